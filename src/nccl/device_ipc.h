// The CUDA IPC all-reduce of the device path (device_ipc.cc), opt-in with
// WEFT_CUDA_IPC=1.
#pragma once

#include "nccl/coll_desc.h"
#include "nccl/nccl_types.h"
#include "weft/weft.h"

namespace weft::nccl {

bool ipcEnabled();
// Collective: called at a communicator's first device call, on every rank
// (nothing of the communicator is in flight then). Allocates and exchanges
// the IPC buffers and decides whether the ranks can use them.
void ipcPrepare(ncclComm_t comm, weftComm_t inner);
// Enqueues d on the stream through CUDA IPC and returns true, or returns
// false (not an all-reduce, too large, or the ranks cannot use IPC) and the
// caller stages. *result is the enqueue's result when true.
bool ipcAllReduce(const CollDesc& d, ncclComm_t comm, weftComm_t inner, cudaStream_t stream,
                  ncclResult_t* result);

}  // namespace weft::nccl
