// Point-to-point batches: every send and receive of one group, progressed
// together in one polling loop so that no posting order deadlocks.
//
// Messages to one peer in one direction form a FIFO in posted order; each
// moves one chunk (channel slot) at a time and the next starts when it is
// done. Sends to self are matched in order with receives from self and
// copied. Zero-byte operations move nothing on either side.
//
// Cost, per message of N bytes: ceil(N / chunkBytes) slots, N bytes sent and
// received; messages to different peers and directions overlap. A message of
// at least directMinBytes() goes by single copy where the transport allows:
// the sender publishes its buffer in one slot and the receiver copies it
// straight into place (one copy instead of two); the send is done once the
// receiver has released that slot.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/tuner.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

// Pairs sends to self with receives from self, in posted order, and copies.
Status runSelf(std::span<const P2POp> ops, int self) {
  size_t ri = 0;
  auto isSelf = [&](const P2POp& op, bool send) {
    return op.peer == self && op.isSend == send && op.bytes > 0;
  };
  for (const P2POp& s : ops) {
    if (!isSelf(s, true)) continue;
    while (ri < ops.size() && !isSelf(ops[ri], false)) ++ri;
    if (ri == ops.size()) {
      return makeError(weftInvalidUsage,
                       "rank %d sends %zu bytes to itself with no matching "
                       "receive in the same group",
                       self, s.bytes);
    }
    const P2POp& d = ops[ri++];
    if (d.bytes != s.bytes) {
      return makeError(weftInvalidUsage,
                       "rank %d sends %zu bytes to itself but receives %zu: the counts differ",
                       self, s.bytes, d.bytes);
    }
    if (d.buf != s.buf) std::memmove(d.buf, s.buf, s.bytes);
  }
  for (; ri < ops.size(); ++ri) {
    if (isSelf(ops[ri], false)) {
      return makeError(weftInvalidUsage,
                       "rank %d receives %zu bytes from itself with no matching send in the "
                       "same group",
                       self, ops[ri].bytes);
    }
  }
  return Status::ok();
}

// A send whose buffer a receive of the same batch overwrites (NCCL's
// in-place sendrecv: one buffer sent to one peer and filled from another)
// must go out as it was when posted: such sends are staged first.
std::span<const P2POp> stageOverlappingSends(std::span<const P2POp> ops, int self) {
  auto overlaps = [](const P2POp& a, const P2POp& b) {
    const char* x = static_cast<const char*>(a.buf);
    const char* y = static_cast<const char*>(b.buf);
    return x < y + b.bytes && y < x + a.bytes;
  };
  thread_local std::vector<P2POp> staged;
  thread_local std::vector<char> staging;
  size_t stageBytes = 0;
  bool any = false;
  for (const P2POp& s : ops) {
    if (!s.isSend || s.peer == self || s.bytes == 0) continue;
    for (const P2POp& r : ops)
      if (!r.isSend && r.bytes > 0 && overlaps(s, r)) {
        stageBytes += s.bytes;
        any = true;
        break;
      }
  }
  if (!any) return ops;
  staged.assign(ops.begin(), ops.end());
  staging.resize(stageBytes);
  size_t at = 0;
  for (P2POp& s : staged) {
    if (!s.isSend || s.peer == self || s.bytes == 0) continue;
    bool hit = false;
    for (const P2POp& r : ops) hit = hit || (!r.isSend && r.bytes > 0 && overlaps(s, r));
    if (!hit) continue;
    kernels::copy(staging.data() + at, s.buf, s.bytes);
    s.buf = staging.data() + at;
    at += s.bytes;
  }
  return staged;
}

}  // namespace

Status runP2P(CollContext& ctx, std::span<const P2POp> posted) {
  const std::span<const P2POp> ops = stageOverlappingSends(posted, ctx.rank());
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t chunk = ctx.chunkBytes();
  const size_t directMin = p2pSingleCopyAllowed() ? ctx.directMinBytes() : SIZE_MAX;
  // Bytes a published receive copies per pass, so other operations of the
  // batch keep moving meanwhile.
  const size_t directPiece = std::max<size_t>(chunk * 8, 4 << 20);
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= n) {
      return makeError(weftInvalidArgument,
                       "%s peer %d is not a rank of this %d-rank "
                       "communicator",
                       op.isSend ? "send" : "recv", op.peer, n);
    }
  }
  WEFT_RETURN_IF_ERROR(runSelf(ops, r));

  // Per (peer, direction) FIFO of op indices: head[2*peer + isSend] is the
  // first unfinished one, nextOp links to the one posted after it.
  thread_local std::vector<int> head, nextOp, active;
  thread_local std::vector<size_t> done;
  thread_local std::vector<char> awaitingRelease;  // per peer: a published send in flight
  awaitingRelease.assign(static_cast<size_t>(n), 0);
  head.assign(2 * static_cast<size_t>(n), -1);
  nextOp.assign(ops.size(), -1);
  done.assign(ops.size(), 0);
  active.clear();
  for (size_t i = ops.size(); i-- > 0;) {
    const P2POp& op = ops[i];
    if (op.peer == r || op.bytes == 0) continue;
    const int key = 2 * op.peer + (op.isSend ? 1 : 0);
    nextOp[i] = head[key];
    head[key] = static_cast<int>(i);
  }
  for (int key = 0; key < 2 * n; ++key) {
    if (head[key] >= 0) active.push_back(key);
  }
  // Over TCP every chunk of every receive is read from the socket straight
  // into place.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r || head[2 * peer] < 0 || !ctx.recvFrom(peer).canLand()) continue;
    RecvChannel& ch = ctx.recvFrom(peer);
    for (int i = head[2 * peer]; i >= 0; i = nextOp[i]) {
      char* buf = static_cast<char*>(ops[i].buf);
      for (size_t off = 0; off < ops[i].bytes; off += chunk)
        ch.land(buf + off, std::min(chunk, ops[i].bytes - off));
    }
  }

  Progress progress(ctx.health());
  while (!active.empty()) {
    bool moved = false;
    for (size_t k = 0; k < active.size();) {
      const int key = active[k];
      const int peer = key / 2;
      int i = head[key];
      if (key & 1) {
        SendChannel& ch = ctx.sendTo(peer);
        while (i >= 0) {
          if (awaitingRelease[peer]) {
            if (!ch.drained()) break;
            awaitingRelease[peer] = 0;
            moved = true;
            i = nextOp[i];
            continue;
          }
          void* slot = ch.tryAcquire();
          if (!slot) break;
          const P2POp& op = ops[i];
          if (done[i] == 0 && op.bytes >= directMin && ch.canPublish()) {
            ch.publish(op.buf, op.bytes);
            done[i] = op.bytes;
            awaitingRelease[peer] = 1;
            moved = true;
            continue;
          }
          const size_t c = std::min(chunk, op.bytes - done[i]);
          ch.commitFrom(slot, static_cast<const char*>(op.buf) + done[i], c);
          moved = true;
          if ((done[i] += c) == op.bytes) i = nextOp[i];
        }
      } else {
        RecvChannel& ch = ctx.recvFrom(peer);
        while (i >= 0) {
          size_t have = 0;
          const void* data = ch.tryPeek(&have);
          if (!data) break;
          const P2POp& op = ops[i];
          if (ch.peekedPublished()) {
            // One published message: the whole rest of this receive.
            if (have != op.bytes) return algo::sizeMismatch(have, op.bytes);
            const size_t c = std::min(directPiece, op.bytes - done[i]);
            WEFT_RETURN_IF_ERROR(
                ch.readPublished(static_cast<char*>(op.buf) + done[i], done[i], c));
            moved = true;
            if ((done[i] += c) < op.bytes) break;  // the rest on a later pass
            ch.release();
            i = nextOp[i];
            continue;
          }
          const size_t c = std::min(chunk, op.bytes - done[i]);
          if (have != c) return algo::sizeMismatch(have, c);
          char* dst = static_cast<char*>(op.buf) + done[i];
          if (data != dst) kernels::copyOut(dst, data, c, op.bytes);
          ch.release();
          moved = true;
          if ((done[i] += c) == op.bytes) i = nextOp[i];
        }
      }
      head[key] = i;
      if (i < 0) {
        active[k] = active.back();
        active.pop_back();
      } else {
        ++k;
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
