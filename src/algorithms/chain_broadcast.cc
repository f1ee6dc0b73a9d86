// Chain broadcast: from the root along the communicator's ring
// (ring_order.h) to the rank before it, pipelined one chunk
// (the tuner's, at most a channel slot) at a time. Each rank forwards a chunk before copying it
// into its own output, so the chunk keeps moving down the chain. recv is the output on every rank;
// the root copies send -> recv when they differ.
//
// Cost, n ranks, N bytes in C chunks: n-1+C-1 pipeline steps; every rank but
// the last sends N bytes, every rank but the root receives N bytes.
// Deadlock-free with any slot count: the chain has no cycle.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status chainBroadcast(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t total = a.count * es;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const int ring = ctx.ringPos(r);
  const int pos = algo::mod(ring - ctx.ringPos(a.root), n);  // 0 at the root
  if (n == 1) {
    if (in != out && total > 0) kernels::copy(out, in, total);
    return Status::ok();
  }

  SendChannel* next = pos < n - 1 ? &ctx.sendTo(ctx.ringRank(algo::mod(ring + 1, n))) : nullptr;
  RecvChannel* prev = pos > 0 ? &ctx.recvFrom(ctx.ringRank(algo::mod(ring - 1, n))) : nullptr;
  Progress progress(ctx.health());
  const size_t chunk = algo::chunkBytes(ctx, a, es);

  if (prev && prev->canLand()) {
    for (size_t off = 0; off < total; off += chunk)
      prev->land(out + off, std::min(chunk, total - off));
  }
  for (size_t off = 0; off < total; off += chunk) {
    const size_t bytes = std::min(chunk, total - off);
    const void* src;
    if (prev) {
      WEFT_RETURN_IF_ERROR(peekSlot(*prev, progress, bytes, &src));
    } else {
      src = in + off;
    }
    // Forwarded from where it stays put until the call returns: the
    // received bytes once copied into place (the root's input as it is).
    if (src != out + off && prev) {
      kernels::copyOut(out + off, src, bytes, total);
      src = out + off;
    }
    if (next) {
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(*next, progress, &slot));
      next->commitFrom(slot, src, bytes);
    }
    if (prev) prev->release();
  }
  // The root copies its input into place once every chunk is on its way:
  // copying each chunk between its sends held the next send back (2 ranks
  // over TCP, out of place: 8 MiB took 1920 us against 1790 for binomial,
  // which copies first; both 1290-1380 in place).
  if (!prev && in != out) kernels::copyOut(out, in, total, total);
  return Status::ok();
}

}  // namespace weft
