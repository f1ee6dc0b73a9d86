// Building blocks shared by the recursive, tree, Bruck and all-to-all-v
// algorithms; not part of the algorithm API.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/coll.h"
#include "algorithms/detail.h"
#include "algorithms/stage.h"
#include "base/dtype.h"
#include "base/page_buffer.h"
#include "kernels/reduce.h"

namespace weft::algo {

// A per-thread scratch buffer of at least `bytes`: kept between calls (no
// allocation on the hot path) unless it grew past 64 MiB, which is freed when
// the call ends.
class Scratch {
 public:
  // Page-aligned, so that copies between it and a page-aligned user buffer
  // run at full speed (base/page_buffer.h).
  Scratch(std::vector<char>& v, size_t bytes) : v_(v), data_(pageAlignedIn(v, bytes)) {}
  ~Scratch() {
    if (v_.capacity() > (size_t{64} << 20)) std::vector<char>().swap(v_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() { return data_; }

 private:
  std::vector<char>& v_;
  char* data_;
};

// Bytes per message: the slot size rounded down to whole elements.
inline size_t chunkFor(const CollContext& ctx, size_t elemBytes) {
  return ctx.chunkBytes() / elemBytes * elemBytes;
}

// Sends sendBytes from src to rank `to` while receiving recvBytes from rank
// `from`, one chunk (slot) at a time, progressing both in one polling loop so
// that two ranks exchanging with each other never deadlock, whatever the slot
// count. Each received chunk is handed to onChunk(offset, data, bytes) and
// released afterwards. to/from < 0 (or a zero size) skips that direction.
// With `gate`, the chunk at offset o is handed over only once the chunk at o
// went out: the receive may then overwrite what is being sent (same layout
// both ways). With `landAt` (ungated only), chunk o may arrive straight at
// landAt + o (RecvChannel::land): onChunk's data is then that address.
//
// Exchange is the exchange as a state machine: step() moves what the
// channels allow now, done() says whether it is over. exchange() runs one to
// its end; a Stage (stage.h) runs one with WEFT_CO_EXCHANGE, yielding while
// it waits.
template <class OnChunk>
class Exchange {
 public:
  Exchange(CollContext& ctx, size_t chunk, int to, const char* src, size_t sendBytes, int from,
           size_t recvBytes, bool gate, OnChunk onChunk, char* landAt = nullptr)
      : chunk_(chunk),
        src_(src),
        sendBytes_(to < 0 ? 0 : sendBytes),
        recvBytes_(from < 0 ? 0 : recvBytes),
        gate_(gate),
        onChunk_(std::move(onChunk)) {
    tx_ = sendBytes_ ? &ctx.sendTo(to) : nullptr;
    rx_ = recvBytes_ ? &ctx.recvFrom(from) : nullptr;
    if (rx_ && landAt && !gate && rx_->canLand()) {
      for (size_t off = 0; off < recvBytes_; off += chunk)
        rx_->land(landAt + off, std::min(chunk, recvBytes_ - off));
    }
    // Over sockets a send runs at most one chunk ahead of the receive while
    // both directions have bytes left, as a ring's step does. Queuing every
    // slot's chunk at once (16 x 512 KiB) before taking the partner's made
    // both ranks' exchanges stall each other: 2 ranks over TCP loopback, rhd
    // allreduce at 32 MiB took 19.9 ms against 12.5 for the ring, and
    // 12.7 paced (8 MiB: 4149 -> 2718 us; median of 5 alternating runs);
    // 4 ranks on 2 CPUs, 8 MiB: 14.7 -> 9.2 ms, the ring 10.5 (median of 3).
    // Over shared memory pacing measured no better (4 ranks on 2 CPUs, 2 MiB:
    // rhd 657 -> 797 us), so it stays off there. Deadlock-free: every rank
    // sends its first chunk unconditionally, and a rank whose receive is
    // complete sends the rest freely.
    paced_ = tx_ && rx_ && tx_->readsSourceLater();
  }

  // Ungated sends may go from src itself (SendChannel::commitFrom): the
  // caller can reuse src (Bruck repacks it) once this is done, so it is done
  // only when nothing reads src any more.
  bool done() const {
    return sent_ >= sendBytes_ && got_ >= recvBytes_ && !(tx_ && !gate_ && tx_->sourcesInUse());
  }

  // One pass over both directions; *moved: whether a chunk went or came.
  Status step(bool* moved) {
    *moved = false;
    while (sent_ < sendBytes_) {
      if (paced_ && got_ < recvBytes_ && sent_ >= got_ + chunk_) break;
      void* slot = tx_->tryAcquire();
      if (!slot) break;
      const size_t c = std::min(chunk_, sendBytes_ - sent_);
      if (gate_) {  // the receive may overwrite src as soon as this returns
        kernels::copyCached(slot, src_ + sent_, c);
        tx_->commit(c);
      } else {
        tx_->commitFrom(slot, src_ + sent_, c);
      }
      sent_ += c;
      *moved = true;
    }
    while (got_ < recvBytes_ && (!gate_ || got_ < sent_)) {
      size_t have = 0;
      const void* data = rx_->tryPeek(&have);
      if (!data) break;
      const size_t c = std::min(chunk_, recvBytes_ - got_);
      if (have != c || rx_->peekedPublished()) return sizeMismatch(have, c);
      onChunk_(got_, data, c);
      rx_->release();
      got_ += c;
      *moved = true;
    }
    return Status::ok();
  }

 private:
  size_t chunk_;
  const char* src_;
  size_t sendBytes_, recvBytes_;
  bool gate_;
  OnChunk onChunk_;
  SendChannel* tx_ = nullptr;
  RecvChannel* rx_ = nullptr;
  bool paced_ = false;
  size_t sent_ = 0, got_ = 0;
};

template <class OnChunk>
Status exchange(CollContext& ctx, Progress& progress, size_t chunk, int to, const char* src,
                size_t sendBytes, int from, size_t recvBytes, bool gate, OnChunk&& onChunk,
                char* landAt = nullptr) {
  Exchange<std::decay_t<OnChunk>> x(ctx, chunk, to, src, sendBytes, from, recvBytes, gate,
                                    std::forward<OnChunk>(onChunk), landAt);
  while (!x.done()) {
    bool moved = false;
    WEFT_RETURN_IF_ERROR(x.step(&moved));
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
  return Status::ok();
}

// Inside a Stage (stage.h): exchange(...) without the Progress, yielding
// after every pass.
#define WEFT_CO_EXCHANGE(...)                                     \
  do {                                                            \
    auto weft_exchange_ = ::weft::algo::Exchange(__VA_ARGS__);    \
    while (!weft_exchange_.done()) {                              \
      bool weft_moved_ = false;                                   \
      WEFT_CO_RETURN_IF_ERROR(weft_exchange_.step(&weft_moved_)); \
      co_yield weft_moved_;                                       \
    }                                                             \
  } while (0)

// The usual fold of a non-power-of-two rank count onto p2 = 2^floor(log2 n)
// "active" ranks: of the first 2*rem ranks (rem = n - p2) each even rank is
// an extra that hands its data to the odd rank above it and sits out the
// power-of-two part; every other rank is active. Active rank i ("new rank")
// stands for the real ranks [lowReal(i), lowReal(i+1)), a contiguous range.
struct Fold {
  Fold(int n, int r) : n(n), r(r) {
    p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    rem = n - p2;
    if (r < 2 * rem) {
      newRank = r % 2 == 0 ? -1 : r / 2;
    } else {
      newRank = r - rem;
    }
  }
  bool extra() const { return newRank < 0; }
  // The extra folded into this active rank, or -1.
  int extraOf() const { return newRank >= 0 && newRank < rem ? 2 * newRank : -1; }
  // The active rank an extra folds into.
  int partnerOfExtra() const { return r + 1; }
  int realOf(int i) const { return i < rem ? 2 * i + 1 : i + rem; }
  int lowReal(int i) const { return i < rem ? 2 * i : i + rem; }  // lowReal(p2) == n
  int n, r, p2, rem, newRank;
};

// Recursive halving's blocks of `count` elements over n ranks: the p2 active
// ranks (Fold) share them evenly, extras own none. bounds gets n+1 entries;
// real rank q owns [bounds[q], bounds[q+1]).
inline void foldedBounds(int n, size_t count, std::vector<size_t>& bounds) {
  const Fold f(n, 0);
  bounds.assign(n + 1, 0);
  for (int q = 0; q <= n; ++q) {
    const size_t activesBelow = q <= 2 * f.rem ? q / 2 : q - f.rem;
    // count * activesBelow / p2, without overflow.
    bounds[q] = count / f.p2 * activesBelow + count % f.p2 * activesBelow / f.p2;
  }
}

// The arguments for folding already-contributed partial results together:
// PreMulSum's scaling was applied when the data was contributed, so it is a
// plain sum from then on; avg's division is left to finish().
inline CollArgs accumulating(const CollArgs& a) {
  CollArgs acc = a;
  if (acc.op.preMul) {
    acc.op.preMul = false;
    acc.op.kind = kernels::ReduceKind::Sum;
  }
  return acc;
}

// Recursive-halving reduce-scatter over arbitrary per-rank ranges: buf holds
// this rank's contribution (already contribute()d) of bounds[n] elements, or
// src does (then buf's contents do not matter, and the input is sent and
// reduced from where it is: no copy into buf first; src as it is must be the
// contribution, so no PreMulSum); on return buf[bounds[r], bounds[r+1])
// holds the reduction of that range over all ranks (other parts of buf are
// scratch). acc: accumulating() args. Non-powers of two fold (see Fold); an
// extra gets its range at the end. bounds has n+1 monotone entries,
// bounds[0] == 0. With mineOut the result for this rank's range is written
// there instead (by the last step itself, no copy afterwards); it may be
// src's own range (in place) but must not overlap the rest of src or buf.
Status halvingReduceScatter(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                            const CollArgs& acc, const char* src = nullptr,
                            char* mineOut = nullptr);
// The same as a Stage; ctx, bounds and the buffers must outlive it.
Stage halvingReduceScatterStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                                const char* src = nullptr, char* mineOut = nullptr);

// Recursive-doubling all-gather over arbitrary per-rank ranges: buf holds
// this rank's range [bounds[r], bounds[r+1]); on return it holds all of
// [0, bounds[n]). Extras send their range to their partner first and get the
// whole buffer at the end; empty ranges are not sent.
Status doublingAllGather(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                         size_t elemBytes);
// The same as a Stage; ctx, bounds and buf must outlive it.
Stage doublingAllGatherStage(CollContext& ctx, char* buf, const size_t* bounds, size_t elemBytes);

// The per-rank blocks a ring stage (ring_exchange.cc) walks: block q (taken
// mod n) is either [bounds[q], bounds[q+1]) elements of buf (cut), or
// blockBytes bytes at buf + q * stride (strided: one local index's blocks
// of a row-per-host output, as hier all-gather has them).
struct RingBlocks {
  static RingBlocks cut(char* buf, const size_t* bounds, int n, size_t elemBytes) {
    return {buf, bounds, n, elemBytes, 0, 0};
  }
  static RingBlocks strided(char* buf, size_t stride, size_t blockBytes, int n, size_t elemBytes) {
    return {buf, nullptr, n, elemBytes, stride, blockBytes};
  }
  char* at(int q) const {
    q = mod(q, n);
    return buf + (bounds ? bounds[q] * elemBytes : q * stride);
  }
  size_t bytes(int q) const {
    if (!bounds) return blockBytes;
    q = mod(q, n);
    return (bounds[q + 1] - bounds[q]) * elemBytes;
  }
  char* buf;
  const size_t* bounds;
  int n;
  size_t elemBytes;
  size_t stride, blockBytes;
};

// Ring all-gather of RingBlocks (ring_exchange.cc), as a Stage: block r
// holds this rank's block; on return every block holds its rank's. n-1
// steps, each rank sends and receives every block but its own once, each
// straight into place where the channel can land it. blocks.n must be
// ctx.nranks(); ctx and the buffer must outlive it.
Stage ringAllGatherStage(CollContext& ctx, RingBlocks blocks);

// Ring reduce-scatter over arbitrary per-rank blocks (ring_exchange.cc): buf
// holds this rank's contribution (already contribute()d) of bounds[n]
// elements; on return buf[bounds[r], bounds[r+1]) holds the reduction of
// that range over all ranks, or mineOut does (other parts of buf are
// scratch). acc: accumulating() args. n-1 steps where halving takes log2(n)
// (and a fold for a non-power of two), the same bytes.
Status ringReduceScatter(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                         const CollArgs& acc, char* mineOut = nullptr);
// The same as a Stage; ctx, bounds and the buffers must outlive it.
Stage ringReduceScatterStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                             char* mineOut = nullptr);

// Ring allreduce over arbitrary per-rank blocks, as a Stage (ring_exchange.cc):
// buf holds this rank's contribution (already contribute()d) of bounds[n]
// elements, block q being [bounds[q], bounds[q+1]); on return it holds the
// sum, avg's division applied with avgRanks (finish(), user's op). acc:
// accumulating() args. ctx, bounds and buf must outlive it.
Stage ringAllReduceStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                         CollArgs user, int avgRanks);

}  // namespace weft::algo
