// Multi-rank test harness: runs a test body in n forked processes that
// rendezvous as real ranks do, and turns what goes wrong in them into gtest
// failures in the parent.
//
//   runRanks(4, [](weftComm_t comm, int rank, int n) {
//     std::vector<float> x(16, float(rank));
//     RANK_CHECK_OK(weftAllReduce(x.data(), x.data(), 16, weftFloat, weftSum, comm, nullptr));
//     RANK_EXPECT(x[0] == 6.0f) << "got " << x[0];
//   });
//
// The parent calls weftGetUniqueId (which starts the rendezvous listener in the
// parent, as NCCL programs do) and forks the children; each child initialises
// its communicator, runs the body, destroys the communicator and _exits.
//
// gtest assertions do not work inside children. Use the RANK_* macros below:
// a failure writes a message (rank, file:line, expression, error string, the
// communicator's last error) to the child's log, and the child exits non-zero.
// RANK_ASSERT / RANK_CHECK_OK are fatal: the child aborts its communicator (so
// that the other ranks fail fast instead of hanging) and exits at once.
//
// The parent waits for all children with a deadline (RunOptions::timeout); a
// child still running then is killed and reported as hung. Once a child has
// ended unexpectedly the others get RunOptions::failGrace to finish. After the
// run the parent checks that no /dev/shm/weft* file was left behind.
#pragma once

#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/weft.h"

namespace weft::test {

// How the children build their communicator.
enum class InitMode {
  kUniqueId,  // weftCommInitRank(&comm, n, id, rank) with the parent's unique id
  kWeftEnv,   // WEFT_RANK / WEFT_WORLD_SIZE / WEFT_ADDR, then weftCommInitFromEnv
  kTorchEnv,  // RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, then weftCommInitFromEnv
  kSlurmEnv,  // SLURM_PROCID / SLURM_NTASKS / SLURM_STEP_NODELIST=localhost / SLURM_JOB_ID
              // and MASTER_PORT (no MASTER_ADDR), as srun without PMIx, then
              // weftCommInitFromEnv
};

// How a child is expected to end.
struct Outcome {
  enum Kind { kExit, kSignal, kAny };
  Kind kind = kExit;
  int value = 0;
  static Outcome exitCode(int code) { return {kExit, code}; }
  static Outcome signal(int sig) { return {kSignal, sig}; }
  static Outcome any() { return {kAny, 0}; }
};

struct RunOptions {
  // Deadline for the whole run; children still alive then are killed.
  std::chrono::milliseconds timeout{120000};
  // Once a child ended unexpectedly, how long the others may still run.
  std::chrono::milliseconds failGrace{20000};
  InitMode init = InitMode::kUniqueId;
  // Set in every child before it initialises (e.g. WEFT_SHM_SLOT_BYTES).
  std::vector<std::pair<std::string, std::string>> env;
  // Passed to weftCommInitRankConfig / weftCommInitFromEnv when set.
  bool useConfig = false;
  weftConfig_t config = WEFT_CONFIG_INITIALIZER;
  // Per rank; missing entries mean "exits with 0".
  std::vector<Outcome> expected;
  // Check /dev/shm for weft* files nobody holds after the run.
  bool checkShm = true;
};

using RankBody = std::function<void(weftComm_t comm, int rank, int nranks)>;

// What a raw child is given: it sets up its communicator itself.
struct RankContext {
  int rank = 0;
  int nranks = 0;
  weftUniqueId id{};  // from the parent's weftGetUniqueId (kUniqueId mode)
  InitMode init = InitMode::kUniqueId;
  // Initialises as RunOptions says (id or environment); returns the result.
  weftResult_t initComm(weftComm_t* comm, weftConfig_t* config = nullptr) const;
};
using RawBody = std::function<void(const RankContext& ctx)>;

// Runs body on n ranks: init, body, weftCommDestroy. Reports every child's
// failures as gtest failures of the calling test.
void runRanks(int n, const RankBody& body, RunOptions opts = {});

// As runRanks, but the children only get the context: the body initialises
// (or fails to initialise) and destroys communicators itself. The environment
// of the chosen init mode is already set in the child.
void runRanksRaw(int n, const RawBody& body, RunOptions opts = {});

// ---- helpers for use inside children ----

// A barrier on comm built from an allreduce; fatal on error.
void rankBarrier(weftComm_t comm);
// The communicator that failure messages quote weftGetLastError of.
void setCurrentComm(weftComm_t comm);
weftComm_t currentComm();
// True once a RANK_* check failed in this child.
bool rankFailed();
// This child's rank (-1 in the parent).
int currentRank();

// A one-way signal between ranks, made in the parent before runRanks (the
// children inherit it): post() from one rank, wait() in another. Use it to
// order events across ranks without sleeping.
class RankSignal {
 public:
  RankSignal();
  ~RankSignal();
  RankSignal(const RankSignal&) = delete;
  RankSignal& operator=(const RankSignal&) = delete;
  void post(int times = 1);
  void wait();     // blocks until one post() is available, then consumes it
  bool tryWait();  // consumes one post() if there is one; never blocks

 private:
  int fds_[2] = {-1, -1};
};

// /dev/shm entries named weft* that no live process has open or mapped.
std::vector<std::string> leakedShmFiles();

// A free TCP port on 127.0.0.1 (bound once, then released).
int freeTcpPort();

// The inside of the RANK_* macros.
class FailureReporter {
 public:
  FailureReporter(const char* file, int line, const char* expr, bool fatal);
  FailureReporter(const char* file, int line, const char* expr, bool fatal, weftResult_t got,
                  weftResult_t want);
  ~FailureReporter();
  FailureReporter(const FailureReporter&) = delete;
  FailureReporter& operator=(const FailureReporter&) = delete;
  template <class T>
  FailureReporter& operator<<(const T& v) {
    user_ << v;
    return *this;
  }

 private:
  std::string head_;
  std::ostringstream user_;
  bool fatal_;
};

// A line of context added to every failure message while it is alive.
class ScopedRankTrace {
 public:
  explicit ScopedRankTrace(std::string text);
  ~ScopedRankTrace();
  ScopedRankTrace(const ScopedRankTrace&) = delete;
  ScopedRankTrace& operator=(const ScopedRankTrace&) = delete;
};

template <class A, class B>
std::string describeEq(const A& a, const B& b) {
  std::ostringstream os;
  os << "  lhs: " << a << "\n  rhs: " << b;
  return os.str();
}

}  // namespace weft::test

#define WEFT_TEST_CAT_(a, b) a##b
#define WEFT_TEST_CAT(a, b) WEFT_TEST_CAT_(a, b)

// The checks below expand to a one-shot `for`, so that they nest under a
// bare `if` without dangling-else trouble and take a streamed message:
//   RANK_EXPECT(x == 3) << "x is " << x;

// Non-fatal: records the failure, the child goes on and exits non-zero.
#define RANK_EXPECT(cond)                                                     \
  for (bool weft_test_bad_ = !(cond); weft_test_bad_; weft_test_bad_ = false) \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #cond, false)

// Fatal: records the failure, aborts the current communicator, exits.
#define RANK_ASSERT(cond)                                                     \
  for (bool weft_test_bad_ = !(cond); weft_test_bad_; weft_test_bad_ = false) \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #cond, true)

// Evaluates a and b twice on failure: pass plain values.
#define RANK_EXPECT_EQ(a, b)                                                        \
  for (bool weft_test_bad_ = !((a) == (b)); weft_test_bad_; weft_test_bad_ = false) \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #a " == " #b, false)            \
      << ::weft::test::describeEq((a), (b)) << "\n  "

// The call must return weftSuccess; fatal (a failed collective desynchronises
// the ranks, so going on would only hang).
#define RANK_CHECK_OK(expr)                                             \
  for (weftResult_t weft_test_r_ = (expr); weft_test_r_ != weftSuccess; \
       weft_test_r_ = weftSuccess)                                      \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #expr, true, weft_test_r_, weftSuccess)

// The call must return weftSuccess; non-fatal.
#define RANK_EXPECT_OK(expr)                                            \
  for (weftResult_t weft_test_r_ = (expr); weft_test_r_ != weftSuccess; \
       weft_test_r_ = weftSuccess)                                      \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #expr, false, weft_test_r_, weftSuccess)

// The call must return exactly `want`; non-fatal.
#define RANK_EXPECT_RESULT(expr, want)                                                          \
  for (weftResult_t weft_test_r_ = (expr), weft_test_w_ = (want); weft_test_r_ != weft_test_w_; \
       weft_test_r_ = weft_test_w_)                                                             \
  ::weft::test::FailureReporter(__FILE__, __LINE__, #expr, false, weft_test_r_, weft_test_w_)

// Adds context (streamed like a message) to every failure in this scope.
#define RANK_SCOPED_TRACE(...)                                                  \
  ::weft::test::ScopedRankTrace WEFT_TEST_CAT(weft_test_trace_, __LINE__)([&] { \
    std::ostringstream weft_test_os_;                                           \
    weft_test_os_ << __VA_ARGS__;                                               \
    return weft_test_os_.str();                                                 \
  }())
