// The algorithm table and every algorithm's entry point. Each algorithm lives
// in its own file with its cost (steps, bytes per rank) in the comment at the
// top; this table is what the selector, WEFT_ALGO and weft-info read.
#pragma once

#include <span>

#include "algorithms/coll.h"

namespace weft {

using AlgorithmFn = Status (*)(CollContext& ctx, const CollArgs& args);

struct Algorithm {
  CollKind kind;
  const char* name;         // as WEFT_ALGO spells it, e.g. "ring"
  const char* description;  // one line
  const char* cost;         // steps and bytes per rank, n ranks, N bytes
  AlgorithmFn run;
};

std::span<const Algorithm> allAlgorithms();

// The algorithm for this call: the tuner's choice (tuner.h; chooseAlgorithm
// also gives the chunk and protocol) among what WEFT_ALGO and WEFT_PROTO
// allow (NCCL syntax: "ring", "^direct", "allreduce:direct;broadcast:chain").
const Algorithm& selectAlgorithm(const CollArgs& args, CollContext& ctx);
// The same choice for channels that cannot publish (no single copy), with
// the default parameters.
const Algorithm& selectAlgorithm(const CollArgs& args, int nranks, size_t chunkBytes);

Status ringAllReduce(CollContext& ctx, const CollArgs& args);
Status directAllReduce(CollContext& ctx, const CollArgs& args);
Status ringReduceScatter(CollContext& ctx, const CollArgs& args);
Status ringAllGather(CollContext& ctx, const CollArgs& args);
Status directAllGather(CollContext& ctx, const CollArgs& args);
Status chainBroadcast(CollContext& ctx, const CollArgs& args);
Status directBroadcast(CollContext& ctx, const CollArgs& args);
Status chainReduce(CollContext& ctx, const CollArgs& args);
Status pairwiseAllToAll(CollContext& ctx, const CollArgs& args);
Status directAllToAll(CollContext& ctx, const CollArgs& args);
Status directGather(CollContext& ctx, const CollArgs& args);
Status directScatter(CollContext& ctx, const CollArgs& args);
Status treeAllReduce(CollContext& ctx, const CollArgs& args);
Status rhdAllReduce(CollContext& ctx, const CollArgs& args);
Status recDoublingAllReduce(CollContext& ctx, const CollArgs& args);
Status rhdReduceScatter(CollContext& ctx, const CollArgs& args);
Status recDoublingAllGather(CollContext& ctx, const CollArgs& args);
Status binomialBroadcast(CollContext& ctx, const CollArgs& args);
Status binomialReduce(CollContext& ctx, const CollArgs& args);
Status bruckAllToAll(CollContext& ctx, const CollArgs& args);
Status pairwiseAllToAllV(CollContext& ctx, const CollArgs& args);
Status hierAllReduce(CollContext& ctx, const CollArgs& args);
Status hierReduceScatter(CollContext& ctx, const CollArgs& args);
Status hierAllGather(CollContext& ctx, const CollArgs& args);
// The parent of `rank` in tree 0 or 1 of the double binary tree (-1: root).
int doubleTreeParent(int tree, int rank, int n);

// Point-to-point: a batch of sends and receives (one group's worth for one
// communicator) progressed together, so that no ordering of them deadlocks.
// Messages to one peer are matched in the order they were posted.
struct P2POp {
  bool isSend = false;
  int peer = 0;
  void* buf = nullptr;  // source for a send, destination for a receive
  size_t bytes = 0;
};
Status runP2P(CollContext& ctx, std::span<const P2POp> ops);
// Bytes the calling thread's last runP2P copied aside because a receive of
// the batch overwrites a send's buffer in a way it cannot gate (see p2p.cc).
size_t p2pLastStagedBytes();

}  // namespace weft
