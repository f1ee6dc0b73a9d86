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
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compression/compressor.h"
#include "compression/linalg.h"
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
    if (padded_ != count) m_.assign(padded_, 0.0f);
    work_.assign(maxWork, 0.0f);
    size_t maxScratch = 0;
    for (const Tensor& t : tensors_)
      if (t.r) maxScratch = std::max(maxScratch, rowBlock(t.cols) * t.cols);
    // (also used without feedback, for the output's row blocks)
    scratch_.assign(maxScratch, 0.0f);
    pending_ = false;
    if (params_.errorFeedback) residual_.assign(padded_, 0.0f);
    initQ();
    return Status::ok();
  }

  void clearState() override {
    tensors_.clear();
    for (auto* v : {&pq_, &q_, &m_, &work_, &scratch_, &residual_}) std::vector<float>().swap(*v);
    pending_ = false;
  }

  Status reduce(CollRunner& runner, const float* in, float* out, size_t count,
                bool average) override {
    const bool ef = params_.errorFeedback != 0;
    const bool padded = padded_ != count;
    // M = in + residual, built in the residual (with feedback) or a padded
    // copy of `in` (reshaped vectors), else `in` itself.
    float* mbuf = ef ? residual_.data() : (padded ? m_.data() : nullptr);
    if (padded) std::memset(mbuf + count, 0, (padded_ - count) * sizeof(float));
    if (!ef && padded) std::memcpy(mbuf, in, count * sizeof(float));
    const float* m = mbuf ? mbuf : in;

    for (const Tensor& t : tensors_) {
      const size_t len = t.rows * t.cols;
      if (t.r == 0) {
        if (ef) addInput(in, t.offset, len, count);
        std::memcpy(pq_.data() + t.uOffset, m + t.offset, len * sizeof(float));
        continue;
      }
      // Row blocks: M's rows are formed and multiplied while in cache. With
      // feedback the residual buffer holds last step's M, and last step's
      // M^ = P Q^T is taken off here rather than at the end of that step:
      // one pass over the matrix less.
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
    // One allreduce carries the uncompressed tensors and every P.
    WEFT_RETURN_IF_ERROR(runner.allReduceSum(pq_.data(), pq_.size()));
    bool anyCompressed = false;
    for (const Tensor& t : tensors_) {
      if (t.r == 0) continue;
      anyCompressed = true;
      float* p = pq_.data() + t.pOffset;
      orthonormalize(p, t.rows, t.r, work_.data());
      gemm(true, false, t.cols, t.r, t.rows, 1.0f, m + t.offset, p, 0.0f, q_.data() + t.qOffset);
    }
    if (anyCompressed) {
      WEFT_RETURN_IF_ERROR(runner.allReduceSum(q_.data(), q_.size()));
      if (average) {
        const float n = static_cast<float>(n_);
        for (float& v : q_) v /= n;
      }
    }
    // M^ = P Q^T into the output (a padded scratch for reshaped vectors).
    // The residual keeps M; M^ comes off it at the start of the next step.
    for (const Tensor& t : tensors_) {
      const size_t len = t.rows * t.cols;
      if (t.r == 0) {
        const float* u = pq_.data() + t.uOffset;
        float* o = out + t.offset;
        const float n = static_cast<float>(n_);
        for (size_t i = 0; i < len; ++i) o[i] = average ? u[i] / n : u[i];
        if (ef) std::memset(residual_.data() + t.offset, 0, len * sizeof(float));
        continue;
      }
      if (padded) {
        gemm(false, true, t.rows, t.cols, t.r, 1.0f, pq_.data() + t.pOffset, q_.data() + t.qOffset,
             0.0f, m_.data());
        kernels::copyOut(out, m_.data(), count * sizeof(float), count * sizeof(float));
        continue;
      }
      // Row blocks into cache, then streamed out (non-temporal for large
      // outputs, which would otherwise be read before being written).
      const size_t step = rowBlock(t.cols);
      for (size_t r0 = 0; r0 < t.rows; r0 += step) {
        const size_t rows = std::min(step, t.rows - r0);
        gemm(false, true, rows, t.cols, t.r, 1.0f, pq_.data() + t.pOffset + r0 * t.r,
             q_.data() + t.qOffset, 0.0f, scratch_.data());
        kernels::copyOut(out + t.offset + r0 * t.cols, scratch_.data(),
                         rows * t.cols * sizeof(float), count * sizeof(float));
      }
    }
    pending_ = ef;
    return Status::ok();
  }

 private:
  // Rows per block: about 64 KiB of M.
  static size_t rowBlock(size_t cols) { return std::max<size_t>(1, 16384 / cols); }

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
    }
  }

  int n_ = 0;
  size_t padded_ = 0;
  size_t uncompressed_ = 0;
  std::vector<Tensor> tensors_;
  std::vector<float> pq_;        // uncompressed tensors, then every P
  std::vector<float> q_;         // every Q (warm start between steps)
  std::vector<float> m_;         // reshaped vectors only: padded M, then M^
  std::vector<float> work_;      // Householder workspace
  std::vector<float> scratch_;   // one row block of last step's M^
  std::vector<float> residual_;  // padded_ elements: M - M^ (M until the next step)
  bool pending_ = false;         // residual_ still holds M: take last step's M^ off
};

}  // namespace

std::unique_ptr<Compressor> makePowerSgdCompressor(const weftCompressorParams_t& params) {
  return std::unique_ptr<Compressor>(new PowerSgdCompressor(params));
}

}  // namespace weft::compression
