// The device path of a build without CUDA: GPU buffers are refused with a
// message that says how to get a build that takes them.
#include "nccl/device_path.h"
#include "nccl/shim.h"

namespace weft::nccl {

bool devicePathBuilt() {
  return false;
}

ncclResult_t deviceIssue(const CollDesc&, ncclComm_t, weftComm_t, cudaStream_t) {
  return fail(ncclInvalidUsage,
              "a buffer is GPU memory, but this libnccl.so.2 (weft) was built without CUDA; "
              "rebuild weft with -DWEFT_CUDA=ON (needs the CUDA toolkit) or pass host buffers");
}

ncclResult_t deviceGroupEnd() {
  return ncclSuccess;
}

ncclResult_t deviceAlloc(void**, size_t) {
  return ncclInvalidUsage;  // the caller falls back to host memory
}

ncclResult_t deviceFree(void*) {
  return fail(ncclInvalidArgument, "ncclMemFree: the pointer was not allocated by ncclMemAlloc");
}

int deviceAsyncError(const ncclComm*) {
  return weftSuccess;
}

}  // namespace weft::nccl
