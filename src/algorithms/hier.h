// What the hierarchical algorithms need: the ranks grouped by host, and a
// context that runs an algorithm on a subset of the ranks.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/coll.h"

namespace weft::algo {

// Ranks grouped by CollContext::hostOf: hosts in order of their lowest rank,
// each host's ranks in rank order.
struct HostLayout {
  explicit HostLayout(CollContext& ctx) {
    const int n = ctx.nranks();
    std::vector<int> seen;  // host id -> index in hosts
    for (int q = 0; q < n; ++q) {
      const int id = ctx.hostOf(q);
      size_t h = 0;
      while (h < seen.size() && seen[h] != id) ++h;
      if (h == seen.size()) {
        seen.push_back(id);
        hosts.emplace_back();
      }
      hosts[h].push_back(q);
      if (q == ctx.rank()) {
        myHost = static_cast<int>(h);
        localIndex = static_cast<int>(hosts[h].size()) - 1;
      }
    }
    perHost = static_cast<int>(hosts[0].size());
    for (const auto& h : hosts) {
      if (static_cast<int>(h.size()) != perHost) perHost = 0;
    }
  }
  // The ranks with local index li on every host, in host order.
  std::vector<int> slice(int li) const {
    std::vector<int> s;
    for (const auto& h : hosts) s.push_back(h[li]);
    return s;
  }
  // Whether the hierarchical reduce-scatter and all-gather run their
  // intra-host stage once per host, on that host's blocks where they lie in
  // the caller's buffer: every host's ranks are consecutive (rank
  // hosts[h][0] + i is hosts[h][i], as when a launcher deals ranks to hosts
  // in blocks), so a host's blocks lie side by side, and they fill a chunk,
  // so the H-fold steps cost less than the reordering copy they replace.
  bool stagesPerHost(size_t blockBytes, size_t chunkBytes) const {
    for (const auto& h : hosts) {
      for (size_t i = 0; i < h.size(); ++i) {
        if (h[i] != h[0] + static_cast<int>(i)) return false;
      }
    }
    return static_cast<size_t>(perHost) * blockBytes >= chunkBytes;
  }
  std::vector<std::vector<int>> hosts;
  int myHost = 0, localIndex = 0;
  int perHost = 0;  // ranks on every host, 0 when hosts differ
};

// The ranks `members` (in that order) as a communicator of their own: rank i
// of the sub-context is members[i]. Channels are the parent's.
class SubContext final : public CollContext {
 public:
  SubContext(CollContext& parent, std::vector<int> members)
      : parent_(parent), members_(std::move(members)) {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i] == parent.rank()) rank_ = static_cast<int>(i);
    }
  }
  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(members_.size()); }
  SendChannel& sendTo(int peer) override { return parent_.sendTo(members_[peer]); }
  RecvChannel& recvFrom(int peer) override { return parent_.recvFrom(members_[peer]); }
  HealthMonitor& health() override { return parent_.health(); }
  size_t chunkBytes() const override { return parent_.chunkBytes(); }
  size_t slotsPerChannel() const override { return parent_.slotsPerChannel(); }
  int hostOf(int rank) const override { return parent_.hostOf(members_[rank]); }

 private:
  CollContext& parent_;
  std::vector<int> members_;
  int rank_ = 0;
};

}  // namespace weft::algo
