// Ring order from where ranks run (ring_order.h).
#include "algorithms/ring_order.h"

#include <algorithm>
#include <bit>
#include <fstream>
#include <string>
#include <tuple>

namespace weft {

namespace {

int readSysfsInt(const std::string& path) {
  std::ifstream f(path);
  long v = -1;
  if (!(f >> v) || v < 0 || v > (1L << 30)) return -1;
  return static_cast<int>(v);
}

int lowestCpu(const CpuRecord& rec) {
  for (int w = 0; w < 16; ++w) {
    if (rec.mask[w] != 0) return 64 * w + std::countr_zero(rec.mask[w]);
  }
  return -1;
}

}  // namespace

void readCpuPlacement(CpuRecord* rec) {
  const int first = lowestCpu(*rec);
  if (first < 0) return;
  const std::string cpu = "/sys/devices/system/cpu/cpu" + std::to_string(first);
  rec->package = readSysfsInt(cpu + "/topology/physical_package_id");
  // index3 is the L3 on x86 and most arm64 servers; the last level where
  // there is no L3.
  for (const char* index : {"index3", "index2"}) {
    const std::string dir = cpu + "/cache/" + index;
    rec->cache = readSysfsInt(dir + "/id");
    if (rec->cache < 0) continue;
    std::ifstream f(dir + "/size");  // "32768K"
    long kib = 0;
    if (f >> kib && kib > 0 && kib < (1L << 30)) rec->cacheKiB = static_cast<uint32_t>(kib);
    break;
  }
}

std::vector<int> ringOrderFor(std::span<const CpuRecord> ranks, std::span<const int> hostOf) {
  const int n = static_cast<int>(std::min(ranks.size(), hostOf.size()));
  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[r] = r;
  auto key = [&](int r) {
    const CpuRecord& c = ranks[static_cast<size_t>(r)];
    return std::make_tuple(hostOf[r], c.package, c.cache, r);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

}  // namespace weft
