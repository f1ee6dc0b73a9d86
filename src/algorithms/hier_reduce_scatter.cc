// Hierarchical (two-level) reduce-scatter: the input blocks are reordered so
// that those of the ranks with local index i on every host form slice i; a
// recursive-halving reduce-scatter within each host leaves local rank i with
// slice i reduced over the host; a recursive-halving reduce-scatter among the
// ranks with local index i (one per host) leaves each rank its own block.
// Needs the same number of ranks on every host; with uneven hosts it runs
// rhd over all ranks instead.
//
// Cost, n = m*H ranks, N = n*count bytes of input: within a host log2(m)
// steps, about (m-1)/m * N sent and received; across hosts log2(H) steps,
// about (H-1)/H * N/m (+2 steps each where not a power of two); scratch N
// and one local copy of N (the reordering). Deadlock-free with any slot count.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/hier.h"
#include "kernels/reduce.h"

namespace weft {

Status hierReduceScatter(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const size_t es = dtypeSize(a.dtype);
  const size_t bb = a.count * es;
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    contribute(out, a.send, a.count, a);
    finish(out, a.count, a, n);
    return Status::ok();
  }
  const algo::HostLayout layout(ctx);
  if (layout.perHost == 0) return rhdReduceScatter(ctx, a);
  const int m = layout.perHost;
  const int nh = static_cast<int>(layout.hosts.size());
  const int li = layout.localIndex;
  const char* in = static_cast<const char*>(a.send);

  // Position li'*H + h' holds the block of rank hosts[h'][li'].
  thread_local std::vector<char> scratchVec;
  algo::Scratch scratch(scratchVec, n * bb);
  for (int l = 0; l < m; ++l) {
    for (int h = 0; h < nh; ++h) {
      contribute(scratch.data() + (l * nh + h) * bb, in + layout.hosts[h][l] * bb, a.count, a);
    }
  }
  const CollArgs acc = algo::accumulating(a);
  Progress progress(ctx.health());
  std::vector<size_t> bounds(m + 1);
  for (int q = 0; q <= m; ++q) bounds[q] = a.count * nh * q;
  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  // The last reduce-scatter writes this rank's block straight into out: the
  // input was all read into scratch above, so in place is safe too.
  WEFT_RETURN_IF_ERROR(algo::halvingReduceScatter(host, progress, scratch.data(), bounds.data(),
                                                  acc, nullptr, nh > 1 ? nullptr : out));
  if (nh > 1) {
    char* slice = scratch.data() + li * nh * bb;
    bounds.resize(nh + 1);
    for (int h = 0; h <= nh; ++h) bounds[h] = a.count * h;
    algo::SubContext across(ctx, layout.slice(li));
    WEFT_RETURN_IF_ERROR(
        algo::halvingReduceScatter(across, progress, slice, bounds.data(), acc, nullptr, out));
  }
  finish(out, a.count, a, n);
  return Status::ok();
}

}  // namespace weft
