// Ring all-gather around the communicator's ring (ring_order.h), pipelined
// one chunk (the tuner's, at most a channel slot) at a time, with several
// chunks in flight (ring_schedule.h). Step 0 sends this rank's block; step t
// receives the block of the rank t positions back, forwards it (except at
// the last step, whose block the next rank started from) and copies it into
// place. In place when send == recv + r*count: the self copy is skipped.
//
// Cost, n ranks, N = n*count bytes in total: n-1 steps; each rank sends and
// receives (n-1)/n * N bytes. Deadlock-free with >= 2 slots per channel.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/ring_schedule.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status ringAllGather(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t count = a.count;
  const size_t blockBytes = count * es;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  char* own = out + static_cast<size_t>(r) * blockBytes;
  if (in != own && blockBytes > 0) kernels::copyOut(own, in, blockBytes, blockBytes * n);
  if (n == 1) return Status::ok();

  const int pos = ctx.ringPos(r);
  SendChannel& next = ctx.sendTo(ctx.ringRank(algo::mod(pos + 1, n)));
  RecvChannel& prev = ctx.recvFrom(ctx.ringRank(algo::mod(pos - 1, n)));
  Progress progress(ctx.health());
  const size_t chunkElems = algo::chunkBytes(ctx, a, es) / es;

  const size_t passes = (count + chunkElems - 1) / chunkElems;
  const size_t messages = static_cast<size_t>(n - 1);
  const size_t stride = algo::ringStride(messages, ctx.slotsPerChannel());
  // Step j of a pass moves the block of the rank j positions back.
  auto dstAt = [&](size_t p, size_t j) {
    const int b = ctx.ringRank(algo::mod(pos - static_cast<int>(j), n));
    return out + static_cast<size_t>(b) * blockBytes + p * chunkElems * es;
  };
  auto bytesAt = [&](size_t p) { return std::min(chunkElems, count - p * chunkElems) * es; };
  if (prev.canLand()) {
    (void)algo::forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) {
      if (j > 0) prev.land(dstAt(p, j), bytesAt(p));
      return Status::ok();
    });
  }

  return algo::forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) -> Status {
    const size_t bytes = bytesAt(p);
    void* slot;
    if (j == 0) {
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      next.commitFrom(slot, in + p * chunkElems * es, bytes);
      return Status::ok();
    }
    char* dst = dstAt(p, j);
    const void* incoming;
    WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, bytes, &incoming));
    if (incoming != dst) kernels::copyOut(dst, incoming, bytes, blockBytes * n);
    prev.release();
    // Forwarded from its place in the output, which nothing writes again.
    if (j < messages) {
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      next.commitFrom(slot, dst, bytes);
    }
    return Status::ok();
  });
}

}  // namespace weft
