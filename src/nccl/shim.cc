// Handle state, init threads and last-error bookkeeping of libnccl.so.2.
#include "nccl/shim.h"

#include <cstdarg>
#include <cstdio>
#include <thread>
#include <vector>

#include "nccl/coll_desc.h"
#include "nccl/shim_group.h"

namespace weft::nccl {
namespace {

// The shim's own last error, and whether it is newer than weft's (weft keeps
// its own per-thread message, set by the weft call that failed).
thread_local std::string shimMessage;
thread_local bool shimMessageIsLast = false;

thread_local int depth = 0;
// Communicators whose init started inside the current group.
thread_local std::vector<ncclComm*> groupInits;

void finishInit(ncclComm* comm, weftResult_t r, weftComm_t inner, const std::string& message) {
  std::lock_guard<std::mutex> lock(comm->mu);
  if (comm->abortRequested) {
    // Aborted while initialising: the communicator is not handed out.
    if (inner != nullptr) (void)weftCommAbort(inner);
    comm->initError = "the communicator was aborted during initialisation";
    comm->state.store(ncclInvalidUsage, std::memory_order_release);
  } else if (r != weftSuccess) {
    comm->initError = message;
    comm->state.store(static_cast<int>(r), std::memory_order_release);
  } else {
    comm->inner = inner;
    comm->state.store(ncclSuccess, std::memory_order_release);
  }
  comm->cv.notify_all();
}

void runInit(ncclComm* comm, const InitFn& init) {
  weftComm_t inner = nullptr;
  const weftResult_t r = init(&inner);
  finishInit(comm, r, inner, r == weftSuccess ? std::string() : weftGetLastError(nullptr));
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  shimMessage = buf;
  shimMessageIsLast = true;
  return code;
}

ncclResult_t fromWeft(weftResult_t r) {
  if (r != weftSuccess && r != weftInProgress) shimMessageIsLast = false;
  return static_cast<ncclResult_t>(r);
}

const char* lastError(ncclComm_t comm) {
  if (comm != nullptr && comm->magic.load() == ncclComm::kLive) {
    const int st = comm->state.load(std::memory_order_acquire);
    if (st != ncclSuccess && st != ncclInProgress) {
      std::lock_guard<std::mutex> lock(comm->mu);
      shimMessage = comm->initError;
      return shimMessage.c_str();
    }
  }
  if (shimMessageIsLast) return shimMessage.c_str();
  return weftGetLastError(comm != nullptr && comm->magic.load() == ncclComm::kLive ? comm->inner
                                                                                   : nullptr);
}

ncclResult_t ready(ncclComm_t comm, const char* api, weftComm_t* out) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
  if (comm->magic.load(std::memory_order_relaxed) != ncclComm::kLive)
    return fail(ncclInvalidUsage, "%s: the communicator was destroyed or aborted", api);
  const int st = comm->state.load(std::memory_order_acquire);
  if (st == ncclSuccess) {
    *out = comm->inner;
    return ncclSuccess;
  }
  if (st == ncclInProgress)
    return fail(ncclInvalidUsage,
                "%s: the communicator is still initialising; poll ncclCommGetAsyncError until "
                "it no longer returns ncclInProgress",
                api);
  return fail(ncclInvalidUsage, "%s: the communicator failed to initialise: %s", api,
              lastError(comm));
}

ncclResult_t startInit(ncclComm* comm, InitFn init) {
  if (comm->blocking && depth == 0) {
    runInit(comm, init);
    return waitInit(comm);
  }
  // On a thread: the caller goes on (non-blocking), or starts the other
  // ranks' inits of the same group before ncclGroupEnd waits for them all.
  std::thread([comm, init = std::move(init)] { runInit(comm, init); }).detach();
  if (depth > 0) {
    groupInits.push_back(comm);
    return ncclSuccess;
  }
  return ncclInProgress;
}

ncclResult_t waitInit(ncclComm* comm) {
  std::unique_lock<std::mutex> lock(comm->mu);
  comm->cv.wait(lock, [&] { return comm->state.load() != ncclInProgress; });
  const int st = comm->state.load();
  if (st != ncclSuccess) {
    shimMessage = comm->initError;
    shimMessageIsLast = true;
  }
  return static_cast<ncclResult_t>(st);
}

int groupDepth() {
  return depth;
}

void groupEnter() {
  ++depth;
}

ncclResult_t groupLeave() {
  if (depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  std::vector<ncclComm*> inits;
  inits.swap(groupInits);
  ncclResult_t result = ncclSuccess;
  for (ncclComm* c : inits) {
    if (!c->blocking) {
      if (c->state.load() == ncclInProgress && result == ncclSuccess) result = ncclInProgress;
      continue;
    }
    const ncclResult_t r = waitInit(c);
    if (r != ncclSuccess && (result == ncclSuccess || result == ncclInProgress)) result = r;
  }
  return result;
}

CollBytes collBytes(const CollDesc& d, size_t typeSize, int rank, int nranks) {
  const size_t one = d.count * typeSize;
  const size_t all = one * static_cast<size_t>(nranks);
  switch (d.op) {
    case CollOp::AllReduce:
      return {one, one};
    case CollOp::Broadcast:
      return {rank == d.root ? one : 0, one};
    case CollOp::Reduce:
      return {one, rank == d.root ? one : 0};
    case CollOp::AllGather:
      return {one, all};
    case CollOp::ReduceScatter:
      return {all, one};
    case CollOp::AlltoAll:
      return {all, all};
    case CollOp::Gather:
      return {one, rank == d.root ? all : 0};
    case CollOp::Scatter:
      return {rank == d.root ? all : 0, one};
    case CollOp::Send:
      return {one, 0};
    case CollOp::Recv:
      return {0, one};
  }
  return {};
}

}  // namespace weft::nccl
