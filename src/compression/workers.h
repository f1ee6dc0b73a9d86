// A small fixed pool of worker threads for the codecs' data-parallel sweeps
// (encode, the owner's decode-sum-encode, decode). The calling thread works
// too, so a pool of T threads starts T-1 workers; T = 1 starts none and runs
// everything on the caller, as the codecs did before the pool existed.
//
// Determinism: run() hands out parts, never elements, and the caller picks
// the parts. A sweep whose parts each own disjoint elements (cut on granule
// boundaries, see splitRange) gives the same bits whichever thread runs a
// part, and whatever the number of parts, so results do not depend on the
// thread count.
//
// One process-wide pool (WorkerPool::shared(), sized by
// WEFT_COMPRESS_THREADS); several threads may call it at once (ranks of a
// LocalGroup, the pipelined casts' helper thread): a caller that finds the
// pool busy runs its parts itself, as does a caller in a forked child (which
// inherits no threads).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::compression {

class WorkerPool {
 public:
  // threads >= 1: the caller and threads-1 workers.
  explicit WorkerPool(int threads);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  // The process's pool: WEFT_COMPRESS_THREADS threads (default 1), made on
  // first use and kept until exit.
  static WorkerPool& shared();

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(k) for every k in [0, parts), spread over the caller and the
  // workers, and returns when all are done. fn must not throw.
  void run(size_t parts, const std::function<void(size_t)>& fn);

 private:
  void loop();
  // Takes parts of the current job until none is left.
  void work(std::unique_lock<std::mutex>& lock);

  const pid_t pid_;   // the process that started the workers
  std::mutex owner_;  // held by the one caller whose job the workers run
  std::mutex mu_;     // guards the job below
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t parts_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool quit_ = false;
  std::vector<std::thread> workers_;  // last: started once the rest is built
};

// Part k of `parts` of the range [0, len), cut at multiples of `align` (the
// last part ends at len): [*begin, *end), possibly empty.
inline void splitRange(size_t len, size_t align, size_t parts, size_t k, size_t* begin,
                       size_t* end) {
  const size_t units = (len + align - 1) / align;
  const size_t per = (units + parts - 1) / parts;
  *begin = std::min(len, k * per * align);
  *end = std::min(len, (k + 1) * per * align);
}

// How many parts a sweep over `len` elements is worth on `pool`: one per
// thread, but none smaller than `minPart` elements (waking a worker costs
// microseconds).
inline size_t partsFor(const WorkerPool& pool, size_t len, size_t minPart) {
  const size_t most = len / minPart;
  return std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(pool.threads()), most));
}

}  // namespace weft::compression
