// Recursive-doubling all-gather: in step k every active rank swaps all the
// blocks it holds with the rank 2^k away, doubling what it holds
// (algorithms/recursive.cc). A non-power-of-two rank count folds each extra
// rank into a partner, which gathers for it and sends it the whole result.
//
// Cost, n ranks, N = n*count bytes of output, p2 = 2^floor(log2 n):
// log2(p2) steps (+2 when n is not a power of two); each active rank sends
// and receives about (n-1)/n * N bytes (+N sent to an extra). In place when
// send == recv + r*count. Pairwise exchanges: any slot count works.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft {

Status recDoublingAllGather(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t blockBytes = a.count * es;
  char* out = static_cast<char*>(a.recv);
  if (blockBytes == 0) return Status::ok();
  if (a.send != out + r * blockBytes)
    kernels::copyOut(out + r * blockBytes, a.send, blockBytes, blockBytes * n);
  if (n == 1) return Status::ok();
  thread_local std::vector<size_t> bounds;
  bounds.resize(n + 1);
  for (int q = 0; q <= n; ++q) bounds[q] = a.count * q;
  Progress progress(ctx.health());
  return algo::doublingAllGather(ctx, progress, out, bounds.data(), es);
}

}  // namespace weft
