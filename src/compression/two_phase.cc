// Two-phase compressed allreduce over a chunk codec (1-bit, fp16, bf16).
//
// The buffer is cut into n chunks of capacity L (chunk j belongs to rank j).
//   1. Worker: encode every chunk of x (+ worker residual), all-to-all: rank
//      j receives every rank's encoding of chunk j.
//   2. Owner: decode and sum the n encodings in rank order in fp32 (divide by
//      n for avg), add the server residual, encode once more, all-gather.
//   3. Everyone decodes the n owner encodings into x.
// Every rank decodes the same bytes, so results are bit-identical.
//
// Cost, n ranks, W = wire bytes of one chunk (about N/n * c, c = codec bytes
// per element): 2 steps (all-to-all, all-gather); bytes sent per rank
// 2(n-1)W ~ 2(n-1)/n * N * c: 1-bit c = 1/8 + 4/block (vs 4 for fp32), the
// casts c = 2.
#include <cstring>
#include <vector>

#include "compression/codec.h"
#include "compression/compressor.h"
#include "kernels/reduce.h"

namespace weft::compression {
namespace {

class TwoPhaseCompressor final : public Compressor {
 public:
  TwoPhaseCompressor(weftCompressKind_t kind, const weftCompressorParams_t& params)
      : Compressor(kind, params) {
    switch (kind) {
      case weftCompressFp16:
        codec_ = makeHalfCodec();
        errorFeedback_ = false;  // a cast's rounding error is tiny and unbiased
        break;
      case weftCompressBf16:
        codec_ = makeBf16Codec();
        errorFeedback_ = false;
        break;
      default:
        codec_ = makeOneBitCodec(static_cast<size_t>(params.blockSize));
        errorFeedback_ = params.errorFeedback != 0;
        break;
    }
  }

 protected:
  Status bind(size_t count, int nranks) override {
    n_ = nranks;
    // A multiple of 32 keeps every chunk's wire image 4-byte aligned.
    cap_ = ((count + nranks - 1) / nranks + 31) / 32 * 32;
    wire_ = codec_->wireBytes(cap_);
    send_.assign(wire_ * n_, 0);
    recv_.assign(wire_ * n_, 0);
    gathered_.assign(wire_ * n_, 0);
    const size_t g = codec_->granule();
    tile_.assign(std::max<size_t>(g, (4096 + g - 1) / g * g), 0.0f);
    if (errorFeedback_) {
      workerResidual_.assign(count, 0.0f);
      serverResidual_.assign(cap_, 0.0f);
    }
    return Status::ok();
  }

  void clearState() override {
    for (auto* v : {&send_, &recv_, &gathered_}) std::vector<uint8_t>().swap(*v);
    for (auto* v : {&tile_, &workerResidual_, &serverResidual_}) std::vector<float>().swap(*v);
  }

  Status reduce(CollRunner& runner, const float* in, float* out, size_t count,
                bool average) override {
    const int me = runner.rank();
    for (int j = 0; j < n_; ++j) {
      const size_t off = j * cap_;
      codec_->encode(in + std::min(off, count),
                     errorFeedback_ ? workerResidual_.data() + std::min(off, count) : nullptr,
                     chunkLen(j, count), cap_, send_.data() + j * wire_);
    }
    WEFT_RETURN_IF_ERROR(runner.allToAll(send_.data(), recv_.data(), wire_));

    // Owner: decode-sum-encode tile by tile, so that the sum never leaves
    // the cache.
    const size_t mine = chunkLen(me, count);
    uint8_t* owned = send_.data();  // free again: reuse for the owner's encoding
    const float n = static_cast<float>(n_);
    float* tile = tile_.data();
    for (size_t b = 0; b < mine; b += tile_.size()) {
      const size_t e = std::min(mine, b + tile_.size());
      for (int p = 0; p < n_; ++p)
        codec_->decodeRange(recv_.data() + p * wire_, b, e, cap_, tile, p > 0);
      if (average)
        for (size_t i = 0; i < e - b; ++i) tile[i] /= n;
      codec_->encodeRange(tile, errorFeedback_ ? serverResidual_.data() + b : nullptr, b, e, cap_,
                          owned);
    }
    codec_->zeroUnused(owned, mine, cap_);
    WEFT_RETURN_IF_ERROR(runner.allGather(owned, gathered_.data(), wire_));

    // Decode tile by tile and stream the tiles out: a large output cannot
    // stay in cache, and non-temporal stores skip reading it first.
    for (int j = 0; j < n_; ++j) {
      const size_t len = chunkLen(j, count);
      for (size_t b = 0; b < len; b += tile_.size()) {
        const size_t e = std::min(len, b + tile_.size());
        codec_->decodeRange(gathered_.data() + j * wire_, b, e, cap_, tile, false);
        kernels::copyOut(out + j * cap_ + b, tile, (e - b) * sizeof(float), count * sizeof(float));
      }
    }
    return Status::ok();
  }

 private:
  size_t chunkLen(int j, size_t count) const {
    const size_t off = static_cast<size_t>(j) * cap_;
    return off >= count ? 0 : std::min(cap_, count - off);
  }

  std::unique_ptr<ChunkCodec> codec_;
  bool errorFeedback_ = false;
  int n_ = 0;
  size_t cap_ = 0;   // elements per chunk
  size_t wire_ = 0;  // wire bytes per chunk
  std::vector<uint8_t> send_, recv_, gathered_;
  std::vector<float> tile_;            // the owner's sums, a few granules at a time
  std::vector<float> workerResidual_;  // count elements
  std::vector<float> serverResidual_;  // this rank's chunk
};

}  // namespace

std::unique_ptr<Compressor> makeTwoPhaseCompressor(weftCompressKind_t kind,
                                                   const weftCompressorParams_t& params) {
  return std::unique_ptr<Compressor>(new TwoPhaseCompressor(kind, params));
}

}  // namespace weft::compression
