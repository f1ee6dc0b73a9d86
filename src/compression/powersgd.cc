// PowerSGD compressed allreduce (Vogels, Karimireddy, Jaggi 2019), one power
// iteration per step with a warm-started Q.
//
// For each matrix M (rows x cols; M = gradient + residual):
//   P = M Q; allreduce P; orthonormalise P; Q = M^T P; allreduce Q (/n for
//   avg); result M^ = P Q^T; residual = M - M^.
// Q starts as a Gaussian matrix drawn from the shared seed (identical on
// every rank) and is kept between steps. Tensors too small to gain, where
// (rows + cols) * r * minCompressionRate >= rows * cols, travel uncompressed
// in the same allreduce as the P matrices. Every rank computes M^ from the
// same reduced P and Q, so results are bit-identical.
//
// Cost: 2 allreduces; bytes sent per rank 2(n-1)/n * 4 * (U + sum (rows +
// cols) * r) for U uncompressed elements, against 2(n-1)/n * 4 * N.
// Memory: for rank <= kMaxFusedRank three sweeps over M (powersgd_kernels.h):
// read G and R, write M into R (last step's M^ comes off here, not at the
// end of that step); read M; stream M^ out: 5 x 4N bytes with feedback, 3 x
// 4N without. Larger ranks go through BLAS in row blocks. Sweeps 1 and 3
// (row by row) run on the compression worker pool (workers.h) in row
// ranges; sweep 2 sums over rows, so it stays on one thread, where its order
// (and Q, bit for bit) does not depend on the pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/env.h"
#include "compression/big_buffer.h"
#include "compression/compressor.h"
#include "compression/linalg.h"
#include "compression/powersgd_kernels.h"
#include "compression/rng.h"
#include "kernels/reduce.h"

namespace weft::compression {
namespace {

struct Tensor {
  size_t offset = 0;  // in the (padded) working matrix buffer
  size_t rows = 0, cols = 0;
  size_t r = 0;        // rank used; 0: sent uncompressed
  size_t pOffset = 0;  // compressed: in pq_ (after the uncompressed part)
  size_t qOffset = 0;  // compressed: in q_
  size_t uOffset = 0;  // uncompressed: in pq_
};

class PowerSgdCompressor final : public Compressor {
 public:
  explicit PowerSgdCompressor(const weftCompressorParams_t& params)
      : Compressor(weftCompressPowerSGD, params) {
    configureBlasThreads();
  }

 protected:
  Status bind(size_t count, int nranks) override {
    n_ = nranks;
    tensors_.clear();
    std::vector<std::pair<size_t, size_t>> shapes;
    if (params_.numTensors > 0) {
      size_t total = 0;
      for (int i = 0; i < params_.numTensors; ++i) {
        shapes.emplace_back(params_.shapes[2 * i], params_.shapes[2 * i + 1]);
        total += shapes.back().first * shapes.back().second;
      }
      if (total != count)
        return makeError(weftInvalidArgument,
                         "powersgd: the %d tensor shapes hold %zu elements but the buffer has "
                         "%zu; the shapes must add up to count",
                         params_.numTensors, total, count);
      padded_ = count;
    } else if (params_.rows != 0) {
      if (params_.rows * params_.cols != count)
        return makeError(weftInvalidArgument,
                         "powersgd shape %zu x %zu = %zu elements does not match count %zu; pass "
                         "rows and cols with rows*cols == count (or 0 x 0 to reshape)",
                         params_.rows, params_.cols, params_.rows * params_.cols, count);
      shapes.emplace_back(params_.rows, params_.cols);
      padded_ = count;
    } else {
      // Reshape rule: cols = ceil(sqrt(N)), rows = ceil(N / cols); the last
      // row is padded with zeros.
      size_t cols = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(count))));
      while (cols > 1 && (cols - 1) * (cols - 1) >= count) --cols;
      const size_t rows = (count + cols - 1) / cols;
      const size_t r = std::min<size_t>({static_cast<size_t>(params_.rank), rows, cols});
      if (rows > 1 && cols > 1 &&
          static_cast<double>(rows + cols) * r * params_.minCompressionRate <
              static_cast<double>(rows) * cols) {
        shapes.emplace_back(rows, cols);
        padded_ = rows * cols;
      } else {
        shapes.emplace_back(1, count);  // too small to compress: no padding
        padded_ = count;
      }
    }

    size_t offset = 0, uncompressed = 0, pTotal = 0, qTotal = 0, maxWork = 0;
    for (auto [rows, cols] : shapes) {
      Tensor t;
      t.offset = offset;
      t.rows = rows;
      t.cols = cols;
      const size_t r = std::min<size_t>({static_cast<size_t>(params_.rank), rows, cols});
      const double compressed = static_cast<double>(rows + cols) * r * params_.minCompressionRate;
      if (rows > 1 && cols > 1 && compressed < static_cast<double>(rows) * cols) {
        t.r = r;
        t.qOffset = qTotal;
        qTotal += cols * r;
        t.pOffset = pTotal;
        pTotal += rows * r;
        maxWork = std::max(maxWork, 2 * rows * r);
      } else {
        t.uOffset = uncompressed;
        uncompressed += rows * cols;
      }
      offset += rows * cols;
      tensors_.push_back(t);
    }
    uncompressed_ = uncompressed;
    for (Tensor& t : tensors_)
      if (t.r) t.pOffset += uncompressed;
    pq_.assign(uncompressed + pTotal, 0.0f);
    q_.assign(qTotal, 0.0f);
    qt_.assign(qTotal, 0.0f);
    work_.assign(maxWork, 0.0f);
    size_t maxScratch = 0, maxQ = 0;
    bool blasPadded = false;
    for (const Tensor& t : tensors_) {
      if (fused(t)) maxQ = std::max(maxQ, t.cols * t.r);
      if (t.r && !fused(t)) {
        maxScratch = std::max(maxScratch, rowBlock(t.cols) * t.cols);
        blasPadded = padded_ != count;
      }
    }
    qtNew_.assign(maxQ, 0.0f);
    // BLAS path only: one row block of M^, and a padded copy of a reshaped
    // vector without feedback.
    scratch_.assign(maxScratch, 0.0f);
    if (blasPadded && !params_.errorFeedback) m_.assign(padded_, 0.0f);
    pending_ = false;
    if (params_.errorFeedback) residual_.assign(padded_);
    initQ();
    return Status::ok();
  }

  void clearState() override {
    tensors_.clear();
    for (auto* v : {&pq_, &q_, &qt_, &qtNew_, &m_, &work_, &scratch_})
      std::vector<float>().swap(*v);
    residual_.clear();
    pending_ = false;
  }

  Status reduce(CollRunner& runner, const float* in, float* out, size_t count,
                bool average) override {
    const bool ef = params_.errorFeedback != 0;
    for (const Tensor& t : tensors_) {
      if (t.r == 0) {
        // The residual of an uncompressed tensor stays zero: M = in.
        std::memcpy(pq_.data() + t.uOffset, in + t.offset, t.rows * t.cols * sizeof(float));
      } else if (fused(t)) {
        projectFused(t, in, count, ef);
      } else {
        projectBlas(t, in, count, ef);
      }
    }
    // One allreduce carries the uncompressed tensors and every P.
    WEFT_RETURN_IF_ERROR(runner.allReduceSum(pq_.data(), pq_.size()));
    bool anyCompressed = false;
    for (const Tensor& t : tensors_) {
      if (t.r == 0) continue;
      anyCompressed = true;
      float* p = pq_.data() + t.pOffset;
      orthonormalize(p, t.rows, t.r, work_.data());
      if (fused(t)) {
        backProjectFused(t, ef ? residual_.data() : in, count);
      } else {
        gemm(true, false, t.cols, t.r, t.rows, 1.0f, blasM(in, ef) + t.offset, p, 0.0f,
             q_.data() + t.qOffset);
      }
    }
    if (anyCompressed) {
      WEFT_RETURN_IF_ERROR(runner.allReduceSum(q_.data(), q_.size()));
      if (average) {
        const float n = static_cast<float>(n_);
        for (float& v : q_) v /= n;
      }
    }
    // M^ = P Q^T into the output. The residual keeps M; M^ comes off it at
    // the start of the next step.
    for (const Tensor& t : tensors_) {
      const size_t len = t.rows * t.cols;
      if (t.r == 0) {
        const float* u = pq_.data() + t.uOffset;
        float* o = out + t.offset;
        const float n = static_cast<float>(n_);
        for (size_t i = 0; i < len; ++i) o[i] = average ? u[i] / n : u[i];
      } else if (fused(t)) {
        transpose(q_.data() + t.qOffset, t.cols, t.r, qt_.data() + t.qOffset);
        expandFused(t, out, count);
      } else {
        expandBlas(t, out, count);
      }
    }
    pending_ = ef;
    return Status::ok();
  }

 private:
  // The fused kernels beat sgemm here because they fold the residual update
  // and the output into the products' sweeps (memory-bound at small r);
  // WEFT_POWERSGD_BLAS=1 takes BLAS for every rank, to compare.
  static bool fused(const Tensor& t) {
    static const bool blasOnly = envInt("POWERSGD_BLAS", 0) != 0;
    return !blasOnly && t.r != 0 && t.r <= kMaxFusedRank;
  }
  // Rows per block (BLAS path): about 64 KiB of M.
  static size_t rowBlock(size_t cols) { return std::max<size_t>(1, 16384 / cols); }
  // Elements of the row at `off` that are real (the rest is padding of a
  // reshaped vector).
  static size_t widthAt(size_t off, size_t cols, size_t count) {
    return off >= count ? 0 : std::min(cols, count - off);
  }
  // dst (cols x rows) = src (rows x cols) transposed.
  static void transpose(const float* src, size_t rows, size_t cols, float* dst) {
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  }

  // Fused path, sweep 1: M = residual - last M^ + in (into the residual),
  // P = M Q, row by row.
  // Rows are independent (row i writes P_i and residual row i only), so the
  // worker pool's parts take disjoint row ranges and the bits do not depend
  // on the split.
  void projectFused(const Tensor& t, const float* in, size_t count, bool ef) {
    const float* qt = qt_.data() + t.qOffset;
    float* p = pq_.data() + t.pOffset;
    const size_t parts = rowParts(t);
    workers().run(parts, [&](size_t k) {
      size_t lo, hi;
      splitRange(t.rows, 1, parts, k, &lo, &hi);
      for (size_t i = lo; i < hi; ++i) {
        const size_t off = t.offset + i * t.cols;
        const size_t w = widthAt(off, t.cols, count);
        float* res = ef ? residual_.data() + off : nullptr;
        psgdProjectRow(t.r, t.cols, w, w ? in + off : in, res, pending_ ? p + i * t.r : nullptr, qt,
                       p + i * t.r);
        if (res && w < t.cols) std::memset(res + w, 0, (t.cols - w) * sizeof(float));
      }
    });
  }
  // Parts for a row-parallel sweep over t: none below kMinPart elements.
  size_t rowParts(const Tensor& t) const {
    const size_t most = t.rows * t.cols / kMinPart;
    return std::max<size_t>(1, std::min({static_cast<size_t>(workers().threads()), most, t.rows}));
  }
  static constexpr size_t kMinPart = size_t{32} << 10;

  // Rows of t that lie wholly inside the buffer (all but a reshaped
  // vector's padding and its partial last row).
  static size_t fullRows(const Tensor& t, size_t count) {
    return count <= t.offset ? 0 : std::min(t.rows, (count - t.offset) / t.cols);
  }

  // Sweep 2: Q = M^T P, last rows first: they are the ones sweep 1 left in
  // cache.
  void backProjectFused(const Tensor& t, const float* m, size_t count) {
    float* qn = qtNew_.data();
    std::memset(qn, 0, t.cols * t.r * sizeof(float));
    const float* p = pq_.data() + t.pOffset;
    const size_t full = fullRows(t, count);
    if (full < t.rows) {
      const size_t off = t.offset + full * t.cols;
      const size_t w = widthAt(off, t.cols, count);
      if (w) psgdBackProjectRows(t.r, t.cols, w, 1, m + off, p + full * t.r, qn);
    }
    constexpr size_t kBlock = 64;
    for (size_t end = full; end > 0;) {
      const size_t begin = end > kBlock ? end - kBlock : 0;
      psgdBackProjectRows(t.r, t.cols, t.cols, end - begin, m + t.offset + begin * t.cols,
                          p + begin * t.r, qn);
      end = begin;
    }
    transpose(qn, t.r, t.cols, q_.data() + t.qOffset);
  }

  // Sweep 3: out = P Q^T (qt_ holds the reduced Q, transposed). Row by
  // row, so the pool's parts take disjoint row ranges; each fences its own
  // non-temporal stores.
  void expandFused(const Tensor& t, float* out, size_t count) {
    const bool stream = kernels::streamsOutput(count * sizeof(float));
    const float* qt = qt_.data() + t.qOffset;
    const float* p = pq_.data() + t.pOffset;
    const size_t full = fullRows(t, count);
    const size_t parts = rowParts(t);
    workers().run(parts, [&](size_t k) {
      size_t lo, hi;
      splitRange(full, 1, parts, k, &lo, &hi);
      if (lo < hi)
        psgdExpandRows(t.r, t.cols, t.cols, hi - lo, p + lo * t.r, qt, out + t.offset + lo * t.cols,
                       stream);
      if (stream) psgdStreamFence();
    });
    if (full < t.rows) {
      const size_t off = t.offset + full * t.cols;
      const size_t w = widthAt(off, t.cols, count);
      if (w) psgdExpandRows(t.r, t.cols, w, 1, p + full * t.r, qt, out + off, stream);
    }
    if (stream) psgdStreamFence();
  }

  // M for the BLAS path: the residual (feedback), a padded copy of a
  // reshaped vector, or the input itself.
  const float* blasM(const float* in, bool ef) const {
    return ef ? residual_.data() : (m_.empty() ? in : m_.data());
  }

  // BLAS path (rank > kMaxFusedRank), sweep 1, in row blocks so that M's
  // rows are formed and multiplied while in cache.
  void projectBlas(const Tensor& t, const float* in, size_t count, bool ef) {
    if (!ef && !m_.empty()) {
      std::memcpy(m_.data(), in, count * sizeof(float));
      std::memset(m_.data() + count, 0, (padded_ - count) * sizeof(float));
    }
    const float* m = blasM(in, ef);
    const size_t step = rowBlock(t.cols);
    for (size_t r0 = 0; r0 < t.rows; r0 += step) {
      const size_t rows = std::min(step, t.rows - r0);
      const size_t off = t.offset + r0 * t.cols;
      float* p = pq_.data() + t.pOffset + r0 * t.r;
      if (ef) {
        float* mrow = residual_.data() + off;
        if (pending_) {
          gemm(false, true, rows, t.cols, t.r, 1.0f, p, q_.data() + t.qOffset, 0.0f,
               scratch_.data());
          for (size_t i = 0; i < rows * t.cols; ++i) mrow[i] -= scratch_[i];
        }
        addInput(in, off, rows * t.cols, count);
        if (off + rows * t.cols > count) {  // padding of a reshaped vector stays zero
          const size_t from = count > off ? count - off : 0;
          std::memset(mrow + from, 0, (rows * t.cols - from) * sizeof(float));
        }
      }
      gemm(false, false, rows, t.r, t.cols, 1.0f, m + off, q_.data() + t.qOffset, 0.0f, p);
    }
  }

  // BLAS path, sweep 3: row blocks into cache, then streamed out.
  void expandBlas(const Tensor& t, float* out, size_t count) {
    const size_t step = rowBlock(t.cols);
    for (size_t r0 = 0; r0 < t.rows; r0 += step) {
      const size_t rows = std::min(step, t.rows - r0);
      const size_t off = t.offset + r0 * t.cols;
      const size_t w = off >= count ? 0 : std::min(rows * t.cols, count - off);
      if (w == 0) break;
      gemm(false, true, rows, t.cols, t.r, 1.0f, pq_.data() + t.pOffset + r0 * t.r,
           q_.data() + t.qOffset, 0.0f, scratch_.data());
      kernels::copyOut(out + off, scratch_.data(), w * sizeof(float), count * sizeof(float));
    }
  }

  // residual[off, off+len) += in (elements past count are padding).
  void addInput(const float* in, size_t off, size_t len, size_t count) {
    float* r = residual_.data() + off;
    const size_t real = off >= count ? 0 : std::min(len, count - off);
    for (size_t i = 0; i < real; ++i) r[i] += in[off + i];
  }

  void initQ() {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      if (t.r == 0) continue;
      SplitMix rng(params_.seed + 0x51ED2701ull * (i + 1));
      float* q = q_.data() + t.qOffset;
      for (size_t j = 0; j < t.cols * t.r; ++j) q[j] = static_cast<float>(rng.normal());
      if (fused(t)) transpose(q, t.cols, t.r, qt_.data() + t.qOffset);
    }
  }

  int n_ = 0;
  size_t padded_ = 0;
  size_t uncompressed_ = 0;
  std::vector<Tensor> tensors_;
  std::vector<float> pq_;       // uncompressed tensors, then every P
  std::vector<float> q_;        // every Q (cols x r; warm start between steps)
  std::vector<float> qt_;       // fused path: every reduced Q transposed (r x cols)
  std::vector<float> qtNew_;    // fused path: one tensor's M^T P, transposed
  std::vector<float> m_;        // BLAS path, reshaped vector without feedback: padded M
  std::vector<float> work_;     // Householder workspace
  std::vector<float> scratch_;  // BLAS path: one row block of M^
  BigBuffer residual_;          // padded_ elements: M - M^ (M until the next step)
  bool pending_ = false;        // residual_ still holds M: take last step's M^ off
};

}  // namespace

std::unique_ptr<Compressor> makePowerSgdCompressor(const weftCompressorParams_t& params) {
  return std::unique_ptr<Compressor>(new PowerSgdCompressor(params));
}

}  // namespace weft::compression
