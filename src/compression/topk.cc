// Top-k (and random-k) compressed allreduce with error feedback.
//
// Top-k: each rank keeps the k = ceil(ratio*N) entries of largest |x + r|
// (ties broken by lower index), sends (index, value) pairs, and keeps the rest
// in its residual r. The pairs are all-gathered; every rank adds them up in
// rank order, so results are bit-identical. 1 step; bytes sent per rank
// (n-1)*8k (ring all-gather), against 2(n-1)/n*4N for fp32 allreduce.
//
// Random-k: the k indices come from a generator seeded by (seed, step), the
// same on every rank, one index in each of k equal strata of the buffer; so
// only the values travel, in one fp32 allreduce: 2(n-1)/n*4k bytes per rank.
// Meant to be used with error feedback (without it the kept entries are not
// rescaled, so the result is biased low by k/N).
//
// The sweeps over the whole buffer (acc = in + r, the candidate scan, |x|
// for a full selection, zeroing and scaling the output) run on the
// compression worker pool (workers.h) in disjoint element ranges; the scan's
// per-range candidate lists are joined in range order, so the candidates
// (and everything after) are those of one thread. The selections and the
// k-sized gathers and scatters stay on the caller.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compression/compressor.h"
#include "compression/rng.h"

namespace weft::compression {
namespace {

class TopKCompressor final : public Compressor {
 public:
  explicit TopKCompressor(const weftCompressorParams_t& params)
      : Compressor(weftCompressTopK, params) {}

 protected:
  Status bind(size_t count, int nranks) override {
    if (count > UINT32_MAX)
      return makeError(weftInvalidArgument,
                       "topk compression indexes with 32 bits: %zu elements is too many; split "
                       "the buffer",
                       count);
    k_ = std::min<size_t>(count, static_cast<size_t>(std::ceil(params_.ratio * count)));
    k_ = std::max<size_t>(k_, 1);
    n_ = nranks;
    idx_.assign(k_, 0);
    vals_.assign(k_, 0.0f);
    if (params_.errorFeedback) residual_.assign(count, 0.0f);
    if (!params_.randomK) {
      mags_.assign(count, 0.0f);
      cand_.assign(std::min<size_t>(count, 4 * k_ + 4096), 0);
      // The scan's lists of pool parts 1.. (grown on first use by a larger
      // pool than this one).
      partCand_.assign(static_cast<size_t>(workers().threads()), {});
      for (size_t k = 1; k < partCand_.size(); ++k) partCand_[k].assign(cand_.size(), 0);
      wire_.assign(k_ * 8, 0);
      gathered_.assign(k_ * 8 * nranks, 0);
    }
    step_ = 0;
    return Status::ok();
  }

  void clearState() override {
    for (auto* v : {&vals_, &residual_, &mags_}) std::vector<float>().swap(*v);
    std::vector<uint32_t>().swap(idx_);
    std::vector<uint32_t>().swap(cand_);
    partCand_.clear();
    std::vector<uint8_t>().swap(wire_);
    std::vector<uint8_t>().swap(gathered_);
    step_ = 0;
  }

  Status reduce(CollRunner& runner, const float* in, float* x, size_t count,
                bool average) override {
    // acc = in + residual, held in the residual (or `in` without feedback).
    const float* acc = in;
    if (params_.errorFeedback) {
      float* r = residual_.data();
      forRanges(count, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) r[i] += in[i];
      });
      acc = r;
    }
    if (params_.randomK)
      pickRandom(count);
    else
      pickLargest(acc, count);
    for (size_t s = 0; s < k_; ++s) vals_[s] = acc[idx_[s]];  // before x (may be in) changes
    if (params_.errorFeedback)
      for (size_t s = 0; s < k_; ++s) residual_[idx_[s]] = 0.0f;
    ++step_;

    if (params_.randomK) {
      WEFT_RETURN_IF_ERROR(runner.allReduceSum(vals_.data(), k_));
      zero(x, count);
      for (size_t s = 0; s < k_; ++s) x[idx_[s]] = average ? vals_[s] / n_ : vals_[s];
      return Status::ok();
    }
    std::memcpy(wire_.data(), idx_.data(), k_ * 4);
    std::memcpy(wire_.data() + k_ * 4, vals_.data(), k_ * 4);
    WEFT_RETURN_IF_ERROR(runner.allGather(wire_.data(), gathered_.data(), k_ * 8));
    zero(x, count);
    for (int p = 0; p < n_; ++p) {
      const uint8_t* w = gathered_.data() + static_cast<size_t>(p) * k_ * 8;
      for (size_t s = 0; s < k_; ++s) {
        uint32_t i;
        float v;
        std::memcpy(&i, w + s * 4, 4);
        std::memcpy(&v, w + k_ * 4 + s * 4, 4);
        if (i >= count) return Status(weftInternalError, "topk: a peer sent an index out of range");
        x[i] += v;
      }
    }
    if (average) {
      const float n = static_cast<float>(n_);
      forRanges(count, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) x[i] /= n;
      });
    }
    return Status::ok();
  }

 private:
  // The smallest range worth handing to a worker (elements).
  static constexpr size_t kMinPart = size_t{32} << 10;

  size_t partsFor(size_t len) const { return compression::partsFor(workers(), len, kMinPart); }
  // fn(begin, end) over disjoint ranges covering [0, len), cut at multiples
  // of 16 elements (a cache line), one per part.
  template <class Fn>
  void forRanges(size_t len, Fn&& fn) {
    const size_t parts = partsFor(len);
    workers().run(parts, [&](size_t k) {
      size_t b, e;
      splitRange(len, 16, parts, k, &b, &e);
      if (b < e) fn(b, e);
    });
  }
  void zero(float* x, size_t count) {
    forRanges(count, [&](size_t b, size_t e) { std::memset(x + b, 0, (e - b) * sizeof(float)); });
  }

  // Indices i with mag(acc[i]) >= t0 into cand_ in index order; returns how
  // many there are (more than cand_ holds: only the count is meaningful).
  // Part k collects its range's into its own list (part 0: straight into
  // cand_), joined in part order after.
  size_t scanCandidates(const float* acc, size_t count, float t0) {
    const size_t cap = cand_.size();
    const size_t parts = partsFor(count);
    if (partCand_.size() < parts) partCand_.resize(parts);
    std::vector<size_t> found(parts, 0);
    workers().run(parts, [&](size_t k) {
      size_t b, e;
      splitRange(count, 16, parts, k, &b, &e);
      uint32_t* out = cand_.data();
      if (k > 0) {
        partCand_[k].resize(cap);
        out = partCand_[k].data();
      }
      size_t c = 0;
      for (size_t i = b; i < e; ++i)
        if (mag(acc[i]) >= t0) {
          if (c < cap) out[c] = static_cast<uint32_t>(i);
          ++c;
        }
      found[k] = c;
    });
    size_t total = found[0];
    for (size_t k = 1; k < parts; ++k) {
      const size_t room = total < cap ? cap - total : 0;
      const size_t take = std::min(room, found[k]);
      std::memcpy(cand_.data() + total, partCand_[k].data(), take * sizeof(uint32_t));
      total += found[k];
    }
    return total;
  }
  // |x| for selection; NaN counts as the largest, so it is sent (as a plain
  // allreduce would propagate it) and every comparison stays well ordered.
  static float mag(float v) { return std::isnan(v) ? INFINITY : std::fabs(v); }

  // The k largest mag(acc): the k-th largest magnitude t by selection, then
  // every index above t and, in index order, as many equal to t as fit.
  // Large buffers first estimate a lower bound t0 for t from a strided
  // sample and select among the entries >= t0 only; that gives exactly the
  // same set (every entry that can be chosen is a candidate) or falls back.
  void pickLargest(const float* acc, size_t count) {
    constexpr size_t kSample = size_t{1} << 14;
    if (count >= 16 * kSample && k_ * 16 <= count) {
      for (size_t j = 0; j < kSample; ++j) mags_[j] = mag(acc[j * (count / kSample)]);
      // Keep twice the expected fraction plus a margin: t0 is then below t
      // unless the sample is badly unrepresentative (then: fall back).
      const double frac = std::min(1.0, 2.0 * k_ / count + 32.0 / kSample);
      const size_t keep = std::clamp<size_t>(static_cast<size_t>(frac * kSample), 1, kSample);
      std::nth_element(mags_.begin(), mags_.begin() + (kSample - keep), mags_.begin() + kSample);
      const float t0 = mags_[kSample - keep];
      const size_t c = scanCandidates(acc, count, t0);
      const size_t cap = cand_.size();
      if (c >= k_ && c <= cap) {
        for (size_t j = 0; j < c; ++j) mags_[j] = mag(acc[cand_[j]]);
        std::nth_element(mags_.begin(), mags_.begin() + (c - k_), mags_.begin() + c);
        selectAbove(acc, cand_.data(), c, mags_[c - k_]);
        return;
      }
    }
    float* mags = mags_.data();
    forRanges(count, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) mags[i] = mag(acc[i]);
    });
    std::nth_element(mags_.begin(), mags_.begin() + (count - k_), mags_.end());
    selectAbove(acc, nullptr, count, mags_[count - k_]);
  }

  // idx_ = the k entries of largest magnitude given the k-th largest t, over
  // candidates `from` (index order; null: every index below n).
  void selectAbove(const float* acc, const uint32_t* from, size_t n, float t) {
    size_t s = 0;
    for (size_t j = 0; j < n && s < k_; ++j) {
      const uint32_t i = from ? from[j] : static_cast<uint32_t>(j);
      if (mag(acc[i]) > t) idx_[s++] = i;
    }
    for (size_t j = 0; j < n && s < k_; ++j) {
      const uint32_t i = from ? from[j] : static_cast<uint32_t>(j);
      if (mag(acc[i]) == t) idx_[s++] = i;
    }
    std::sort(idx_.begin(), idx_.begin() + s);
  }

  void pickRandom(size_t count) {
    SplitMix rng(params_.seed ^ (0x9E3779B97F4A7C15ull * (step_ + 1)));
    for (size_t s = 0; s < k_; ++s) {
      const size_t lo = s * count / k_, hi = (s + 1) * count / k_;
      idx_[s] = static_cast<uint32_t>(lo + rng.next() % (hi - lo));
    }
  }

  size_t k_ = 0;
  int n_ = 0;
  uint64_t step_ = 0;
  std::vector<uint32_t> idx_;
  std::vector<uint32_t> cand_;                   // candidates of the sampled selection
  std::vector<std::vector<uint32_t>> partCand_;  // pool parts 1.. of the scan
  std::vector<float> vals_;
  std::vector<float> residual_;
  std::vector<float> mags_;
  std::vector<uint8_t> wire_, gathered_;
};

}  // namespace

std::unique_ptr<Compressor> makeTopKCompressor(const weftCompressorParams_t& params) {
  return std::unique_ptr<Compressor>(new TopKCompressor(params));
}

}  // namespace weft::compression
