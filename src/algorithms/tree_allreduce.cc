// Double binary tree allreduce (the layout NCCL uses): two binary trees over
// the ranks, each carrying half of the buffer, reduce up and broadcast down,
// pipelined one chunk (slot) at a time (algorithms/tree.h). Tree A is the
// in-order tree on the ranks themselves (a rank's level is its lowest set
// bit, rank 0 the root with one child); tree B is the same tree on the
// mirrored ranks n-1-r (n even) or on ranks shifted by one (n odd), so that
// tree A's leaves (the odd ranks) are inner nodes of tree B and every rank
// sends and receives about the same amount.
//
// Cost, n ranks, N bytes in C chunks per tree: about 2 log2(n) + C pipeline
// steps; each rank sends and receives at most 3N/2 bytes (N/2 up and N/2 down
// to each of at most two children per tree, and leaves of one tree are inner
// nodes of the other) and reduces at most N. Latency log n, bandwidth near a
// ring's for large N only when chunks are many.
#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/tree.h"

namespace weft {

namespace {

// Parent of position p in the in-order binary tree over positions 0..n-1.
int btreeParent(int p, int n) {
  if (p == 0) return -1;
  const int bit = p & -p;
  const int up = (p ^ bit) | (bit << 1);
  return up < n ? up : p ^ bit;
}

}  // namespace

// Positions of the two trees: tree 0 is the identity, tree 1 mirrors (n even)
// or shifts (n odd). Exposed for the tests through treeAllReduceParent.
int doubleTreeParent(int tree, int rank, int n) {
  if (tree == 0) return btreeParent(rank, n);
  const bool even = n % 2 == 0;
  const int pos = even ? n - 1 - rank : (rank + n - 1) % n;
  const int up = btreeParent(pos, n);
  if (up < 0) return -1;
  return even ? n - 1 - up : (up + 1) % n;
}

Status treeAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  char* out = static_cast<char*>(a.recv);
  contribute(out, a.send, a.count, a);
  if (n == 1 || a.count == 0) {
    finish(out, a.count, a, n);
    return Status::ok();
  }
  algo::TreeSpec trees[2];
  const size_t half = a.count / 2;
  trees[0].first = 0;
  trees[0].count = half;
  trees[1].first = half;
  trees[1].count = a.count - half;
  for (int t = 0; t < 2; ++t) {
    trees[t].parent = doubleTreeParent(t, r, n);
    for (int q = 0; q < n; ++q) {
      if (q != r && doubleTreeParent(t, q, n) == r) trees[t].children.push_back(q);
    }
  }
  return algo::runTrees(ctx, a, algo::TreeMode::AllReduce, trees, out);
}

}  // namespace weft
