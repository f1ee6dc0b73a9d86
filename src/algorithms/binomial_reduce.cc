// Binomial-tree reduce: relative rank v = r - root folds in its children
// v + 2^j (for every 2^j below v's lowest set bit, in a fixed order) and
// sends the partial result to v with that bit cleared, pipelined one chunk
// (slot) at a time (algorithms/tree.h). Non-roots work in a scratch buffer,
// so their recv is not touched.
//
// Cost, n ranks, N bytes in C chunks: ceil(log2 n) + C-1 pipeline steps at
// best; every non-root sends N bytes, the root receives and reduces
// ceil(log2 n) * N, an inner rank up to (log2 n - 1) * N. Latency log n
// (the chain's is n). The tree has no cycle: any slot count works.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/binomial.h"
#include "algorithms/exchange.h"
#include "base/dtype.h"

namespace weft {

Status binomialReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  char* buf = static_cast<char*>(a.recv);
  thread_local std::vector<char> scratchVec;
  algo::Scratch scratch(scratchVec, r != a.root ? a.count * es : 0);
  if (r != a.root) buf = scratch.data();
  contribute(buf, a.send, a.count, a);
  if (n == 1 || a.count == 0) {
    if (r == a.root) finish(buf, a.count, a, n);
    return Status::ok();
  }
  const algo::TreeSpec tree = algo::binomialTree(r, a.root, n, a.count);
  return algo::runTrees(ctx, a, algo::TreeMode::Reduce, {&tree, 1}, buf);
}

}  // namespace weft
