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
//
// Over sockets, a send to a peer that this batch also receives from runs at
// most one chunk ahead of what has come back, as an exchange does
// (exchange.h), unless nothing has come back for kPaceWaitNs (see holdSend).
#include <time.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/tuner.h"
#include "base/page_buffer.h"
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

// Sends whose buffer a receive of the same batch overwrites must go out as
// the buffer was when posted (NCCL's in-place sendrecv: one buffer sent to
// one peer and filled from another; in-place all-to-all).
//
// The common shape over shared-memory FIFOs is gated, not copied up front: a
// send and a receive that start at the same address, overlap nothing else,
// and are each the only operation of their peer and direction. The send
// copies each chunk into its slot, as it would anyway. The receive writes
// freely up to what the send has taken; where it gets further ahead, the
// send's bytes it is about to overwrite are copied aside first, one chunk
// at a time, and the send reads them from there. The receive never waits
// for the send: the peer may post the matching receive only once this one
// completed (a blocking send, then a receive), and a receive that waited
// would deadlock there. While sends keep ahead (a message within the FIFO's
// depth; each pass moves sends first), nothing is copied aside. Only sends
// of at most kMostGatedChunks chunks are gated: a larger one is overtaken
// most of the time, and copying it aside piece by piece measured slower
// than up front (in-place 16 and 64 MiB, 2 ranks, `simple`, 6 runs each:
// 0.28-0.86 of the out-of-place rate, median 0.48, against 0.49-1.28,
// median 0.72, up front).
//
// The same shape over sockets, where the send's frames read the caller's
// buffer when the kernel takes them and the receive reads from the socket
// straight into place, is gated per chunk. A chunk of the receive lands in
// place only once the send's chunk at the same offset is no longer read
// (the kernel took it); one that arrives earlier waits in the channel's
// slot, and before it is copied into place the send's chunk is copied aside
// and its frame, queued or not, reads the copy. Again the receive never
// waits for the send. In-place sendrecv, 2 ranks over loopback, median of 6
// alternating runs: 64 MiB 50.8 ms staged up front, 33.4 ms gated (out of
// place 36.4); 4 MiB 2615 -> 1215 us.
//
// Every other overlap is staged before anything moves. So is a send by
// single copy (staging plus single copy is two copies, the FIFO two
// already), and one over TCP to a receive over shared memory or back.
enum class Gate { kNone, kFifo, kSocket };
struct Overlaps {
  std::span<const P2POp> ops;  // as posted, or with staged sends' buffers replaced
  std::vector<int> gate;       // per receive: the send it waits on (-1: none)
  std::vector<char> copyIn;    // per send: copy into the slot, publish nothing
  std::vector<char> bySocket;  // per receive: gated by chunk over sockets
  size_t stagedBytes = 0;
};

thread_local size_t lastStagedBytes = 0;
// The shared-memory FIFO's default depth (WEFT_SHM_SLOTS).
constexpr size_t kMostGatedChunks = 4;
// How long a paced send waits for its peer's next chunk before it stops
// pacing for the rest of the batch: a few chunks' time on a 10 Gbit/s link.
constexpr int64_t kPaceWaitNs = 2 * 1000 * 1000;

int64_t monotonicNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ll + t.tv_nsec;
}

// Every op's peer is a rank (0 <= peer < nranks).
// `gatable(send, receive)`: how the pair may be gated (see above: FIFOs
// that copy, a send of at most kMostGatedChunks; or sockets both ways).
const Overlaps& resolveOverlaps(
    std::span<const P2POp> ops, int self, int nranks,
    const std::function<Gate(const P2POp& send, const P2POp& recv)>& gatable) {
  thread_local Overlaps out;
  thread_local std::vector<P2POp> staged;
  thread_local std::vector<char> staging;
  thread_local std::vector<int> fifoOps;  // non-empty operations per (peer, direction)
  auto overlaps = [](const P2POp& a, const P2POp& b) {
    const char* x = static_cast<const char*>(a.buf);
    const char* y = static_cast<const char*>(b.buf);
    return x < y + b.bytes && y < x + a.bytes;
  };
  auto remote = [self](const P2POp& op) { return op.peer != self && op.bytes > 0; };
  out.ops = ops;
  out.gate.assign(ops.size(), -1);
  out.copyIn.assign(ops.size(), 0);
  out.bySocket.assign(ops.size(), 0);
  out.stagedBytes = 0;
  fifoOps.assign(2 * static_cast<size_t>(nranks), 0);
  for (const P2POp& op : ops) {
    if (remote(op)) ++fifoOps[2 * op.peer + (op.isSend ? 1 : 0)];
  }
  auto aloneInFifo = [&](const P2POp& op) {
    return fifoOps[2 * op.peer + (op.isSend ? 1 : 0)] == 1;
  };
  thread_local std::vector<char> stageIt;
  stageIt.assign(ops.size(), 0);
  for (size_t si = 0; si < ops.size(); ++si) {
    const P2POp& s = ops[si];
    if (!s.isSend || !remote(s)) continue;
    int hits = 0, hit = -1;
    for (size_t ri = 0; ri < ops.size(); ++ri) {
      const P2POp& r = ops[ri];
      if (r.isSend || r.bytes == 0 || !overlaps(s, r)) continue;
      ++hits;
      hit = static_cast<int>(ri);
    }
    if (hits == 0) continue;
    Gate how = hits == 1 && remote(ops[hit]) && ops[hit].buf == s.buf && aloneInFifo(s) &&
                       aloneInFifo(ops[hit])
                   ? gatable(s, ops[hit])
                   : Gate::kNone;
    for (size_t sj = 0; how != Gate::kNone && sj < ops.size(); ++sj) {
      if (sj != si && ops[sj].isSend && remote(ops[sj]) && overlaps(ops[sj], ops[hit]))
        how = Gate::kNone;
    }
    if (how != Gate::kNone) {
      out.gate[hit] = static_cast<int>(si);
      out.copyIn[si] = how == Gate::kFifo;
      out.bySocket[hit] = how == Gate::kSocket;
    } else {
      stageIt[si] = 1;
      out.stagedBytes += s.bytes;
    }
  }
  if (out.stagedBytes > 0) {
    staged.assign(ops.begin(), ops.end());
    char* base = pageAlignedIn(staging, out.stagedBytes);
    size_t at = 0;
    for (size_t si = 0; si < ops.size(); ++si) {
      if (!stageIt[si]) continue;
      kernels::copy(base + at, staged[si].buf, staged[si].bytes);
      staged[si].buf = base + at;
      at += staged[si].bytes;
    }
    out.ops = staged;
  }
  lastStagedBytes = out.stagedBytes;
  return out;
}

// The state of one batch while it runs; thread_local and reused, so that a
// stream of small batches allocates nothing.
class Batch {
 public:
  Status run(CollContext& ctx, std::span<const P2POp> posted);

 private:
  // Moves what the send FIFO to `peer` can take; `i` is its first unfinished op.
  void moveSends(int peer, int& i);
  // Whether the next chunk to `peer` waits for the peer's next one (pacing).
  bool holdSend(int peer);
  // Moves what has arrived from `peer`.
  Status moveRecvs(int peer, int& i);
  // Copies `bytes` of send i from offset `at` to dst: from the copy aside
  // below copiedEnd_, from its buffer above.
  void readSend(int i, size_t at, size_t bytes, char* dst) const {
    const size_t fromCopy = at < copiedEnd_[i] ? std::min(bytes, copiedEnd_[i] - at) : 0;
    if (fromCopy > 0) kernels::copy(dst, lateCopy_[i] + (at - lateFrom_[i]), fromCopy);
    if (bytes > fromCopy)
      kernels::copy(dst + fromCopy, static_cast<const char*>(ops_[i].buf) + at + fromCopy,
                    bytes - fromCopy);
  }
  // How far a receive may write: all of it, or for one gated over FIFOs (see
  // resolveOverlaps) only what its send has taken or copied aside.
  size_t writableEnd(int i) const {
    const int s = overlap_->gate[i];
    if (s < 0 || overlap_->bySocket[i]) return ops_[i].bytes;
    const size_t kept = std::max(done_[s], copiedEnd_[s]);
    return kept >= ops_[s].bytes ? ops_[i].bytes : kept;
  }
  // The receive `ri` is about to write up to `end`, past what its send has
  // taken: the send's bytes up to there are copied aside first (a piece at a
  // time, so that neither rank stalls on one large copy while the other
  // waits for it).
  void keepSendUpTo(int ri, size_t end);
  // A buffer of at least `bytes` for copies aside, kept from batch to batch.
  char* lateBuffer(size_t bytes);
  // Gated over sockets (see resolveOverlaps): whether the caller's buffer
  // may be overwritten at send si's chunk k (the send took it, or a copy).
  bool sendChunkFree(int si, size_t k);
  // Copies send si's chunk k aside; its frame reads the copy from now on.
  void moveSendChunkAside(int si, size_t k);
  // Names for the channel the next chunks of receive ri that may land in
  // place, in order (RecvChannel::land).
  void landFreeChunks(int ri);

  CollContext* ctx_ = nullptr;
  std::span<const P2POp> ops_;
  size_t chunk_ = 0, directMin_ = SIZE_MAX, directPiece_ = 0;
  bool moved_ = false;
  // Per (peer, direction) FIFO of op indices: head_[2*peer + isSend] is the
  // first unfinished one, nextOp_ links to the one posted after it.
  std::vector<int> head_, nextOp_, active_;
  std::vector<size_t> done_;
  std::vector<char> awaitingRelease_;  // per peer: a published send in flight
  // Per peer, for pacing (holdSend): whether sends to it are paced, the bytes
  // sent to it and received from it in this batch, and until when a held
  // send waits (0: not waiting).
  std::vector<char> paced_;
  std::vector<size_t> sentTo_, gotFrom_;
  std::vector<int64_t> holdUntilNs_;
  const Overlaps* overlap_ = nullptr;  // gates and copy-in flags
  // A gated send's bytes from lateFrom_ up to copiedEnd_ are in lateCopy_
  // (at offset - lateFrom_).
  std::vector<size_t> lateFrom_, copiedEnd_;
  std::vector<char*> lateCopy_;
  // Kept from batch to batch: a fresh allocation would fault in every page
  // of a large message again (64 MiB in-place sendrecv: 4x slower).
  struct LateCopy {
    std::unique_ptr<char[]> bytes;
    size_t capacity = 0;
  };
  std::vector<LateCopy> lateCopies_;
  size_t lateCopiesUsed_ = 0;
  // Gated over sockets: per send, where its flags in aside_ start (one per
  // chunk: copied aside into lateCopy_ at the same offset); per receive,
  // the next chunk to name for landing.
  std::vector<size_t> asideAt_, landNext_;
  std::vector<char> aside_;
};

char* Batch::lateBuffer(size_t bytes) {
  if (lateCopiesUsed_ == lateCopies_.size()) lateCopies_.emplace_back();
  LateCopy& copy = lateCopies_[lateCopiesUsed_++];
  if (copy.capacity < bytes) {
    copy.bytes.reset(new char[bytes]);
    copy.capacity = bytes;
  }
  return copy.bytes.get();
}

bool Batch::sendChunkFree(int si, size_t k) {
  const P2POp& op = ops_[si];
  const size_t off = k * chunk_;
  if (off >= op.bytes || (asideAt_[si] != SIZE_MAX && aside_[asideAt_[si] + k])) return true;
  if (done_[si] <= off) return false;  // not committed yet: it will read the buffer
  return !ctx_->sendTo(op.peer).readsFrom(static_cast<const char*>(op.buf) + off,
                                          std::min(chunk_, op.bytes - off));
}

void Batch::moveSendChunkAside(int si, size_t k) {
  const P2POp& op = ops_[si];
  const size_t off = k * chunk_;
  if (off >= op.bytes) return;
  if (asideAt_[si] == SIZE_MAX) {
    asideAt_[si] = aside_.size();
    aside_.resize(aside_.size() + (op.bytes + chunk_ - 1) / chunk_, 0);
    lateCopy_[si] = lateBuffer(op.bytes);
  }
  if (aside_[asideAt_[si] + k]) return;
  const size_t len = std::min(chunk_, op.bytes - off);
  const char* from = static_cast<const char*>(op.buf) + off;
  kernels::copy(lateCopy_[si] + off, from, len);
  if (done_[si] > off) ctx_->sendTo(op.peer).moveSources(from, len, lateCopy_[si] + off);
  aside_[asideAt_[si] + k] = 1;
  lastStagedBytes += len;
}

void Batch::landFreeChunks(int ri) {
  const P2POp& op = ops_[ri];
  const size_t chunks = (op.bytes + chunk_ - 1) / chunk_;
  // Chunks before done_ were released, named or not; those from there up to
  // landNext_ are named. A chunk not named when its frame arrived waits in
  // its slot, and the ones after it are named only once it is released, so
  // the channel's names stay in slot order.
  size_t& next = landNext_[ri];
  next = std::max(next, done_[ri] / chunk_);
  RecvChannel& ch = ctx_->recvFrom(op.peer);
  while (next < chunks && sendChunkFree(overlap_->gate[ri], next)) {
    const size_t off = next * chunk_;
    ch.land(static_cast<char*>(op.buf) + off, std::min(chunk_, op.bytes - off));
    ++next;
  }
}

void Batch::keepSendUpTo(int ri, size_t end) {
  const int si = overlap_->gate[ri];
  end = std::min(end, ops_[si].bytes);
  const size_t from = std::max(done_[si], copiedEnd_[si]);
  if (end <= from) return;
  if (lateCopy_[si] == nullptr) {
    lateCopy_[si] = lateBuffer(ops_[si].bytes - done_[si]);
    lateFrom_[si] = done_[si];
  }
  kernels::copy(lateCopy_[si] + (from - lateFrom_[si]),
                static_cast<const char*>(ops_[si].buf) + from, end - from);
  copiedEnd_[si] = end;
  lastStagedBytes += end - from;
}

// Two ranks that send each other large messages over sockets and queue
// every chunk the channel takes before reading the other's stall each other,
// as exchanges did before they were paced (exchange.h). sendrecv at 64 MiB
// between two namespaces over a 10 Gbit/s veth, 3 runs each: 0.82-0.96 GB/s
// unpaced, 1.12-1.19 paced; 2 ranks over loopback, median of 6 alternating
// runs: 4 MiB 2088 -> 1248 us, 64 MiB 41.0 -> 36.4 ms.
//
// Unlike an exchange's, the peer's matching send may be posted only after
// this batch completes (it receives, then sends in a later group): a send
// that waited for it unconditionally would deadlock. So a send waits at most
// kPaceWaitNs for the peer's next chunk; after that this batch sends to the
// peer freely, which costs a program of that shape kPaceWaitNs once per batch.
bool Batch::holdSend(int peer) {
  if (head_[2 * peer] < 0 || sentTo_[peer] < gotFrom_[peer] + chunk_) return false;
  const int64_t now = monotonicNs();
  if (holdUntilNs_[peer] == 0) {
    holdUntilNs_[peer] = now + kPaceWaitNs;
    return true;
  }
  if (now < holdUntilNs_[peer]) return true;
  paced_[peer] = 0;
  return false;
}

void Batch::moveSends(int peer, int& i) {
  SendChannel& ch = ctx_->sendTo(peer);
  while (i >= 0) {
    if (awaitingRelease_[peer]) {
      if (!ch.drained()) return;
      awaitingRelease_[peer] = 0;
      moved_ = true;
      i = nextOp_[i];
      continue;
    }
    if (paced_[peer] && holdSend(peer)) return;
    void* slot = ch.tryAcquire();
    if (!slot) return;
    const P2POp& op = ops_[i];
    if (done_[i] == 0 && op.bytes >= directMin_ && ch.canPublish() && !overlap_->copyIn[i]) {
      ch.publish(op.buf, op.bytes);
      done_[i] = op.bytes;
      awaitingRelease_[peer] = 1;
      moved_ = true;
      continue;
    }
    const size_t c = std::min(chunk_, op.bytes - done_[i]);
    if (overlap_->copyIn[i]) {
      readSend(i, done_[i], c, static_cast<char*>(slot));  // its receive may overwrite it next
      ch.commit(c);
    } else if (asideAt_[i] != SIZE_MAX && aside_[asideAt_[i] + done_[i] / chunk_]) {
      ch.commitFrom(slot, lateCopy_[i] + done_[i], c);  // its receive overwrote the buffer
    } else {
      ch.commitFrom(slot, static_cast<const char*>(op.buf) + done_[i], c);
    }
    moved_ = true;
    sentTo_[peer] += c;
    if ((done_[i] += c) == op.bytes) i = nextOp_[i];
  }
}

Status Batch::moveRecvs(int peer, int& i) {
  RecvChannel& ch = ctx_->recvFrom(peer);
  if (i >= 0 && overlap_->bySocket[i]) landFreeChunks(i);
  while (i >= 0) {
    size_t have = 0;
    const void* data = ch.tryPeek(&have);
    if (!data) return Status::ok();
    const P2POp& op = ops_[i];
    char* dst = static_cast<char*>(op.buf) + done_[i];
    if (ch.peekedPublished()) {
      // One published message: the whole rest of this receive.
      if (have != op.bytes) return algo::sizeMismatch(have, op.bytes);
      const size_t c = std::min(directPiece_, op.bytes - done_[i]);
      if (done_[i] + c > writableEnd(i)) keepSendUpTo(i, done_[i] + c);
      WEFT_RETURN_IF_ERROR(ch.readPublished(dst, done_[i], c));
      moved_ = true;
      if ((done_[i] += c) < op.bytes) return Status::ok();  // the rest on a later pass
      ch.release();
      i = nextOp_[i];
      continue;
    }
    const size_t c = std::min(chunk_, op.bytes - done_[i]);
    if (have != c) return algo::sizeMismatch(have, c);
    if (done_[i] + c > writableEnd(i)) keepSendUpTo(i, done_[i] + c);
    if (data != dst && overlap_->bySocket[i]) {
      const int si = overlap_->gate[i];
      if (!sendChunkFree(si, done_[i] / chunk_)) moveSendChunkAside(si, done_[i] / chunk_);
    }
    if (data != dst) kernels::copyOut(dst, data, c, op.bytes);
    ch.release();
    gotFrom_[peer] += c;
    holdUntilNs_[peer] = 0;
    moved_ = true;
    if ((done_[i] += c) == op.bytes) i = nextOp_[i];
  }
  return Status::ok();
}

Status Batch::run(CollContext& ctx, std::span<const P2POp> posted) {
  const int n = ctx.nranks();
  for (const P2POp& op : posted) {
    if (op.peer < 0 || op.peer >= n) {
      return makeError(weftInvalidArgument,
                       "%s peer %d is not a rank of this %d-rank "
                       "communicator",
                       op.isSend ? "send" : "recv", op.peer, n);
    }
  }
  const int r = ctx.rank();
  ctx_ = &ctx;
  chunk_ = ctx.chunkBytes();
  directMin_ = p2pSingleCopyAllowed() ? ctx.directMinBytes() : SIZE_MAX;
  // Bytes a published receive copies per pass, so other operations of the
  // batch keep moving meanwhile.
  directPiece_ = std::max<size_t>(chunk_ * 8, 4 << 20);
  const Overlaps& overlap = resolveOverlaps(posted, r, n, [&](const P2POp& s, const P2POp& rv) {
    SendChannel& out = ctx.sendTo(s.peer);
    RecvChannel& in = ctx.recvFrom(rv.peer);
    if (out.readsSourceLater() && in.canLand() && !out.canPublish()) return Gate::kSocket;
    const bool publishes = s.bytes >= directMin_ && out.canPublish();
    const bool fifo = !publishes && s.bytes <= kMostGatedChunks * chunk_ &&
                      !out.readsSourceLater() && !in.canLand();
    return fifo ? Gate::kFifo : Gate::kNone;
  });
  ops_ = overlap.ops;
  WEFT_RETURN_IF_ERROR(runSelf(ops_, r));

  awaitingRelease_.assign(static_cast<size_t>(n), 0);
  head_.assign(2 * static_cast<size_t>(n), -1);
  nextOp_.assign(ops_.size(), -1);
  done_.assign(ops_.size(), 0);
  overlap_ = &overlap;
  lateFrom_.assign(ops_.size(), 0);
  copiedEnd_.assign(ops_.size(), 0);
  lateCopy_.assign(ops_.size(), nullptr);
  lateCopiesUsed_ = 0;
  asideAt_.assign(ops_.size(), SIZE_MAX);
  landNext_.assign(ops_.size(), 0);
  aside_.clear();
  active_.clear();
  for (size_t i = ops_.size(); i-- > 0;) {
    const P2POp& op = ops_[i];
    if (op.peer == r || op.bytes == 0) continue;
    const int key = 2 * op.peer + (op.isSend ? 1 : 0);
    nextOp_[i] = head_[key];
    head_[key] = static_cast<int>(i);
  }
  for (int key = 0; key < 2 * n; ++key) {
    if (head_[key] >= 0) active_.push_back(key);
  }
  paced_.assign(static_cast<size_t>(n), 0);
  sentTo_.assign(static_cast<size_t>(n), 0);
  gotFrom_.assign(static_cast<size_t>(n), 0);
  holdUntilNs_.assign(static_cast<size_t>(n), 0);
  for (int peer = 0; peer < n; ++peer) {
    paced_[peer] =
        head_[2 * peer] >= 0 && head_[2 * peer + 1] >= 0 && ctx.sendTo(peer).readsSourceLater();
  }
  // Over TCP every chunk of every receive is read from the socket straight
  // into place; a gated one names its chunks as they become free (see
  // landFreeChunks).
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r || head_[2 * peer] < 0 || !ctx.recvFrom(peer).canLand()) continue;
    if (overlap.bySocket[head_[2 * peer]]) continue;  // alone in its FIFO
    RecvChannel& ch = ctx.recvFrom(peer);
    for (int i = head_[2 * peer]; i >= 0; i = nextOp_[i]) {
      char* buf = static_cast<char*>(ops_[i].buf);
      for (size_t off = 0; off < ops_[i].bytes; off += chunk_)
        ch.land(buf + off, std::min(chunk_, ops_[i].bytes - off));
    }
  }

  Progress progress(ctx.health());
  while (!active_.empty()) {
    moved_ = false;
    // Sends first: what a send takes in this pass, its receive need not stage.
    for (const int sends : {1, 0}) {
      for (size_t k = 0; k < active_.size();) {
        const int key = active_[k];
        if ((key & 1) != sends) {
          ++k;
          continue;
        }
        int& i = head_[key];
        if (sends) {
          moveSends(key / 2, i);
        } else {
          WEFT_RETURN_IF_ERROR(moveRecvs(key / 2, i));
        }
        if (i < 0) {
          active_[k] = active_.back();
          active_.pop_back();
        } else {
          ++k;
        }
      }
    }
    if (moved_) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
  return Status::ok();
}

}  // namespace

size_t p2pLastStagedBytes() {
  return lastStagedBytes;
}

Status runP2P(CollContext& ctx, std::span<const P2POp> posted) {
  thread_local Batch batch;
  return batch.run(ctx, posted);
}

}  // namespace weft
