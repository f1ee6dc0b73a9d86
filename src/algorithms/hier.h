// What the hierarchical algorithms need: the ranks grouped by host, and a
// context that runs an algorithm on a subset of the ranks.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/coll.h"

namespace weft::algo {

// Whether the ranks fall into blocks of equal length, one per host, in rank
// order: every host's ranks are consecutive and every host has as many, as
// when a launcher deals ranks to hosts in blocks (mpirun, srun and weftrun
// --hosts by default). hostOf[r]: rank r's host id.
inline bool hostsAreEvenRankRuns(std::span<const int> hostOf) {
  const size_t n = hostOf.size();
  if (n == 0) return true;
  size_t run = 1;
  while (run < n && hostOf[run] == hostOf[0]) ++run;
  if (n % run != 0) return false;
  for (size_t r = 0; r < n; ++r) {
    if (hostOf[r] != hostOf[r - r % run]) return false;
  }
  for (size_t b = run; b < n; b += run) {
    for (size_t c = 0; c < b; c += run) {
      if (hostOf[b] == hostOf[c]) return false;
    }
  }
  return true;
}

// Whether the hierarchical reduce-scatter and all-gather run their
// intra-host stage once per host, on that host's blocks where they lie in
// the caller's buffer: the hosts are even rank runs, so a host's blocks lie
// side by side, and they fill a chunk, so the H-fold steps cost less than
// the reordering copy of N they replace (a chunk copied costs more than a
// step). The tuner's model asks the same question.
inline bool stagesPerHost(bool evenRankRuns, int perHost, size_t blockBytes, size_t chunkBytes) {
  return evenRankRuns && perHost > 0 && static_cast<size_t>(perHost) * blockBytes >= chunkBytes;
}

// How many segments hier allreduce pipelines `bytes` in, with perHost ranks
// on every host: each segment's slice (a local rank's share, crossing hosts)
// holds at least kHierSliceChunks chunks, so that the extra steps stay few
// against the bytes each moves; at most kHierMaxSegments. 1: no pipeline.
constexpr size_t kHierSliceChunks = 2;
constexpr size_t kHierMaxSegments = 8;
inline size_t hierSegments(size_t bytes, int perHost, size_t chunkBytes) {
  const size_t slice = bytes / static_cast<size_t>(perHost > 0 ? perHost : 1);
  const size_t k = chunkBytes > 0 ? slice / (kHierSliceChunks * chunkBytes) : 1;
  return k < 1 ? 1 : k > kHierMaxSegments ? kHierMaxSegments : k;
}

// Ranks grouped by CollContext::hostOf: hosts in order of their lowest rank,
// each host's ranks in rank order.
struct HostLayout {
  explicit HostLayout(CollContext& ctx) {
    const int n = ctx.nranks();
    std::vector<int> seen;  // host id -> index in hosts
    std::vector<int> hostOf(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      const int id = hostOf[q] = ctx.hostOf(q);
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
    rankRuns = hostsAreEvenRankRuns(hostOf);
  }
  // The ranks with local index li on every host, in host order.
  std::vector<int> slice(int li) const {
    std::vector<int> s;
    for (const auto& h : hosts) s.push_back(h[li]);
    return s;
  }
  bool stagesPerHost(size_t blockBytes, size_t chunkBytes) const {
    return algo::stagesPerHost(rankRuns, perHost, blockBytes, chunkBytes);
  }
  std::vector<std::vector<int>> hosts;
  int myHost = 0, localIndex = 0;
  int perHost = 0;        // ranks on every host, 0 when hosts differ
  bool rankRuns = false;  // hostsAreEvenRankRuns
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
