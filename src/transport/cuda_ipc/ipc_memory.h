// CUDA IPC of device buffers between processes: a rank exports a handle to
// (any pointer into) one of its allocations; a peer opens it once and reads
// or writes it with kernels or copies. Opened mappings are cached per
// allocation and closed when the PeerMemory goes away.
//
// The handle is plain bytes: pass it over any side channel (weft's
// bootstrap allgather, a pipe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace weft::cudaipc {

struct IpcHandle {
  unsigned char handle[64];  // cudaIpcMemHandle_t
  uint64_t offset = 0;       // of the exported pointer inside its allocation
  uint64_t size = 0;         // bytes usable from the pointer on
  int32_t device = -1;
  int32_t pid = 0;  // the exporter (handles are per process)
};

// Fills `out` for [ptr, ptr + size) of device memory. Returns a CUDA error
// code (0 on success); `error` says what failed.
int exportBuffer(const void* ptr, size_t size, IpcHandle* out, std::string* error);

// Is `from` able to access `to`'s memory (true for the same device)?
bool canAccessPeer(int from, int to);

class PeerMemory {
 public:
  PeerMemory() = default;
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  // The local address of a peer's exported pointer (opened on first use).
  int open(const IpcHandle& h, void** ptr, std::string* error);
  size_t openCount() const { return opened_.size(); }

 private:
  // (exporter pid, handle bytes) -> base of the opened mapping
  std::map<std::pair<int32_t, std::string>, void*> opened_;
};

}  // namespace weft::cudaipc
