// Asynchronous work: host streams in the C API and Work handles in the C++
// API. Cross-rank ordering ("rank 0 has posted, rank 1 has not yet") is
// arranged with RankSignal pipes, never with sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "core/stream.h"
#include "harness/data.h"
#include "harness/multirank.h"
#include "weft/weft.h"
#include "weft/weft.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

TEST(Streams, CreateQuerySynchronizeDestroy) {
  weftStream_t s = nullptr;
  ASSERT_EQ(weftStreamCreate(&s), weftSuccess);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(weftStreamQuery(s), weftSuccess) << "an empty stream has nothing in progress";
  EXPECT_EQ(weftStreamSynchronize(s), weftSuccess);
  EXPECT_EQ(weftStreamDestroy(s), weftSuccess);
}

TEST(Streams, ManyStreams) {
  std::vector<weftStream_t> streams(16, nullptr);
  for (auto& s : streams) ASSERT_EQ(weftStreamCreate(&s), weftSuccess);
  for (size_t i = 0; i < streams.size(); ++i) {
    for (size_t j = 0; j < i; ++j) EXPECT_NE(streams[i], streams[j]);
  }
  for (auto& s : streams) EXPECT_EQ(weftStreamDestroy(s), weftSuccess);
}

// A stream nobody synchronizes must not keep every finished call: finished
// work is dropped as the stream grows, failed and running work stays, and
// a synchronize still reports the failure.
TEST(Streams, FinishedWorkIsDroppedFailedAndRunningWorkStays) {
  weftStream stream;
  auto failed = std::make_shared<WorkState>();
  failed->complete(Status(weftRemoteError, "a peer failed"));
  auto running = std::make_shared<WorkState>();
  stream.append(failed);
  stream.append(running);
  size_t most = 0;
  for (int i = 0; i < 10000; ++i) {
    auto w = std::make_shared<WorkState>();
    w->complete(Status::ok());
    stream.append(std::move(w));
    most = std::max(most, stream.pending.size());
  }
  EXPECT_LE(most, weftStream::kMinCompact + 1) << "finished work piled up on the stream";
  auto has = [&](const std::shared_ptr<WorkState>& w) {
    return std::find(stream.pending.begin(), stream.pending.end(), w) != stream.pending.end();
  };
  EXPECT_TRUE(has(failed));
  EXPECT_TRUE(has(running));
  running->complete(Status::ok());
  EXPECT_EQ(weftStreamSynchronize(&stream), weftRemoteError);
  EXPECT_TRUE(stream.pending.empty());
}

class Async : public ::testing::TestWithParam<int> {};

// A collective on a stream returns at once; Query says weftInProgress while a
// peer has not joined and weftSuccess after Synchronize.
TEST_P(Async, StreamQueryInProgressThenSuccess) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a peer that joins late";
  RankSignal posted;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(30);
  runRanks(
      n,
      [&](weftComm_t comm, int rank, int n) {
        const size_t count = 1 << 20;
        std::vector<float> x(count, float(rank + 1));
        weftStream_t stream = nullptr;
        RANK_CHECK_OK(weftStreamCreate(&stream));
        if (rank == 0) {
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, stream));
          // Rank 1 has not posted yet, so this cannot have finished.
          RANK_EXPECT_EQ(weftStreamQuery(stream), weftInProgress);
          posted.post();
        } else {
          if (rank == 1) posted.wait();
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, stream));
          const weftResult_t q = weftStreamQuery(stream);
          RANK_EXPECT(q == weftInProgress || q == weftSuccess) << "query returned " << int(q);
        }
        RANK_CHECK_OK(weftStreamSynchronize(stream));
        RANK_EXPECT_EQ(weftStreamQuery(stream), weftSuccess);
        const float want = float(n) * float(n + 1) / 2;
        size_t bad = 0;
        for (float v : x) bad += v != want;
        RANK_EXPECT(bad == 0) << bad << " wrong elements; x[0] = " << x[0] << ", expected " << want;
        RANK_CHECK_OK(weftStreamDestroy(stream));
      },
      opts);
}

// Work queued on one stream runs in order: each step reads the previous
// step's result, so any reordering gives a different answer.
TEST_P(Async, StreamRunsQueuedWorkInOrder) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const size_t count = 300001;
    std::vector<int64_t> x(count), y(count), g(count * size_t(n));
    for (size_t i = 0; i < count; ++i) x[i] = int64_t(rank + 1) + int64_t(i % 7);
    weftStream_t stream = nullptr;
    RANK_CHECK_OK(weftStreamCreate(&stream));
    // x = sum; x = sum again (n * previous); y = max(x) (== x); broadcast y
    // from the last rank after it added 1; allgather y.
    RANK_CHECK_OK(weftAllReduce(x.data(), x.data(), count, weftInt64, weftSum, comm, stream));
    RANK_CHECK_OK(weftAllReduce(x.data(), x.data(), count, weftInt64, weftSum, comm, stream));
    RANK_CHECK_OK(weftAllReduce(x.data(), y.data(), count, weftInt64, weftMax, comm, stream));
    RANK_CHECK_OK(weftBroadcast(y.data(), y.data(), count, weftInt64, n - 1, comm, stream));
    RANK_CHECK_OK(weftAllGather(y.data(), g.data(), count, weftInt64, comm, stream));
    RANK_CHECK_OK(weftStreamSynchronize(stream));
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      const int64_t s1 = int64_t(n) * (n + 1) / 2 + int64_t(n) * int64_t(i % 7);
      const int64_t s2 = int64_t(n) * s1;
      bad += x[i] != s2;
      bad += y[i] != s2;
      for (int q = 0; q < n; ++q) bad += g[size_t(q) * count + i] != s2;
    }
    RANK_EXPECT(bad == 0) << bad << " wrong elements; x[0]=" << x[0] << " y[0]=" << y[0];
    RANK_CHECK_OK(weftStreamDestroy(stream));
  });
}

// Many small collectives queued back to back, synchronised once.
TEST_P(Async, ManySmallCollectivesOnOneStream) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    constexpr int kSteps = 200;
    std::vector<int32_t> v(kSteps);
    weftStream_t stream = nullptr;
    RANK_CHECK_OK(weftStreamCreate(&stream));
    for (int i = 0; i < kSteps; ++i) {
      v[size_t(i)] = rank * i;
      RANK_CHECK_OK(
          weftAllReduce(&v[size_t(i)], &v[size_t(i)], 1, weftInt32, weftMax, comm, stream));
    }
    RANK_CHECK_OK(weftStreamSynchronize(stream));
    for (int i = 0; i < kSteps; ++i) RANK_EXPECT_EQ(v[size_t(i)], (n - 1) * i);
    RANK_CHECK_OK(weftStreamDestroy(stream));
  });
}

// Two streams on two communicators progress independently.
TEST_P(Async, TwoStreamsTwoCommunicators) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    weftComm_t other = nullptr;
    RANK_CHECK_OK(weftCommSplit(comm, 0, rank, &other, nullptr));
    weftStream_t s1 = nullptr, s2 = nullptr;
    RANK_CHECK_OK(weftStreamCreate(&s1));
    RANK_CHECK_OK(weftStreamCreate(&s2));
    std::vector<float> a(100000, 1.0f), b(100000, 2.0f);
    RANK_CHECK_OK(weftAllReduce(a.data(), a.data(), a.size(), weftFloat32, weftSum, comm, s1));
    RANK_CHECK_OK(weftAllReduce(b.data(), b.data(), b.size(), weftFloat32, weftSum, other, s2));
    RANK_CHECK_OK(weftStreamSynchronize(s2));
    RANK_CHECK_OK(weftStreamSynchronize(s1));
    RANK_EXPECT_EQ(a.back(), float(n));
    RANK_EXPECT_EQ(b.front(), 2.0f * float(n));
    RANK_CHECK_OK(weftStreamDestroy(s1));
    RANK_CHECK_OK(weftStreamDestroy(s2));
    RANK_CHECK_OK(weftCommDestroy(other));
  });
}

// ---- C++ API ----

TEST_P(Async, CppWaitAndTest) {
  runRanksRaw(GetParam(), [](const RankContext& ctx) {
    weft::Comm comm = weft::Comm::initRank(ctx.nranks, ctx.id, ctx.rank);
    setCurrentComm(comm.handle());
    const int n = comm.size();
    RANK_EXPECT_EQ(comm.rank(), ctx.rank);
    std::vector<float> in(4097, 1.5f), out(4097, 0.0f);
    weft::Work w = comm.allReduce(std::span<const float>(in), std::span<float>(out), weftSum);
    w.wait();
    RANK_EXPECT_EQ(w.status(), weftSuccess);
    RANK_EXPECT(w.test()) << "test() after wait() must be true";
    RANK_EXPECT_EQ(out[4096], 1.5f * float(n));

    // test() polls until done (bounded by the harness timeout).
    std::vector<int64_t> v(1 << 18, ctx.rank);
    weft::Work w2 = comm.allReduce(std::span<int64_t>(v), weftMax);
    weft::Work copy = w2;  // copies see the same work
    while (!copy.test()) {
    }
    RANK_EXPECT_EQ(w2.status(), weftSuccess);
    RANK_EXPECT_EQ(v[12345], int64_t(n - 1));

    // Several outstanding works, waited on in reverse order.
    std::vector<std::vector<int32_t>> bufs(8, std::vector<int32_t>(1000));
    std::vector<weft::Work> works;
    for (int i = 0; i < 8; ++i) {
      for (auto& e : bufs[size_t(i)]) e = i + ctx.rank;
      works.push_back(comm.allReduce(std::span<int32_t>(bufs[size_t(i)]), weftSum));
    }
    for (int i = 7; i >= 0; --i) {
      RANK_EXPECT(works[size_t(i)].wait(60s)) << "work " << i << " did not finish in 60 s";
    }
    for (int i = 0; i < 8; ++i) {
      RANK_EXPECT_EQ(bufs[size_t(i)][999], i * n + n * (n - 1) / 2);
    }

    // broadcast through the span overload
    std::vector<double> d(77, ctx.rank == 0 ? 3.25 : 0.0);
    comm.broadcast(std::span<double>(d), 0).wait();
    RANK_EXPECT_EQ(d[76], 3.25);

    // the void* overloads
    std::vector<uint8_t> g(size_t(n) * 3);
    uint8_t mine[3] = {uint8_t(ctx.rank), uint8_t(ctx.rank + 1), uint8_t(ctx.rank + 2)};
    comm.allGather(mine, g.data(), 3, weftUint8).wait();
    for (int q = 0; q < n; ++q) RANK_EXPECT_EQ(int(g[size_t(q) * 3 + 2]), q + 2);
    comm.finalize();
    setCurrentComm(nullptr);
  });
}

// wait(timeout) gives up while a peer has not joined, and the work still
// finishes later.
TEST_P(Async, CppWaitTimesOutThenCompletes) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a peer that joins late";
  RankSignal timedOut;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(30);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weft::Comm comm = weft::Comm::initRank(ctx.nranks, ctx.id, ctx.rank);
        setCurrentComm(comm.handle());
        std::vector<float> x(1000, 1.0f);
        if (ctx.rank == 1) timedOut.wait();
        weft::Work w = comm.allReduce(std::span<float>(x), weftSum);
        if (ctx.rank == 0) {
          const auto t0 = std::chrono::steady_clock::now();
          RANK_EXPECT(!w.wait(50ms)) << "wait(50ms) must time out: rank 1 has not posted";
          RANK_EXPECT(std::chrono::steady_clock::now() - t0 >= 50ms)
              << "returned before the timeout";
          RANK_EXPECT_EQ(w.status(), weftInProgress);
          RANK_EXPECT(!w.test());
          timedOut.post();
        }
        RANK_EXPECT(w.wait(20s)) << "the work must finish once every rank posted";
        RANK_EXPECT_EQ(x[999], float(ctx.nranks));
        comm.finalize();
        setCurrentComm(nullptr);
      },
      opts);
}

// A work that fails on a remote abort throws weft::Error from wait().
TEST_P(Async, CppWorkErrorPropagates) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a peer to abort";
  RankSignal posted;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(30);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weft::Comm comm = weft::Comm::initRank(ctx.nranks, ctx.id, ctx.rank);
        std::vector<float> x(1 << 16, 1.0f);
        if (ctx.rank == n - 1) {
          // Everyone else has posted: abort instead of joining.
          for (int q = 0; q < n - 1; ++q) posted.wait();
          comm.abort();
          return;
        }
        weft::Work w = comm.allReduce(std::span<float>(x), weftSum);
        posted.post();
        try {
          w.wait();
          RANK_EXPECT(false) << "wait() returned normally although rank " << n - 1 << " aborted";
        } catch (const weft::Error& e) {
          RANK_EXPECT(e.code() == weftRemoteError || e.code() == weftInvalidUsage)
              << "weft::Error code " << int(e.code()) << ": " << e.what();
          RANK_EXPECT(std::string(e.what()).size() > 0);
        }
        RANK_EXPECT(w.status() != weftSuccess && w.status() != weftInProgress)
            << "status() after a failure: " << int(w.status());
        comm.abort();
      },
      opts);
}

// Bad arguments throw weft::Error with the C API's code.
TEST_P(Async, CppInvalidArgumentsThrow) {
  runRanksRaw(GetParam(), [](const RankContext& ctx) {
    weft::Comm comm = weft::Comm::initRank(ctx.nranks, ctx.id, ctx.rank);
    setCurrentComm(comm.handle());
    std::vector<float> a(10), b(11);
    try {
      comm.allReduce(std::span<const float>(a), std::span<float>(b), weftSum).wait();
      RANK_EXPECT(false) << "spans of different sizes must throw";
    } catch (const weft::Error& e) {
      RANK_EXPECT_EQ(e.code(), weftInvalidArgument);
    }
    try {
      comm.allReduce(nullptr, b.data(), 5, weftFloat32, weftSum).wait();
      RANK_EXPECT(false) << "a null sendbuff must throw";
    } catch (const weft::Error& e) {
      RANK_EXPECT_EQ(e.code(), weftInvalidArgument);
    }
    try {
      comm.broadcast(a.data(), a.data(), 10, weftFloat32, ctx.nranks).wait();
      RANK_EXPECT(false) << "an out-of-range root must throw";
    } catch (const weft::Error& e) {
      RANK_EXPECT_EQ(e.code(), weftInvalidArgument);
    }
    // The communicator is still usable after rejected calls.
    std::vector<float> ok(3, 1.0f);
    comm.allReduce(std::span<float>(ok)).wait();
    RANK_EXPECT_EQ(ok[0], float(ctx.nranks));
    comm.finalize();
    setCurrentComm(nullptr);
  });
}

TEST_P(Async, CppMoveAndSend) {
  runRanksRaw(GetParam(), [](const RankContext& ctx) {
    weft::Comm first = weft::Comm::initRank(ctx.nranks, ctx.id, ctx.rank);
    weft::Comm comm = std::move(first);
    RANK_EXPECT(first.handle() == nullptr) << "a moved-from Comm holds nothing";
    setCurrentComm(comm.handle());
    // Pairs (0,1), (2,3)...: the even rank sends first, the odd one receives
    // first, so even a strictly ordered engine cannot deadlock.
    const int peer = ctx.rank ^ 1;
    if (peer < comm.size()) {
      std::vector<int32_t> out(50000, ctx.rank), in(50000, -1);
      if (ctx.rank % 2 == 0) {
        comm.send(out.data(), out.size(), weftInt32, peer).wait();
        comm.recv(in.data(), in.size(), weftInt32, peer).wait();
      } else {
        weft::Work r = comm.recv(in.data(), in.size(), weftInt32, peer);
        weft::Work s = comm.send(out.data(), out.size(), weftInt32, peer);
        s.wait();
        r.wait();
      }
      RANK_EXPECT_EQ(in[49999], peer);
    }
    comm.finalize();
    setCurrentComm(nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Async, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
}  // namespace weft::test
