// Ring allreduce: a reduce-scatter then an all-gather around the ring
// r -> r+1, pipelined one chunk (channel slot) at a time.
//
// The buffer is cut into n blocks; each pass of the outer loop moves one
// chunk-sized slice of every block all the way round, so sends, reductions
// and receives of different slices overlap across ranks.
//
// Cost, n ranks, N bytes: 2(n-1) steps; each rank sends and receives
// 2(n-1)/n * N bytes and reduces (n-1)/n * N bytes. Receive-reduce-send is
// fused: the reduction writes straight into the next rank's slot.
// Deadlock-free with >= 2 slots per channel: a rank is never more than one
// message ahead of what it has received.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status ringAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (n == 1) {
    contribute(out, in, a.count, a);
    finish(out, a.count, a, 1);
    return Status::ok();
  }

  const size_t perBlock = (a.count + n - 1) / n;
  auto blockStart = [&](int b) { return std::min(a.count, perBlock * b); };
  auto blockLen = [&](int b) { return std::min(a.count, perBlock * (b + 1)) - blockStart(b); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  const size_t chunkElems = ctx.chunkBytes() / es;

  SendChannel& next = ctx.sendTo(mod(r + 1));
  RecvChannel& prev = ctx.recvFrom(mod(r - 1));
  Progress progress(ctx.health());

  // Over TCP the all-gather's blocks are read from the socket straight into
  // place: every slot this call receives is named in order, those of the
  // reduce-scatter (added into a slot) with no address.
  if (prev.canLand()) {
    for (size_t off = 0; off < perBlock; off += chunkElems) {
      for (int s = 1; s < n; ++s)
        if (off < blockLen(mod(r - s))) prev.land(nullptr, 0);
      for (int t = 1; t < n; ++t) {
        const int b = mod(r + 1 - t);
        if (off < blockLen(b))
          prev.land(out + (blockStart(b) + off) * es, std::min(chunkElems, blockLen(b) - off) * es);
      }
    }
  }

  for (size_t off = 0; off < perBlock; off += chunkElems) {
    auto len = [&](int b) -> size_t {
      const size_t bl = blockLen(b);
      return off >= bl ? 0 : std::min(chunkElems, bl - off);
    };
    auto inAt = [&](int b) { return in + (blockStart(b) + off) * es; };
    auto outAt = [&](int b) { return out + (blockStart(b) + off) * es; };

    // Reduce-scatter. Step 0 sends this rank's own block; step s receives
    // block r-s partially reduced by s ranks, adds ours and passes it on. The
    // last step completes block r+1, which starts the all-gather.
    if (const size_t c = len(r)) {
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      if (a.op.preMul) {
        contribute(slot, inAt(r), c, a);
        next.commit(c * es);
      } else {
        next.commitFrom(slot, inAt(r), c * es);
      }
    }
    for (int s = 1; s < n; ++s) {
      const int b = mod(r - s);
      const size_t c = len(b);
      if (c == 0) continue;
      const void* incoming;
      WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, c * es, &incoming));
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      if (s < n - 1) {
        combine(slot, inAt(b), incoming, c, a);
        prev.release();
        next.commit(c * es);
      } else {
        // The finished block goes into place and on from there (over TCP
        // the socket reads it from the output: no copy into the slot).
        combine(outAt(b), inAt(b), incoming, c, a);
        finish(outAt(b), c, a, n);
        prev.release();
        next.commitFrom(slot, outAt(b), c * es);
      }
    }

    // All-gather: step t receives the finished block r+1-t and forwards it,
    // except at the last step, whose block the next rank finished itself.
    for (int t = 1; t < n; ++t) {
      const int b = mod(r + 1 - t);
      const size_t c = len(b);
      if (c == 0) continue;
      const void* incoming;
      WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, c * es, &incoming));
      if (incoming != outAt(b)) kernels::copyOut(outAt(b), incoming, c * es, a.count * es);
      prev.release();
      // Forwarded from its place in the output, which nothing writes again.
      if (t < n - 1) {
        void* slot;
        WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
        next.commitFrom(slot, outAt(b), c * es);
      }
    }
  }
  return Status::ok();
}

}  // namespace weft
