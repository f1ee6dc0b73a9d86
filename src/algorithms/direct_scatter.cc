// Direct scatter: the root sends block p to every peer p one chunk (channel
// slot) at a time, filling whichever peers' channels have room round-robin,
// so a slow peer does not hold up the others. The root copies its own block
// unless in place (recv == send + root*count).
//
// Cost, n ranks, N = count bytes per rank: 1 step; the root sends (n-1) * N
// bytes, each non-root receives N bytes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status directScatter(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  const size_t chunk = ctx.chunkBytes();
  char* out = static_cast<char*>(a.recv);
  Progress progress(ctx.health());

  if (r != a.root) {
    RecvChannel& ch = ctx.recvFrom(a.root);
    for (size_t off = 0; off < bytes; off += chunk) {
      const size_t c = std::min(chunk, bytes - off);
      const void* data;
      WEFT_RETURN_IF_ERROR(peekSlot(ch, progress, c, &data));
      std::memcpy(out + off, data, c);
      ch.release();
    }
    return Status::ok();
  }

  const char* in = static_cast<const char*>(a.send);
  if (bytes == 0) return Status::ok();
  const char* own = in + static_cast<size_t>(r) * bytes;
  if (own != out) kernels::copy(out, own, bytes);

  thread_local std::vector<size_t> sent;
  sent.assign(n, 0);
  int pending = n - 1;
  while (pending > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int p = algo::mod(r + s, n);
      SendChannel& ch = ctx.sendTo(p);
      while (sent[p] < bytes) {
        void* slot = ch.tryAcquire();
        if (!slot) break;
        const size_t c = std::min(chunk, bytes - sent[p]);
        std::memcpy(slot, in + static_cast<size_t>(p) * bytes + sent[p], c);
        ch.commit(c);
        sent[p] += c;
        moved = true;
        if (sent[p] == bytes) --pending;
      }
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
