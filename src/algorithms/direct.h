// Helpers of the single-copy algorithms (direct_allgather.cc,
// direct_alltoall.cc, direct_broadcast.cc, and the published paths of
// direct_gather.cc and direct_scatter.cc); not part of the algorithm API.
//
// A single-copy message is one slot that holds a reference to the sender's
// buffer (SendChannel::publish). The receiver copies it straight into place
// in pieces, releases the slot, and the sender's buffer is free again once
// SendChannel::drained() says so.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "algorithms/coll.h"
#include "algorithms/detail.h"

namespace weft::algo {

// Bytes a published receive copies per pass over the peers, so that the
// transfers from other peers progress in the same polling loop.
inline size_t directPieceBytes(const CollContext& ctx) {
  return std::max<size_t>(ctx.chunkBytes() * 8, size_t{4} << 20);
}

// One published message of `bytes` from a peer, copied into `dst`.
struct PublishedRead {
  char* dst = nullptr;
  size_t bytes = 0;
  size_t done = 0;
  bool finished = false;  // all read and the slot released
};

// Moves one piece of `rd` if the peer's slot has arrived; sets *moved when it
// did. A slot that holds FIFO data, or a published size other than
// rd.bytes, means the ranks called different collectives or counts.
inline Status stepPublishedRead(RecvChannel& ch, PublishedRead& rd, size_t piece, bool* moved) {
  if (rd.finished) return Status::ok();
  size_t have = 0;
  if (!ch.tryPeek(&have)) return Status::ok();
  if (have != rd.bytes) return sizeMismatch(have, rd.bytes);
  if (!ch.peekedPublished()) {
    return makeError(weftInvalidUsage,
                     "rank got a %zu-byte FIFO message where %zu bytes were expected as one "
                     "single-copy message: ranks called different collectives or counts",
                     have, rd.bytes);
  }
  const size_t c = std::min(piece, rd.bytes - rd.done);
  WEFT_RETURN_IF_ERROR(ch.readPublished(rd.dst + rd.done, rd.done, c));
  rd.done += c;
  *moved = true;
  if (rd.done == rd.bytes) {
    ch.release();
    rd.finished = true;
  }
  return Status::ok();
}

// One buffer published to a peer: first published once a slot is free,
// then done once the peer has released it.
struct PublishedSend {
  const void* src = nullptr;
  size_t bytes = 0;
  bool published = false;
  bool finished = false;  // drained: the peer no longer reads src
};

inline void stepPublishedSend(SendChannel& ch, PublishedSend& s, bool* moved) {
  if (s.finished) return;
  if (!s.published) {
    if (!ch.tryAcquire()) return;
    ch.publish(s.src, s.bytes);
    s.published = true;
    *moved = true;
  }
  if (ch.drained()) {
    s.finished = true;
    *moved = true;
  }
}

// Publishes sends[p] to and reads reads[p] from every peer p (the entries of
// this rank are ignored) in one polling loop, until every block has arrived
// and every peer has released this rank's buffers. Peers are visited in
// rank order starting after this rank, so the ranks do not all read from the
// same peer at once.
inline Status exchangePublished(CollContext& ctx, std::vector<PublishedSend>& sends,
                                std::vector<PublishedRead>& reads) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t piece = directPieceBytes(ctx);
  Progress progress(ctx.health());
  int pending = 2 * (n - 1);
  while (pending > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int p = mod(r + s, n);
      if (!sends[p].finished) {
        stepPublishedSend(ctx.sendTo(p), sends[p], &moved);
        if (sends[p].finished) --pending;
      }
      const int q = mod(r - s, n);
      if (!reads[q].finished) {
        WEFT_RETURN_IF_ERROR(stepPublishedRead(ctx.recvFrom(q), reads[q], piece, &moved));
        if (reads[q].finished) --pending;
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

}  // namespace weft::algo
