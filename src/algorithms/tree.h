// The pipelined tree engine behind the double binary tree allreduce and the
// binomial broadcast and reduce; not part of the algorithm API.
#pragma once

#include <span>
#include <vector>

#include "algorithms/coll.h"

namespace weft::algo {

// One tree as this rank sees it: the elements it carries and the neighbours.
struct TreeSpec {
  size_t first = 0;           // first element carried by this tree
  size_t count = 0;           // elements carried
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // folded in this order (a deterministic result)
};

enum class TreeMode {
  Reduce,     // children -> parent, the root ends with the result
  Broadcast,  // parent -> children, from the root's buf
  AllReduce,  // reduce up, then the root's result broadcast down
};

// Runs every tree at once, one chunk (slot) per message, all progressed in one
// polling loop. buf holds this rank's contribution (contribute()d) for the
// reducing modes and receives the result; for Broadcast the root's buf holds
// the data and every other rank's buf receives it. The root of a reducing
// tree applies finish() (avg).
//
// Two trees may use the same pair of ranks (in either direction), so messages
// on one channel follow a fixed order that sender and receiver both know:
// chunk index first (in an allreduce, a down chunk counts as a few chunks
// later, so that the up stream sharing its channel is not held up: tree.cc),
// then tree. Every message that arrives can be taken at once (partial sums
// fold straight into buf, broadcast chunks land in buf), except that a
// child's chunk k is folded only after the children before it folded
// theirs, so the result does not depend on timing. Nothing waits on a
// message ordered later than itself, so any slot count works. Sends read buf
// itself (SendChannel::commitFrom) and, over TCP, down chunks land in it
// straight from the socket (RecvChannel::land); the call returns once the
// sends are done.
Status runTrees(CollContext& ctx, const CollArgs& a, TreeMode mode, std::span<const TreeSpec> trees,
                char* buf);

}  // namespace weft::algo
