// Direct scatter: the root sends block p to every peer p one chunk (channel
// slot) at a time, filling whichever peers' channels have room round-robin,
// so a slow peer does not hold up the others. The root copies its own block
// unless in place (recv == send + root*count).
//
// Blocks of at least directMinBytes() go by single copy where the channels
// can publish: the root publishes block p to peer p in one slot and is done
// once every peer has released it; each peer copies its block straight from
// the root's memory, a few MiB per pass. A non-root takes either form.
//
// Cost, n ranks, N = count bytes per rank: 1 step; the root sends (n-1) * N
// bytes, each non-root receives N bytes (copied once by single copy, twice
// through the FIFO).
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/direct.h"
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
    if (bytes == 0) return Status::ok();
    // The first slot says which form the root chose.
    size_t have = 0;
    while (!ch.tryPeek(&have)) WEFT_RETURN_IF_ERROR(progress.idle());
    if (ch.peekedPublished()) {
      algo::PublishedRead rd;
      rd.dst = out;
      rd.bytes = bytes;
      const size_t piece = algo::directPieceBytes(ctx);
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
    for (size_t off = 0; off < bytes; off += chunk) {
      const size_t c = std::min(chunk, bytes - off);
      const void* data;
      WEFT_RETURN_IF_ERROR(peekSlot(ch, progress, c, &data));
      kernels::copyCached(out + off, data, c);
      ch.release();
    }
    return Status::ok();
  }

  const char* in = static_cast<const char*>(a.send);
  if (bytes == 0) return Status::ok();
  const char* own = in + static_cast<size_t>(r) * bytes;
  if (own != out) kernels::copy(out, own, bytes);

  thread_local std::vector<size_t> sent;
  thread_local std::vector<algo::PublishedSend> sends;
  sent.assign(n, 0);
  sends.assign(n, {});
  const bool single = bytes >= algo::directMinBytes(ctx, a);
  int pending = n - 1;
  while (pending > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int p = algo::mod(r + s, n);
      SendChannel& ch = ctx.sendTo(p);
      if (single && ch.canPublish()) {
        algo::PublishedSend& ps = sends[p];
        if (ps.finished) continue;
        ps.src = in + static_cast<size_t>(p) * bytes;
        ps.bytes = bytes;
        algo::stepPublishedSend(ch, ps, &moved);
        if (ps.finished) --pending;
        continue;
      }
      while (sent[p] < bytes) {
        void* slot = ch.tryAcquire();
        if (!slot) break;
        const size_t c = std::min(chunk, bytes - sent[p]);
        kernels::copyCached(slot, in + static_cast<size_t>(p) * bytes + sent[p], c);
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
