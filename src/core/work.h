// A unit of work for the progress engine: one collective, or one group's
// worth of collectives and point-to-point operations for one communicator.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/algorithms.h"
#include "base/status.h"

struct weftComm;

namespace weft {

struct CollCall {
  CollArgs args;
  // The op as the caller passed it, kept as an int: a C caller may pass any
  // value, and loading an out-of-range enum is undefined behaviour.
  int rawOp = weftSum;     // resolved when the call runs (PreMulSum scalars)
  uint64_t flightSeq = 0;  // its flight-recorder entry, once posted (0: not yet)
  // All-to-all-v: the caller's counts and displacements, copied (sendcounts,
  // sdispls, recvcounts, rdispls; nranks each) because queued work outlives
  // the call; args points into it.
  std::shared_ptr<const std::vector<size_t>> vcounts;
};

struct Task {
  // A collective built from other collectives (a compressed allreduce): when
  // set, the task is this call alone, run with the task's deadline.
  std::function<Status(const std::atomic<int64_t>* deadline)> composite;
  std::vector<CollCall> colls;  // run in order
  std::vector<P2POp> p2p;       // then progressed together
  uint64_t p2pFlightSeq = 0;    // the p2p group's flight-recorder entry (0: not yet)
  // The work handle's own deadline (WorkState::deadlineNs), if it has one.
  const std::atomic<int64_t>* deadline = nullptr;
};

struct WorkState {
  weftComm* comm = nullptr;
  Task task;
  std::atomic<bool> done{false};
  // Per-handle timeout (Work::setTimeout): steady-clock nanoseconds after
  // which the running collective fails with weftTimeout; 0 = none.
  std::atomic<int64_t> deadlineNs{0};
  Status result;  // valid once done
  std::mutex mu;
  std::condition_variable cv;

  void complete(Status st) {
    {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(st);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
};

}  // namespace weft
