// The algorithm table. The choice among its entries is the tuner's
// (tuner.h), restricted by WEFT_ALGO and WEFT_PROTO (spec.h for the syntax).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "algorithms/algorithms.h"
#include "algorithms/tuner.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {

// Lone sends and receives outside a group are a batch of one.
Status singleSend(CollContext& ctx, const CollArgs& a) {
  const P2POp op{true, a.peer, const_cast<void*>(a.send), a.count * dtypeSize(a.dtype)};
  return runP2P(ctx, std::span<const P2POp>(&op, 1));
}
Status singleRecv(CollContext& ctx, const CollArgs& a) {
  const P2POp op{false, a.peer, a.recv, a.count * dtypeSize(a.dtype)};
  return runP2P(ctx, std::span<const P2POp>(&op, 1));
}

constexpr Algorithm kAlgorithms[] = {
    {CollKind::AllReduce, "ring", "reduce-scatter then all-gather around a ring, pipelined",
     "2(n-1) steps; sends and receives 2(n-1)/n*N, reduces (n-1)/n*N", ringAllReduce},
    {CollKind::AllReduce, "direct",
     "one hop: every rank sends its input to all peers and reduces all n (N <= chunk)",
     "1 step; sends and receives (n-1)*N, reduces (n-1)*N", directAllReduce},
    {CollKind::Broadcast, "chain", "pipelined chain root -> root+1 -> ... -> root-1",
     "n-1+C-1 pipeline steps (C chunks); sends and receives N", chainBroadcast},
    {CollKind::Reduce, "chain", "pipelined chain root+1 -> ... -> root, reducing on the way",
     "n-1+C-1 pipeline steps (C chunks); sends, receives and reduces N", chainReduce},
    {CollKind::AllGather, "ring", "blocks passed around a ring, pipelined",
     "n-1 steps; sends and receives (n-1)/n*N (N = whole output)", ringAllGather},
    {CollKind::ReduceScatter, "ring", "partial sums passed around a ring, pipelined",
     "n-1 steps; sends, receives and reduces (n-1)/n*N (N = whole input)", ringReduceScatter},
    {CollKind::AllToAll, "pairwise", "step s sends to r+s while receiving from r-s",
     "n-1 steps; sends and receives (n-1)/n*N (N = whole buffer)", pairwiseAllToAll},
    {CollKind::Gather, "direct", "every rank sends to the root, polled round-robin",
     "1 step; the root receives (n-1)*N, others send N", directGather},
    {CollKind::Scatter, "direct", "the root sends each rank its block, round-robin",
     "1 step; the root sends (n-1)*N, others receive N", directScatter},
    // Single copy: chosen for messages of at least directMinBytes() per peer
    // where the channels can publish.
    {CollKind::AllGather, "direct",
     "single copy: every rank reads each peer's block straight from its memory",
     "1 step; copies (n-1)/n*N once from the peers' buffers (N = whole output)", directAllGather},
    {CollKind::AllToAll, "direct",
     "single copy: every rank reads its block straight from each peer's memory",
     "1 step; copies (n-1)/n*N once from the peers' buffers (N = whole buffer), +N local in "
     "place",
     directAllToAll},
    {CollKind::Broadcast, "direct",
     "single copy: every non-root reads the message straight from the root's memory",
     "1 step; each non-root copies N once from the root's buffer", directBroadcast},
    // Chosen only when WEFT_ALGO asks for them (the tuner decides otherwise).
    {CollKind::AllReduce, "tree",
     "double binary tree (two complementary trees, half the data each), reduce up and "
     "broadcast down, pipelined",
     "~2log2(n)+C pipeline steps (C chunks); sends and receives <= 3N/2, reduces <= N",
     treeAllReduce},
    {CollKind::AllReduce, "rhd",
     "Rabenseifner: recursive-halving reduce-scatter then recursive-doubling all-gather",
     "2log2(p2) steps (+2 if n != p2 = 2^floor(log2 n)); sends and receives 2(p2-1)/p2*N, "
     "reduces (p2-1)/p2*N",
     rhdAllReduce},
    {CollKind::AllReduce, "recdoubling",
     "recursive doubling: whole buffer swapped with rank r^2^k each step (small messages)",
     "log2(p2) steps (+2 if n != p2); sends, receives and reduces log2(p2)*N",
     recDoublingAllReduce},
    {CollKind::ReduceScatter, "rhd", "recursive halving: the kept half halves each step",
     "log2(p2) steps (+2 if n != p2); sends, receives and reduces ~(p2-1)/p2*N (N = whole input)",
     rhdReduceScatter},
    {CollKind::AllGather, "recdoubling", "recursive doubling: the held blocks double each step",
     "log2(p2) steps (+2 if n != p2); sends and receives ~(n-1)/n*N (N = whole output)",
     recDoublingAllGather},
    {CollKind::Broadcast, "binomial", "binomial tree from the root, pipelined",
     "ceil(log2 n)+C-1 pipeline steps; root sends ceil(log2 n)*N, others receive N",
     binomialBroadcast},
    {CollKind::Reduce, "binomial", "binomial tree to the root, reducing on the way, pipelined",
     "ceil(log2 n)+C-1 pipeline steps; non-roots send N, root receives and reduces "
     "ceil(log2 n)*N",
     binomialReduce},
    {CollKind::AllToAll, "bruck", "Bruck: log n steps of packed blocks (small messages)",
     "ceil(log2 n) steps; sends and receives ~N/2*log2(n) (N = whole buffer)", bruckAllToAll},
    {CollKind::AllToAllV, "pairwise",
     "step s sends to r+s while receiving from r-s, counts checked against the sender's",
     "n-1 steps; sends S and receives R bytes (this rank's totals) plus a header per peer",
     pairwiseAllToAllV},
    {CollKind::AllReduce, "hier",
     "two-level: reduce-scatter within each host, rhd (or ring) allreduce across hosts per slice, "
     "all-gather within the host; in up to 8 segments, the host's and the network's stages "
     "overlapping",
     "per segment (K of them): within a host of m ranks 2log2(m) steps, across H hosts 2log2(H) "
     "(2(H-1), a ring, where H is not a power of two); "
     "in all 2(m-1)/m*N within and 2(H-1)/H*N/m across",
     hierAllReduce},
    {CollKind::ReduceScatter, "hier",
     "two-level: reduce-scatter within each host, then across hosts per slice",
     "within a host of m ranks log2(m) steps (H*log2(m) for large blocks on hosts of consecutive "
     "ranks) and (m-1)/m*N; across H hosts log2(H) steps and (H-1)/H*N/m (N = whole input)",
     hierReduceScatter},
    {CollKind::AllGather, "hier",
     "two-level: all-gather across hosts per slice, then within each host",
     "across H hosts log2(H) steps and (H-1)/H*N/m; within a host of m ranks log2(m) steps "
     "(H*log2(m) for large blocks on hosts of consecutive ranks) and (m-1)/m*N (N = whole output)",
     hierAllGather},
    {CollKind::Send, "p2p", "a lone send: one-message batch", "ceil(N/chunk) slots; sends N",
     singleSend},
    {CollKind::Recv, "p2p", "a lone receive: one-message batch", "ceil(N/chunk) slots; receives N",
     singleRecv},
};
static_assert(std::size(kAlgorithms) <= 64, "WEFT_ALGO masks are 64 bits");

}  // namespace

std::span<const Algorithm> allAlgorithms() {
  return kAlgorithms;
}

const Algorithm& selectAlgorithm(const CollArgs& args, CollContext& ctx) {
  return *chooseAlgorithm(args, ctx).alg;
}

const Algorithm& selectAlgorithm(const CollArgs& args, int nranks, size_t chunkBytes) {
  TunerShape shape;
  shape.nranks = nranks;
  shape.ranksPerHost = nranks;
  shape.slotBytes = chunkBytes;
  return *chooseFor(args.kind, args.count * dtypeSize(args.dtype), shape, defaultTunerParams(),
                    allAlgorithms(), envRestrictions())
              .alg;
}

}  // namespace weft
