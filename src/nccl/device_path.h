// Collectives on GPU memory. Built with WEFT_CUDA (device_path_cuda.cc); the
// host-only build (device_path_none.cc) answers ncclInvalidUsage saying how
// to get a CUDA build.
//
// Mechanism (device_path_cuda.cc): stream-ordered staging. On the caller's
// stream: copy device inputs to pinned host buffers (cudaMemcpyAsync), then a
// host function (cudaLaunchHostFunc) runs the collective through weft's host
// engine, then copy results back. Everything is ordered on the caller's
// stream and capturable in a CUDA graph (host nodes), and the host engine
// (algorithms, transports, failure handling) is reused unchanged. The cost is
// two PCIe/C2C copies and a CPU reduction; the kernels in src/kernels/*.cu and
// the cuda_ipc transport are the way past that.
#pragma once

#include "nccl/coll_desc.h"
#include "nccl/nccl_types.h"
#include "weft/weft.h"

namespace weft::nccl {

bool devicePathBuilt();
// Runs (or, inside a group, queues) one call on device memory.
ncclResult_t deviceIssue(const CollDesc& d, ncclComm_t comm, weftComm_t inner, cudaStream_t stream);
// At the outermost ncclGroupEnd: issues the queued device calls of this thread.
ncclResult_t deviceGroupEnd();
// Memory for ncclMemAlloc when the build has CUDA and a device is there.
ncclResult_t deviceAlloc(void** ptr, size_t size);
ncclResult_t deviceFree(void* ptr);
// The first failure of a device call of `comm` (they fail on CUDA's callback
// thread, after the call returned); weftSuccess if none.
int deviceAsyncError(const ncclComm* comm);

}  // namespace weft::nccl
