// How many CPUs a host's ranks may run on together, for the tuner's
// oversubscription term (tuner.h).
//
// Each rank reads its own affinity mask (sched_getaffinity: the cpuset and
// any taskset/launcher binding) and its cgroup v2 CPU quota; the ranks
// all-gather them, and every host's CPUs are the union of its ranks' masks,
// capped by the smallest quota there. The union matters: a launcher that
// binds each of 4 ranks to its own core gives every rank a 1-CPU mask, yet
// the host is not oversubscribed; 4 ranks confined to the same 2 cores are.
// Rank 0 then picks the worst host, applies WEFT_TUNER_HOST_CPUS and
// broadcasts the answer, so every rank models the same shape.
//
// The same records, with where each rank's lowest CPU sits, give the ring's
// order (ring_order.h) and each rank's share of its last-level cache, which
// sets the size above which copies stream past the cache (kernels/reduce.h).
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/byte_collectives.h"
#include "algorithms/detail.h"
#include "algorithms/ring_order.h"
#include "algorithms/tuner.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {

// cgroup v2 "cpu.max": "<quota> <period>" or "max <period>". Returns the
// quota in CPUs rounded up, or 0 where there is none.
int cgroupQuotaCpus() {
  std::ifstream f("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (!(f >> quota >> period) || quota == "max" || period <= 0) return 0;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || !(q > 0)) return 0;
  return static_cast<int>(std::min(std::ceil(q / period), 1e6));
}

}  // namespace

int usableCpus(uint64_t (&mask)[16]) {
  std::memset(mask, 0, sizeof(mask));
  int count = 0;
  // Up to 64K CPUs; a mask too small for the kernel fails with EINVAL.
  for (int cpus = 1024; cpus <= 65536 && count == 0; cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (!set) break;
    const size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      count = CPU_COUNT_S(size, set);
      for (int c = 0; c < 1024 && c < cpus; ++c) {
        if (CPU_ISSET_S(c, size, set)) mask[c / 64] |= uint64_t{1} << (c % 64);
      }
    }
    CPU_FREE(set);
  }
  if (count <= 0) return 0;
  const int quota = cgroupQuotaCpus();
  return quota > 0 ? std::min(count, quota) : count;
}

namespace {

// Per group (a host, or a machine) the union of its ranks' masks (at least
// the widest count), capped by the smallest quota; returns the most ranks
// per CPU of any group (0 where nothing is known) and the most ranks in any
// group.
double worstRanksPerCpu(std::span<const CpuRecord> ranks, std::span<const int> groupOf,
                        int* maxRanks) {
  const int n = static_cast<int>(std::min(ranks.size(), groupOf.size()));
  int groups = 0;
  for (int r = 0; r < n; ++r) groups = std::max(groups, groupOf[r] + 1);
  *maxRanks = 0;
  double worst = 0;
  for (int g = 0; g < groups; ++g) {
    uint64_t u[16] = {};
    int count = 0, widest = 0, quota = 0;
    bool unknown = false;
    for (int r = 0; r < n; ++r) {
      if (groupOf[r] != g) continue;
      ++count;
      const CpuRecord& c = ranks[static_cast<size_t>(r)];
      if (c.count == 0) unknown = true;
      for (int w = 0; w < 16; ++w) u[w] |= c.mask[w];
      widest = std::max(widest, static_cast<int>(c.count));
      if (c.quota > 0)
        quota = quota == 0 ? static_cast<int>(c.quota) : std::min(quota, static_cast<int>(c.quota));
    }
    if (count == 0) continue;
    *maxRanks = std::max(*maxRanks, count);
    if (unknown) continue;
    int cpus = 0;
    for (uint64_t w : u) cpus += std::popcount(w);
    cpus = std::max(cpus, widest);
    if (quota > 0) cpus = std::min(cpus, quota);
    if (cpus <= 0) continue;
    worst = std::max(worst, static_cast<double>(count) / cpus);
  }
  return worst;
}

// Each rank's machine as an index (CpuRecord::machine; an unknown one, 0,
// is a machine of its own), and the masks without quotas: a CPU quota is
// its container's own (one per host here), not the machine's.
std::vector<int> machinesOf(std::span<const CpuRecord> ranks, std::vector<CpuRecord>* masks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<int> machineOf(static_cast<size_t>(n));
  std::unordered_map<uint32_t, int> index;  // machine id -> its index
  int next = 0;
  for (int r = 0; r < n; ++r) {
    int m = next;
    if (ranks[r].machine != 0) m = index.emplace(ranks[r].machine, m).first->second;
    if (m == next) ++next;
    machineOf[r] = m;
  }
  masks->assign(ranks.begin(), ranks.end());
  for (CpuRecord& r : *masks) r.quota = 0;
  return machineOf;
}

// The model pairs one CPU count with the most ranks on any host (or
// machine): the worst one's ranks per CPU, scaled to that many ranks.
int cpusFor(int mostRanks, double ranksPerCpu) {
  if (ranksPerCpu <= 0 || mostRanks == 0) return 0;
  return std::max(1, static_cast<int>(std::floor(mostRanks / ranksPerCpu + 1e-9)));
}

}  // namespace

int worstHostCpus(std::span<const CpuRecord> ranks, std::span<const int> hostOf) {
  int maxRanks = 0;
  const double perCpu = worstRanksPerCpu(ranks, hostOf, &maxRanks);
  return cpusFor(maxRanks, perCpu);
}

int modelHostCpus(std::span<const CpuRecord> ranks, std::span<const int> hostOf) {
  int maxRanks = 0;
  const double perHost = worstRanksPerCpu(ranks, hostOf, &maxRanks);
  if (perHost <= 0) return 0;
  std::vector<CpuRecord> masks;
  const std::vector<int> machineOf = machinesOf(ranks, &masks);
  int mostOnMachine = 0;
  const double perMachine = worstRanksPerCpu(masks, machineOf, &mostOnMachine);
  // The host's own CPUs, or its share of a machine more crowded than it.
  return cpusFor(maxRanks, std::max(perHost, perMachine));
}

bool machineOversubscribed(std::span<const CpuRecord> ranks) {
  std::vector<CpuRecord> masks;
  const std::vector<int> machineOf = machinesOf(ranks, &masks);
  int most = 0;
  const double perCpu = worstRanksPerCpu(masks, machineOf, &most);
  if (most < 2) return false;  // one rank per machine (the usual cluster)
  // The worst machine's CPUs scaled to `most` ranks: fewer than that many
  // CPUs means more ranks than CPUs there.
  const int cpus = cpusFor(most, perCpu);
  return cpus > 0 && cpus < most;
}

int spreadCpuFor(std::span<const CpuRecord> ranks, int me) {
  const CpuRecord& mine = ranks[static_cast<size_t>(me)];
  if (mine.machine == 0 || mine.count < 2) return -1;
  auto sameMask = [&](const CpuRecord& r) {
    return r.machine == mine.machine && std::equal(r.mask, r.mask + 16, mine.mask);
  };
  int index = 0, sharers = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!sameMask(ranks[r])) continue;
    if (static_cast<int>(r) < me) ++index;
    ++sharers;
  }
  if (sharers < 2) return -1;
  int cpus = 0;
  for (uint64_t w : mine.mask) cpus += std::popcount(w);
  if (cpus < 2) return -1;  // the mask is cut at 1024 CPUs: none of it may be listed
  int want = index % cpus;
  for (int c = 0; c < 1024; ++c) {
    if (((mine.mask[c / 64] >> (c % 64)) & 1) && want-- == 0) return c;
  }
  return -1;
}

namespace {

uint32_t bootIdHash() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(f >> id) || id.empty()) return 0;
  uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : id) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h == 0 ? 1 : h;
}

}  // namespace

Status agreeCpuLayout(CollContext& ctx, std::span<const int> hostOf, CpuLayout* out) {
  const int n = ctx.nranks();
  CpuRecord mine;
  const int usable = usableCpus(mine.mask);
  mine.count = static_cast<uint32_t>(std::max(usable, 0));
  mine.quota = static_cast<uint32_t>(cgroupQuotaCpus());
  readCpuPlacement(&mine);
  mine.machine = bootIdHash();
  std::vector<CpuRecord> all(static_cast<size_t>(n));
  if (n > 1) {
    // Before the tuner exists: a fixed algorithm.
    WEFT_RETURN_IF_ERROR(
        algo::allGatherBytes(ctx, &mine, all.data(), sizeof(CpuRecord), ringAllGather));
  } else {
    all[0] = mine;
  }
  int32_t answer[3] = {0, 0, 0};  // hostOf's hosts; every rank a host; machines
  if (ctx.rank() == 0) {
    std::vector<int> own(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) own[r] = r;
    answer[0] = modelHostCpus(all, hostOf);
    answer[1] = modelHostCpus(all, own);
    answer[2] = machineOversubscribed(all) ? 1 : 0;
    const int64_t forced = envInt("TUNER_HOST_CPUS", -1);
    if (forced >= 0) {
      // The CPUs are stated: the machine-wide check defers to them too.
      answer[0] = answer[1] = static_cast<int32_t>(std::min<int64_t>(forced, 1 << 20));
      answer[2] = 0;
    }
  }
  if (n > 1) WEFT_RETURN_IF_ERROR(algo::broadcastBytes(ctx, answer, sizeof(answer)));
  out->hostCpus = std::max(answer[0], 0);
  out->ownHostCpus = std::max(answer[1], 0);
  out->machineOversubscribed = answer[2] != 0;
  out->ringOrder = ringOrderFor(all, hostOf);
  out->spreadCpu = spreadCpuFor(all, ctx.rank());
  out->cacheShareBytes = 0;
  if (mine.cacheKiB > 0) {
    const int me = ctx.rank();
    int sharers = 0;
    for (int r = 0; r < n; ++r) {
      sharers +=
          hostOf[r] == hostOf[me] && all[r].package == mine.package && all[r].cache == mine.cache;
    }
    out->cacheShareBytes =
        (size_t{mine.cacheKiB} << 10) / static_cast<size_t>(std::max(sharers, 1));
  }
  return Status::ok();
}

}  // namespace weft
