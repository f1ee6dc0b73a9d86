#include "compression/workers.h"

#include <unistd.h>

#include <algorithm>

#include "base/env.h"
#include "base/log.h"

namespace weft::compression {

WorkerPool::WorkerPool(int threads) : pid_(getpid()) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

WorkerPool& WorkerPool::shared() {
  // Never destroyed: a rank that exits while another thread still codes
  // must not join workers under it.
  static WorkerPool* pool = [] {
    int64_t n = envInt("COMPRESS_THREADS", 1);
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    if (n < 1 || n > 4 * cores) {
      WEFT_WARN(kLogEnv, "WEFT_COMPRESS_THREADS=%lld is outside [1, %lld]; using 1",
                static_cast<long long>(n), static_cast<long long>(4 * cores));
      n = 1;
    }
    return new WorkerPool(static_cast<int>(n));
  }();
  return *pool;
}

void WorkerPool::run(size_t parts, const std::function<void(size_t)>& fn) {
  std::unique_lock<std::mutex> owner(owner_, std::defer_lock);
  if (parts <= 1 || workers_.empty() || getpid() != pid_ || !owner.try_lock()) {
    for (size_t k = 0; k < parts; ++k) fn(k);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  parts_ = parts;
  next_ = finished_ = 0;
  ++generation_;
  wake_.notify_all();
  work(lock);
  done_.wait(lock, [&] { return finished_ == parts_; });
  job_ = nullptr;
}

void WorkerPool::work(std::unique_lock<std::mutex>& lock) {
  while (next_ < parts_) {
    const size_t k = next_++;
    const std::function<void(size_t)>* job = job_;
    lock.unlock();
    (*job)(k);
    lock.lock();
    if (++finished_ == parts_) done_.notify_all();
  }
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen = 0;
  for (;;) {
    wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
    if (quit_) return;
    seen = generation_;
    work(lock);
  }
}

}  // namespace weft::compression
