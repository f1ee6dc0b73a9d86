// Hierarchical (two-level) all-gather: the ranks with local index i (one per
// host) first gather their blocks by recursive doubling, so that local rank i
// holds slice i (the blocks of local index i on every host); a recursive-
// doubling all-gather within each host then spreads the slices, and a local
// reordering puts the blocks in rank order. Needs the same number of ranks
// on every host; with uneven hosts it runs recdoubling over all ranks.
//
// Cost, n = m*H ranks, N = n*count bytes of output: across hosts log2(H)
// steps, about (H-1)/H * N/m sent and received; within a host log2(m) steps,
// about (m-1)/m * N (+2 steps each where not a power of two); scratch N and
// one local copy of N. Deadlock-free with any slot count.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/hier.h"
#include "kernels/reduce.h"

namespace weft {

Status hierAllGather(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const size_t es = dtypeSize(a.dtype);
  const size_t bb = a.count * es;
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || bb == 0) return recDoublingAllGather(ctx, a);
  const algo::HostLayout layout(ctx);
  if (layout.perHost == 0) return recDoublingAllGather(ctx, a);
  const int m = layout.perHost;
  const int nh = static_cast<int>(layout.hosts.size());
  const int li = layout.localIndex;

  // Position li'*H + h' holds the block of rank hosts[h'][li'].
  thread_local std::vector<char> scratchVec;
  algo::Scratch scratch(scratchVec, n * bb);
  char* slice = scratch.data() + li * nh * bb;
  kernels::copy(slice + layout.myHost * bb, a.send, bb);
  Progress progress(ctx.health());
  std::vector<size_t> bounds(nh + 1);
  if (nh > 1) {
    for (int h = 0; h <= nh; ++h) bounds[h] = a.count * h;
    algo::SubContext across(ctx, layout.slice(li));
    WEFT_RETURN_IF_ERROR(algo::doublingAllGather(across, progress, slice, bounds.data(), es));
  }
  bounds.resize(m + 1);
  for (int q = 0; q <= m; ++q) bounds[q] = a.count * nh * q;
  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  WEFT_RETURN_IF_ERROR(algo::doublingAllGather(host, progress, scratch.data(), bounds.data(), es));
  for (int l = 0; l < m; ++l) {
    for (int h = 0; h < nh; ++h) {
      kernels::copy(out + layout.hosts[h][l] * bb, scratch.data() + (l * nh + h) * bb, bb);
    }
  }
  return Status::ok();
}

}  // namespace weft
