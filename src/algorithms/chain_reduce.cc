// Chain reduce: along the communicator's ring (ring_order.h) from the rank
// after the root round to the root, pipelined one chunk
// (the tuner's, at most a channel slot) at a time. The first rank of the chain sends its
// contribution; each next rank folds its own in, writing straight into the
// following rank's slot; the root folds in last and writes the result to
// recv. Non-roots' recv is not touched.
//
// Cost, n ranks, N bytes in C chunks: n-1+C-1 pipeline steps; every rank but
// the root sends N bytes, every rank but the first receives and reduces N
// bytes. Deadlock-free with any slot count: the chain has no cycle.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"

namespace weft {

Status chainReduce(CollContext& ctx, const CollArgs& a) {
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

  const int ring = ctx.ringPos(r);
  // 0 at the rank after the root, n-1 at the root
  const int pos = algo::mod(ring - ctx.ringPos(a.root) - 1, n);
  SendChannel* next = pos < n - 1 ? &ctx.sendTo(ctx.ringRank(algo::mod(ring + 1, n))) : nullptr;
  RecvChannel* prev = pos > 0 ? &ctx.recvFrom(ctx.ringRank(algo::mod(ring - 1, n))) : nullptr;
  Progress progress(ctx.health());
  const size_t chunkElems = algo::chunkBytes(ctx, a, es) / es;

  for (size_t off = 0; off < a.count; off += chunkElems) {
    const size_t c = std::min(chunkElems, a.count - off);
    const char* local = in + off * es;
    if (!prev) {
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(*next, progress, &slot));
      contribute(slot, local, c, a);
      next->commit(c * es);
      continue;
    }
    const void* incoming;
    WEFT_RETURN_IF_ERROR(peekSlot(*prev, progress, c * es, &incoming));
    if (next) {
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(*next, progress, &slot));
      combine(slot, local, incoming, c, a);
      prev->release();
      next->commit(c * es);
    } else {
      char* dst = out + off * es;
      combine(dst, local, incoming, c, a);
      finish(dst, c, a, n);
      prev->release();
    }
  }
  return Status::ok();
}

}  // namespace weft
