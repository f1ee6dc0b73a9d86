// Ring allreduce over arbitrary per-rank blocks, as a Stage (stage.h): the
// building block hier allreduce runs across a host count that is not a power
// of two, where rhd's fold would have each extra's partner send and receive
// the slice twice more (2S against the ring's 2(n-1)/n * S).
//
// Why not ringAllReduce (ring_allreduce.cc): that one is the flat
// algorithm, a blocking loop over the communicator's ring order with its
// reduction fused into the next rank's slot. A stage must yield whenever it
// would wait, so that hier allreduce's host lane runs meanwhile; this one
// is step by step, each step a pairwise exchange (exchange.h) that yields.
//
// Cost, n ranks, S elements in buf: 2(n-1) steps; each rank sends and
// receives 2(n-1)/n * S elements (block sizes as bounds gives them) and
// reduces (n-1)/n * S. Deadlock-free with any slot count.
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft::algo {

Stage ringAllReduceStage(CollContext& ctx, char* buf, const size_t* bounds, CollArgs acc,
                         CollArgs user, int avgRanks) {
  const int n = ctx.nranks(), r = ctx.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t es = dtypeSize(acc.dtype);
  const size_t chunk = chunkFor(ctx, es);
  auto at = [&](int q) { return buf + bounds[mod(q, n)] * es; };
  auto bytes = [&](int q) {
    q = mod(q, n);
    return (bounds[q + 1] - bounds[q]) * es;
  };
  // Step j sends the block it reduced last (its own at first) and adds the
  // one before it; every block is written once, after the exchange that
  // last sent it is done (nothing reads it any more).
  for (int j = 0; j < n - 1; ++j) {
    char* dst = at(r - j - 1);
    auto add = [&, dst](size_t off, const void* data, size_t len) {
      combine(dst + off, dst + off, static_cast<const char*>(data), len / es, acc);
    };
    WEFT_CO_EXCHANGE(ctx, chunk, next, at(r - j), bytes(r - j), prev, bytes(r - j - 1), false, add);
  }
  finish(at(r + 1), bytes(r + 1) / es, user, avgRanks);
  for (int j = 0; j < n - 1; ++j) {
    char* dst = at(r - j);
    auto place = [dst](size_t off, const void* data, size_t len) {
      if (dst + off != data) kernels::copyCached(dst + off, data, len);
    };
    WEFT_CO_EXCHANGE(ctx, chunk, next, at(r + 1 - j), bytes(r + 1 - j), prev, bytes(r - j), false,
                     place, dst);
  }
  co_return Status::ok();
}

}  // namespace weft::algo
