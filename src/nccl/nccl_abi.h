// The NCCL ABI that libnccl.so.2 implements: NCCL's type names, enum values
// and struct layouts, written from NCCL's public documentation so that the
// shim builds without the CUDA toolkit. It is a superset of the toolkit's
// nccl.h (2.28.9): it also has what NCCL 2.29/2.30 added (ncclTimeout, the
// longer ncclConfig_t, the memory-statistics enum, signal descriptors).
//
// tests/nccl/abi_static_check.cc includes this header inside a namespace next
// to the toolkit's nccl.h and static_asserts that every value and offset
// agrees; WEFT_NCCL_ABI_NS_BEGIN/END exist for that.
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_version.h"

#ifndef WEFT_NCCL_ABI_NS_BEGIN
#define WEFT_NCCL_ABI_NS_BEGIN
#define WEFT_NCCL_ABI_NS_END
#endif

WEFT_NCCL_ABI_NS_BEGIN

// As CUDA declares it: the shim never dereferences a stream itself.
typedef struct CUstream_st* cudaStream_t;

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;

#define WEFT_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[WEFT_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* NCCL 2.29 */
  ncclNumResults = 9
} ncclResult_t;

#define WEFT_NCCL_CONFIG_UNDEF_INT INT_MIN
#define WEFT_NCCL_CONFIG_MAGIC 0xcafebeefu
#define WEFT_NCCL_SPLIT_NOCOLOR (-1)

// ncclConfig_t with the fields known here (through NCCL 2.29). Callers built
// against another nccl.h pass a shorter or longer struct: `size` says how many
// bytes are there; fields past it are taken as unset, fields past ours are
// ignored. The shim honours only fields of the 2.28 prefix (blocking,
// commName, splitShare). Every field is an int or a pointer; the offsets are
// asserted against the toolkit's header in tests/nccl/abi_static_check.cc.
typedef struct ncclConfig_v22900 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched; /* last field of the 2.28 struct (80 bytes) */
  int graphUsageMode;     /* 2.29 */
  int numRmaCtx;          /* 2.29 (88 bytes) */
} ncclConfig_t;

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* NCCL 2.29: communicator memory statistics. */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* NCCL 2.29: one-sided signals. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

WEFT_NCCL_ABI_NS_END
