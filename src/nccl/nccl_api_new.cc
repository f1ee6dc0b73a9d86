// Functions that NCCL 2.29/2.30 added after the toolkit's nccl.h (2.28.9).
// weft honours what it can; the rest answer ncclInvalidUsage with a message
// (ncclGetLastError) saying so and what to do instead.
#include <cstdint>

#include "nccl/api_macro.h"
#include "nccl/nccl_abi.h"
#include "nccl/shim.h"

using namespace weft::nccl;

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  return fail(ncclInvalidUsage,
              "ncclCommGetUniqueId is not supported by weft (communicators cannot grow); "
              "create a new communicator with ncclGetUniqueId and ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
         int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return fail(ncclInvalidUsage,
              "ncclCommGrow is not supported by weft; create a new communicator over all ranks "
              "with ncclGetUniqueId and ncclCommInitRank");
}

// weft holds no GPU memory of its own in a communicator, so suspending has
// nothing to release; the calls are accepted and the statistics say zero.
NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  weftComm_t inner;
  return ready(comm, "ncclCommSuspend", &inner);
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  weftComm_t inner;
  return ready(comm, "ncclCommResume", &inner);
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  weftComm_t inner;
  if (value == nullptr) return fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  if (ncclResult_t r = ready(comm, "ncclCommMemStats", &inner); r != ncclSuccess) return r;
  const int raw = static_cast<int>(stat);
  if (raw < ncclStatGpuMemSuspend || raw > ncclStatGpuMemTotal)
    return fail(ncclInvalidArgument, "ncclCommMemStats: unknown statistic %d", raw);
  *value = 0;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
         unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return fail(ncclInvalidUsage,
              "ncclPutSignal (one-sided communication) is not supported by weft; use "
              "ncclSend/ncclRecv in a group");
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream) {
  return fail(ncclInvalidUsage,
              "ncclSignal (one-sided communication) is not supported by weft; use "
              "ncclSend/ncclRecv in a group");
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs,
         ncclComm_t comm, cudaStream_t stream) {
  return fail(ncclInvalidUsage,
              "ncclWaitSignal (one-sided communication) is not supported by weft; use "
              "ncclSend/ncclRecv in a group");
}
