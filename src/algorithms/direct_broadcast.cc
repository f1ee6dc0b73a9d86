// Direct (single-copy) broadcast: the root publishes its input to every
// non-root, one slot per channel, and each non-root copies the whole message
// straight from the root's memory into its output, a few MiB per pass. The
// root copies send to recv unless in place, and is done once every non-root
// has released the slot (its input must not change until then).
//
// Cost, n ranks, N bytes: 1 step, one slot per non-root; each non-root copies
// N bytes once, straight from the root's buffer, all at the same time (the
// chain copies every byte twice per hop); the root copies nothing to peers.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/direct.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status directBroadcast(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  if (bytes == 0) return Status::ok();
  Progress progress(ctx.health());

  if (r != a.root) {
    algo::PublishedRead rd;
    rd.dst = static_cast<char*>(a.recv);
    rd.bytes = bytes;
    const size_t piece = algo::directPieceBytes(ctx);
    RecvChannel& ch = ctx.recvFrom(a.root);
    while (!rd.finished) {
      bool moved = false;
      WEFT_RETURN_IF_ERROR(algo::stepPublishedRead(ch, rd, piece, &moved));
      if (moved) {
        progress.made();
      } else {
        WEFT_RETURN_IF_ERROR(progress.idle());
      }
    }
    return Status::ok();
  }

  if (a.send != a.recv) kernels::copy(a.recv, a.send, bytes);
  thread_local std::vector<algo::PublishedSend> sends;
  sends.assign(n, {});
  int pending = n - 1;
  for (int p = 0; p < n; ++p) {
    sends[p].src = a.send;
    sends[p].bytes = bytes;
  }
  while (pending > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int p = algo::mod(r + s, n);
      if (sends[p].finished) continue;
      algo::stepPublishedSend(ctx.sendTo(p), sends[p], &moved);
      if (sends[p].finished) --pending;
    }
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
  return Status::ok();
}

}  // namespace weft
