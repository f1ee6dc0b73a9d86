// Rabenseifner allreduce: a recursive-halving reduce-scatter then a
// recursive-doubling all-gather (algorithms/recursive.cc). A non-power-of-two
// rank count first folds each of its rem = n - p2 extra ranks into a partner
// (p2 = 2^floor(log2 n)); extras own no block and get the whole result back
// at the end.
//
// Cost, n ranks, N bytes, p2 = 2^floor(log2 n): 2 log2(p2) steps (+2 when n
// is not a power of two); each active rank sends and receives
// 2(p2-1)/p2 * N bytes and reduces (p2-1)/p2 * N (+N for a partner of an
// extra, which also sends N back); extras send and receive N. The first
// step reads the input where it is (out of place, no PreMulSum): no copy of
// it into the output first. Each step is a
// pairwise exchange progressed in both directions: deadlock-free with any
// slot count.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"

namespace weft {

Status rhdAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    contribute(out, a.send, a.count, a);
    finish(out, a.count, a, n);
    return Status::ok();
  }
  // The first step sends and adds the input where it is, unless it must be
  // scaled first (PreMulSum): one pass over N bytes less.
  const char* in = static_cast<const char*>(a.send);
  if (a.op.preMul) {
    contribute(out, in, a.count, a);
    in = out;
  }
  thread_local std::vector<size_t> bounds;
  algo::foldedBounds(n, a.count, bounds);
  Progress progress(ctx.health());
  WEFT_RETURN_IF_ERROR(
      algo::halvingReduceScatter(ctx, progress, out, bounds.data(), algo::accumulating(a), in));
  finish(out + bounds[r] * es, bounds[r + 1] - bounds[r], a, n);
  return algo::doublingAllGather(ctx, progress, out, bounds.data(), es);
}

}  // namespace weft
