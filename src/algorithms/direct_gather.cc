// Direct gather: every non-root sends its block to the root one chunk
// (channel slot) at a time; the root polls all peers round-robin, so it takes
// chunks in whatever order they arrive and no peer waits on another. The root
// copies its own block unless in place (send == recv + root*count).
//
// A block of at least directMinBytes() goes by single copy where the channel
// can publish: the non-root publishes it in one slot and waits until the root
// has released it; the root copies it straight from that rank's memory, a few
// MiB per pass. The root takes either form from any peer.
//
// Cost, n ranks, N = count bytes per rank: 1 step; each non-root sends N
// bytes, the root receives (n-1) * N bytes (copied once by single copy,
// twice through the FIFO).
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/direct.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status directGather(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  const size_t chunk = ctx.chunkBytes();
  const char* in = static_cast<const char*>(a.send);
  Progress progress(ctx.health());

  if (r != a.root) {
    SendChannel& ch = ctx.sendTo(a.root);
    if (bytes > 0 && bytes >= algo::directMinBytes(ctx, a) && ch.canPublish()) {
      algo::PublishedSend ps;
      ps.src = in;
      ps.bytes = bytes;
      while (!ps.finished) {
        bool moved = false;
        algo::stepPublishedSend(ch, ps, &moved);
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
      void* slot;
      WEFT_RETURN_IF_ERROR(acquireSlot(ch, progress, &slot));
      kernels::copyCached(slot, in + off, c);
      ch.commit(c);
    }
    return Status::ok();
  }

  char* out = static_cast<char*>(a.recv);
  if (bytes == 0) return Status::ok();
  char* own = out + static_cast<size_t>(r) * bytes;
  if (in != own) kernels::copyOut(own, in, bytes, bytes * static_cast<size_t>(n));

  thread_local std::vector<size_t> got;
  thread_local std::vector<algo::PublishedRead> reads;  // a peer's published block
  got.assign(n, 0);
  reads.assign(n, {});
  const size_t piece = algo::directPieceBytes(ctx);
  int pending = n - 1;
  while (pending > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int p = algo::mod(r + s, n);
      if (got[p] == bytes) continue;
      RecvChannel& ch = ctx.recvFrom(p);
      algo::PublishedRead& rd = reads[p];
      if (rd.dst != nullptr) {
        WEFT_RETURN_IF_ERROR(algo::stepPublishedRead(ch, rd, piece, &moved));
        if (rd.finished) {
          got[p] = bytes;
          --pending;
        }
        continue;
      }
      while (got[p] < bytes) {
        size_t have = 0;
        const void* data = ch.tryPeek(&have);
        if (!data) break;
        if (ch.peekedPublished()) {
          // The whole block by single copy; only as the first message.
          if (got[p] != 0 || have != bytes) return algo::sizeMismatch(have, bytes - got[p]);
          rd.dst = out + static_cast<size_t>(p) * bytes;
          rd.bytes = bytes;
          moved = true;
          break;  // read on the next pass
        }
        const size_t c = std::min(chunk, bytes - got[p]);
        if (have != c) return algo::sizeMismatch(have, c);
        kernels::copyCached(out + static_cast<size_t>(p) * bytes + got[p], data, c);
        ch.release();
        got[p] += c;
        moved = true;
        if (got[p] == bytes) --pending;
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
