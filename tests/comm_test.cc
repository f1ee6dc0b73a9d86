// Communicator lifetime: version, count/rank, several communicators at once,
// split, finalize/destroy, config, and init through the environment.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "harness/multirank.h"
#include "weft/weft.h"
#include "weft/weft.hpp"

namespace weft::test {
namespace {

// Rank 0 makes a unique id and broadcasts it over comm (the usual way to
// bootstrap a second communicator from a first).
weftUniqueId shareNewId(weftComm_t comm, int rank) {
  weftUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) RANK_CHECK_OK(weftGetUniqueId(&id));
  RANK_CHECK_OK(weftBroadcast(&id, &id, sizeof id, weftUint8, 0, comm, nullptr));
  return id;
}

// Allgathers every rank's `value` over comm.
std::vector<int> gatherInts(weftComm_t comm, int value) {
  int n = 0;
  RANK_CHECK_OK(weftCommCount(comm, &n));
  std::vector<int> all(size_t(n), -1);
  RANK_CHECK_OK(weftAllGather(&value, all.data(), 1, weftInt32, comm, nullptr));
  return all;
}

std::string str(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + " ";
  return s;
}

TEST(Comm, Version) {
  int v = -1;
  ASSERT_EQ(weftGetVersion(&v), weftSuccess);
  EXPECT_EQ(v, WEFT_VERSION);
  EXPECT_EQ(v, WEFT_MAJOR * 10000 + WEFT_MINOR * 100 + WEFT_PATCH);
}

TEST(Comm, UniqueIdsDiffer) {
  weftUniqueId a, b;
  ASSERT_EQ(weftGetUniqueId(&a), weftSuccess);
  ASSERT_EQ(weftGetUniqueId(&b), weftSuccess);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
}

class CommRanks : public ::testing::TestWithParam<int> {};

TEST_P(CommRanks, CountAndUserRank) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    int count = -1, me = -1;
    RANK_CHECK_OK(weftCommCount(comm, &count));
    RANK_CHECK_OK(weftCommUserRank(comm, &me));
    RANK_EXPECT_EQ(count, n);
    RANK_EXPECT_EQ(me, rank);
    weftResult_t async = weftInternalError;
    RANK_CHECK_OK(weftCommGetAsyncError(comm, &async));
    RANK_EXPECT_EQ(async, weftSuccess);
    const std::vector<int> all = gatherInts(comm, rank * 10);
    for (int q = 0; q < n; ++q) RANK_EXPECT_EQ(all[size_t(q)], q * 10);
  });
}

// Two communicators over the same processes, the second with ranks
// reversed, used in turns.
TEST_P(CommRanks, TwoCommunicatorsInterleaved) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const weftUniqueId id = shareNewId(comm, rank);
    weftComm_t second = nullptr;
    const int rank2 = n - 1 - rank;
    RANK_CHECK_OK(weftCommInitRank(&second, n, id, rank2));
    int me2 = -1;
    RANK_CHECK_OK(weftCommUserRank(second, &me2));
    RANK_EXPECT_EQ(me2, rank2);
    for (int round = 0; round < 20; ++round) {
      int64_t a = rank + round, b = 100 * rank2 + round;
      RANK_CHECK_OK(weftAllReduce(&a, &a, 1, weftInt64, weftSum, comm, nullptr));
      RANK_CHECK_OK(weftAllReduce(&b, &b, 1, weftInt64, weftMax, second, nullptr));
      RANK_EXPECT_EQ(a, int64_t(n) * (n - 1) / 2 + int64_t(n) * round) << "round " << round;
      RANK_EXPECT_EQ(b, 100 * int64_t(n - 1) + round) << "round " << round;
      std::vector<int> g1 = gatherInts(comm, rank);
      std::vector<int> g2 = gatherInts(second, rank);
      for (int q = 0; q < n; ++q) {
        RANK_EXPECT_EQ(g1[size_t(q)], q);
        RANK_EXPECT_EQ(g2[size_t(q)], n - 1 - q) << "the second comm orders ranks reversed";
      }
      // A broadcast on the second comm from its rank 0 (world rank n-1).
      int v = rank == n - 1 ? 4242 + round : -1;
      RANK_CHECK_OK(weftBroadcast(&v, &v, 1, weftInt32, 0, second, nullptr));
      RANK_EXPECT_EQ(v, 4242 + round);
    }
    RANK_CHECK_OK(weftCommFinalize(second));
    RANK_CHECK_OK(weftCommDestroy(second));
    rankBarrier(comm);
  });
}

TEST_P(CommRanks, SplitByParity) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int color = rank % 2;
    weftComm_t child = nullptr;
    RANK_CHECK_OK(weftCommSplit(comm, color, rank, &child, nullptr));
    RANK_ASSERT(child != nullptr);
    const int expectSize = color == 0 ? (n + 1) / 2 : n / 2;
    int count = -1, me = -1;
    RANK_CHECK_OK(weftCommCount(child, &count));
    RANK_CHECK_OK(weftCommUserRank(child, &me));
    RANK_EXPECT_EQ(count, expectSize);
    RANK_EXPECT_EQ(me, rank / 2);
    // The sum over the child is the sum of the world ranks of that parity.
    int64_t sum = rank;
    RANK_CHECK_OK(weftAllReduce(&sum, &sum, 1, weftInt64, weftSum, child, nullptr));
    int64_t want = 0;
    for (int q = color; q < n; q += 2) want += q;
    RANK_EXPECT_EQ(sum, want);
    const std::vector<int> members = gatherInts(child, rank);
    for (int j = 0; j < count; ++j) RANK_EXPECT_EQ(members[size_t(j)], color + 2 * j);
    // The parent still works while the child exists, and both in turns.
    rankBarrier(comm);
    int v = rank == 0 ? 7 : 0;
    RANK_CHECK_OK(weftBroadcast(&v, &v, 1, weftInt32, 0, child, nullptr));
    RANK_EXPECT_EQ(v, color == 0 ? 7 : 0);
    rankBarrier(comm);
    RANK_CHECK_OK(weftCommDestroy(child));
    rankBarrier(comm);
  });
}

TEST_P(CommRanks, SplitWithReversedKeys) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    weftComm_t child = nullptr;
    RANK_CHECK_OK(weftCommSplit(comm, 5, n - rank, &child, nullptr));
    RANK_ASSERT(child != nullptr);
    int me = -1;
    RANK_CHECK_OK(weftCommUserRank(child, &me));
    RANK_EXPECT_EQ(me, n - 1 - rank);
    const std::vector<int> members = gatherInts(child, rank);
    for (int j = 0; j < n; ++j) RANK_EXPECT_EQ(members[size_t(j)], n - 1 - j) << str(members);
    RANK_CHECK_OK(weftCommDestroy(child));
  });
}

TEST_P(CommRanks, SplitEqualKeysKeepParentOrder) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    weftComm_t child = nullptr;
    RANK_CHECK_OK(weftCommSplit(comm, 0, 0, &child, nullptr));
    RANK_ASSERT(child != nullptr);
    int me = -1;
    RANK_CHECK_OK(weftCommUserRank(child, &me));
    RANK_EXPECT_EQ(me, rank);
    rankBarrier(child);
    RANK_CHECK_OK(weftCommDestroy(child));
  });
}

TEST_P(CommRanks, SplitNoColorGivesNull) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a rank that stays out and one that joins";
  runRanks(n, [](weftComm_t comm, int rank, int n) {
    weftComm_t child = reinterpret_cast<weftComm_t>(0x1);
    const int color = rank == 0 ? WEFT_SPLIT_NOCOLOR : 3;
    RANK_CHECK_OK(weftCommSplit(comm, color, rank, &child, nullptr));
    if (rank == 0) {
      RANK_EXPECT(child == nullptr) << "WEFT_SPLIT_NOCOLOR must give a NULL newcomm";
    } else {
      RANK_ASSERT(child != nullptr && child != reinterpret_cast<weftComm_t>(0x1));
      int count = -1, me = -1;
      RANK_CHECK_OK(weftCommCount(child, &count));
      RANK_CHECK_OK(weftCommUserRank(child, &me));
      RANK_EXPECT_EQ(count, n - 1);
      RANK_EXPECT_EQ(me, rank - 1);
      float x = 1.0f;
      RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftFloat32, weftSum, child, nullptr));
      RANK_EXPECT_EQ(x, float(n - 1));
      RANK_CHECK_OK(weftCommDestroy(child));
    }
    rankBarrier(comm);
  });
}

// A split of a split, with a config.
TEST_P(CommRanks, NestedSplit) {
  const int n = GetParam();
  if (n < 4) GTEST_SKIP() << "needs 4 ranks";
  runRanks(n, [](weftComm_t comm, int rank, int n) {
    weftConfig_t config = WEFT_CONFIG_INITIALIZER;
    config.commName = "half";
    weftComm_t half = nullptr, quarter = nullptr;
    RANK_CHECK_OK(weftCommSplit(comm, rank < n / 2 ? 0 : 1, rank, &half, &config));
    int hr = -1;
    RANK_CHECK_OK(weftCommUserRank(half, &hr));
    RANK_CHECK_OK(weftCommSplit(half, hr % 2, hr, &quarter, nullptr));
    const std::vector<int> members = gatherInts(quarter, rank);
    const int base = rank < n / 2 ? 0 : n / 2;
    for (size_t j = 0; j < members.size(); ++j) {
      RANK_EXPECT_EQ(members[j], base + (hr % 2) + 2 * int(j)) << str(members);
    }
    RANK_CHECK_OK(weftCommDestroy(quarter));
    RANK_CHECK_OK(weftCommDestroy(half));
  });
}

TEST_P(CommRanks, FinalizeThenDestroy) {
  runRanksRaw(GetParam(), [](const RankContext& ctx) {
    weftComm_t comm = nullptr;
    RANK_CHECK_OK(ctx.initComm(&comm));
    setCurrentComm(comm);
    double x = ctx.rank;
    RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftFloat64, weftSum, comm, nullptr));
    RANK_EXPECT_EQ(x, double(ctx.nranks) * (ctx.nranks - 1) / 2);
    RANK_CHECK_OK(weftCommFinalize(comm));
    setCurrentComm(nullptr);
    RANK_CHECK_OK(weftCommDestroy(comm));
  });
}

// Communicators made and destroyed one after another in the same processes
// (resources must be returned each time; the harness checks /dev/shm).
TEST_P(CommRanks, ManyCommunicatorsInSequence) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    for (int i = 0; i < 6; ++i) {
      const weftUniqueId id = shareNewId(comm, rank);
      weftComm_t c = nullptr;
      RANK_CHECK_OK(weftCommInitRank(&c, n, id, rank)) << "communicator " << i;
      int x = i;
      RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftInt32, weftSum, c, nullptr));
      RANK_EXPECT_EQ(x, i * n);
      RANK_CHECK_OK(weftCommDestroy(c));
    }
  });
}

// Kilobytes of this process's mappings of weft's shared-memory segments
// that are mapped now (smaps' Rss).
long mappedShmKiB() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inSegment = false;
  long kib = 0;
  while (std::getline(smaps, line)) {
    if (line.find("/weft-") != std::string::npos) {
      inSegment = true;
    } else if (line.rfind("Rss:", 0) == 0) {
      if (inSegment) kib += std::stol(line.substr(4));
    } else if (line.find('-') != std::string::npos && line.find(':') == std::string::npos) {
      inSegment = false;  // another mapping's header line
    }
  }
  return kib;
}

// The FIFOs a rank uses (its receive FIFO, its send FIFO in the peer's
// segment: 2 x 1 MiB by default) are mapped at creation, not at each page's
// first touch inside a collective. The communicator's own first call moved
// 4 bytes, which touches a page or two.
TEST(Comm, SharedMemoryFifosAreMappedAtCreation) {
  runRanks(4, [](weftComm_t, int, int) {
    const long kib = mappedShmKiB();
    RANK_EXPECT(kib >= 6 * 1024) << kib << " KiB mapped";
  });
}

TEST_P(CommRanks, InitWithConfig) {
  RunOptions opts;
  opts.useConfig = true;
  opts.config.blocking = 1;
  opts.config.timeoutMs = 60000;
  opts.config.commName = "configured";
  runRanks(
      GetParam(),
      [](weftComm_t comm, int rank, int n) {
        int x = 1;
        RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftInt32, weftSum, comm, nullptr));
        RANK_EXPECT_EQ(x, n);
      },
      opts);
}

// blocking = 0: init may return weftInProgress; the communicator is ready
// once weftCommGetAsyncError stops saying weftInProgress.
TEST_P(CommRanks, NonBlockingInit) {
  runRanksRaw(GetParam(), [](const RankContext& ctx) {
    weftConfig_t config = WEFT_CONFIG_INITIALIZER;
    config.blocking = 0;
    weftComm_t comm = nullptr;
    const weftResult_t r = ctx.initComm(&comm, &config);
    RANK_ASSERT(r == weftSuccess || r == weftInProgress) << "init returned " << int(r);
    RANK_ASSERT(comm != nullptr);
    setCurrentComm(comm);
    weftResult_t state = weftInProgress;
    // Bounded by the harness timeout.
    while (state == weftInProgress) RANK_CHECK_OK(weftCommGetAsyncError(comm, &state));
    RANK_ASSERT(state == weftSuccess) << "async state " << int(state);
    int x = 2;
    weftResult_t ar = weftAllReduce(&x, &x, 1, weftInt32, weftSum, comm, nullptr);
    RANK_ASSERT(ar == weftSuccess || ar == weftInProgress) << "allreduce returned " << int(ar);
    state = weftInProgress;
    while (state == weftInProgress) RANK_CHECK_OK(weftCommGetAsyncError(comm, &state));
    RANK_EXPECT_EQ(state, weftSuccess);
    RANK_EXPECT_EQ(x, 2 * ctx.nranks);
    setCurrentComm(nullptr);
    RANK_CHECK_OK(weftCommDestroy(comm));
  });
}

// Ranks started as `init` says build a communicator from the environment:
// each is who the launcher said, and an all-gather and an allreduce agree.
void expectCommFromEnv(int nranks, InitMode init,
                       std::vector<std::pair<std::string, std::string>> env = {}) {
  RunOptions opts;
  opts.init = init;
  opts.env = std::move(env);
  runRanks(
      nranks,
      [](weftComm_t comm, int rank, int n) {
        int count = -1, me = -1;
        RANK_CHECK_OK(weftCommCount(comm, &count));
        RANK_CHECK_OK(weftCommUserRank(comm, &me));
        RANK_EXPECT_EQ(count, n);
        RANK_EXPECT_EQ(me, rank);
        const std::vector<int> all = gatherInts(comm, 3 * rank + 1);
        for (int q = 0; q < n; ++q) RANK_EXPECT_EQ(all[size_t(q)], 3 * q + 1);
        int64_t x = rank;
        RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftInt64, weftMax, comm, nullptr));
        RANK_EXPECT_EQ(x, n - 1);
      },
      opts);
}

TEST_P(CommRanks, InitFromWeftEnv) {
  expectCommFromEnv(GetParam(), InitMode::kWeftEnv,
                    {{"WEFT_SECRET", "correct horse battery staple"}});
}

TEST_P(CommRanks, InitFromTorchrunEnv) {
  expectCommFromEnv(GetParam(), InitMode::kTorchEnv);
}

// srun without PMIx: rank 0's address is the step's first node; the port is
// MASTER_PORT's here (a free one), else derived from the job and step ids.
TEST_P(CommRanks, InitFromSlurmEnv) {
  expectCommFromEnv(GetParam(), InitMode::kSlurmEnv);
}

// The C++ API over the same machinery: a Comm from the environment, split.
TEST_P(CommRanks, CppCommFromEnvAndSplit) {
  RunOptions opts;
  opts.init = InitMode::kWeftEnv;
  runRanksRaw(
      GetParam(),
      [](const RankContext& ctx) {
        weft::Comm comm = weft::Comm::fromEnv();
        RANK_EXPECT_EQ(comm.rank(), ctx.rank);
        RANK_EXPECT_EQ(comm.size(), ctx.nranks);
        setCurrentComm(comm.handle());
        std::vector<int32_t> v(5, comm.rank());
        comm.allReduce(std::span<int32_t>(v)).wait();
        for (int32_t x : v) RANK_EXPECT_EQ(x, ctx.nranks * (ctx.nranks - 1) / 2);
        weft::Comm sub = comm.split(ctx.rank % 2, -ctx.rank);
        const int subSize = ctx.rank % 2 == 0 ? (ctx.nranks + 1) / 2 : ctx.nranks / 2;
        RANK_EXPECT_EQ(sub.size(), subSize);
        RANK_EXPECT_EQ(sub.rank(), subSize - 1 - ctx.rank / 2);
        std::vector<double> d(3, 1.0);
        sub.allReduce(std::span<double>(d), weftSum).wait();
        RANK_EXPECT_EQ(d[2], double(subSize));
        sub.finalize();
        comm.finalize();
        setCurrentComm(nullptr);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommRanks, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
}  // namespace weft::test
