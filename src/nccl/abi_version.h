// The NCCL version whose ABI libnccl.so.2 implements: what ncclGetVersion
// reports, coded as NCCL_VERSION(2, 30, 0) codes it. The exported functions
// are those of the toolkit's nccl.h (2.28.9) and those NCCL 2.29/2.30 added
// (ncclCommGrow, ncclCommGetUniqueId, ncclCommSuspend/Resume, ncclCommMemStats,
// ncclWinGetUserPtr, ncclPutSignal/Signal/WaitSignal); result codes include
// ncclTimeout (8).
#pragma once

#define WEFT_NCCL_ABI_MAJOR 2
#define WEFT_NCCL_ABI_MINOR 30
#define WEFT_NCCL_ABI_PATCH 0
#define WEFT_NCCL_ABI_VERSION_CODE \
  (WEFT_NCCL_ABI_MAJOR * 10000 + WEFT_NCCL_ABI_MINOR * 100 + WEFT_NCCL_ABI_PATCH)
