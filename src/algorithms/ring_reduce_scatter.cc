// Ring reduce-scatter around r -> r+1, pipelined one chunk (channel slot) at
// a time. Rank r ends with block r (recvcount elements) of the reduction.
//
// Step 0 sends block r-1; step s receives block r-1-s reduced by s ranks,
// folds in this rank's part and passes it on, writing straight into the next
// rank's slot. The last step receives block r itself and finishes it in the
// output. In place when recv == send + r*recvcount: block r of the input is
// read only by that last step, which writes the same elements.
//
// Cost, n ranks, N = n*recvcount bytes in total: n-1 steps; each rank sends
// and receives (n-1)/n * N bytes and reduces (n-1)/n * N bytes.
// Deadlock-free with >= 2 slots per channel: a rank is never more than one
// message ahead of what it has received.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"

namespace weft {

Status ringReduceScatter(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t count = a.count;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (n == 1) {
    contribute(out, in, count, a);
    finish(out, count, a, 1);
    return Status::ok();
  }

  SendChannel& next = ctx.sendTo(algo::mod(r + 1, n));
  RecvChannel& prev = ctx.recvFrom(algo::mod(r - 1, n));
  Progress progress(ctx.health());
  const size_t chunkElems = ctx.chunkBytes() / es;

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t c = std::min(chunkElems, count - off);
    auto inAt = [&](int b) { return in + (static_cast<size_t>(b) * count + off) * es; };

    void* slot;
    WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
    if (a.op.preMul) {
      contribute(slot, inAt(algo::mod(r - 1, n)), c, a);
      next.commit(c * es);
    } else {
      next.commitFrom(slot, inAt(algo::mod(r - 1, n)), c * es);
    }

    for (int s = 1; s < n; ++s) {
      const int b = algo::mod(r - 1 - s, n);
      const void* incoming;
      WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, c * es, &incoming));
      if (s < n - 1) {
        WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
        combine(slot, inAt(b), incoming, c, a);
        prev.release();
        next.commit(c * es);
      } else {
        char* dst = out + off * es;  // b == r
        combine(dst, inAt(b), incoming, c, a);
        finish(dst, c, a, n);
        prev.release();
      }
    }
  }
  return Status::ok();
}

}  // namespace weft
