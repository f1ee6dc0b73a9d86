// Hierarchical (two-level) all-gather: the ranks with local index i (one per
// host) first gather their blocks by recursive doubling, so that local rank i
// holds slice i (the blocks of local index i on every host); a recursive-
// doubling all-gather within each host then spreads the slices. Where every
// host's ranks are consecutive and a host's blocks fill a chunk, that runs
// once per host, straight into the output, and with two hosts or blocks of
// a chunk or more the first stage too moves the blocks where they belong in
// the output, over a ring (gatherInPlace); otherwise the first stage
// gathers into a slice in scratch, or all of them into scratch and a local
// reordering puts the blocks in rank order. Needs the same number of ranks
// on every host; with uneven hosts it runs recdoubling over all ranks.
//
// Cost, n = m*H ranks, N = n*count bytes of output: across hosts log2(H)
// steps (H-1 in place), about (H-1)/H * N/m sent and received;
// within a host log2(m) steps (H*log2(m) without the reordering), about
// (m-1)/m * N (+2 steps each where not a power of two). Local copies: one
// block in place (none where send is the rank's own block); N/m + one block
// through a slice, with N/m of scratch; N with the reordering, with N of
// scratch. Deadlock-free with any slot count.
//
// Without the reordering, 4 ranks as 2 hosts on 2 CPUs, forced, median of 7
// interleaved rounds, time new/old: 512 KiB 0.90, 2 MiB 0.75, 8 MiB 0.84.
// In place against through a slice, the same shape, two sets of 6 and 5
// alternating rounds, medians: 2 MiB 766/1194 and 901/1119 us (0.64,
// 0.81), 8 MiB 4848/5865 and 5071/6093 us (0.83 both); 512 KiB the same.
// 6 ranks as 3 hosts (the ring in place against a doubling with a fold
// through a slice), 20 calls, two sets of 5 and 4 rounds: 2 MiB 2268/2805
// and 2357/3110 us (0.81, 0.76), 8 MiB 9443/12856 and 10722/14639 us
// (0.73 both), where the flat ring took 2357 and 2927, 9039 and 11649.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/hier.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

// Per host, with every block received straight where it belongs in the
// output: across hosts a ring (H-1 steps of one block each) swaps the
// blocks in place, since the blocks of one local index lie m blocks apart
// and a doubling step would need one exchange per block it holds (H-1 in
// all too, and a fold where H is not a power of two); each host's row then
// already holds this rank's block for the intra-host stage. Only this
// rank's own block is copied (none in place), where the path through a
// slice copies N/m + 1 blocks: 4 ranks as 2 hosts on 2 CPUs, 8 MiB, that
// was 4 MiB more per rank. H-1 steps against log2(H): this path takes two
// hosts, or blocks of a chunk or more.
Status gatherInPlace(CollContext& ctx, const CollArgs& a, const algo::HostLayout& layout,
                     size_t bb) {
  const int m = layout.perHost;
  const int nh = static_cast<int>(layout.hosts.size());
  const int li = layout.localIndex, me = layout.myHost;
  const size_t es = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  // Hosts are runs of m consecutive ranks (stagesPerHost), so host h's
  // block of local index li is m blocks after host h-1's.
  const auto blocks = algo::RingBlocks::strided(out + static_cast<size_t>(li) * bb,
                                                static_cast<size_t>(m) * bb, bb, nh, es);
  if (a.send != blocks.at(me)) kernels::copyOut(blocks.at(me), a.send, bb, bb * ctx.nranks());
  Progress progress(ctx.health());
  if (nh > 1) {
    algo::SubContext across(ctx, layout.slice(li));
    WEFT_RETURN_IF_ERROR(algo::runStage(algo::ringAllGatherStage(across, blocks), progress));
  }
  algo::SubContext host(ctx, layout.hosts[me]);
  thread_local std::vector<size_t> bounds;
  bounds.resize(m + 1);
  for (int q = 0; q <= m; ++q) bounds[q] = a.count * q;
  for (int h = 0; h < nh; ++h) {
    char* row = out + static_cast<size_t>(layout.hosts[h][0]) * bb;
    WEFT_RETURN_IF_ERROR(algo::doublingAllGather(host, progress, row, bounds.data(), es));
  }
  return Status::ok();
}

}  // namespace

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

  // Per host (HostLayout::stagesPerHost), only this rank's slice needs
  // scratch.
  const bool byHost = layout.stagesPerHost(bb, ctx.chunkBytes());
  if (byHost && (nh <= 2 || bb >= ctx.chunkBytes())) return gatherInPlace(ctx, a, layout, bb);
  // Else position li'*H + h' holds the block of rank hosts[h'][li'].
  thread_local std::vector<char> scratchVec;
  algo::Scratch scratch(scratchVec, (byHost ? nh : n) * bb);
  char* slice = byHost ? scratch.data() : scratch.data() + li * nh * bb;
  kernels::copy(slice + layout.myHost * bb, a.send, bb);
  Progress progress(ctx.health());
  std::vector<size_t> bounds(nh + 1);
  if (nh > 1) {
    for (int h = 0; h <= nh; ++h) bounds[h] = a.count * h;
    algo::SubContext across(ctx, layout.slice(li));
    WEFT_RETURN_IF_ERROR(algo::doublingAllGather(across, progress, slice, bounds.data(), es));
  }
  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  bounds.resize(m + 1);
  if (byHost) {
    // One doubling all-gather per host, each gathering into the output
    // where that host's blocks belong, puts every block in place: H times
    // the steps, the same bytes, and N/m copied locally instead of N.
    for (int q = 0; q <= m; ++q) bounds[q] = a.count * q;
    for (int h = 0; h < nh; ++h) {
      char* row = out + static_cast<size_t>(layout.hosts[h][0]) * bb;
      char* mine = row + li * bb;
      if (h != layout.myHost || mine != a.send) kernels::copy(mine, slice + h * bb, bb);
      WEFT_RETURN_IF_ERROR(algo::doublingAllGather(host, progress, row, bounds.data(), es));
    }
    return Status::ok();
  }
  for (int q = 0; q <= m; ++q) bounds[q] = a.count * nh * q;
  WEFT_RETURN_IF_ERROR(algo::doublingAllGather(host, progress, scratch.data(), bounds.data(), es));
  for (int l = 0; l < m; ++l) {
    for (int h = 0; h < nh; ++h) {
      kernels::copy(out + layout.hosts[h][l] * bb, scratch.data() + (l * nh + h) * bb, bb);
    }
  }
  return Status::ok();
}

}  // namespace weft
