// Recursive halving (reduce-scatter) and recursive doubling (all-gather) over
// arbitrary per-rank element ranges, with the fold of a non-power-of-two rank
// count (exchange.h). Shared by the rhd and recdoubling algorithms and by the
// hierarchical ones, which run them on a subset of the ranks. Written as
// stages (stage.h), so that hier allreduce can interleave them; the blocking
// calls run one to its end.
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft::algo {

Stage halvingReduceScatterStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                                const char* src, char* mineOut) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(acc.dtype);
  const size_t chunk = chunkFor(ctx, es);
  const Fold f(n, r);
  const size_t total = bounds[n] * es;
  // Where this rank's partial sums are read: its input until the first step
  // that writes buf (the fold, or the first halving), buf from then on; the
  // ranges read later lie within what that step wrote.
  const char* cur = src != nullptr ? src : buf;
  // This rank's own range is final only after the last step, which writes it
  // to mineOut; every earlier step keeps its partial sums in buf.
  const size_t mineFrom = bounds[r] * es, mineTo = bounds[r + 1] * es;
  if (mineOut == nullptr) mineOut = buf + mineFrom;
  auto combineInto = [&](size_t base, bool last = false) {
    return [&, base, last](size_t off, const void* data, size_t bytes) {
      const size_t from = base + off, to = from + bytes;
      auto piece = [&](size_t lo, size_t hi, char* dst) {
        if (lo < hi) {
          combine(dst, cur + lo, static_cast<const char*>(data) + (lo - from), (hi - lo) / es, acc);
        }
      };
      if (!last) {
        piece(from, to, buf + from);
        return;
      }
      // The last step's range is this rank's own, preceded by its extra's.
      piece(from, std::min(to, mineFrom), buf + from);
      const size_t ownLo = std::max(from, mineFrom), ownHi = std::min(to, mineTo);
      piece(ownLo, ownHi, mineOut + (ownLo - mineFrom));
      piece(std::max(from, mineTo), to, buf + std::max(from, mineTo));
    };
  };
  auto noRecv = [](size_t, const void*, size_t) {};

  if (f.extra()) {
    const int partner = f.partnerOfExtra();
    WEFT_CO_EXCHANGE(ctx, chunk, partner, cur, total, -1, 0, false, noRecv);
    auto copyMine = [&](size_t off, const void* data, size_t bytes) {
      if (mineOut + off != data) kernels::copyCached(mineOut + off, data, bytes);
    };
    WEFT_CO_EXCHANGE(ctx, chunk, -1, nullptr, 0, partner, mineTo - mineFrom, false, copyMine,
                     mineOut);
    co_return Status::ok();
  }
  if (const int e = f.extraOf(); e >= 0) {
    WEFT_CO_EXCHANGE(ctx, chunk, -1, nullptr, 0, e, total, false, combineInto(0));
    cur = buf;
  }

  // Halving over new ranks: the range [lo, hi) of new ranks whose elements
  // this rank still reduces halves at every step.
  const int i = f.newRank;
  auto start = [&](int newRank) { return bounds[f.lowReal(newRank)] * es; };
  int lo = 0, hi = f.p2;
  for (int mask = f.p2 / 2; mask >= 1; mask /= 2) {
    const int peer = f.realOf(i ^ mask);
    const int mid = lo + mask;
    const bool keepLow = (i & mask) == 0;
    const int sendLo = keepLow ? mid : lo, sendHi = keepLow ? hi : mid;
    const int keepLo = keepLow ? lo : mid, keepHi = keepLow ? mid : hi;
    WEFT_CO_EXCHANGE(ctx, chunk, peer, cur + start(sendLo), start(sendHi) - start(sendLo), peer,
                     start(keepHi) - start(keepLo), false, combineInto(start(keepLo), mask == 1));
    cur = buf;
    lo = keepLo;
    hi = keepHi;
  }
  // No step (one rank): the input is the result.
  if (f.p2 == 1 && mineOut != cur + mineFrom) {
    kernels::copyCached(mineOut, cur + mineFrom, mineTo - mineFrom);
  }

  if (const int e = f.extraOf(); e >= 0) {
    const size_t from = bounds[e] * es;
    WEFT_CO_EXCHANGE(ctx, chunk, e, buf + from, bounds[e + 1] * es - from, -1, 0, false, noRecv);
  }
  co_return Status::ok();
}

// Every block received lands where it belongs (exchange's landAt): over TCP
// it is read from the socket straight into buf, not staged and copied (2
// ranks over loopback, rhd allreduce: 8 MiB 4474 -> 3920 us, 32 MiB 23.6 ->
// 20.7 ms, median of 5).
Stage doublingAllGatherStage(CollContext& ctx, char* buf, const size_t* bounds, size_t es) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t chunk = chunkFor(ctx, es);
  const Fold f(n, r);
  const size_t total = bounds[n] * es;
  auto noRecv = [](size_t, const void*, size_t) {};
  auto copyInto = [&](size_t base) {
    return [&, base](size_t off, const void* data, size_t bytes) {
      char* dst = buf + base + off;
      if (dst != data) kernels::copyCached(dst, data, bytes);
    };
  };

  if (f.extra()) {
    const int partner = f.partnerOfExtra();
    const size_t mine = bounds[r] * es;
    WEFT_CO_EXCHANGE(ctx, chunk, partner, buf + mine, bounds[r + 1] * es - mine, -1, 0, false,
                     noRecv);
    WEFT_CO_EXCHANGE(ctx, chunk, -1, nullptr, 0, partner, total, false, copyInto(0), buf);
    co_return Status::ok();
  }
  if (const int e = f.extraOf(); e >= 0) {
    const size_t from = bounds[e] * es;
    WEFT_CO_EXCHANGE(ctx, chunk, -1, nullptr, 0, e, bounds[e + 1] * es - from, false,
                     copyInto(from), buf + from);
  }

  const int i = f.newRank;
  auto start = [&](int newRank) { return bounds[f.lowReal(newRank)] * es; };
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int peer = f.realOf(i ^ mask);
    const int mine = i / mask * mask;
    const int theirs = mine ^ mask;
    WEFT_CO_EXCHANGE(ctx, chunk, peer, buf + start(mine), start(mine + mask) - start(mine), peer,
                     start(theirs + mask) - start(theirs), false, copyInto(start(theirs)),
                     buf + start(theirs));
  }

  if (const int e = f.extraOf(); e >= 0) {
    WEFT_CO_EXCHANGE(ctx, chunk, e, buf, total, -1, 0, false, noRecv);
  }
  co_return Status::ok();
}

Status halvingReduceScatter(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                            const CollArgs& acc, const char* src, char* mineOut) {
  return runStage(halvingReduceScatterStage(ctx, buf, bounds, acc, src, mineOut), progress);
}

Status doublingAllGather(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                         size_t es) {
  return runStage(doublingAllGatherStage(ctx, buf, bounds, es), progress);
}

}  // namespace weft::algo
