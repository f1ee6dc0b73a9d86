// Binomial-tree broadcast: relative rank v = r - root receives from v with
// its lowest set bit cleared and forwards to v + 2^j for every 2^j below that
// bit, pipelined one chunk (slot) at a time (algorithms/tree.h): a chunk is
// forwarded as soon as it arrived, so later chunks overlap earlier ones.
//
// Cost, n ranks, N bytes in C chunks: ceil(log2 n) + C-1 pipeline steps at
// best; the root sends ceil(log2 n) * N bytes, an inner rank up to
// (log2 n - 1) * N, every non-root receives N. Latency log n (the chain's
// is n); bandwidth-bound where the root's fan-out dominates. The tree has no
// cycle: any slot count works.
#include "algorithms/algorithms.h"
#include "algorithms/binomial.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status binomialBroadcast(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (r == a.root && a.send != out && bytes > 0) kernels::copy(out, a.send, bytes);
  if (n == 1 || bytes == 0) return Status::ok();
  const algo::TreeSpec tree = algo::binomialTree(r, a.root, n, a.count);
  return algo::runTrees(ctx, a, algo::TreeMode::Broadcast, {&tree, 1}, out);
}

}  // namespace weft
