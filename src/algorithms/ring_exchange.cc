// Ring reduce-scatter, all-gather and allreduce over arbitrary per-rank
// blocks (RingBlocks), as Stages (stage.h): the building blocks the
// hierarchical algorithms run across hosts (all-gather: in place, into a
// row-per-host output; reduce-scatter and allreduce: across a host count
// that is not a power of two, where recursive halving's
// fold would have each extra's partner send and receive the whole slice
// twice more (2S against the ring's (n-1)/n * S per pass).
//
// Why not ringAllReduce (ring_allreduce.cc): that one is the flat
// algorithm, a blocking loop over the communicator's ring order with its
// reduction fused into the next rank's slot. A stage must yield whenever it
// would wait, so that hier allreduce's host lane runs meanwhile; these are
// step by step, each step a pairwise exchange (exchange.h) that yields.
//
// Cost, n ranks, S elements in buf: reduce-scatter n-1 steps, each rank
// sends and receives (n-1)/n * S elements (block sizes as bounds gives them)
// and reduces as many; all-gather the same steps and bytes, no reduction;
// allreduce is the two, twice the steps and the bytes. Deadlock-free with any slot count.
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft::algo {

Stage ringReduceScatterStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                             char* mineOut) {
  const int n = ctx.nranks(), r = ctx.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t es = dtypeSize(acc.dtype);
  const size_t chunk = chunkFor(ctx, es);
  const RingBlocks b = RingBlocks::cut(buf, bounds, n, es);
  if (mineOut == nullptr) mineOut = b.at(r);
  // Step j sends the block it reduced last (at first the one after its
  // own, as the ring ends each rank on its own block) and adds the one
  // before it; the last step's sum goes to mineOut. Every block is written
  // once, after the exchange that last sent it is done (nothing reads it
  // any more).
  for (int j = 0; j < n - 1; ++j) {
    const int q = r - j - 2;
    char* dst = j == n - 2 ? mineOut : b.at(q);
    const char* mine = b.at(q);
    auto add = [&, dst, mine](size_t off, const void* data, size_t len) {
      combine(dst + off, mine + off, static_cast<const char*>(data), len / es, acc);
    };
    WEFT_CO_EXCHANGE(ctx, chunk, next, b.at(q + 1), b.bytes(q + 1), prev, b.bytes(q), false, add);
  }
  if (n == 1 && mineOut != b.at(r)) kernels::copyCached(mineOut, b.at(r), b.bytes(r));
  co_return Status::ok();
}

Stage ringAllReduceStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                         CollArgs user, int avgRanks) {
  const int n = ctx.nranks(), r = ctx.rank();
  const size_t es = dtypeSize(acc.dtype);
  const RingBlocks b = RingBlocks::cut(buf, bounds, n, es);
  WEFT_CO_AWAIT_STAGE(ringReduceScatterStage(ctx, buf, bounds, acc, nullptr));
  finish(b.at(r), b.bytes(r) / es, user, avgRanks);
  WEFT_CO_AWAIT_STAGE(ringAllGatherStage(ctx, b));
  co_return Status::ok();
}

Stage ringAllGatherStage(CollContext& ctx, RingBlocks b) {
  const int n = ctx.nranks(), r = ctx.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t chunk = chunkFor(ctx, b.elemBytes);
  // Step j passes on the block of rank r - j and takes that of r - j - 1,
  // straight into place.
  for (int j = 0; j < n - 1; ++j) {
    char* dst = b.at(r - j - 1);
    auto place = [dst](size_t off, const void* data, size_t len) {
      if (dst + off != data) kernels::copyCached(dst + off, data, len);
    };
    WEFT_CO_EXCHANGE(ctx, chunk, next, b.at(r - j), b.bytes(r - j), prev, b.bytes(r - j - 1), false,
                     place, dst);
  }
  co_return Status::ok();
}

Status ringReduceScatter(CollContext& ctx, Progress& progress, char* buf, const size_t* bounds,
                         const CollArgs& acc, char* mineOut) {
  return runStage(ringReduceScatterStage(ctx, buf, bounds, acc, mineOut), progress);
}

}  // namespace weft::algo
