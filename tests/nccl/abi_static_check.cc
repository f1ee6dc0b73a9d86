// Compile-time check of the shim's NCCL ABI (src/nccl/nccl_abi.h) against the
// CUDA toolkit's nccl.h: enum values, ncclUniqueId, and the offset of every
// ncclConfig_t field the toolkit has. Building this file is the test; its
// main() only reports.
#include <nccl.h>

#include <cstddef>
#include <cstdio>

#define WEFT_NCCL_ABI_NS_BEGIN namespace shim {
#define WEFT_NCCL_ABI_NS_END }
#include "nccl/nccl_abi.h"

#define SAME_VALUE(name) \
  static_assert(static_cast<long>(name) == static_cast<long>(shim::name), #name)
#define SAME_OFFSET(field)                                                            \
  static_assert(offsetof(ncclConfig_t, field) == offsetof(shim::ncclConfig_t, field), \
                "ncclConfig_t::" #field)

// Result codes (the toolkit's ncclNumResults is 8: ncclTimeout came in 2.29).
SAME_VALUE(ncclSuccess);
SAME_VALUE(ncclUnhandledCudaError);
SAME_VALUE(ncclSystemError);
SAME_VALUE(ncclInternalError);
SAME_VALUE(ncclInvalidArgument);
SAME_VALUE(ncclInvalidUsage);
SAME_VALUE(ncclRemoteError);
SAME_VALUE(ncclInProgress);
#if NCCL_VERSION_CODE >= 22900
SAME_VALUE(ncclTimeout);
SAME_VALUE(ncclNumResults);
#else
static_assert(static_cast<int>(shim::ncclTimeout) == static_cast<int>(ncclNumResults),
              "ncclTimeout takes the old ncclNumResults");
#endif

// Data types and ops.
SAME_VALUE(ncclInt8);
SAME_VALUE(ncclChar);
SAME_VALUE(ncclUint8);
SAME_VALUE(ncclInt32);
SAME_VALUE(ncclInt);
SAME_VALUE(ncclUint32);
SAME_VALUE(ncclInt64);
SAME_VALUE(ncclUint64);
SAME_VALUE(ncclFloat16);
SAME_VALUE(ncclHalf);
SAME_VALUE(ncclFloat32);
SAME_VALUE(ncclFloat);
SAME_VALUE(ncclFloat64);
SAME_VALUE(ncclDouble);
SAME_VALUE(ncclBfloat16);
SAME_VALUE(ncclFloat8e4m3);
SAME_VALUE(ncclFloat8e5m2);
SAME_VALUE(ncclNumTypes);
SAME_VALUE(ncclSum);
SAME_VALUE(ncclProd);
SAME_VALUE(ncclMax);
SAME_VALUE(ncclMin);
SAME_VALUE(ncclAvg);
SAME_VALUE(ncclNumOps);
SAME_VALUE(ncclMaxRedOp);
SAME_VALUE(ncclScalarDevice);
SAME_VALUE(ncclScalarHostImmediate);
static_assert(NCCL_CONFIG_UNDEF_INT == WEFT_NCCL_CONFIG_UNDEF_INT, "NCCL_CONFIG_UNDEF_INT");
static_assert(NCCL_SPLIT_NOCOLOR == WEFT_NCCL_SPLIT_NOCOLOR, "NCCL_SPLIT_NOCOLOR");
static_assert(NCCL_UNIQUE_ID_BYTES == WEFT_NCCL_UNIQUE_ID_BYTES, "NCCL_UNIQUE_ID_BYTES");

// Types.
static_assert(sizeof(ncclUniqueId) == 128 && sizeof(shim::ncclUniqueId) == 128, "ncclUniqueId");
static_assert(sizeof(ncclResult_t) == sizeof(shim::ncclResult_t), "ncclResult_t size");
static_assert(sizeof(ncclDataType_t) == sizeof(shim::ncclDataType_t), "ncclDataType_t size");
static_assert(sizeof(ncclRedOp_t) == sizeof(shim::ncclRedOp_t), "ncclRedOp_t size");
static_assert(sizeof(ncclSimInfo_t) == sizeof(shim::ncclSimInfo_t), "ncclSimInfo_t size");
static_assert(offsetof(ncclSimInfo_t, estimatedTime) ==
                  offsetof(shim::ncclSimInfo_t, estimatedTime),
              "ncclSimInfo_t::estimatedTime");
static_assert(sizeof(cudaStream_t) == sizeof(shim::cudaStream_t), "cudaStream_t");

// ncclConfig_t: the shim's struct starts with the toolkit's, field for field.
SAME_OFFSET(size);
SAME_OFFSET(magic);
SAME_OFFSET(version);
SAME_OFFSET(blocking);
SAME_OFFSET(cgaClusterSize);
SAME_OFFSET(minCTAs);
SAME_OFFSET(maxCTAs);
SAME_OFFSET(netName);
SAME_OFFSET(splitShare);
SAME_OFFSET(trafficClass);
SAME_OFFSET(commName);
SAME_OFFSET(collnetEnable);
SAME_OFFSET(CTAPolicy);
SAME_OFFSET(shrinkShare);
SAME_OFFSET(nvlsCTAs);
SAME_OFFSET(nChannelsPerNetPeer);
SAME_OFFSET(nvlinkCentricSched);
static_assert(sizeof(ncclConfig_t) <= sizeof(shim::ncclConfig_t),
              "the shim's config is the longer");
// The initializer's magic is what the shim checks.
static_assert(ncclConfig_t(NCCL_CONFIG_INITIALIZER).magic == WEFT_NCCL_CONFIG_MAGIC,
              "config magic");
// The toolkit's version is no newer than the ABI the shim reports.
static_assert(NCCL_VERSION_CODE <= WEFT_NCCL_ABI_VERSION_CODE, "toolkit newer than the shim's ABI");

int main() {
  std::printf("nccl.h %d.%d.%d matches the shim's ABI (%d): values, ncclUniqueId, ncclConfig_t\n",
              NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, WEFT_NCCL_ABI_VERSION_CODE);
  return 0;
}
