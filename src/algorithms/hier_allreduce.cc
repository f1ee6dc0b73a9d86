// Hierarchical (two-level) allreduce for ranks spread over hosts: a
// recursive-halving reduce-scatter among the m ranks of each host leaves
// local rank i with slice i of the host's sum; the ranks with local index i
// on the H hosts allreduce that slice by recursive halving and doubling, or
// over a ring (ring_exchange.cc) where H is not a power of two (one leader
// per slice, so every rank's link carries 1/m of the data across hosts); a
// recursive-doubling all-gather within each host completes the buffer.
// Needs the same number of ranks on every host; with uneven hosts it runs
// rhd over all ranks instead.
//
// Pipelined: the buffer is cut into K segments (hierSegments, K <= 8, each
// slice at least two chunks), and two lanes run as stages (stage.h) taking
// turns on the rank's thread. The host lane runs, over shared memory,
// reduce-scatter 0, reduce-scatter 1, all-gather 0, reduce-scatter 2,
// all-gather 1, ..., all-gather K-1; the network lane runs the cross-host
// allreduce of segments 0..K-1, each once its reduce-scatter is done. So
// segment k crosses hosts while segment k+1 is reduced and segment k-1
// gathered within the host, where one stage after another left each
// link idle while the other worked, and left a stage's fast ranks waiting
// for its slow ones. The lanes use different channels (host peers, other
// hosts' peers), and each runs its stages in the same order on every rank.
//
// Cost, n = m*H ranks, N bytes, K segments: within a host 2K log2(m) steps
// (+2K when m is not a power of two), each rank sends and receives about
// 2(m-1)/m * N; across hosts 2K log2(H) steps (2K(H-1) when H is not a power
// of two), each rank sends and receives about 2(H-1)/H * N/m. With the lanes
// overlapped the time tends to the slower lane's plus 1/K of the other's.
// Deadlock-free with any slot count: every stage is a pairwise exchange
// progressed in both directions, and no lane waits on the other's progress
// except for a segment the other has finished with.
//
// Measured, forced, 4 ranks as 2 hosts (network namespaces, 2 ranks each) on
// a veth throttled to 10 Gbit/s, 16 MiB (perf/netns-bench.sh, PER_HOST=2):
// busbw 1.38 and 1.50 GB/s against 1.17 and 1.21 with the stages one after
// another and the ring across; in place 1.52 and 1.78 against 1.18 and 1.33,
// where the link allows 1.79. On simulated hosts sharing 2 CPUs over
// loopback, where the lanes compete for the CPUs, time new/old 0.88-1.06
// (median of 4 interleaved rounds, 512 KiB-8 MiB).
#include <optional>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "algorithms/hier.h"
#include "algorithms/stage.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

struct Segment {
  char* out = nullptr;               // the segment's part of the output
  const char* in = nullptr;          // ... and of the input
  std::vector<size_t> hostBounds;    // local rank i's slice: [b[i], b[i+1])
  std::vector<size_t> acrossBounds;  // within this rank's slice, per host
  bool reduced = false;              // the host's reduce-scatter is done
  bool crossed = false;              // the slice is reduced over all hosts
};

// Reduce-scatter k+1 before all-gather k, so that the network lane has the
// next segment while this lane gathers.
algo::Stage hostLane(CollContext& host, std::vector<Segment>& segs, CollArgs acc, size_t es) {
  for (size_t k = 0; k <= segs.size(); ++k) {
    if (k < segs.size()) {
      Segment& s = segs[k];
      WEFT_CO_AWAIT_STAGE(
          algo::halvingReduceScatterStage(host, s.out, s.hostBounds.data(), acc, s.in));
      s.reduced = true;
    }
    if (k > 0) {
      Segment& s = segs[k - 1];
      while (!s.crossed) co_yield false;
      WEFT_CO_AWAIT_STAGE(algo::doublingAllGatherStage(host, s.out, s.hostBounds.data(), es));
    }
  }
  co_return Status::ok();
}

// acrossCtx is null with one host: the slice is then already the sum.
algo::Stage networkLane(CollContext* acrossCtx, std::vector<Segment>& segs, int localIndex,
                        CollArgs acc, CollArgs user, int nranks, size_t es) {
  for (Segment& s : segs) {
    while (!s.reduced) co_yield false;
    char* slice = s.out + s.hostBounds[localIndex] * es;
    const size_t count = s.hostBounds[localIndex + 1] - s.hostBounds[localIndex];
    if (acrossCtx == nullptr || count == 0) {
      finish(slice, count, user, nranks);
    } else if (const int h = acrossCtx->nranks(); (h & (h - 1)) != 0) {
      WEFT_CO_AWAIT_STAGE(
          algo::ringAllReduceStage(*acrossCtx, slice, s.acrossBounds.data(), acc, user, nranks));
    } else {
      // Each slice leader's reduced block is final after the halving: the
      // average divides that block once, before the doubling spreads it.
      const int r = acrossCtx->rank();
      WEFT_CO_AWAIT_STAGE(
          algo::halvingReduceScatterStage(*acrossCtx, slice, s.acrossBounds.data(), acc));
      finish(slice + s.acrossBounds[r] * es, s.acrossBounds[r + 1] - s.acrossBounds[r], user,
             nranks);
      WEFT_CO_AWAIT_STAGE(
          algo::doublingAllGatherStage(*acrossCtx, slice, s.acrossBounds.data(), es));
    }
    s.crossed = true;
  }
  co_return Status::ok();
}

}  // namespace

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
  const int nh = static_cast<int>(layout.hosts.size());
  // The first halving step sends and adds the input where it is, as rhd's
  // does, unless it must be scaled first (PreMulSum): no up-front copy of N
  // bytes into the output.
  const char* in = static_cast<const char*>(a.send);
  if (a.op.preMul) {
    contribute(out, in, a.count, a);
    in = out;
  }

  const size_t segments = std::min(
      a.segments > 0 ? a.segments : algo::hierSegments(a.count * es, m, ctx.chunkBytes()), a.count);
  // Kept per thread, bounds and all, so that a call allocates no segments
  // once the thread has run one with as many.
  thread_local std::vector<Segment> segs;
  segs.resize(segments);
  for (size_t k = 0; k < segments; ++k) {
    const size_t begin = a.count / segments * k + a.count % segments * k / segments;
    const size_t end = a.count / segments * (k + 1) + a.count % segments * (k + 1) / segments;
    Segment& s = segs[k];
    s.out = out + begin * es;
    s.in = in + begin * es;
    s.reduced = s.crossed = false;
    const size_t count = end - begin;
    s.hostBounds.resize(m + 1);
    for (int q = 0; q <= m; ++q) s.hostBounds[q] = count / m * q + count % m * q / m;
    // rhd's blocks across a power of two of hosts (no extras: an even
    // split), the ring's even blocks otherwise.
    const size_t slice = s.hostBounds[li + 1] - s.hostBounds[li];
    if ((nh & (nh - 1)) == 0) {
      algo::foldedBounds(nh, slice, s.acrossBounds);
    } else {
      s.acrossBounds.resize(nh + 1);
      for (int h = 0; h <= nh; ++h) s.acrossBounds[h] = slice / nh * h + slice % nh * h / nh;
    }
  }

  algo::SubContext host(ctx, layout.hosts[layout.myHost]);
  std::optional<algo::SubContext> across;
  if (nh > 1) across.emplace(ctx, layout.slice(li));
  algo::Stage lanes[] = {
      hostLane(host, segs, algo::accumulating(a), es),
      networkLane(across ? &*across : nullptr, segs, li, algo::accumulating(a), a, n, es),
  };
  Progress progress(ctx.health());
  return algo::runStages(lanes, progress);
}

}  // namespace weft
