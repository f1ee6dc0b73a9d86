// Recursive-doubling allreduce, for small messages: in step k every rank
// exchanges its whole partial result with the rank 2^k away and folds it in.
// A non-power-of-two rank count first folds each extra rank into a partner
// (exchange.h Fold), which sends it the result at the end.
//
// Cost, n ranks, N bytes, p2 = 2^floor(log2 n): log2(p2) steps (+2 when n is
// not a power of two); each active rank sends, receives and reduces
// log2(p2) * N bytes (+N for a partner of an extra). Latency-optimal, not
// bandwidth-optimal. A send and the fold of the partner's data into the same
// chunk are ordered (the exchange's gate); both directions are progressed
// together, so any slot count works.
#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft {

Status recDoublingAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t bytes = a.count * es;
  char* out = static_cast<char*>(a.recv);
  contribute(out, a.send, a.count, a);
  if (n == 1 || a.count == 0) {
    finish(out, a.count, a, n);
    return Status::ok();
  }
  const CollArgs acc = algo::accumulating(a);
  const size_t chunk = algo::chunkFor(ctx, es);
  const algo::Fold f(n, r);
  Progress progress(ctx.health());
  auto fold = [&](size_t off, const void* data, size_t len) {
    combine(out + off, out + off, data, len / es, acc);
  };
  auto copy = [&](size_t off, const void* data, size_t len) {
    kernels::copy(out + off, data, len);
  };
  auto none = [](size_t, const void*, size_t) {};

  if (f.extra()) {
    const int partner = f.partnerOfExtra();
    WEFT_RETURN_IF_ERROR(
        algo::exchange(ctx, progress, chunk, partner, out, bytes, -1, 0, false, none));
    return algo::exchange(ctx, progress, chunk, -1, nullptr, 0, partner, bytes, false, copy);
  }
  const int e = f.extraOf();
  if (e >= 0)
    WEFT_RETURN_IF_ERROR(
        algo::exchange(ctx, progress, chunk, -1, nullptr, 0, e, bytes, false, fold));
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int peer = f.realOf(f.newRank ^ mask);
    WEFT_RETURN_IF_ERROR(
        algo::exchange(ctx, progress, chunk, peer, out, bytes, peer, bytes, true, fold));
  }
  finish(out, a.count, a, n);
  if (e >= 0)
    WEFT_RETURN_IF_ERROR(algo::exchange(ctx, progress, chunk, e, out, bytes, -1, 0, false, none));
  return Status::ok();
}

}  // namespace weft
