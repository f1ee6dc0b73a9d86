#include "compression/local_group.h"

#include <barrier>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::compression {
namespace {

struct Shared {
  explicit Shared(int n) : n(n), ptrs(n, nullptr), sync(n) {}
  int n;
  std::vector<const void*> ptrs;
  std::barrier<> sync;
};

// Each call: publish, barrier, read peers, barrier (so that no rank reuses
// or republishes a buffer another rank still reads).
class ThreadRunner final : public CollRunner {
 public:
  ThreadRunner(Shared& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return s_.n; }

  Status allToAll(const void* send, void* recv, size_t bytes) override {
    s_.ptrs[rank_] = send;
    s_.sync.arrive_and_wait();
    for (int p = 0; p < s_.n; ++p)
      std::memcpy(static_cast<char*>(recv) + p * bytes,
                  static_cast<const char*>(s_.ptrs[p]) + rank_ * bytes, bytes);
    s_.sync.arrive_and_wait();
    return Status::ok();
  }

  Status allGather(const void* send, void* recv, size_t bytes) override {
    s_.ptrs[rank_] = send;
    s_.sync.arrive_and_wait();
    for (int p = 0; p < s_.n; ++p)
      std::memcpy(static_cast<char*>(recv) + p * bytes, s_.ptrs[p], bytes);
    s_.sync.arrive_and_wait();
    return Status::ok();
  }

  Status allReduceSum(float* buf, size_t count) override {
    s_.ptrs[rank_] = buf;
    s_.sync.arrive_and_wait();
    tmp_.assign(count, 0.0f);
    for (int p = 0; p < s_.n; ++p) {
      const float* src = static_cast<const float*>(s_.ptrs[p]);
      for (size_t i = 0; i < count; ++i) tmp_[i] += src[i];
    }
    s_.sync.arrive_and_wait();
    std::memcpy(buf, tmp_.data(), count * sizeof(float));
    return Status::ok();
  }

 private:
  Shared& s_;
  int rank_;
  std::vector<float> tmp_;
};

}  // namespace

Status runLocalGroup(int n, const std::function<Status(CollRunner& runner)>& body) {
  Shared shared(n);
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadRunner runner(shared, r);
      results[r] = body(runner);
    });
  for (auto& t : threads) t.join();
  for (auto& st : results)
    if (!st.isOk()) return st;
  return Status::ok();
}

}  // namespace weft::compression
