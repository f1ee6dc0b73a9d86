// Compressed allreduce through the public API on real ranks (forked
// processes): every rank ends with bit-identical results equal to the
// in-process model, bad input gets clear errors, and data-parallel training
// with each compressor converges like uncompressed training.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compression/compressor.h"
#include "compression/local_group.h"
#include "compression/params.h"
#include "harness/data.h"
#include "harness/multirank.h"
#include "weft/weft.hpp"

namespace {

using weft::test::runRanks;

using weft::test::gaussian;

// The in-process model's result for `steps` calls (rank 0's view).
std::vector<std::vector<float>> modelResults(const std::string& spec, int n, size_t count,
                                             int steps) {
  std::vector<std::vector<float>> out(steps);
  weft::Status st = weft::compression::runLocalGroup(n, [&](auto& runner) -> weft::Status {
    weftCompressKind_t kind;
    weftCompressorParams_t p;
    WEFT_RETURN_IF_ERROR(weft::compression::parseSpec(spec, &kind, &p));
    std::unique_ptr<weft::compression::Compressor> c;
    WEFT_RETURN_IF_ERROR(weft::compression::Compressor::create(kind, p, &c));
    for (int s = 0; s < steps; ++s) {
      auto x = gaussian(count, 100 * s + runner.rank());
      std::vector<float> y(count);
      WEFT_RETURN_IF_ERROR(c->allReduce(runner, x.data(), y.data(), count, weftFloat32, true));
      if (runner.rank() == 0) out[s] = y;
    }
    return weft::Status::ok();
  });
  if (!st.isOk()) out.clear();
  return out;
}

TEST(CompressedAllReduce, EveryRankGetsTheModelResultBitForBit) {
  runRanks(4, [](weftComm_t comm, int rank, int n) {
    const size_t count = 5000;
    const int steps = 3;
    weftStream_t stream;
    RANK_CHECK_OK(weftStreamCreate(&stream));
    for (const char* spec : {"onebit", "topk:ratio=0.02", "topk:ratio=0.02,random=1",
                             "powersgd:rank=4", "fp16", "bf16"}) {
      weft::test::ScopedRankTrace trace(spec);
      const auto model = modelResults(spec, n, count, steps);
      RANK_ASSERT(model.size() == static_cast<size_t>(steps));
      weftCompressor_t c;
      RANK_CHECK_OK(weftCompressorCreateFromString(comm, spec, &c));
      for (int s = 0; s < steps; ++s) {
        auto x = gaussian(count, 100 * s + rank);
        std::vector<float> y(count);
        // Alternate the NULL stream and a stream, in place and not.
        float* out = s == 1 ? x.data() : y.data();
        RANK_CHECK_OK(weftCompressedAllReduce(x.data(), out, count, weftFloat32, weftAvg, c, comm,
                                              s == 2 ? stream : nullptr));
        std::vector<float> all(count * n);
        RANK_CHECK_OK(weftAllGather(out, all.data(), count, weftFloat32, comm, nullptr));
        for (int r = 1; r < n; ++r)
          RANK_EXPECT(std::memcmp(all.data() + r * count, all.data(), count * 4) == 0)
              << "rank " << r << " differs from rank 0 at step " << s;
        // Only PowerSGD's P and Q sums and random-k's value sums go through
        // the allreduce, whose summation order is the tuner's choice (on an
        // oversubscribed host recursive doubling, not the model's rank
        // order); everything else is exact.
        const bool exact = std::string(spec).rfind("powersgd", 0) != 0 &&
                           std::string(spec).find("random=1") == std::string::npos;
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) {
          const float d = std::fabs(out[i] - model[s][i]);
          if (exact ? d != 0.0f : d > 1e-4f * (1.0f + std::fabs(model[s][i]))) ++bad;
        }
        RANK_EXPECT(bad == 0) << bad << " elements differ from the model at step " << s;
      }
      weftCompressorStats_t st;
      RANK_CHECK_OK(weftCompressorGetStats(c, &st));
      RANK_EXPECT(st.plainBytes == 2.0 * 3 / 4 * count * 4) << st.plainBytes;
      RANK_EXPECT(st.wireBytes > 0 && st.ratio > 1.9) << st.ratio;
      RANK_CHECK_OK(weftCompressorDestroy(c));
    }
    RANK_CHECK_OK(weftStreamDestroy(stream));
  });
}

// Cast buffers of 16 MiB and more run pipelined in slices with a helper
// thread (two_phase.cc): still the model's result bit for bit (1-bit, not
// pipelined, as the size check of the plain path).
TEST(CompressedAllReduce, PipelinedTwoPhaseMatchesTheModel) {
  const size_t count = (size_t{4} << 20) + 1001;  // a little over 16 MiB: 2 slices
  const int n = 2, steps = 2;
  for (const char* spec : {"onebit", "fp16"}) {
    const auto model = modelResults(spec, n, count, steps);
    ASSERT_EQ(model.size(), static_cast<size_t>(steps));
    runRanks(n, [&](weftComm_t comm, int rank, int) {
      weft::test::ScopedRankTrace trace(spec);
      weftCompressor_t c;
      RANK_CHECK_OK(weftCompressorCreateFromString(comm, spec, &c));
      for (int s = 0; s < steps; ++s) {
        auto x = gaussian(count, 100 * s + rank);
        RANK_CHECK_OK(weftCompressedAllReduce(x.data(), x.data(), count, weftFloat32, weftAvg, c,
                                              comm, nullptr));
        RANK_EXPECT(std::memcmp(x.data(), model[s].data(), count * 4) == 0)
            << "differs from the model at step " << s;
      }
      RANK_CHECK_OK(weftCompressorDestroy(c));
    });
  }
}

TEST(CompressedAllReduce, BadInputGetsClearErrors) {
  runRanks(1, [](weftComm_t comm, int, int) {
    auto expectError = [&](weftResult_t got, const char* words) {
      RANK_EXPECT(got != weftSuccess) << "expected an error mentioning " << words;
      const std::string msg = weftGetLastError(comm);
      RANK_EXPECT(msg.find(words) != std::string::npos) << "message: " << msg;
    };
    weftCompressor_t c = nullptr;
    weftCompressorParams_t p = WEFT_COMPRESSOR_PARAMS_INITIALIZER;
    p.rank = 0;
    expectError(weftCompressorCreate(comm, weftCompressPowerSGD, &p, &c), "at least 1");
    p = WEFT_COMPRESSOR_PARAMS_INITIALIZER;
    p.ratio = 0.0;
    expectError(weftCompressorCreate(comm, weftCompressTopK, &p, &c), "(0, 1]");
    p.ratio = 1.5;
    expectError(weftCompressorCreate(comm, weftCompressTopK, &p, &c), "(0, 1]");
    expectError(weftCompressorCreate(comm, static_cast<weftCompressKind_t>(42), nullptr, &c),
                "invalid compressor kind");
    weftCompressorParams_t raw{};
    expectError(weftCompressorCreate(comm, weftCompressOneBit, &raw, &c), "INITIALIZER");
    expectError(weftCompressorCreateFromString(comm, "topk:ratio=2", &c), "(0, 1]");

    std::vector<float> x(100, 1.0f), y(100);
    RANK_CHECK_OK(weftCompressorCreateFromString(comm, "powersgd:rows=10,cols=20", &c));
    expectError(
        weftCompressedAllReduce(x.data(), y.data(), 100, weftFloat32, weftAvg, c, comm, nullptr),
        "does not match count 100");
    RANK_CHECK_OK(weftCompressorDestroy(c));

    RANK_CHECK_OK(weftCompressorCreateFromString(comm, "onebit", &c));
    expectError(
        weftCompressedAllReduce(x.data(), y.data(), 100, weftInt32, weftAvg, c, comm, nullptr),
        "not int32");
    expectError(
        weftCompressedAllReduce(x.data(), y.data(), 100, weftFloat32, weftMax, c, comm, nullptr),
        "weftSum or weftAvg");
    RANK_CHECK_OK(
        weftCompressedAllReduce(x.data(), y.data(), 100, weftFloat32, weftAvg, c, comm, nullptr));
    expectError(
        weftCompressedAllReduce(x.data(), y.data(), 50, weftFloat32, weftAvg, c, comm, nullptr),
        "one compressor per buffer");
    RANK_CHECK_OK(weftCompressorReset(c));
    RANK_CHECK_OK(
        weftCompressedAllReduce(x.data(), y.data(), 50, weftFloat32, weftAvg, c, comm, nullptr));
    RANK_CHECK_OK(weftCompressorDestroy(c));
    expectError(weftCompressorDestroy(c), "destroyed");
    expectError(weftCompressedAllReduce(x.data(), y.data(), 50, weftFloat32, weftAvg, nullptr, comm,
                                        nullptr),
                "NULL");
  });
}

TEST(CompressedAllReduce, CppWrapper) {
  weft::test::runRanksRaw(2, [](const weft::test::RankContext& ctx) {
    weftComm_t raw = nullptr;
    RANK_CHECK_OK(ctx.initComm(&raw));
    weft::Comm comm(raw);
    bool threw = false;
    try {
      weft::Compressor bad(comm, "powersgd:rank=-1");
    } catch (const weft::Error& e) {
      threw = e.code() == weftInvalidArgument &&
              std::string(e.what()).find("at least 1") != std::string::npos;
    }
    RANK_EXPECT(threw);
    weft::Compressor c(comm, "fp16");
    std::vector<float> v(1024, static_cast<float>(ctx.rank + 1));
    c.allReduce(std::span<float>(v));  // average of 1 and 2
    RANK_EXPECT(v[3] == 1.5f) << v[3];
    RANK_EXPECT(c.stats().ratio == 2.0) << c.stats().ratio;
  });
}

// Compares out with the model's step (bit for bit, or to PowerSGD's and
// random-k's tolerance: their sums depend on the allreduce's summation
// order, which the tuner picks).
size_t differences(const std::string& spec, const std::vector<float>& out,
                   const std::vector<float>& model) {
  const bool exact = spec.rfind("powersgd", 0) != 0 && spec.find("random=1") == std::string::npos;
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float d = std::fabs(out[i] - model[i]);
    if (exact ? d != 0.0f : d > 1e-4f * (1.0f + std::fabs(model[i]))) ++bad;
  }
  return bad;
}

// allReduceAsync: two compressors with calls in flight at once (two steps of
// one of them queued back to back), a plain collective posted between them
// and a blocking C call after them; all run in the order they were posted
// and match the in-process model, on every rank alike.
TEST(CompressedAllReduce, AsyncCallsRunInOrderAndMatchTheModel) {
  const size_t count = 5000;
  const std::string specA = "powersgd:rank=4", specB = "fp16", specC = "onebit";
  const int n = 4;
  const auto modelA = modelResults(specA, n, count, 2);
  const auto modelB = modelResults(specB, n, count, 2);
  const auto modelC = modelResults(specC, n, count, 1);
  ASSERT_EQ(modelA.size(), 2u);
  ASSERT_EQ(modelB.size(), 2u);
  ASSERT_EQ(modelC.size(), 1u);
  weft::test::runRanksRaw(n, [&](const weft::test::RankContext& ctx) {
    weftComm_t raw = nullptr;
    RANK_CHECK_OK(ctx.initComm(&raw));
    weft::Comm comm(raw);
    const int rank = ctx.rank;
    weft::Compressor a(comm, specA), b(comm, specB);
    auto xA0 = gaussian(count, rank), xA1 = gaussian(count, 100 + rank);
    auto xB0 = gaussian(count, rank), xB1 = gaussian(count, 100 + rank);
    std::vector<float> yA0(count), yB0(count);
    std::vector<float> plain(count, static_cast<float>(rank + 1));
    weft::Work wA0 = a.allReduceAsync(xA0.data(), yA0.data(), count, weftFloat32, weftAvg);
    weft::Work wPlain = comm.allReduce(plain.data(), plain.data(), count, weftFloat32, weftSum);
    weft::Work wB0 = b.allReduceAsync(xB0.data(), yB0.data(), count, weftFloat32, weftAvg);
    weft::Work wA1 = a.allReduceAsync(std::span<float>(xA1));  // in place, step 1
    // The blocking C call on b's step 1 runs after everything queued.
    RANK_CHECK_OK(weftCompressedAllReduce(xB1.data(), xB1.data(), count, weftFloat32, weftAvg,
                                          b.handle(), comm.handle(), nullptr));
    RANK_EXPECT(wA0.test() && wB0.test() && wA1.test() && wPlain.test())
        << "queued work must be done once a later blocking call returned";
    // Waiting in any order is fine.
    wA1.wait();
    wA0.wait();
    wB0.wait();
    wPlain.wait();
    RANK_EXPECT(plain[0] == n * (n + 1) / 2.0f && plain[count - 1] == plain[0]) << plain[0];
    struct Result {
      const std::string* spec;
      const std::vector<float>* out;
      const std::vector<float>* model;
      const char* what;
    };
    for (const Result& r : {Result{&specA, &yA0, &modelA[0], "a step 0"},
                            Result{&specA, &xA1, &modelA[1], "a step 1"},
                            Result{&specB, &yB0, &modelB[0], "b step 0"},
                            Result{&specB, &xB1, &modelB[1], "b step 1"}}) {
      RANK_EXPECT(differences(*r.spec, *r.out, *r.model) == 0)
          << r.what << " differs from the model";
      std::vector<float> all(count * n);
      comm.allGather(r.out->data(), all.data(), count, weftFloat32).wait();
      for (int p = 1; p < n; ++p)
        RANK_EXPECT(std::memcmp(all.data() + p * count, all.data(), count * 4) == 0)
            << r.what << ": rank " << p << " differs from rank 0";
    }

    // The engine runs the work while this thread computes, without wait().
    {
      auto x = gaussian(count, 7 + rank);
      weft::Work w = b.allReduceAsync(std::span<float>(x));
      double busy = 0;
      const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!w.test() && std::chrono::steady_clock::now() < giveUp)
        for (float v : xA0) busy += v;  // stand-in for backward compute
      RANK_EXPECT(w.status() == weftSuccess)
          << "not done by the engine alone: " << w.status() << " " << busy;
    }

    // A compressor destroyed with work queued waits for it.
    auto xC = gaussian(count, rank);
    std::vector<float> yC(count);
    weft::Work wC;
    {
      weft::Compressor c(comm, specC);
      wC = c.allReduceAsync(xC.data(), yC.data(), count, weftFloat32, weftAvg);
    }
    RANK_EXPECT(wC.status() == weftSuccess) << wC.status();
    RANK_EXPECT(differences(specC, yC, modelC[0]) == 0) << "onebit differs from the model";

    // Bad arguments throw at once; misuse found when the call runs comes
    // back through the Work.
    bool threw = false;
    try {
      (void)a.allReduceAsync(xA0.data(), yA0.data(), count, weftFloat32, weftMax);
    } catch (const weft::Error& e) {
      threw = e.code() == weftInvalidArgument &&
              std::string(e.what()).find("weftSum or weftAvg") != std::string::npos;
    }
    RANK_EXPECT(threw);
    weft::Work bad = a.allReduceAsync(xA0.data(), yA0.data(), count / 2, weftFloat32, weftAvg);
    threw = false;
    try {
      bad.wait();
    } catch (const weft::Error& e) {
      threw = std::string(e.what()).find("one compressor per buffer") != std::string::npos;
    }
    RANK_EXPECT(threw);
  });
}

// The C call on a stream is queued: it returns while a peer has not called
// yet (so it cannot be done), the stream reports it in progress, and
// weftStreamSynchronize completes it with the model's result. Two steps on
// one stream run in order (step 1 uses step 0's residuals).
TEST(CompressedAllReduce, StreamCallIsQueuedAndSynchronizeCompletesIt) {
  const size_t count = 5000;
  const std::string spec = "onebit";
  const int n = 3;
  const auto model = modelResults(spec, n, count, 2);
  ASSERT_EQ(model.size(), 2u);
  weft::test::RankSignal rank0Queued;
  weft::test::runRanksRaw(n, [&](const weft::test::RankContext& ctx) {
    weftComm_t comm = nullptr;
    RANK_CHECK_OK(ctx.initComm(&comm));
    weftCompressor_t c = nullptr;
    RANK_CHECK_OK(weftCompressorCreateFromString(comm, spec.c_str(), &c));
    weftStream_t stream = nullptr;
    RANK_CHECK_OK(weftStreamCreate(&stream));
    auto x0 = gaussian(count, ctx.rank), x1 = gaussian(count, 100 + ctx.rank);
    std::vector<float> y0(count);
    // The last rank calls only once rank 0's calls are queued.
    if (ctx.rank == n - 1) rank0Queued.wait();
    RANK_CHECK_OK(weftCompressedAllReduce(x0.data(), y0.data(), count, weftFloat32, weftAvg, c,
                                          comm, stream));
    RANK_CHECK_OK(weftCompressedAllReduce(x1.data(), x1.data(), count, weftFloat32, weftAvg, c,
                                          comm, stream));
    if (ctx.rank == 0) {
      RANK_EXPECT(weftStreamQuery(stream) == weftInProgress)
          << "done although the last rank has not called yet";
      rank0Queued.post();
    }
    RANK_CHECK_OK(weftStreamSynchronize(stream));
    RANK_EXPECT(weftStreamQuery(stream) == weftSuccess);
    RANK_EXPECT(differences(spec, y0, model[0]) == 0) << "step 0 differs from the model";
    RANK_EXPECT(differences(spec, x1, model[1]) == 0) << "step 1 differs from the model";
    // Bad arguments are still refused at the call, with nothing queued.
    RANK_EXPECT(weftCompressedAllReduce(x0.data(), y0.data(), count, weftFloat32, weftMax, c, comm,
                                        stream) == weftInvalidArgument);
    RANK_EXPECT(weftStreamQuery(stream) == weftSuccess);
    RANK_CHECK_OK(weftStreamDestroy(stream));
    RANK_CHECK_OK(weftCompressorDestroy(c));
    RANK_CHECK_OK(weftCommDestroy(comm));
  });
}

}  // namespace
