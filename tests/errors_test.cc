// Failure is an answer: bad input gives weftInvalidArgument with a message
// that names the problem; abort, a killed peer and a timeout give an error on
// every other rank instead of a hang; resources that cannot be had (a
// /dev/shm too small) fail init with a message that says what was needed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "algorithms/select.h"
#include "harness/multirank.h"
#include "weft/weft.h"

namespace weft::test {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The largest byte count written in text: numbers with an optional unit
// (B, bytes, KiB/KB/K ... TiB/TB/T).
double largestSizeIn(const std::string& text) {
  double biggest = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
      ++end;
    double v = std::strtod(text.substr(i, end - i).c_str(), nullptr);
    size_t u = end;
    while (u < text.size() && text[u] == ' ') ++u;
    const char unit =
        u < text.size() ? char(std::toupper(static_cast<unsigned char>(text[u]))) : ' ';
    const double scale = unit == 'T'   ? 1099511627776.0
                         : unit == 'G' ? 1073741824.0
                         : unit == 'M' ? 1048576.0
                         : unit == 'K' ? 1024.0
                                       : 1.0;
    biggest = std::max(biggest, v * scale);
    i = end;
  }
  return biggest;
}

std::string lastError(weftComm_t comm) {
  const char* m = weftGetLastError(comm);
  return m ? m : "";
}

// `call` must return `want` and leave a last-error message that contains one
// of the keywords (case-insensitive).
#define RANK_EXPECT_REJECTED(call, want, ...)                                 \
  do {                                                                        \
    RANK_EXPECT_RESULT(call, want);                                           \
    const std::string weft_msg_ = lower(lastError(currentComm()));            \
    bool weft_hit_ = false;                                                   \
    for (const char* kw : {__VA_ARGS__})                                      \
      weft_hit_ = weft_hit_ || weft_msg_.find(kw) != std::string::npos;       \
    RANK_EXPECT(weft_hit_) << #call << ": last error \"" << weft_msg_         \
                           << "\" does not mention any of: " << #__VA_ARGS__; \
  } while (0)

// The same in the parent, with gtest.
void expectRejected(weftResult_t got, weftResult_t want, weftComm_t comm,
                    std::initializer_list<const char*> keywords, const char* what) {
  EXPECT_EQ(got, want) << what;
  const std::string msg = lower(lastError(comm));
  bool hit = false;
  for (const char* k : keywords) hit = hit || msg.find(k) != std::string::npos;
  EXPECT_TRUE(hit) << what << ": last error \"" << msg << "\" names none of the expected words";
}

TEST(Errors, ErrorStringsAreDistinctAndNonEmpty) {
  std::set<std::string> seen;
  for (int r = 0; r < int(weftNumResults); ++r) {
    const char* s = weftGetErrorString(weftResult_t(r));
    ASSERT_NE(s, nullptr) << "code " << r;
    EXPECT_GT(std::strlen(s), 0u) << "code " << r;
    EXPECT_TRUE(seen.insert(s).second) << "code " << r << " repeats \"" << s << "\"";
  }
  const char* unknown = weftGetErrorString(weftResult_t(12345));
  ASSERT_NE(unknown, nullptr);
  EXPECT_GT(std::strlen(unknown), 0u);
}

TEST(Errors, NullPointersWithoutCommunicator) {
  expectRejected(weftGetVersion(nullptr), weftInvalidArgument, nullptr, {"null", "version"},
                 "weftGetVersion(NULL)");
  expectRejected(weftGetUniqueId(nullptr), weftInvalidArgument, nullptr, {"null", "id"},
                 "weftGetUniqueId(NULL)");
  expectRejected(weftStreamCreate(nullptr), weftInvalidArgument, nullptr, {"null", "stream"},
                 "weftStreamCreate(NULL)");
  int n = 0;
  expectRejected(weftCommCount(nullptr, &n), weftInvalidArgument, nullptr, {"null", "comm"},
                 "weftCommCount(NULL comm)");
  expectRejected(weftCommUserRank(nullptr, &n), weftInvalidArgument, nullptr, {"null", "comm"},
                 "weftCommUserRank(NULL comm)");
  expectRejected(weftCommTuningPending(nullptr, &n), weftInvalidArgument, nullptr, {"null", "comm"},
                 "weftCommTuningPending(NULL comm)");
  float x = 0;
  expectRejected(weftAllReduce(&x, &x, 1, weftFloat32, weftSum, nullptr, nullptr),
                 weftInvalidArgument, nullptr, {"null", "comm"}, "weftAllReduce(comm = NULL)");
  expectRejected(weftSend(&x, 1, weftFloat32, 0, nullptr, nullptr), weftInvalidArgument, nullptr,
                 {"null", "comm"}, "weftSend(comm = NULL)");
  expectRejected(weftCommDestroy(nullptr), weftInvalidArgument, nullptr, {"null", "comm"},
                 "weftCommDestroy(NULL)");
  weftResult_t async;
  expectRejected(weftCommGetAsyncError(nullptr, &async), weftInvalidArgument, nullptr,
                 {"null", "comm"}, "weftCommGetAsyncError(NULL comm)");
}

// Init with bad arguments fails at once. In a child, so that a library that
// wrongly waits for peers is caught by the harness timeout, not a hang here.
TEST(Errors, BadInitArguments) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  runRanksRaw(
      1,
      [](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_EXPECT_REJECTED(weftCommInitRank(&comm, 0, ctx.id, 0), weftInvalidArgument, "nranks",
                             "rank");
        RANK_EXPECT_REJECTED(weftCommInitRank(&comm, -3, ctx.id, 0), weftInvalidArgument, "nranks",
                             "rank");
        RANK_EXPECT_REJECTED(weftCommInitRank(&comm, 2, ctx.id, 2), weftInvalidArgument, "rank");
        RANK_EXPECT_REJECTED(weftCommInitRank(&comm, 2, ctx.id, -1), weftInvalidArgument, "rank");
        RANK_EXPECT_REJECTED(weftCommInitRank(nullptr, 1, ctx.id, 0), weftInvalidArgument, "null",
                             "comm");
        weftConfig_t zero;
        std::memset(&zero, 0, sizeof zero);
        RANK_EXPECT_REJECTED(weftCommInitRankConfig(&comm, 1, ctx.id, 0, &zero),
                             weftInvalidArgument, "config");
        weftConfig_t wrongMagic = WEFT_CONFIG_INITIALIZER;
        wrongMagic.magic = 0x12345678u;
        RANK_EXPECT_REJECTED(weftCommInitRankConfig(&comm, 1, ctx.id, 0, &wrongMagic),
                             weftInvalidArgument, "config", "magic");
        weftConfig_t wrongSize = WEFT_CONFIG_INITIALIZER;
        wrongSize.size = 3;
        RANK_EXPECT_REJECTED(weftCommInitRankConfig(&comm, 1, ctx.id, 0, &wrongSize),
                             weftInvalidArgument, "config", "size");
        RANK_EXPECT(comm == nullptr) << "a failed init must not hand out a communicator";
        // The id is still good for a correct init afterwards.
        RANK_CHECK_OK(weftCommInitRank(&comm, 1, ctx.id, 0));
        RANK_CHECK_OK(weftCommDestroy(comm));
      },
      opts);
}

TEST(Errors, InitFromEnvWithoutEnvironment) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.init = InitMode::kWeftEnv;  // sets WEFT_*; the body removes them again
  runRanksRaw(
      1,
      [](const RankContext&) {
        ::unsetenv("WEFT_RANK");
        ::unsetenv("WEFT_WORLD_SIZE");
        ::unsetenv("WEFT_ADDR");
        weftComm_t comm = nullptr;
        const weftResult_t r = weftCommInitFromEnv(&comm, nullptr);
        RANK_EXPECT(r == weftInvalidArgument || r == weftInvalidUsage)
            << "init from an empty environment returned " << int(r);
        RANK_EXPECT(lower(lastError(nullptr)).find("rank") != std::string::npos)
            << "message should say what is missing: " << lastError(nullptr);
        ::setenv("WEFT_RANK", "5", 1);
        ::setenv("WEFT_WORLD_SIZE", "2", 1);
        ::setenv("WEFT_ADDR", "127.0.0.1:1", 1);
        RANK_EXPECT_REJECTED(weftCommInitFromEnv(&comm, nullptr), weftInvalidArgument, "rank");
        ::setenv("WEFT_RANK", "zero", 1);
        RANK_EXPECT_REJECTED(weftCommInitFromEnv(&comm, nullptr), weftInvalidArgument, "weft_rank",
                             "rank");
      },
      opts);
}

// srun without PMIx puts rank 0's listener on the step's first node. Rank 0
// started elsewhere (a distribution other than block) says so at once,
// rather than leaving the others to wait for a listener that is not there;
// they give up at the bootstrap timeout, naming the address they tried.
TEST(Errors, SlurmRankZeroOffTheFirstNodeIsRefused) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.init = InitMode::kSlurmEnv;
  opts.env = {{"SLURMD_NODENAME", "node7"}, {"WEFT_BOOTSTRAP_TIMEOUT_MS", "1500"}};
  runRanksRaw(
      2,
      [](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        if (ctx.rank == 0) {
          RANK_EXPECT_REJECTED(weftCommInitFromEnv(&comm, nullptr), weftInvalidArgument, "node7",
                               "localhost", "block distribution");
        } else {
          RANK_EXPECT_REJECTED(weftCommInitFromEnv(&comm, nullptr), weftSystemError,
                               "bootstrap root");
        }
        RANK_EXPECT(comm == nullptr);
      },
      opts);
}

// Bad arguments to collectives on a live communicator: each call is rejected
// locally, names the problem, and leaves the communicator usable.
void badCollectiveArguments(weftComm_t comm, int rank, int n) {
  const size_t kCount = 64;
  std::vector<float> a(kCount * size_t(n) + 8, 1.0f), b(kCount * size_t(n) + 8, 0.0f);
  float* s = a.data();
  float* r = b.data();
  const weftDataType_t f = weftFloat32;

  // Null buffers with count > 0.
  RANK_EXPECT_REJECTED(weftAllReduce(nullptr, r, kCount, f, weftSum, comm, nullptr),
                       weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftAllReduce(s, nullptr, kCount, f, weftSum, comm, nullptr),
                       weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftBroadcast(s, nullptr, kCount, f, 0, comm, nullptr), weftInvalidArgument,
                       "null");
  RANK_EXPECT_REJECTED(weftReduce(nullptr, r, kCount, f, weftSum, 0, comm, nullptr),
                       weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftAllGather(nullptr, r, kCount, f, comm, nullptr), weftInvalidArgument,
                       "null");
  RANK_EXPECT_REJECTED(weftReduceScatter(s, nullptr, kCount, f, weftSum, comm, nullptr),
                       weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftAlltoAll(nullptr, r, kCount, f, comm, nullptr), weftInvalidArgument,
                       "null");
  RANK_EXPECT_REJECTED(weftSend(nullptr, kCount, f, 0, comm, nullptr), weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftRecv(nullptr, kCount, f, 0, comm, nullptr), weftInvalidArgument, "null");
  if (rank == 0) {
    // Only the root's buffers of gather/scatter matter: null there is an error.
    RANK_EXPECT_REJECTED(weftGather(s, nullptr, kCount, f, 0, comm, nullptr), weftInvalidArgument,
                         "null");
    RANK_EXPECT_REJECTED(weftScatter(nullptr, r, kCount, f, 0, comm, nullptr), weftInvalidArgument,
                         "null");
  }

  // count * element size overflows size_t.
  const size_t huge = SIZE_MAX / 2;
  RANK_EXPECT_REJECTED(weftAllReduce(s, r, huge, f, weftSum, comm, nullptr), weftInvalidArgument,
                       "count", "overflow", "size");
  RANK_EXPECT_REJECTED(weftBroadcast(s, r, huge, weftInt64, 0, comm, nullptr), weftInvalidArgument,
                       "count", "overflow", "size");
  if (n > 1) {
    // nranks * count overflows for the gathering collectives even at 1 byte.
    RANK_EXPECT_REJECTED(weftAllGather(s, r, SIZE_MAX / 2 + 1, weftUint8, comm, nullptr),
                         weftInvalidArgument, "count", "overflow", "size");
    RANK_EXPECT_REJECTED(weftAlltoAll(s, r, SIZE_MAX / 2 + 1, weftUint8, comm, nullptr),
                         weftInvalidArgument, "count", "overflow", "size");
  }

  // Invalid dtypes.
  for (int dt : {int(weftNumTypes), -1, 1000}) {
    RANK_SCOPED_TRACE("dtype " << dt);
    RANK_EXPECT_REJECTED(weftAllReduce(s, r, kCount, weftDataType_t(dt), weftSum, comm, nullptr),
                         weftInvalidArgument, "type");
    RANK_EXPECT_REJECTED(weftBroadcast(s, r, kCount, weftDataType_t(dt), 0, comm, nullptr),
                         weftInvalidArgument, "type");
    RANK_EXPECT_REJECTED(weftSend(s, kCount, weftDataType_t(dt), 0, comm, nullptr),
                         weftInvalidArgument, "type");
  }

  // Invalid ops: out of range, not yet created, destroyed.
  for (int op : {99, int(weftNumOps), -1}) {
    RANK_SCOPED_TRACE("op " << op);
    RANK_EXPECT_REJECTED(weftAllReduce(s, r, kCount, f, weftRedOp_t(op), comm, nullptr),
                         weftInvalidArgument, "op");
    RANK_EXPECT_REJECTED(weftReduce(s, r, kCount, f, weftRedOp_t(op), 0, comm, nullptr),
                         weftInvalidArgument, "op");
    RANK_EXPECT_REJECTED(weftReduceScatter(s, r, kCount, f, weftRedOp_t(op), comm, nullptr),
                         weftInvalidArgument, "op");
  }
  {
    float two = 2.0f;
    weftRedOp_t pm;
    RANK_CHECK_OK(weftRedOpCreatePreMulSum(&pm, &two, f, weftScalarHostImmediate, comm));
    // A PreMulSum op made for float is not an op for double.
    RANK_EXPECT_REJECTED(weftAllReduce(s, r, 4, weftFloat64, pm, comm, nullptr),
                         weftInvalidArgument, "op", "type");
    RANK_CHECK_OK(weftRedOpDestroy(pm, comm));
    RANK_EXPECT_REJECTED(weftAllReduce(s, r, kCount, f, pm, comm, nullptr), weftInvalidArgument,
                         "op");
    RANK_EXPECT_REJECTED(weftRedOpDestroy(pm, comm), weftInvalidArgument, "op");
    RANK_EXPECT_REJECTED(weftRedOpDestroy(weftSum, comm), weftInvalidArgument, "op");
    RANK_EXPECT_REJECTED(weftRedOpCreatePreMulSum(&pm, nullptr, f, weftScalarHostImmediate, comm),
                         weftInvalidArgument, "null", "scalar");
    RANK_EXPECT_REJECTED(
        weftRedOpCreatePreMulSum(&pm, &two, weftDataType_t(42), weftScalarHostImmediate, comm),
        weftInvalidArgument, "type");
    RANK_EXPECT_REJECTED(weftRedOpCreatePreMulSum(&pm, &two, f, weftScalarResidence_t(7), comm),
                         weftInvalidArgument, "residence", "scalar");
  }

  // Invalid roots.
  for (int root : {-1, n, n + 100}) {
    RANK_SCOPED_TRACE("root " << root);
    RANK_EXPECT_REJECTED(weftBroadcast(s, r, kCount, f, root, comm, nullptr), weftInvalidArgument,
                         "root");
    RANK_EXPECT_REJECTED(weftReduce(s, r, kCount, f, weftSum, root, comm, nullptr),
                         weftInvalidArgument, "root");
    RANK_EXPECT_REJECTED(weftGather(s, r, kCount, f, root, comm, nullptr), weftInvalidArgument,
                         "root");
    RANK_EXPECT_REJECTED(weftScatter(s, r, kCount, f, root, comm, nullptr), weftInvalidArgument,
                         "root");
  }

  // Invalid peers.
  for (int peer : {-1, n, n + 7}) {
    RANK_SCOPED_TRACE("peer " << peer);
    RANK_EXPECT_REJECTED(weftSend(s, kCount, f, peer, comm, nullptr), weftInvalidArgument, "peer");
    RANK_EXPECT_REJECTED(weftRecv(r, kCount, f, peer, comm, nullptr), weftInvalidArgument, "peer");
  }

  // Buffers that overlap without being the exact in-place alias.
  RANK_EXPECT_REJECTED(weftAllReduce(s, s + 1, kCount, f, weftSum, comm, nullptr),
                       weftInvalidArgument, "overlap", "alias");
  RANK_EXPECT_REJECTED(weftAllReduce(s + 3, s, kCount, f, weftSum, comm, nullptr),
                       weftInvalidArgument, "overlap", "alias");
  RANK_EXPECT_REJECTED(
      weftReduceScatter(s, s + size_t(rank) * kCount + 1, kCount, f, weftSum, comm, nullptr),
      weftInvalidArgument, "overlap", "alias");
  RANK_EXPECT_REJECTED(weftAllGather(r + size_t(rank) * kCount + 1, r, kCount, f, comm, nullptr),
                       weftInvalidArgument, "overlap", "alias");
  if (rank == 0) {
    RANK_EXPECT_REJECTED(weftReduce(s, s + 2, kCount, f, weftSum, 0, comm, nullptr),
                         weftInvalidArgument, "overlap", "alias");
  }

  // Other bad pointers.
  RANK_EXPECT_REJECTED(weftCommCount(comm, nullptr), weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftCommUserRank(comm, nullptr), weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftCommTuningPending(comm, nullptr), weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftCommGetAsyncError(comm, nullptr), weftInvalidArgument, "null");
  RANK_EXPECT_REJECTED(weftCommSplit(comm, 0, 0, nullptr, nullptr), weftInvalidArgument, "null");

  // GroupEnd without GroupStart.
  RANK_EXPECT_REJECTED(weftGroupEnd(), weftInvalidUsage, "group");

  // After all that, the communicator still works.
  std::vector<int> v(5, rank);
  RANK_CHECK_OK(weftAllReduce(v.data(), v.data(), 5, weftInt32, weftSum, comm, nullptr));
  RANK_EXPECT_EQ(v[4], n * (n - 1) / 2);
  // And count 0 with null buffers is fine (nothing to touch).
  RANK_EXPECT_OK(weftAllReduce(nullptr, nullptr, 0, f, weftSum, comm, nullptr));
  rankBarrier(comm);
}

TEST(Errors, BadCollectiveArguments1Rank) {
  runRanks(1, badCollectiveArguments);
}
TEST(Errors, BadCollectiveArguments3Ranks) {
  runRanks(3, badCollectiveArguments);
}

// Every call on an aborted communicator fails with weftInvalidUsage. As in
// NCCL, abort also frees the communicator: no destroy afterwards.
TEST(Errors, CallsOnAbortedCommunicator) {
  runRanksRaw(2, [](const RankContext& ctx) {
    weftComm_t comm = nullptr;
    RANK_CHECK_OK(ctx.initComm(&comm));
    setCurrentComm(comm);
    rankBarrier(comm);
    RANK_CHECK_OK(weftCommAbort(comm));
    float x = 1;
    RANK_EXPECT_REJECTED(weftAllReduce(&x, &x, 1, weftFloat32, weftSum, comm, nullptr),
                         weftInvalidUsage, "abort");
    RANK_EXPECT_REJECTED(weftBroadcast(&x, &x, 1, weftFloat32, 0, comm, nullptr), weftInvalidUsage,
                         "abort");
    RANK_EXPECT_REJECTED(weftSend(&x, 1, weftFloat32, 1 - ctx.rank, comm, nullptr),
                         weftInvalidUsage, "abort");
    weftComm_t child = nullptr;
    RANK_EXPECT_REJECTED(weftCommSplit(comm, 0, 0, &child, nullptr), weftInvalidUsage, "abort");
    weftResult_t async = weftSuccess;
    const weftResult_t r = weftCommGetAsyncError(comm, &async);
    RANK_EXPECT(r == weftInvalidUsage || (r == weftSuccess && async != weftSuccess))
        << "weftCommGetAsyncError on an aborted communicator returned " << int(r) << " with state "
        << int(async);
    RANK_EXPECT_REJECTED(weftCommDestroy(comm), weftInvalidUsage, "abort");
    setCurrentComm(nullptr);
  });
}

// One rank aborts while the others wait inside an AllReduce: they all get
// weftRemoteError, not a hang.
class Failures : public ::testing::TestWithParam<int> {};

TEST_P(Failures, AbortUnblocksPeersInAllReduce) {
  const int n = GetParam();
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        std::vector<float> x(1 << 20, 1.0f);
        if (ctx.rank == n - 1) {
          for (int q = 0; q < n - 1; ++q) entering.wait();
          RANK_CHECK_OK(weftCommAbort(comm));  // also frees it, as in NCCL
          return;
        } else {
          entering.post();
          const weftResult_t r =
              weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr);
          RANK_EXPECT_EQ(r, weftRemoteError) << "last error: " << lastError(comm);
          RANK_EXPECT(!lastError(comm).empty()) << "the error needs a message";
          weftResult_t async = weftSuccess;
          RANK_EXPECT_OK(weftCommGetAsyncError(comm, &async));
          RANK_EXPECT(async != weftSuccess) << "the communicator must report its failure";
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

// Abort unblocks work queued on a stream too.
TEST_P(Failures, AbortUnblocksStreamWork) {
  const int n = GetParam();
  RankSignal posted;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        std::vector<double> x(1 << 18, 1.0);
        if (ctx.rank == n - 1) {
          for (int q = 0; q < n - 1; ++q) posted.wait();
          RANK_CHECK_OK(weftCommAbort(comm));  // also frees it, as in NCCL
          return;
        } else {
          weftStream_t stream = nullptr;
          RANK_CHECK_OK(weftStreamCreate(&stream));
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), x.size(), weftFloat64, weftSum, comm, stream));
          posted.post();
          // Half the ranks poll, half synchronise: both must see the failure.
          weftResult_t r;
          if (ctx.rank % 2 == 0) {
            while ((r = weftStreamQuery(stream)) == weftInProgress) {
            }
          } else {
            r = weftStreamSynchronize(stream);
          }
          RANK_EXPECT_EQ(r, weftRemoteError) << (ctx.rank % 2 == 0 ? "query" : "synchronize")
                                             << "; last error: " << lastError(comm);
          // Destroying the stream frees it; it may repeat the work's error.
          const weftResult_t d = weftStreamDestroy(stream);
          RANK_EXPECT(d == weftSuccess || d == weftRemoteError)
              << "weftStreamDestroy returned " << int(d);
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

// A rank killed with SIGKILL in the middle of a collective: the others get
// weftRemoteError, and no /dev/shm file is left behind (the harness checks).
TEST_P(Failures, PeerKilledMidCollective) {
  const int n = GetParam();
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.expected.assign(size_t(n), Outcome::exitCode(0));
  opts.expected[size_t(n - 1)] = Outcome::signal(SIGKILL);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        const size_t count = size_t(8) << 20;  // 32 MiB of floats: many chunks
        std::vector<float> x(count, 1.0f);
        if (ctx.rank == n - 1) {
          for (int q = 0; q < n - 1; ++q) entering.wait();
          // Start our part of the collective in the progress engine, then die.
          weftStream_t stream = nullptr;
          RANK_CHECK_OK(weftStreamCreate(&stream));
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, stream));
          ::raise(SIGKILL);
        }
        entering.post();
        const weftResult_t r =
            weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr);
        RANK_EXPECT_EQ(r, weftRemoteError) << "last error: " << lastError(comm);
        RANK_EXPECT(!lastError(comm).empty()) << "the error needs a message";
        // Further collectives fail at once too.
        int one = 1;
        const weftResult_t r2 = weftAllReduce(&one, &one, 1, weftInt32, weftSum, comm, nullptr);
        RANK_EXPECT(r2 == weftRemoteError || r2 == weftInvalidUsage)
            << "a collective after the failure returned " << int(r2);
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

// A rank killed before it joins a collective the others are waiting in.
TEST_P(Failures, PeerKilledBeforeJoining) {
  const int n = GetParam();
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.expected.assign(size_t(n), Outcome::exitCode(0));
  opts.expected[0] = Outcome::signal(SIGKILL);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        if (ctx.rank == 0) {
          for (int q = 1; q < n; ++q) entering.wait();
          ::raise(SIGKILL);
        }
        entering.post();
        int64_t v = 1;
        const weftResult_t r = weftAllReduce(&v, &v, 1, weftInt64, weftSum, comm, nullptr);
        RANK_EXPECT_EQ(r, weftRemoteError) << "last error: " << lastError(comm);
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

// A per-collective timeout (config.timeoutMs) ends a collective that a peer
// never joins with weftTimeout.
TEST_P(Failures, CollectiveTimeout) {
  const int n = GetParam();
  RankSignal timedOut, sawTimeout;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_FLIGHT_RECORDS", "0"}};  // no flight records left in /tmp
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftConfig_t config = WEFT_CONFIG_INITIALIZER;
        config.timeoutMs = 300;
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm, &config));
        setCurrentComm(comm);
        rankBarrier(comm);
        if (ctx.rank == n - 1) {
          // Never joins; leaves once everyone else has timed out.
          for (int q = 0; q < n - 1; ++q) timedOut.wait();
        } else {
          float x = 1;
          const auto t0 = std::chrono::steady_clock::now();
          const weftResult_t r = weftAllReduce(&x, &x, 1, weftFloat32, weftSum, comm, nullptr);
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - t0)
                              .count();
          // Either this rank timed out itself, or it heard of another rank's timeout.
          RANK_EXPECT(r == weftTimeout || r == weftRemoteError)
              << "returned " << int(r) << " after " << ms << " ms: " << lastError(comm);
          if (r == weftTimeout) {
            sawTimeout.post();
            const std::string msg = lower(lastError(comm));
            RANK_EXPECT(msg.find("timeout") != std::string::npos ||
                        msg.find("timed out") != std::string::npos)
                << msg;
            RANK_EXPECT(ms >= 250) << "timed out after " << ms << " ms, before the 300 ms timeout";
          }
          timedOut.post();
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);

  EXPECT_TRUE(sawTimeout.tryWait()) << "no rank returned weftTimeout";
}

INSTANTIATE_TEST_SUITE_P(Ranks, Failures, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

// /dev/shm cannot hold what init needs: init fails with weftSystemError and a
// message that names /dev/shm and the size it needed.
TEST(Errors, ShmTooSmall) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_SHM_SLOT_BYTES", "1099511627776"}};  // 1 TiB per slot
  RankSignal sawSystemError;
  runRanksRaw(
      2,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        const weftResult_t r = ctx.initComm(&comm);
        const std::string msg = lastError(nullptr);
        RANK_EXPECT(r != weftSuccess) << "init with 1 TiB slots succeeded";
        RANK_EXPECT(comm == nullptr);
        if (r == weftSystemError) {
          sawSystemError.post();
          RANK_EXPECT(msg.find("/dev/shm") != std::string::npos) << "message: " << msg;
          // Some number in the message, with its unit, must be at least 1 TiB.
          const double biggest = largestSizeIn(msg);
          RANK_EXPECT(biggest >= 0.99e12) << "message does not give the size needed: " << msg;
        } else {
          // The peer of the rank that failed may only hear that it failed.
          RANK_EXPECT(r == weftRemoteError) << "init returned " << int(r) << ": " << msg;
        }
      },
      opts);
  EXPECT_TRUE(sawSystemError.tryWait()) << "no rank failed with weftSystemError";
}

// A rank with the wrong WEFT_SECRET is refused; nobody hangs.
void expectWrongSecretRefused(const char* right, const char* wrong) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(20);
  opts.init = InitMode::kWeftEnv;
  opts.env = {{"WEFT_SECRET", right}, {"WEFT_BOOTSTRAP_TIMEOUT_MS", "3000"}};
  runRanksRaw(
      2,
      [&](const RankContext& ctx) {
        if (ctx.rank == 1) ::setenv("WEFT_SECRET", wrong, 1);
        weftComm_t comm = nullptr;
        const weftResult_t r = ctx.initComm(&comm);
        RANK_EXPECT(r != weftSuccess)
            << "rank " << ctx.rank << " joined although rank 0 has secret \"" << right
            << "\" and rank 1 \"" << wrong << "\"";
        if (r == weftSuccess) weftCommDestroy(comm);
      },
      opts);
}

// Ranks whose algorithm-selection settings differ would run different
// algorithms for one call and hang: init fails on every rank, with
// weftInvalidUsage and a message naming the setting and both values.
void expectSelectionMismatchRefused(const char* setting, const char* rank0, const char* rank2,
                                    const char* named, const char* shown0, const char* shown2) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  runRanksRaw(
      3,
      [&](const RankContext& ctx) {
        // Rank 1 leaves it unset where rank 0's is unset too: only rank 2
        // differs, so the message names rank 2.
        const char* value = ctx.rank == 2 ? rank2 : rank0;
        if (value[0]) ::setenv(setting, value, 1);
        resetAlgorithmSelectionForTesting();
        weftComm_t comm = nullptr;
        const weftResult_t r = ctx.initComm(&comm);
        const std::string msg = lastError(nullptr);
        RANK_EXPECT(r == weftInvalidUsage) << "init returned " << int(r) << " with " << setting
                                           << " " << rank0 << " / " << rank2 << ": " << msg;
        RANK_EXPECT(comm == nullptr);
        const std::string want =
            std::string(named) + " is " + shown0 + " on rank 0 and " + shown2 + " on rank 2";
        RANK_EXPECT(msg.find(want) != std::string::npos) << "want \"" << want << "\" in: " << msg;
        RANK_EXPECT(msg.find("alike on every rank") != std::string::npos) << msg;
        if (r == weftSuccess) weftCommDestroy(comm);
      },
      opts);
}

TEST(Errors, AlgoDifferingAcrossRanksIsRefused) {
  expectSelectionMismatchRefused("WEFT_ALGO", "allreduce:ring", "allreduce:tree",
                                 "WEFT_ALGO (NCCL_ALGO)", "\"allreduce:ring\"",
                                 "\"allreduce:tree\"");
}
TEST(Errors, ProtoDifferingAcrossRanksIsRefused) {
  expectSelectionMismatchRefused("WEFT_PROTO", "", "^cma", "WEFT_PROTO (NCCL_PROTO)", "unset",
                                 "\"^cma\"");
}
TEST(Errors, HierSegmentsDifferingAcrossRanksIsRefused) {
  expectSelectionMismatchRefused("WEFT_HIER_SEGMENTS", "3", "", "WEFT_HIER_SEGMENTS", "3", "unset");
}
TEST(Errors, OnlineTuningDifferingAcrossRanksIsRefused) {
  expectSelectionMismatchRefused("WEFT_TUNER_ONLINE", "0", "",
                                 "online tuning (WEFT_TUNER_ONLINE, WEFT_TUNER_ONLINE_ROUNDS)",
                                 "off", "on, 4 rounds");
}
TEST(Errors, DirectMinDifferingAcrossRanksIsRefused) {
  // Single copy runs on one host only: over TCP it is off, and nothing differs.
  if (std::getenv("WEFT_SHM_DISABLE")) GTEST_SKIP() << "no single copy over TCP";
  expectSelectionMismatchRefused("WEFT_SHM_DIRECT_MIN", "", "1K", "WEFT_SHM_DIRECT_MIN",
                                 "65536 bytes", "1024");
}
// Spelled differently, selecting alike: no error.
TEST(Errors, AlgoSpelledDifferentlyAcrossRanksIsAccepted) {
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  runRanksRaw(
      2,
      [&](const RankContext& ctx) {
        ::setenv("WEFT_ALGO", ctx.rank == 0 ? "ring" : "RING", 1);
        resetAlgorithmSelectionForTesting();
        weftComm_t comm = nullptr;
        const weftResult_t r = ctx.initComm(&comm);
        RANK_EXPECT(r == weftSuccess) << lastError(nullptr);
        if (r == weftSuccess) weftCommDestroy(comm);
      },
      opts);
}

TEST(Errors, WrongSecretIsRefused) {
  expectWrongSecretRefused("0123abcd", "0123abce");
}
TEST(Errors, WrongTextSecretIsRefused) {
  expectWrongSecretRefused("right", "wrong");
}

}  // namespace
}  // namespace weft::test
