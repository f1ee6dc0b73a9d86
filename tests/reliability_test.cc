// Reliability: timeouts (per communicator and per work handle) that end a
// collective with weftTimeout on every live rank, kill -9 of a rank inside
// every collective kind, the flight recorder and tools/weft-hang naming the
// rank that caused a hang, WEFT_CHECK naming a mismatched call, and
// weftCommShrink continuing without a dead rank.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/check.h"
#include "harness/multirank.h"
#include "weft/weft.h"
#include "weft/weft.hpp"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

std::string lastError(weftComm_t comm) {
  const char* m = weftGetLastError(comm);
  return m ? m : "";
}

// A scratch directory for flight records, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/weft-reliab-XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    for (const std::string& f : files()) std::remove((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.push_back(e->d_name);
      closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

// Runs tools/weft-hang on dir; returns its output and exit status.
std::string runWeftHang(const std::string& dir, int* status) {
  const std::string cmd =
      std::string("python3 ") + WEFT_SOURCE_DIR + "/tools/weft-hang " + dir + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

// ---- timeouts ----

// Every rank that waits in a collective a peer never joins gets weftTimeout
// (not some other error) within the timeout plus a margin.
TEST(Timeouts, EveryLiveRankGetsTimeout) {
  constexpr int n = 4, kTimeoutMs = 400;
  TempDir dir;
  RankSignal done;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_FLIGHT_DIR", dir.path()}};
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftConfig_t config = WEFT_CONFIG_INITIALIZER;
        config.timeoutMs = kTimeoutMs;
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm, &config));
        setCurrentComm(comm);
        rankBarrier(comm);
        if (ctx.rank == 1) {
          for (int q = 0; q < n - 1; ++q) done.wait();  // never joins
        } else {
          std::vector<float> x(1000, 1.0f);
          const auto t0 = Clock::now();
          const weftResult_t r =
              weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr);
          const int64_t ms = msSince(t0);
          RANK_EXPECT_EQ(int(r), int(weftTimeout)) << lastError(comm);
          RANK_EXPECT(ms < kTimeoutMs + 2000) << "took " << ms << " ms";
          // Every later call fails too.
          RANK_EXPECT(weftAllReduce(x.data(), x.data(), 1, weftFloat32, weftSum, comm, nullptr) !=
                      weftSuccess);
          done.post();
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
  // The ranks that timed out wrote flight records.
  EXPECT_GE(dir.files().size(), size_t(n - 1));
}

// Work::setTimeout: the handle's own timeout ends the collective with
// weftTimeout on every waiting rank, while the communicator has none.
TEST(Timeouts, PerWorkHandle) {
  constexpr int n = 3;
  TempDir dir;
  RankSignal done;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_FLIGHT_DIR", dir.path()}, {"WEFT_TIMEOUT_MS", "0"}};
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        Comm comm = Comm::initRank(n, ctx.id, ctx.rank);
        std::vector<double> x(64, 1.0);
        comm.allReduce(std::span<double>(x)).wait();  // a working collective first
        if (ctx.rank == n - 1) {
          for (int q = 0; q < n - 1; ++q) done.wait();
          return;
        }
        Work w = comm.allReduce(std::span<double>(x));
        w.setTimeout(std::chrono::milliseconds(300));
        const auto t0 = Clock::now();
        weftResult_t code = weftSuccess;
        try {
          w.wait();
        } catch (const Error& e) {
          code = e.code();
        }
        const int64_t ms = msSince(t0);
        RANK_EXPECT_EQ(int(code), int(weftTimeout));
        RANK_EXPECT(ms >= 250 && ms < 2300) << "took " << ms << " ms";
        done.post();
      },
      opts);
}

// ---- kill -9 inside every collective kind ----

enum class Kind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  SendRecv
};
const char* kindName(Kind k) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                "AllToAll",  "Gather",    "Scatter", "SendRecv"};
  return names[int(k)];
}

// Issues one collective of `kind` with `count` floats per rank; the victim
// is the root of rooted kinds, so that the others depend on it.
weftResult_t issue(Kind kind, std::vector<float>& a, std::vector<float>& b, size_t count, int rank,
                   int n, int root, weftComm_t comm, weftStream_t s) {
  switch (kind) {
    case Kind::AllReduce:
      return weftAllReduce(a.data(), b.data(), count, weftFloat32, weftSum, comm, s);
    case Kind::Broadcast:
      return weftBroadcast(a.data(), b.data(), count, weftFloat32, root, comm, s);
    case Kind::Reduce:
      return weftReduce(a.data(), b.data(), count, weftFloat32, weftSum, root, comm, s);
    case Kind::AllGather:
      return weftAllGather(a.data(), b.data(), count, weftFloat32, comm, s);
    case Kind::ReduceScatter:
      return weftReduceScatter(a.data(), b.data(), count, weftFloat32, weftSum, comm, s);
    case Kind::AllToAll:
      return weftAlltoAll(a.data(), b.data(), count, weftFloat32, comm, s);
    case Kind::Gather:
      return weftGather(a.data(), b.data(), count, weftFloat32, root, comm, s);
    case Kind::Scatter:
      return weftScatter(a.data(), b.data(), count, weftFloat32, root, comm, s);
    case Kind::SendRecv: {
      // A ring exchange: everyone sends to the next rank, receives from the previous.
      weftGroupStart();
      weftSend(a.data(), count * n, weftFloat32, (rank + 1) % n, comm, s);
      weftRecv(b.data(), count * n, weftFloat32, (rank + n - 1) % n, comm, s);
      return weftGroupEnd();
    }
  }
  return weftInternalError;
}

class KillNine : public ::testing::TestWithParam<Kind> {};

TEST_P(KillNine, SurvivorsGetErrorsNoHang) {
  constexpr int n = 4, kVictim = 2, kTimeoutMs = 3000;
  const Kind kind = GetParam();
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.expected.assign(n, Outcome::exitCode(0));
  opts.expected[kVictim] = Outcome::signal(SIGKILL);
  opts.env = {{"WEFT_FLIGHT_RECORDS", "0"}};
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftConfig_t config = WEFT_CONFIG_INITIALIZER;
        config.timeoutMs = kTimeoutMs;
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm, &config));
        setCurrentComm(comm);
        rankBarrier(comm);
        const size_t count = size_t(2) << 20;  // 8 MiB of floats per rank: many chunks
        std::vector<float> a(count * n, 1.0f), b(count * n, 0.0f);
        if (ctx.rank == kVictim) {
          for (int q = 0; q < n - 1; ++q) entering.wait();
          weftStream_t stream = nullptr;
          RANK_CHECK_OK(weftStreamCreate(&stream));
          RANK_CHECK_OK(issue(kind, a, b, count, ctx.rank, n, kVictim, comm, stream));
          ::raise(SIGKILL);
        }
        entering.post();
        const auto t0 = Clock::now();
        const weftResult_t r = issue(kind, a, b, count, ctx.rank, n, kVictim, comm, nullptr);
        const int64_t ms = msSince(t0);
        // In the ring exchange only the victim's neighbours depend on it.
        // Over TCP a rank that only sends towards the victim (the root of a
        // reduce or gather) may finish: its bytes fit in the kernel's socket
        // buffers, as NCCL's sends complete once the buffer may be reused.
        const bool overTcp = std::getenv("WEFT_SHM_DISABLE") != nullptr;
        const bool mayFinish = (kind == Kind::SendRecv && ctx.rank != (kVictim + 1) % n &&
                                ctx.rank != (kVictim + n - 1) % n) ||
                               (overTcp && (kind == Kind::Reduce || kind == Kind::Gather));
        RANK_EXPECT(r == weftRemoteError || r == weftTimeout || (mayFinish && r == weftSuccess))
            << kindName(kind) << " returned " << int(r) << ": " << lastError(comm);
        RANK_EXPECT(ms < 2 * kTimeoutMs) << kindName(kind) << " took " << ms << " ms";
        int one = 1;
        const auto t1 = Clock::now();
        const weftResult_t r2 = weftAllReduce(&one, &one, 1, weftInt32, weftSum, comm, nullptr);
        RANK_EXPECT(r2 != weftSuccess) << "a later call succeeded";
        RANK_EXPECT(msSince(t1) < 2 * kTimeoutMs);
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Kinds, KillNine,
                         ::testing::Values(Kind::AllReduce, Kind::Broadcast, Kind::Reduce,
                                           Kind::AllGather, Kind::ReduceScatter, Kind::AllToAll,
                                           Kind::Gather, Kind::Scatter, Kind::SendRecv),
                         [](const auto& info) { return std::string(kindName(info.param)); });

// ---- flight recorder and tools/weft-hang ----

// Rank 2 skips collective #2; the others time out and write their records,
// rank 2 writes its own through the API; weft-hang names rank 2.
TEST(FlightRecorder, HangNamesRankThatNeverPosted) {
  constexpr int n = 4;
  TempDir dir;
  RankSignal done;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_FLIGHT_DIR", dir.path()}};
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftConfig_t config = WEFT_CONFIG_INITIALIZER;
        config.timeoutMs = 400;
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm, &config));
        setCurrentComm(comm);
        rankBarrier(comm);  // collective #1
        std::vector<int> x(100, 1);
        if (ctx.rank == 2) {
          for (int q = 0; q < n - 1; ++q) done.wait();
          RANK_EXPECT_OK(weftCommDumpFlightRecord(comm, nullptr));
        } else {
          const weftResult_t r =
              weftAllReduce(x.data(), x.data(), x.size(), weftInt32, weftSum, comm, nullptr);
          RANK_EXPECT_EQ(int(r), int(weftTimeout));
          done.post();
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
  ASSERT_EQ(dir.files().size(), size_t(n));
  int status = 0;
  const std::string out = runWeftHang(dir.path(), &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("NEVER POSTED #2 (AllReduce count 100 int32"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 2 never posted it"), std::string::npos) << out;
  EXPECT_EQ(out.find("rank 0 never posted"), std::string::npos) << out;
  EXPECT_NE(out.find("waiting on rank(s) 2"), std::string::npos) << out;
}

// Rank 1 calls AllReduce with another count at #2; the records (written by
// SIGUSR1's handler) make weft-hang name rank 1 as diverged.
TEST(FlightRecorder, DivergedCallNamedAndSignalDumps) {
  constexpr int n = 3;
  TempDir dir;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_FLIGHT_DIR", dir.path()}};
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftConfig_t config = WEFT_CONFIG_INITIALIZER;
        config.timeoutMs = 5000;  // only a backstop: the size mismatch is found at once
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm, &config));
        setCurrentComm(comm);
        rankBarrier(comm);
        std::vector<float> x(64, 1.0f);
        const size_t count = ctx.rank == 1 ? 48 : 32;
        // Fails (a size mismatch or a timeout); what matters is the record.
        (void)weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr);
        // SIGUSR1: the handler wakes the dumper thread, which writes the file.
        char name[64];
        std::snprintf(name, sizeof name, "-r%d.json", ctx.rank);
        ::raise(SIGUSR1);
        bool found = false;
        for (int i = 0; i < 2000 && !found; ++i) {  // bounded: 10 s at most
          if (DIR* d = opendir(dir.path().c_str())) {
            while (dirent* e = readdir(d)) {
              const std::string f = e->d_name;
              if (f.size() > std::strlen(name) &&
                  f.compare(f.size() - std::strlen(name), std::string::npos, name) == 0)
                found = true;
            }
            closedir(d);
          }
          if (!found) usleep(5000);
        }
        RANK_EXPECT(found) << "SIGUSR1 wrote no flight record";
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
  int status = 0;
  const std::string out = runWeftHang(dir.path(), &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("DIVERGED #2: rank 1 called AllReduce count 48"), std::string::npos) << out;
  EXPECT_NE(out.find("(count differs)"), std::string::npos) << out;
}

// ---- WEFT_CHECK ----

TEST(CallCheck, CompareFingerprintsNamesRankAndField) {
  CollCall c;
  c.args.kind = CollKind::AllReduce;
  c.args.count = 10;
  c.args.dtype = weftFloat32;
  std::vector<CallFingerprint> all(4, fingerprintOf(c, 7));
  EXPECT_EQ(compareFingerprints(all), "");
  all[3].dtype = weftInt32;
  const std::string msg = compareFingerprints(all);
  EXPECT_NE(msg.find("collective #7: rank 3 differs in dtype"), std::string::npos) << msg;
  // With two ranks, rank 0's value counts as the reference.
  std::vector<CallFingerprint> two(2, fingerprintOf(c, 1));
  two[0].count = 11;
  EXPECT_NE(compareFingerprints(two).find("rank 1 differs in count"), std::string::npos);
}

class CallCheckField : public ::testing::TestWithParam<const char*> {};

// Rank 1 differs from the others in one field: every rank fails with
// weftInvalidUsage naming rank 1 and the field, and the communicator still
// works afterwards.
TEST_P(CallCheckField, AllRanksFailNamingRankAndField) {
  constexpr int n = 3;
  const std::string field = GetParam();
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_CHECK", "1"}, {"WEFT_FLIGHT_RECORDS", "0"}};
  runRanks(
      n,
      [&](weftComm_t comm, int rank, int) {
        std::vector<float> x(16, 1.0f);
        const bool odd = rank == 1;
        weftResult_t r = weftSuccess;
        if (field == "kind") {
          r = odd ? weftBroadcast(x.data(), x.data(), 8, weftFloat32, 0, comm, nullptr)
                  : weftAllReduce(x.data(), x.data(), 8, weftFloat32, weftSum, comm, nullptr);
        } else if (field == "count") {
          r = weftAllReduce(x.data(), x.data(), odd ? 9 : 8, weftFloat32, weftSum, comm, nullptr);
        } else if (field == "dtype") {
          r = weftAllReduce(x.data(), x.data(), 8, odd ? weftInt32 : weftFloat32, weftSum, comm,
                            nullptr);
        } else if (field == "op") {
          r = weftAllReduce(x.data(), x.data(), 8, weftFloat32, odd ? weftMax : weftSum, comm,
                            nullptr);
        } else if (field == "root") {
          r = weftBroadcast(x.data(), x.data(), 8, weftFloat32, odd ? 2 : 0, comm, nullptr);
        }
        RANK_EXPECT_EQ(int(r), int(weftInvalidUsage)) << lastError(comm);
        const std::string msg = lastError(comm);
        RANK_EXPECT(msg.find("rank 1 differs in " + field) != std::string::npos) << msg;
        // Nothing moved, so the communicator is still good.
        std::vector<int> v(5, rank);
        RANK_CHECK_OK(weftAllReduce(v.data(), v.data(), 5, weftInt32, weftSum, comm, nullptr));
        RANK_EXPECT_EQ(v[4], n * (n - 1) / 2);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Fields, CallCheckField,
                         ::testing::Values("kind", "count", "dtype", "op", "root"),
                         [](const auto& info) { return std::string(info.param); });

// ---- shrink ----

// Rank 0 (which also led the old bootstrap star) is killed; the survivors
// shrink without it and run collectives on the new communicator.
TEST(Shrink, SurvivorsContinueAfterRankZeroDies) {
  constexpr int n = 4, kVictim = 0;
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.expected.assign(n, Outcome::exitCode(0));
  opts.expected[kVictim] = Outcome::signal(SIGKILL);
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        if (ctx.rank == kVictim) {
          for (int q = 0; q < n - 1; ++q) entering.wait();
          ::raise(SIGKILL);
        }
        entering.post();
        int64_t v = 1;
        RANK_EXPECT(weftAllReduce(&v, &v, 1, weftInt64, weftSum, comm, nullptr) != weftSuccess);
        int exclude[] = {kVictim};
        weftComm_t small = nullptr;
        RANK_CHECK_OK(weftCommShrink(comm, exclude, 1, &small, nullptr, WEFT_SHRINK_DEFAULT));
        int newRank = -1, newSize = 0;
        RANK_CHECK_OK(weftCommUserRank(small, &newRank));
        RANK_CHECK_OK(weftCommCount(small, &newSize));
        RANK_EXPECT_EQ(newSize, n - 1);
        RANK_EXPECT_EQ(newRank, ctx.rank - 1);
        setCurrentComm(small);
        std::vector<double> x(100000, double(ctx.rank));
        RANK_CHECK_OK(
            weftAllReduce(x.data(), x.data(), x.size(), weftFloat64, weftSum, small, nullptr));
        RANK_EXPECT_EQ(x[99999], 1.0 + 2.0 + 3.0);
        std::vector<int> all(n - 1, -1);
        int mine = ctx.rank * 10;
        RANK_CHECK_OK(weftAllGather(&mine, all.data(), 1, weftInt32, small, nullptr));
        for (int r = 0; r < n - 1; ++r) RANK_EXPECT_EQ(all[r], (r + 1) * 10);
        RANK_EXPECT_OK(weftCommDestroy(small));
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

TEST(Shrink, BadArguments) {
  runRanks(2, [](weftComm_t comm, int rank, int) {
    weftComm_t out = nullptr;
    int self[] = {rank};
    RANK_EXPECT_RESULT(weftCommShrink(comm, self, 1, &out, nullptr, 0), weftInvalidArgument);
    int bad[] = {7};
    RANK_EXPECT_RESULT(weftCommShrink(comm, bad, 1, &out, nullptr, 0), weftInvalidArgument);
    RANK_EXPECT_RESULT(weftCommShrink(comm, nullptr, 1, &out, nullptr, 0), weftInvalidArgument);
    RANK_EXPECT_RESULT(weftCommShrink(comm, nullptr, 0, nullptr, nullptr, 0), weftInvalidArgument);
    // Excluding nobody gives a copy of the communicator.
    RANK_CHECK_OK(weftCommShrink(comm, nullptr, 0, &out, nullptr, 0));
    int v = 1;
    RANK_CHECK_OK(weftAllReduce(&v, &v, 1, weftInt32, weftSum, out, nullptr));
    RANK_EXPECT_EQ(v, 2);
    RANK_EXPECT_OK(weftCommDestroy(out));
  });
}

}  // namespace
}  // namespace weft::test
