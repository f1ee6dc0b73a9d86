// A unit of work for the progress engine: one collective, or one group's
// worth of collectives and point-to-point operations for one communicator.
#pragma once

#include <atomic>
#include <condition_variable>
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
  int rawOp = weftSum;  // resolved when the call runs (PreMulSum scalars)
  // All-to-all-v: the caller's counts and displacements, copied (sendcounts,
  // sdispls, recvcounts, rdispls; nranks each) because queued work outlives
  // the call; args points into it.
  std::shared_ptr<const std::vector<size_t>> vcounts;
};

struct Task {
  std::vector<CollCall> colls;  // run in order
  std::vector<P2POp> p2p;       // then progressed together
};

struct WorkState {
  weftComm* comm = nullptr;
  Task task;
  std::atomic<bool> done{false};
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
