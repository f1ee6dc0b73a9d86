#include "transport/cuda_ipc/ipc_memory.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>

namespace weft::cudaipc {
namespace {

int cudaError(cudaError_t e, const char* what, std::string* error) {
  if (e != cudaSuccess && error != nullptr)
    *error = std::string(what) + ": " + cudaGetErrorString(e);
  return static_cast<int>(e);
}

// cuMemGetAddressRange from the driver the runtime has loaded: linking
// libcuda itself would make every binary need a GPU driver to start.
using GetAddressRangeFn = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);

GetAddressRangeFn getAddressRange() {
  static GetAddressRangeFn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return lib == nullptr
               ? nullptr
               : reinterpret_cast<GetAddressRangeFn>(dlsym(lib, "cuMemGetAddressRange_v2"));
  }();
  return fn;
}

}  // namespace

int exportBuffer(const void* ptr, size_t size, IpcHandle* out, std::string* error) {
  static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(out->handle), "cudaIpcMemHandle_t size");
  *out = IpcHandle{};
  cudaPointerAttributes attr{};
  if (int e = cudaError(cudaPointerGetAttributes(&attr, ptr), "cudaPointerGetAttributes", error))
    return e;
  if (attr.type != cudaMemoryTypeDevice) {
    if (error) *error = "exportBuffer: the pointer is not device memory (cudaMalloc)";
    return cudaErrorInvalidValue;
  }
  // The handle names the whole allocation; remember where the pointer is in it.
  unsigned long long base = 0;
  size_t range = 0;
  const GetAddressRangeFn range_of = getAddressRange();
  if (range_of == nullptr ||
      range_of(&base, &range, reinterpret_cast<unsigned long long>(ptr)) != 0) {
    if (error) *error = "cuMemGetAddressRange (libcuda.so.1) failed";
    return cudaErrorInvalidValue;
  }
  cudaIpcMemHandle_t h;
  if (int e = cudaError(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)),
                        "cudaIpcGetMemHandle", error))
    return e;
  std::memcpy(out->handle, &h, sizeof h);
  out->offset = reinterpret_cast<unsigned long long>(ptr) - base;
  out->size = size;
  out->device = attr.device;
  out->pid = static_cast<int32_t>(getpid());
  return 0;
}

bool canAccessPeer(int from, int to) {
  if (from == to) return true;
  int ok = 0;
  return cudaDeviceCanAccessPeer(&ok, from, to) == cudaSuccess && ok != 0;
}

PeerMemory::~PeerMemory() {
  for (auto& [key, base] : opened_) (void)cudaIpcCloseMemHandle(base);
}

int PeerMemory::open(const IpcHandle& h, void** ptr, std::string* error) {
  const auto key =
      std::make_pair(h.pid, std::string(reinterpret_cast<const char*>(h.handle), sizeof h.handle));
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    cudaIpcMemHandle_t mh;
    std::memcpy(&mh, h.handle, sizeof mh);
    void* base = nullptr;
    if (int e = cudaError(cudaIpcOpenMemHandle(&base, mh, cudaIpcMemLazyEnablePeerAccess),
                          "cudaIpcOpenMemHandle", error))
      return e;
    it = opened_.emplace(key, base).first;
  }
  *ptr = static_cast<char*>(it->second) + h.offset;
  return 0;
}

}  // namespace weft::cudaipc
