// The progress engine of one communicator.
//
// Work runs in the order it was posted, one item at a time, on whichever
// thread holds the driver lock: the engine's own thread (started on the
// first asynchronous post, blocked on a condition variable while there is
// nothing to do) or a caller waiting for its work, who drives the queue
// itself instead of paying a thread wake-up. Blocking calls with nothing
// queued ahead of them run straight on the caller's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/work.h"

namespace weft {

class Engine {
 public:
  using Runner = std::function<Status(Task&)>;
  explicit Engine(Runner runner) : runner_(std::move(runner)) {}
  ~Engine();

  // Queues work for the engine thread; returns at once.
  void post(const std::shared_ptr<WorkState>& work);
  // Runs `fn` on this thread after everything posted before it.
  template <class Fn>
  Status runInline(Fn&& fn) {
    std::lock_guard<std::mutex> driver(driver_);
    driveLocked(nullptr);
    return fn();
  }
  // Waits for work, driving the queue when no one else is. With a deadline,
  // leaves the running to the engine thread and returns weftInProgress if the
  // work has not finished by then.
  Status wait(WorkState& work, std::optional<std::chrono::steady_clock::time_point> deadline);
  // Waits for everything posted so far.
  Status drain();
  // Stops the engine thread after the queue is empty.
  void stop();

 private:
  // Runs queued items while `until` is not done (or, if null, the queue is
  // not empty). Caller holds driver_.
  void driveLocked(const WorkState* until);
  void threadMain();

  Runner runner_;
  std::mutex driver_;
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<std::shared_ptr<WorkState>> queue_;
  std::shared_ptr<WorkState> last_;  // the newest posted item, for drain()
  bool stopping_ = false;
  bool threadSleeping_ = false;  // the engine thread waits on queueCv_
  std::thread thread_;
};

}  // namespace weft
