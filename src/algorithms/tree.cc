// The pipelined tree engine (algorithms/tree.h).
#include "algorithms/tree.h"

#include <algorithm>

#include "algorithms/detail.h"
#include "algorithms/exchange.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft::algo {

namespace {

struct Stream {
  int tree;
  bool up;     // partial sums towards the root (else results towards the leaves)
  int child;   // receiving side of an up stream: which child it comes from
  size_t lag;  // chunk k of this stream has the place k + lag in its lane's order
};

// The streams on one channel and how far along their merged order it is:
// at place p, streams[idx] carries its chunk p - lag (if it has one), in
// order of place, then of stream.
struct Lane {
  int peer = -1;
  std::vector<Stream> streams;
  size_t place = 0;
  size_t idx = 0;
  size_t left = 0;  // messages still to go
};

// Where one channel carries both an up and a down stream (an allreduce whose
// two trees join the same pair of ranks, as every pair with 2 ranks), down
// chunk k waits for up chunk k to climb to the root and come back, which
// takes about two tree depths. Placed at k alone, it would stop the up
// stream behind it for that whole round trip, every chunk; placed that many
// chunks later, the up stream keeps flowing. Both ends compute the same lag.
size_t downLag(int nranks) {
  size_t depth = 0;
  while ((size_t{1} << depth) < static_cast<size_t>(nranks)) ++depth;
  return 2 * depth + 2;
}

}  // namespace

Status runTrees(CollContext& ctx, const CollArgs& a, TreeMode mode, std::span<const TreeSpec> trees,
                char* buf) {
  const size_t es = dtypeSize(a.dtype);
  const size_t ce = chunkFor(ctx, es) / es;  // elements per chunk
  const bool upPhase = mode != TreeMode::Broadcast;
  const bool downPhase = mode != TreeMode::Reduce;
  const CollArgs acc = accumulating(a);
  const int nt = static_cast<int>(trees.size());
  const size_t lag = upPhase && downPhase ? downLag(ctx.nranks()) : 0;

  std::vector<size_t> chunks(nt), reduced(nt), final_(nt);
  std::vector<std::vector<size_t>> childNext(nt);
  for (int t = 0; t < nt; ++t) chunks[t] = (trees[t].count + ce - 1) / ce;
  auto len = [&](int t, size_t k) { return std::min(ce, trees[t].count - k * ce); };
  auto at = [&](int t, size_t k) { return buf + (trees[t].first + k * ce) * es; };
  auto isRoot = [&](int t) { return trees[t].parent < 0; };

  // Chunks fully reduced here; at a reducing root they are finished and final.
  auto updateReduced = [&](int t) {
    const auto& kids = childNext[t];
    const size_t now = kids.empty() ? chunks[t] : kids.back();
    if (isRoot(t) && upPhase) {
      for (size_t k = final_[t]; k < now; ++k) finish(at(t, k), len(t, k), a, ctx.nranks());
      final_[t] = now;
    }
    reduced[t] = now;
  };
  for (int t = 0; t < nt; ++t) {
    childNext[t].assign(upPhase ? trees[t].children.size() : 0, 0);
    if (upPhase) updateReduced(t);
    if (!upPhase && isRoot(t)) final_[t] = chunks[t];
  }

  // Lanes: one per peer and direction, holding that channel's streams.
  std::vector<Lane> out, in;
  auto lane = [](std::vector<Lane>& lanes, int peer) -> Lane& {
    for (Lane& l : lanes)
      if (l.peer == peer) return l;
    lanes.push_back(Lane{});
    lanes.back().peer = peer;
    return lanes.back();
  };
  for (int t = 0; t < nt; ++t) {
    const TreeSpec& ts = trees[t];
    if (chunks[t] == 0) continue;
    if (ts.parent >= 0) {
      if (upPhase) lane(out, ts.parent).streams.push_back({t, true, -1, 0});
      if (downPhase) lane(in, ts.parent).streams.push_back({t, false, -1, lag});
    }
    for (size_t j = 0; j < ts.children.size(); ++j) {
      if (downPhase) lane(out, ts.children[j]).streams.push_back({t, false, -1, lag});
      if (upPhase) lane(in, ts.children[j]).streams.push_back({t, true, static_cast<int>(j), 0});
    }
  }
  auto step = [](Lane& l) {
    if (++l.idx == l.streams.size()) {
      l.idx = 0;
      ++l.place;
    }
  };
  // Moves a lane's cursor to its next message that exists (or the end).
  auto settle = [&](Lane& l) {
    while (l.left > 0) {
      const Stream& s = l.streams[l.idx];
      if (l.place >= s.lag && l.place - s.lag < chunks[s.tree]) return;
      step(l);
    }
  };
  auto advance = [&](Lane& l) {
    --l.left;
    step(l);
    settle(l);
  };
  size_t pending = 0;
  for (auto* lanes : {&out, &in}) {
    for (Lane& l : *lanes) {
      for (const Stream& s : l.streams) l.left += chunks[s.tree];
      pending += l.left;
      settle(l);
    }
  }

  // Over TCP a down chunk is read from the socket straight into buf: every
  // message a lane receives is named in the lane's order, up chunks (folded
  // from the slot) with no address. Landing early is safe: in a broadcast
  // buf is only output; in an allreduce down chunk k of a tree overwrites
  // only what this rank sent up as chunk k, which the parent received whole
  // (so the socket has read it) before it sends chunk k down.
  for (const Lane& l : in) {
    RecvChannel& ch = ctx.recvFrom(l.peer);
    if (!ch.canLand()) continue;
    for (Lane walk = l; walk.left > 0; advance(walk)) {
      const Stream& s = walk.streams[walk.idx];
      const size_t k = walk.place - s.lag;
      if (s.up) {
        ch.land(nullptr, 0);
      } else {
        ch.land(at(s.tree, k), len(s.tree, k) * es);
      }
    }
  }

  Progress progress(ctx.health());
  while (pending > 0) {
    bool moved = false;
    for (Lane& l : out) {
      SendChannel& ch = ctx.sendTo(l.peer);
      while (l.left > 0) {
        const Stream& s = l.streams[l.idx];
        const size_t k = l.place - s.lag;
        if (k >= (s.up ? reduced[s.tree] : final_[s.tree])) break;
        void* slot = ch.tryAcquire();
        if (!slot) break;
        // Sent from buf itself (over TCP without a copy into the slot): an
        // up chunk is overwritten only by its down chunk, which comes after
        // the parent received it, and nothing else writes a chunk sent.
        ch.commitFrom(slot, at(s.tree, k), len(s.tree, k) * es);
        advance(l);
        --pending;
        moved = true;
      }
    }
    for (Lane& l : in) {
      RecvChannel& ch = ctx.recvFrom(l.peer);
      while (l.left > 0) {
        const Stream& s = l.streams[l.idx];
        const int t = s.tree;
        const size_t k = l.place - s.lag;
        if (s.up && s.child > 0 && childNext[t][s.child - 1] <= k) break;  // fold in order
        size_t have = 0;
        const void* data = ch.tryPeek(&have);
        if (!data) break;
        const size_t c = len(t, k);
        if (have != c * es || ch.peekedPublished()) return sizeMismatch(have, c * es);
        if (s.up) {
          combine(at(t, k), at(t, k), data, c, acc);
          ++childNext[t][s.child];
          ch.release();
          updateReduced(t);
        } else {
          if (data != at(t, k)) kernels::copy(at(t, k), data, c * es);
          ch.release();
          final_[t] = k + 1;
        }
        advance(l);
        --pending;
        moved = true;
      }
    }
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
  // buf may be a caller's scratch (binomial reduce), freed on return.
  return waitSourcesRead(ctx, progress);
}

}  // namespace weft::algo
