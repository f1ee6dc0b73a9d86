#include "nccl/cuda_probe.h"

#include <dlfcn.h>

#include <atomic>

namespace weft::nccl {
namespace {

// The three driver entry points used, with the driver API's types spelled as
// their fixed-width equivalents (CUresult and the enums are ints, CUdeviceptr
// is 64-bit) so that no CUDA header is needed.
using PointerGetAttributeFn = int (*)(void* data, int attribute, unsigned long long ptr);
using CtxGetDeviceFn = int (*)(int* device);

constexpr int kAttrMemoryType = 2;         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrIsManaged = 8;          // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE

std::atomic<PointerGetAttributeFn> pointerGetAttribute{nullptr};
std::atomic<CtxGetDeviceFn> ctxGetDevice{nullptr};

}  // namespace

void probeCuda() {
  if (pointerGetAttribute.load(std::memory_order_acquire) != nullptr) return;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return;
  // The handle stays open: the driver is never unloaded while in use.
  ctxGetDevice.store(reinterpret_cast<CtxGetDeviceFn>(dlsym(lib, "cuCtxGetDevice")));
  pointerGetAttribute.store(
      reinterpret_cast<PointerGetAttributeFn>(dlsym(lib, "cuPointerGetAttribute")),
      std::memory_order_release);
}

MemKind classify(const void* p) {
  const PointerGetAttributeFn get = pointerGetAttribute.load(std::memory_order_acquire);
  if (get == nullptr || p == nullptr) return MemKind::Host;
  const auto addr = reinterpret_cast<unsigned long long>(p);
  unsigned type = 0;
  // Memory the driver does not know (plain malloc) fails the query: host.
  if (get(&type, kAttrMemoryType, addr) != 0 || type != kMemoryTypeDevice) return MemKind::Host;
  unsigned managed = 0;
  if (get(&managed, kAttrIsManaged, addr) == 0 && managed != 0) return MemKind::Host;
  return MemKind::Device;
}

int currentCudaDevice() {
  const CtxGetDeviceFn get = ctxGetDevice.load(std::memory_order_acquire);
  int dev = -1;
  if (get == nullptr || get(&dev) != 0) return -1;
  return dev;
}

}  // namespace weft::nccl
