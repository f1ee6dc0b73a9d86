#include "core/engine.h"

#include <immintrin.h>

namespace weft {

Engine::~Engine() {
  stop();
}

void Engine::post(const std::shared_ptr<WorkState>& work) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (!thread_.joinable() && !stopping_) thread_ = std::thread(&Engine::threadMain, this);
    queue_.push_back(work);
    last_ = work;
    if (!threadSleeping_) return;  // it will find the work when it next looks
  }
  queueCv_.notify_one();
}

void Engine::driveLocked(const WorkState* until) {
  for (;;) {
    if (until != nullptr && until->done.load(std::memory_order_acquire)) return;
    std::shared_ptr<WorkState> item;
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item->complete(runner_(item->task));
  }
}

Status Engine::wait(WorkState& work,
                    std::optional<std::chrono::steady_clock::time_point> deadline) {
  uint32_t spins = 0;
  while (!work.done.load(std::memory_order_acquire)) {
    // A collective cannot be interrupted, so a caller with a deadline never
    // drives: it leaves the work to the engine thread and keeps its deadline.
    if (!deadline && driver_.try_lock()) {
      driveLocked(&work);
      driver_.unlock();
      continue;
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline)
      return Status(weftInProgress, "the operation has not finished yet");
    // Someone else is running our work. Spin only briefly, then sleep until
    // it completes: on a machine with as many ranks as cores, a spinning or
    // yielding waiter steals the core that the engine threads need.
    if (++spins < 256) {
      _mm_pause();
      continue;
    }
    std::unique_lock<std::mutex> lock(work.mu);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    if (deadline && *deadline < until) until = *deadline;
    work.cv.wait_until(lock, until, [&] { return work.done.load(std::memory_order_acquire); });
  }
  return work.result;
}

Status Engine::drain() {
  std::shared_ptr<WorkState> last;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    last = last_;
  }
  if (last) (void)wait(*last, std::nullopt);
  return Status::ok();
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::threadMain() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      threadSleeping_ = true;
      queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      threadSleeping_ = false;
      if (queue_.empty()) return;
    }
    std::lock_guard<std::mutex> driver(driver_);
    driveLocked(nullptr);
  }
}

}  // namespace weft
