// Internals of libnccl.so.2: the communicator handle NCCL callers hold, the
// thread's last error, and how a collective call is described on its way to
// weft (host memory) or to the device path (GPU memory).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "nccl/nccl_types.h"
#include "weft/weft.h"

// What ncclComm_t points at. weft's own communicator exists only once
// initialisation has finished, which may happen on another thread (config
// blocking = 0, or an init inside ncclGroupStart/End); until then the handle
// answers ncclInProgress. Handles are never freed, so that a stale one gets an
// error instead of touching freed memory (as weft does with its own).
struct ncclComm {
  static constexpr uint64_t kLive = 0x6e63636c73686d21ull;  // "ncclshm!"
  static constexpr uint64_t kDead = 0x6e63636c64656164ull;

  std::atomic<uint64_t> magic{kLive};
  // ncclInProgress until init ends, then its result. Read without the lock on
  // the hot path; `inner` is published before it turns ncclSuccess.
  std::atomic<int> state{ncclInProgress};
  weftComm_t inner = nullptr;
  bool blocking = true;  // from config.blocking (or NCCL_COMM_BLOCKING)
  int cudaDev = -1;      // the CUDA device current at init; -1 without CUDA

  std::mutex mu;
  std::condition_variable cv;
  std::string initError;  // why init failed (set with state)
  bool abortRequested = false;
};

namespace weft::nccl {

// Last-error bookkeeping: the shim's own message, or weft's.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fromWeft(weftResult_t r);
const char* lastError(ncclComm_t comm);

// The ready weft communicator behind a handle, or an error (set as last error).
ncclResult_t ready(ncclComm_t comm, const char* api, weftComm_t* out);

// Starts initialisation of `comm`: inline when blocking and outside a group,
// else on a thread (a group's ncclGroupEnd waits for blocking ones).
// `init` builds the weft communicator.
using InitFn = std::function<weftResult_t(weftComm_t*)>;
ncclResult_t startInit(ncclComm* comm, InitFn init);
// Blocks until init of `comm` has ended; returns its result.
ncclResult_t waitInit(ncclComm* comm);

// Group depth of this thread as the shim counts it (mirrors weft's).
int groupDepth();

}  // namespace weft::nccl
