// Recursive-halving reduce-scatter: in step k every active rank sends the
// half of its current range that its partner keeps and folds in the half it
// keeps (algorithms/recursive.cc). A non-power-of-two rank count folds each
// extra rank into a partner first; the partner reduces the extra's block too
// and sends it over at the end. Partial sums live in a scratch buffer; the
// last step reduces this rank's block straight into recv, so there is no copy
// at the end. In place (recv == send + r*count), only that last step writes
// the block, after every read of the rest of the input.
//
// Cost, n ranks, N = n*count bytes in all, p2 = 2^floor(log2 n): log2(p2)
// steps (+2 when n is not a power of two); each active rank sends, receives
// and reduces about (p2-1)/p2 * N bytes (+N received for an extra's data);
// scratch N bytes per rank. Pairwise exchanges: any slot count works.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft {

Status rhdReduceScatter(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const size_t es = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    contribute(out, a.send, a.count, a);
    finish(out, a.count, a, n);
    return Status::ok();
  }
  thread_local std::vector<char> scratchVec;
  thread_local std::vector<size_t> bounds;
  algo::Scratch scratch(scratchVec, a.count * n * es);
  bounds.resize(n + 1);
  for (int q = 0; q <= n; ++q) bounds[q] = a.count * q;
  // The input is sent and added where it is, unless it must be scaled first.
  const char* in = static_cast<const char*>(a.send);
  if (a.op.preMul) {
    contribute(scratch.data(), in, a.count * n, a);
    in = scratch.data();
  }
  Progress progress(ctx.health());
  WEFT_RETURN_IF_ERROR(algo::halvingReduceScatter(ctx, progress, scratch.data(), bounds.data(),
                                                  algo::accumulating(a), in, out));
  finish(out, a.count, a, n);
  return Status::ok();
}

}  // namespace weft
