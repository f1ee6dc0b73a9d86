// How GPU buffers of ranks on one host reach each other: straight through
// CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle; NVLink or PCIe peer
// access, or the same GPU shared by several ranks), or, where that is not
// possible, staged through host memory and the shm transport.
//
// Pure logic, no CUDA: the caller says which GPUs can reach which (from
// cudaDeviceCanAccessPeer), so the choice is testable without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace weft::cudaipc {

enum class Path { kIpc, kHostStaging };

struct GpuRank {
  uint64_t hostHash = 0;  // ranks with equal hashes share a host (bootstrap's PeerInfo)
  int device = -1;        // CUDA ordinal on that host; -1: the rank has no GPU buffers
};

// kIpc when every rank is on one host and has a GPU, and every pair of
// distinct GPUs can access each other (the same GPU always can: CUDA IPC
// works between processes on one device). `enabled` false (WEFT_CUDA_IPC=0)
// forces staging.
inline Path choosePath(const std::vector<GpuRank>& ranks,
                       const std::function<bool(int from, int to)>& canAccessPeer, bool enabled) {
  if (!enabled || ranks.empty()) return Path::kHostStaging;
  for (const GpuRank& r : ranks)
    if (r.device < 0 || r.hostHash != ranks[0].hostHash) return Path::kHostStaging;
  for (const GpuRank& a : ranks)
    for (const GpuRank& b : ranks)
      if (a.device != b.device && !canAccessPeer(a.device, b.device)) return Path::kHostStaging;
  return Path::kIpc;
}

}  // namespace weft::cudaipc
