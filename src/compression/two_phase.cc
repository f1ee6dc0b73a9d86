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
//
// Large cast buffers run pipelined: the buffer is cut into S slices, each a
// two-phase allreduce of its own (a cast's result is per element, so it does
// not depend on the cut), and a helper thread encodes, combines and decodes
// slices while this thread keeps the wire busy with the next one:
//   wire:    a2a(0) a2a(1) ag(0) a2a(2) ag(1) ... ag(S-1)
//   helper:  enc(0..S-1), own(s) after a2a(s), dec(s) after ag(s)
// so only enc(0), own(S-1) and dec(S-1) are not hidden behind the wire.
//
// Each stage is spread over the compression worker pool (workers.h,
// WEFT_COMPRESS_THREADS): every chunk is cut into one piece per part at
// multiples of lcm(granule, 64) elements, so a part owns whole coding units
// (1-bit scale blocks, whole sign bytes) and their residuals, and every
// element is computed by the same operations in the same order whatever the
// cut: the wire bytes and results are those of one thread. In the pipelined
// form the helper thread is the pool's caller, stage after stage.
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "compression/big_buffer.h"
#include "compression/codec.h"
#include "compression/compressor.h"
#include "compression/workers.h"
#include "kernels/reduce.h"

namespace weft::compression {
namespace {

// A thread that runs jobs in the order they are posted (a handful per call,
// so std::function and a condition variable are cheap enough). Destroying
// it drops the jobs not yet started and joins.
class JobThread {
 public:
  JobThread() : thread_([this] { loop(); }) {}
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;
  ~JobThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Returns the job's number, for waitFor.
  size_t post(std::function<void()> job) {
    size_t k;
    {
      std::lock_guard<std::mutex> lock(mu_);
      k = jobs_.size();
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
    return k;
  }
  void waitFor(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ > k; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return quit_ || finished_ < jobs_.size(); });
      if (quit_) return;
      std::function<void()> job = std::move(jobs_[finished_]);
      lock.unlock();
      job();
      lock.lock();
      ++finished_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> jobs_;
  size_t finished_ = 0;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

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
    // Large cast buffers run pipelined in slices. Not 1-bit: its compute
    // outweighs its wire time, and the helper thread would share the rank's
    // core with this thread, which keeps polling the transport (measured
    // slower on 2 ranks per 2 cores). The stages take residuals all the same.
    const bool cast = kind_ == weftCompressFp16 || kind_ == weftCompressBf16;
    slices_ =
        cast && nranks > 1 ? std::min<size_t>(kMaxSlices, count * sizeof(float) / kSliceBytes) : 1;
    if (slices_ < 2) slices_ = 1;
    const size_t perSlice = (count + slices_ - 1) / slices_;
    // A multiple of 32 keeps every chunk's wire image 4-byte aligned.
    cap_ = ((perSlice + nranks - 1) / nranks + 31) / 32 * 32;
    wire_ = codec_->wireBytes(cap_);
    send_.assign(wire_ * n_ * slices_, 0);
    recv_.assign(wire_ * n_ * slices_, 0);
    gathered_.assign(wire_ * n_ * slices_, 0);
    const size_t g = codec_->granule();
    align_ = std::lcm(g, size_t{64});
    tileLen_ = std::max<size_t>(g, (4096 + g - 1) / g * g);
    // One tile per part; the pool's size now bounds the parts of every call.
    tiles_ = static_cast<size_t>(workers().threads());
    tile_.assign(tileLen_ * tiles_, 0.0f);
    if (errorFeedback_) {
      workerResidual_.assign(count);
      serverResidual_.assign(cap_ * slices_);
    }
    return Status::ok();
  }

  void clearState() override {
    for (auto* v : {&send_, &recv_, &gathered_}) std::vector<uint8_t>().swap(*v);
    std::vector<float>().swap(tile_);
    workerResidual_.clear();
    serverResidual_.clear();
  }

  Status reduce(CollRunner& runner, const float* in, float* out, size_t count,
                bool average) override {
    if (slices_ > 1) return reducePipelined(runner, in, out, count, average);
    encodeSlice(0, in, count);
    WEFT_RETURN_IF_ERROR(runner.allToAll(wireOf(send_, 0, 0), wireOf(recv_, 0, 0), wire_));
    combineSlice(0, runner.rank(), count, average);
    WEFT_RETURN_IF_ERROR(runner.allGather(wireOf(send_, 0, 0), wireOf(gathered_, 0, 0), wire_));
    decodeSlice(0, out, count);
    return Status::ok();
  }

 private:
  // Pipelining: slices of at least this many fp32 bytes, at most kMaxSlices.
  static constexpr size_t kSliceBytes = size_t{8} << 20;
  static constexpr size_t kMaxSlices = 8;
  // The smallest piece of work worth handing to a worker (elements): waking
  // one costs a few microseconds.
  static constexpr size_t kMinPart = size_t{32} << 10;

  size_t chunkLen(int j, size_t count) const {
    const size_t off = static_cast<size_t>(j) * cap_;
    return off >= count ? 0 : std::min(cap_, count - off);
  }
  // Slice s, chunk j: where it starts in the buffer, and its length.
  size_t sliceOff(size_t s, int j) const { return (s * n_ + j) * cap_; }
  size_t sliceLen(size_t s, int j, size_t count) const {
    const size_t off = sliceOff(s, j);
    return off >= count ? 0 : std::min(cap_, count - off);
  }
  uint8_t* wireOf(std::vector<uint8_t>& v, size_t s, int j) {
    return v.data() + (s * n_ + j) * wire_;
  }
  // Parts for a sweep over `len` elements: at most one per tile.
  size_t partsFor(size_t len) const {
    return std::min(tiles_, compression::partsFor(workers(), len, kMinPart));
  }
  // Elements of slice s in the buffer.
  size_t sliceElems(size_t s, size_t count) const {
    size_t len = 0;
    for (int j = 0; j < n_; ++j) len += sliceLen(s, j, count);
    return len;
  }
  float* tileOf(size_t k) { return tile_.data() + k * tileLen_; }

  // The stages of one slice. Worker: encode every chunk (+ its residual);
  // part k encodes piece k of every chunk.
  void encodeSlice(size_t s, const float* in, size_t count) {
    const size_t parts = partsFor(sliceElems(s, count));
    workers().run(parts, [&](size_t k) {
      for (int j = 0; j < n_; ++j) {
        const size_t off = std::min(sliceOff(s, j), count);
        size_t b, e;
        splitRange(sliceLen(s, j, count), align_, parts, k, &b, &e);
        if (b == e) continue;
        codec_->encodeRange(in + off + b,
                            errorFeedback_ ? workerResidual_.data() + off + b : nullptr, b, e, cap_,
                            wireOf(send_, s, j));
      }
    });
    for (int j = 0; j < n_; ++j)
      codec_->zeroUnused(wireOf(send_, s, j), sliceLen(s, j, count), cap_);
  }
  // Owner: this rank's chunk of slice s, decode-sum-encode into the slice's
  // send area (free once its all-to-all is done), tile by tile so that the
  // sum never leaves the cache; part k owns piece k of the chunk and tile k.
  void combineSlice(size_t s, int me, size_t count, bool average) {
    const size_t mine = sliceLen(s, me, count);
    uint8_t* owned = wireOf(send_, s, 0);
    const float n = static_cast<float>(n_);
    const size_t parts = partsFor(mine);
    workers().run(parts, [&](size_t k) {
      float* tile = tileOf(k);
      size_t lo, hi;
      splitRange(mine, align_, parts, k, &lo, &hi);
      for (size_t b = lo; b < hi; b += tileLen_) {
        const size_t e = std::min(hi, b + tileLen_);
        for (int p = 0; p < n_; ++p)
          codec_->decodeRange(wireOf(recv_, s, p), b, e, cap_, tile, p > 0);
        if (average)
          for (size_t i = 0; i < e - b; ++i) tile[i] /= n;
        codec_->encodeRange(tile, errorFeedback_ ? serverResidual_.data() + s * cap_ + b : nullptr,
                            b, e, cap_, owned);
      }
    });
    codec_->zeroUnused(owned, mine, cap_);
  }
  // Everyone: decode tile by tile and stream the tiles out (a large output
  // cannot stay in cache, and non-temporal stores skip reading it first);
  // part k decodes piece k of every chunk.
  void decodeSlice(size_t s, float* out, size_t count) {
    const size_t parts = partsFor(sliceElems(s, count));
    workers().run(parts, [&](size_t k) {
      float* tile = tileOf(k);
      for (int j = 0; j < n_; ++j) {
        size_t lo, hi;
        splitRange(sliceLen(s, j, count), align_, parts, k, &lo, &hi);
        for (size_t b = lo; b < hi; b += tileLen_) {
          const size_t e = std::min(hi, b + tileLen_);
          codec_->decodeRange(wireOf(gathered_, s, j), b, e, cap_, tile, false);
          kernels::copyOut(out + sliceOff(s, j) + b, tile, (e - b) * sizeof(float),
                           count * sizeof(float));
        }
      }
    });
  }

  Status reducePipelined(CollRunner& runner, const float* in, float* out, size_t count,
                         bool average) {
    const int me = runner.rank();
    const size_t S = slices_;
    // The tiles are the helper's (and its pool parts') alone while it runs;
    // its destructor drops what an error left unstarted.
    JobThread helper;
    std::vector<size_t> encoded(S), combined(S);
    for (size_t s = 0; s < S; ++s)
      encoded[s] = helper.post([this, s, in, count] { encodeSlice(s, in, count); });
    size_t last = 0;
    // Wire: a2a(0), then a2a(s) before ag(s-1), so that the helper combines
    // slice s-1 while slice s travels.
    for (size_t s = 0; s <= S; ++s) {
      if (s < S) {
        helper.waitFor(encoded[s]);
        WEFT_RETURN_IF_ERROR(runner.allToAll(wireOf(send_, s, 0), wireOf(recv_, s, 0), wire_));
        combined[s] =
            helper.post([this, s, me, count, average] { combineSlice(s, me, count, average); });
      }
      if (s >= 1) {
        const size_t d = s - 1;
        helper.waitFor(combined[d]);
        WEFT_RETURN_IF_ERROR(runner.allGather(wireOf(send_, d, 0), wireOf(gathered_, d, 0), wire_));
        last = helper.post([this, d, out, count] { decodeSlice(d, out, count); });
      }
    }
    helper.waitFor(last);
    return Status::ok();
  }

  std::unique_ptr<ChunkCodec> codec_;
  bool errorFeedback_ = false;
  int n_ = 0;
  size_t slices_ = 1;  // pipelined casts above 16 MiB: slices of n chunks each
  size_t cap_ = 0;     // elements per chunk
  size_t wire_ = 0;    // wire bytes per chunk
  std::vector<uint8_t> send_, recv_, gathered_;
  size_t align_ = 64;        // pieces of a chunk start at multiples of this
  size_t tileLen_ = 0;       // elements per tile
  size_t tiles_ = 1;         // tiles, one per part
  std::vector<float> tile_;  // the sums and decodes, a few granules at a time
  // Streamed through on every step: huge pages (BigBuffer) spare a TLB miss
  // every 4 KiB and make binding fault in 2 MiB at a time.
  BigBuffer workerResidual_;  // count elements
  BigBuffer serverResidual_;  // this rank's chunk of every slice
};

}  // namespace

std::unique_ptr<Compressor> makeTwoPhaseCompressor(weftCompressKind_t kind,
                                                   const weftCompressorParams_t& params) {
  return std::unique_ptr<Compressor>(new TwoPhaseCompressor(kind, params));
}

}  // namespace weft::compression
