// The shim's side of ncclGroupStart/End: its depth, and the inits started
// inside the group that the outermost ncclGroupEnd waits for.
#pragma once

#include "nccl/nccl_types.h"

namespace weft::nccl {

void groupEnter();
// At the outermost end: waits for the group's blocking inits; ncclInProgress
// if a non-blocking one is still running.
ncclResult_t groupLeave();

}  // namespace weft::nccl
