// Hierarchical (two-level) allreduce for ranks spread over hosts: a
// recursive-halving reduce-scatter among the m ranks of each host leaves
// local rank i with slice i of the host's sum; the ranks with local index i
// on the H hosts allreduce that slice over a ring (one leader per slice, so
// every rank's link carries 1/m of the data across hosts); a recursive-doubling
// all-gather within each host completes the buffer. Needs the same number of
// ranks on every host; with uneven hosts it runs rhd over all ranks instead.
//
// Cost, n = m*H ranks, N bytes: within a host 2log2(m) steps (+2 when m is
// not a power of two), each rank sends and receives about 2(m-1)/m * N;
// across hosts 2(H-1) ring steps, each rank sends and receives
// 2(H-1)/H * N/m. Every stage is deadlock-free with any slot count.
//
// The stages run one after another, so a stage's fast ranks wait for its slow
// ones. Where hosts are simulated on shared CPUs (4 ranks as 2 hosts on 2
// CPUs, 2 MiB) phase timers put the cross-host ring alone at 450-480 us a call
// and the whole call at 1000-1150 us: the ring is not what is slow, the
// hand-offs between stages are, which is why ring or rhd can win there. The
// cure is to overlap the stages chunk by chunk, which needs each stage as a
// non-blocking state machine rather than a blocking loop.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/hier.h"

namespace weft {

Status hierAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const size_t es = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    contribute(out, a.send, a.count, a);
    finish(out, a.count, a, n);
    return Status::ok();
  }
  const algo::HostLayout layout(ctx);
  if (layout.perHost == 0) return rhdAllReduce(ctx, a);
  const int m = layout.perHost;
  const int li = layout.localIndex;
  // The first halving step sends and adds the input where it is, as rhd's
  // does, unless it must be scaled first (PreMulSum): no up-front copy of N
  // bytes into the output.
  const char* in = static_cast<const char*>(a.send);
  if (a.op.preMul) {
    contribute(out, in, a.count, a);
    in = out;
  }
  const CollArgs acc = algo::accumulating(a);
  std::vector<size_t> bounds(m + 1);
  for (int q = 0; q <= m; ++q) bounds[q] = a.count / m * q + a.count % m * q / m;
  Progress progress(ctx.health());

  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  WEFT_RETURN_IF_ERROR(algo::halvingReduceScatter(host, progress, out, bounds.data(), acc, in));
  CollArgs slice = acc;
  slice.op.average = false;
  slice.send = slice.recv = out + bounds[li] * es;
  slice.count = bounds[li + 1] - bounds[li];
  if (layout.hosts.size() > 1 && slice.count > 0) {
    algo::SubContext across(ctx, layout.slice(li));
    WEFT_RETURN_IF_ERROR(ringAllReduce(across, slice));
    // The ring may still send from the slice (over TCP), which finish() is
    // about to divide.
    WEFT_RETURN_IF_ERROR(algo::waitSourcesRead(across, progress));
  }
  finish(slice.recv, slice.count, a, n);
  return algo::doublingAllGather(host, progress, out, bounds.data(), es);
}

}  // namespace weft
