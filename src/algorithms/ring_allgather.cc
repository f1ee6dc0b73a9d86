// Ring all-gather around r -> r+1, pipelined one chunk (channel slot) at a
// time. Step 0 sends this rank's block; step t receives block r-t, forwards it
// (except at the last step, whose block the next rank started from) and
// copies it into place. In place when send == recv + r*count: the self copy
// is skipped.
//
// Cost, n ranks, N = n*count bytes in total: n-1 steps; each rank sends and
// receives (n-1)/n * N bytes. Deadlock-free with >= 2 slots per channel: a
// rank is never more than one message ahead of what it has received.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
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
  if (in != own && blockBytes > 0) kernels::copy(own, in, blockBytes);
  if (n == 1) return Status::ok();

  SendChannel& next = ctx.sendTo(algo::mod(r + 1, n));
  RecvChannel& prev = ctx.recvFrom(algo::mod(r - 1, n));
  Progress progress(ctx.health());
  const size_t chunkElems = ctx.chunkBytes() / es;

  auto dstAt = [&](int b, size_t off) {
    return out + static_cast<size_t>(b) * blockBytes + off * es;
  };
  if (prev.canLand()) {
    for (size_t off = 0; off < count; off += chunkElems)
      for (int t = 1; t < n; ++t)
        prev.land(dstAt(algo::mod(r - t, n), off), std::min(chunkElems, count - off) * es);
  }

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t bytes = std::min(chunkElems, count - off) * es;
    void* slot;
    WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
    next.commitFrom(slot, in + off * es, bytes);

    for (int t = 1; t < n; ++t) {
      char* dst = dstAt(algo::mod(r - t, n), off);
      const void* incoming;
      WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, bytes, &incoming));
      if (incoming != dst) kernels::copyOut(dst, incoming, bytes, blockBytes * n);
      prev.release();
      // Forwarded from its place in the output, which nothing writes again.
      if (t < n - 1) {
        WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
        next.commitFrom(slot, dst, bytes);
      }
    }
  }
  return Status::ok();
}

}  // namespace weft
