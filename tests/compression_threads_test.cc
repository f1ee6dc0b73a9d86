// The compression worker pool (compression/workers.h) and the codecs that
// use it: results with 2 or 3 threads per rank are bit-identical to one
// thread's (the in-process model's serial path), over several steps so that
// the error-feedback residuals split across workers are checked too. Runs
// under ThreadSanitizer in scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "compression/compressor.h"
#include "compression/local_group.h"
#include "compression/params.h"
#include "compression/workers.h"
#include "harness/data.h"
#include "harness/multirank.h"
#include "weft/weft.h"

namespace weft::compression {
namespace {

using weft::test::gaussian;

TEST(CompressionWorkers, EveryPartRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    WorkerPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (size_t parts : {0, 1, 2, 3, 7, 64}) {
      std::vector<std::atomic<int>> hits(parts);
      for (auto& h : hits) h = 0;
      pool.run(parts, [&](size_t k) { hits[k].fetch_add(1); });
      for (size_t k = 0; k < parts; ++k)
        EXPECT_EQ(hits[k].load(), 1) << "threads " << threads << " part " << k;
    }
  }
}

TEST(CompressionWorkers, ConcurrentCallersAllFinish) {
  // A busy pool lets the other callers run their parts themselves; every
  // caller's parts still run exactly once.
  WorkerPool pool(3);
  constexpr int kCallers = 4, kRounds = 200;
  std::vector<std::vector<int>> sums(kCallers, std::vector<int>(kRounds, 0));
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<int> out(6, 0);
        pool.run(out.size(), [&](size_t k) { out[k] = static_cast<int>(k) + 1; });
        for (int v : out) sums[c][r] += v;
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c)
    for (int r = 0; r < kRounds; ++r) ASSERT_EQ(sums[c][r], 21) << c << " " << r;
}

TEST(CompressionWorkers, SplitRangeCoversTheRangeOnAlignedCuts) {
  for (size_t len : {0, 1, 63, 64, 65, 1000, 4097, 100003})
    for (size_t align : {1, 64, 2048})
      for (size_t parts : {1, 2, 3, 7}) {
        size_t next = 0;
        for (size_t k = 0; k < parts; ++k) {
          size_t b, e;
          splitRange(len, align, parts, k, &b, &e);
          ASSERT_LE(b, e);
          if (b == e) continue;
          ASSERT_EQ(b, next) << len << " " << align << " " << parts << " " << k;
          ASSERT_EQ(b % align, 0u);
          next = e;
        }
        ASSERT_EQ(next, len) << len << " " << align << " " << parts;
      }
}

// Every rank's outputs of `steps` allreduces of `spec` on n thread-ranks,
// each rank with a pool of `threads` threads of its own (so that every rank
// really splits its sweeps).
std::vector<std::vector<std::vector<float>>> run(int n, const std::string& spec, size_t count,
                                                 int steps, int threads, bool ties = false) {
  std::vector<std::vector<std::vector<float>>> out(n);
  Status st = runLocalGroup(n, [&](CollRunner& runner) -> Status {
    weftCompressKind_t kind;
    weftCompressorParams_t p;
    WEFT_RETURN_IF_ERROR(parseSpec(spec, &kind, &p));
    std::unique_ptr<Compressor> c;
    WEFT_RETURN_IF_ERROR(Compressor::create(kind, p, &c));
    WorkerPool pool(threads);
    c->setWorkers(&pool);
    const int r = runner.rank();
    for (int s = 0; s < steps; ++s) {
      std::vector<float> x = gaussian(count, 1000 * s + 10 * r + 1);
      if (ties)  // few distinct magnitudes: top-k's choice among equals matters
        for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
      std::vector<float> y(count);
      // Rank 0 in place on odd steps: out may alias in.
      const bool inPlace = r == 0 && s % 2 == 1;
      if (inPlace) y = x;
      WEFT_RETURN_IF_ERROR(
          c->allReduce(runner, inPlace ? y.data() : x.data(), y.data(), count, weftFloat32, true));
      out[r].push_back(std::move(y));
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.isOk()) << st.message();
  return out;
}

void expectSameBits(const std::vector<std::vector<std::vector<float>>>& got,
                    const std::vector<std::vector<std::vector<float>>>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size()) << what;
    for (size_t s = 0; s < got[r].size(); ++s) {
      ASSERT_EQ(got[r][s].size(), want[r][s].size()) << what;
      ASSERT_EQ(std::memcmp(got[r][s].data(), want[r][s].data(), got[r][s].size() * 4), 0)
          << what << " rank " << r << " step " << s;
      // ... and every rank holds the same result.
      ASSERT_EQ(std::memcmp(got[r][s].data(), got[0][s].data(), got[r][s].size() * 4), 0)
          << what << " rank " << r << " step " << s << " differs from rank 0";
    }
  }
}

// Sizes that split into several parts of uneven length (the smallest part a
// worker gets is 32K elements) and chunks that end inside a 1-bit block.
TEST(CompressionThreads, TwoPhaseCodecsAreBitIdenticalToOneThread) {
  const char* specs[] = {"onebit", "onebit:block=64", "onebit:ef=0", "fp16", "bf16"};
  struct Case {
    int n;
    size_t count;
  };
  for (const Case& cs : {Case{1, 200003}, Case{2, 300007}, Case{3, 250001}}) {
    for (const char* spec : specs) {
      const auto want = run(cs.n, spec, cs.count, 3, 1);
      for (int threads : {2, 3}) {
        const auto got = run(cs.n, spec, cs.count, 3, threads);
        expectSameBits(got, want,
                       std::string(spec) + " n=" + std::to_string(cs.n) + " count=" +
                           std::to_string(cs.count) + " threads=" + std::to_string(threads));
      }
    }
  }
}

// PowerSGD's row sweeps (form M and P = MQ; M^ = PQ^T) split by rows; the
// sum over rows (Q = M^T P) stays in one thread's order.
TEST(CompressionThreads, PowerSgdIsBitIdenticalToOneThread) {
  struct Case {
    int n;
    const char* spec;
    size_t count;
  };
  for (const Case& cs :
       {Case{2, "powersgd:rank=4", 300007}, Case{3, "powersgd:rank=2,ef=0", 250001},
        Case{2, "powersgd:rank=4,rows=701,cols=433", 701 * 433},
        Case{1, "powersgd:rank=8,rows=1000,cols=257", 1000 * 257}}) {
    const auto want = run(cs.n, cs.spec, cs.count, 3, 1);
    for (int threads : {2, 3}) {
      const auto got = run(cs.n, cs.spec, cs.count, 3, threads);
      expectSameBits(got, want,
                     std::string(cs.spec) + " n=" + std::to_string(cs.n) +
                         " threads=" + std::to_string(threads));
    }
  }
}

// Top-k's sweeps (acc = in + r, the candidate scan, |x|, zeroing and
// scaling the output) split by ranges: sampled selection (ratio 0.01 on
// 256K+ elements), full selection (ratio 0.1), random-k, no feedback.
TEST(CompressionThreads, TopKIsBitIdenticalToOneThread) {
  struct Case {
    int n;
    size_t count;
  };
  for (const char* spec :
       {"topk:ratio=0.01", "topk:ratio=0.1", "topk:ratio=0.01,random=1", "topk:ratio=0.02,ef=0"}) {
    for (const Case& cs : {Case{2, 300007}, Case{3, 270001}}) {
      for (bool ties : {false, true}) {
        const auto want = run(cs.n, spec, cs.count, 3, 1, ties);
        for (int threads : {2, 3}) {
          const auto got = run(cs.n, spec, cs.count, 3, threads, ties);
          expectSameBits(got, want,
                         std::string(spec) + " n=" + std::to_string(cs.n) +
                             " threads=" + std::to_string(threads) + (ties ? " ties" : ""));
        }
      }
    }
  }
}

// Casts above 16 MiB run pipelined: the helper thread drives the pool.
TEST(CompressionThreads, PipelinedCastsAreBitIdenticalToOneThread) {
  const size_t count = (size_t{4} << 20) + 4321;  // 16 MiB of fp32 and a bit: 2 slices
  for (const char* spec : {"fp16", "bf16"}) {
    const auto want = run(2, spec, count, 2, 1);
    const auto got = run(2, spec, count, 2, 3);
    expectSameBits(got, want, std::string(spec) + " pipelined threads=3");
  }
}

// Through the public API on real ranks (forked processes), with the
// process-wide pool sized by WEFT_COMPRESS_THREADS=3 in every rank: the
// in-process model's result (one thread) bit for bit. The model here uses
// pools of its own, so that this process never makes the shared pool the
// children would inherit.
TEST(CompressionThreads, CommunicatorWithThreeThreadsGetsTheModelResult) {
  const size_t count = 400009;
  const int n = 2, steps = 2;
  weft::test::RunOptions opts;
  opts.env = {{"WEFT_COMPRESS_THREADS", "3"}};
  for (const char* spec : {"onebit", "fp16", "powersgd:rank=4"}) {
    const auto model = run(n, spec, count, steps, 1);
    weft::test::runRanks(
        n,
        [&](weftComm_t comm, int rank, int) {
          weft::test::ScopedRankTrace trace(spec);
          RANK_ASSERT(WorkerPool::shared().threads() == 3);
          weftCompressor_t c;
          RANK_CHECK_OK(weftCompressorCreateFromString(comm, spec, &c));
          for (int s = 0; s < steps; ++s) {
            std::vector<float> x = gaussian(count, 1000 * s + 10 * rank + 1);
            std::vector<float> y(count);
            RANK_CHECK_OK(weftCompressedAllReduce(x.data(), y.data(), count, weftFloat32, weftAvg,
                                                  c, comm, nullptr));
            // PowerSGD's P and Q sums go through the communicator's
            // allreduce, whose order differs from the model's; the rest is
            // exact.
            const bool exact = std::string(spec).rfind("powersgd", 0) != 0;
            size_t bad = 0;
            for (size_t i = 0; i < count; ++i) {
              const float d = std::fabs(y[i] - model[rank][s][i]);
              if (exact ? d != 0.0f : d > 1e-4f * (1.0f + std::fabs(model[rank][s][i]))) ++bad;
            }
            RANK_EXPECT(bad == 0) << bad << " elements differ from the model at step " << s;
          }
          RANK_CHECK_OK(weftCompressorDestroy(c));
        },
        opts);
  }
}

// A setting out of range is reported and taken as 1.
TEST(CompressionThreads, BadThreadCountFallsBackToOne) {
  weft::test::RunOptions opts;
  opts.env = {{"WEFT_COMPRESS_THREADS", "0"}};
  weft::test::runRanks(
      1, [](weftComm_t, int, int) { RANK_EXPECT(WorkerPool::shared().threads() == 1); }, opts);
}

}  // namespace
}  // namespace weft::compression
