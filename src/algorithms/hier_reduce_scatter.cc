// Hierarchical (two-level) reduce-scatter: a recursive-halving
// reduce-scatter within each host leaves local rank i with slice i, the
// blocks of the ranks with local index i on every host, reduced over the
// host; a recursive-halving reduce-scatter among the ranks with local index
// i (one per host), or a ring where the host count is not a power of two
// (ring_exchange.cc), leaves each rank its own block. Where every host's ranks
// are consecutive (a launcher dealing ranks in blocks) and a host's blocks
// fill a chunk, the first stage runs once per host over that host's blocks,
// read from the input where they are; otherwise the input is first reordered
// into slices (one local copy of N). Needs the same number of ranks on every
// host; with uneven hosts it runs rhd over all ranks instead.
//
// Cost, n = m*H ranks, N = n*count bytes of input: within a host log2(m)
// steps (H*log2(m) without the reordering), about (m-1)/m * N sent and
// received (+2 steps where m is not a power of two); across hosts log2(H)
// steps, or H-1 over the ring, about (H-1)/H * N/m; scratch N (N/H + N/m
// without the reordering).
// Deadlock-free with any slot count.
//
// Without the reordering copy, 4 ranks as 2 hosts on 2 CPUs, forced, median
// of 7 interleaved rounds, time new/old: 512 KiB 0.93, 2 MiB 0.68, 8 MiB 0.68.
// The ring across 3 hosts against halving with a fold, 6 ranks on 2 CPUs,
// forced, 20 calls, two sets of 5 and 4 alternating rounds, medians: 512 KiB
// 0.84, 2 MiB 0.78 and 0.97, 8 MiB 0.82 and 0.90 of the time. The flat ring
// stays faster on these simulated hosts, where TCP costs the CPUs what
// shared memory does (8 MiB: 8534 and 9333 us against 10165 and 10910).
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
  const CollArgs acc = algo::accumulating(a);
  Progress progress(ctx.health());
  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  std::vector<size_t> bounds(m + 1);

  // The slice this rank then reduces across hosts: position h holds the
  // block of rank hosts[h][li], summed over this host.
  const bool byHost = !a.op.preMul && layout.stagesPerHost(bb, ctx.chunkBytes());
  thread_local std::vector<char> scratchVec;
  algo::Scratch scratch(scratchVec, (byHost ? m + nh : n) * bb);
  char* slice = nullptr;
  if (byHost) {
    // Host h's blocks lie side by side in the input, so one halving
    // reduce-scatter per host, each reading the input where it is, leaves
    // this rank the block of hosts[h][li] for every h: H times the steps,
    // the same bytes, and no reordering copy of N. The hosts' partial sums
    // share one buffer of m blocks: an exchange returns only once no send
    // reads its source any more.
    for (int q = 0; q <= m; ++q) bounds[q] = a.count * q;
    slice = scratch.data() + m * bb;
    for (int h = 0; h < nh; ++h) {
      const char* row = in + static_cast<size_t>(layout.hosts[h][0]) * bb;
      char* mine = nh > 1 ? slice + h * bb : out;
      WEFT_RETURN_IF_ERROR(algo::halvingReduceScatter(host, progress, scratch.data(), bounds.data(),
                                                      acc, row, mine));
    }
  } else {
    // Position li'*H + h' holds the block of rank hosts[h'][li'].
    for (int l = 0; l < m; ++l) {
      for (int h = 0; h < nh; ++h) {
        contribute(scratch.data() + (l * nh + h) * bb, in + layout.hosts[h][l] * bb, a.count, a);
      }
    }
    for (int q = 0; q <= m; ++q) bounds[q] = a.count * nh * q;
    // With one host this writes the rank's block straight into out: the
    // input was all read into scratch above, so in place is safe too.
    WEFT_RETURN_IF_ERROR(algo::halvingReduceScatter(host, progress, scratch.data(), bounds.data(),
                                                    acc, nullptr, nh > 1 ? nullptr : out));
    slice = scratch.data() + li * nh * bb;
  }
  if (nh > 1) {
    bounds.resize(nh + 1);
    for (int h = 0; h <= nh; ++h) bounds[h] = a.count * h;
    algo::SubContext across(ctx, layout.slice(li));
    // The last step writes this rank's block into out after every read of
    // the input (in place: out is within it). Across a host count that is
    // not a power of two, a ring: halving's fold would send the extras'
    // partners' slices twice more.
    if ((nh & (nh - 1)) == 0) {
      WEFT_RETURN_IF_ERROR(
          algo::halvingReduceScatter(across, progress, slice, bounds.data(), acc, nullptr, out));
    } else {
      WEFT_RETURN_IF_ERROR(
          algo::ringReduceScatter(across, progress, slice, bounds.data(), acc, out));
    }
  }
  finish(out, a.count, a, n);
  return Status::ok();
}

}  // namespace weft
