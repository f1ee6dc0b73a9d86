// Codecs and compressed allreduce on the in-process model (ranks as threads,
// compression/local_group.h): error bounds, error feedback, PowerSGD
// exactness, bit-identical results, and the serial references.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "compression/codec.h"
#include "compression/compressor.h"
#include "compression/linalg.h"
#include "compression/local_group.h"
#include "compression/params.h"
#include "compression/powersgd_kernels.h"
#include "compression/rng.h"
#include "harness/data.h"

namespace weft::compression {
namespace {

using weft::test::gaussian;

std::unique_ptr<Compressor> make(const std::string& spec) {
  weftCompressKind_t kind;
  weftCompressorParams_t p;
  Status st = parseSpec(spec, &kind, &p);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Compressor> c;
  st = Compressor::create(kind, p, &c);
  EXPECT_TRUE(st.isOk()) << st.message();
  return c;
}

// Runs `steps` compressed allreduces of inputs(rank, step) on n thread-ranks,
// each with its own compressor; returns every rank's outputs of every step.
using InputFn = std::function<std::vector<float>(int rank, int step)>;
std::vector<std::vector<std::vector<float>>> runGroup(int n, const std::string& spec, size_t count,
                                                      int steps, const InputFn& inputs,
                                                      bool average = true) {
  std::vector<std::vector<std::vector<float>>> out(n);
  Status st = runLocalGroup(n, [&](CollRunner& runner) -> Status {
    auto c = make(spec);
    const int r = runner.rank();
    for (int s = 0; s < steps; ++s) {
      std::vector<float> x = inputs(r, s);
      std::vector<float> y(count);
      WEFT_RETURN_IF_ERROR(c->allReduce(runner, x.data(), y.data(), count, weftFloat32, average));
      out[r].push_back(std::move(y));
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.isOk()) << st.message();
  return out;
}

// ---- codecs ----------------------------------------------------------------

TEST(CompressionCodec, HalfAndBf16RoundTripWithinHalfUlp) {
  const auto x = gaussian(10007, 1, 3.0f);
  for (int bf = 0; bf < 2; ++bf) {
    auto codec = bf ? makeBf16Codec() : makeHalfCodec();
    const double rel = bf ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    std::vector<uint8_t> wire(codec->wireBytes(x.size()));
    std::vector<float> y(x.size());
    codec->encode(x.data(), nullptr, x.size(), x.size(), wire.data());
    codec->decode(wire.data(), x.size(), x.size(), y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double bound = std::max(rel * std::fabs(x[i]), 6.1e-5 * rel);  // fp16 subnormals
      ASSERT_LE(std::fabs(y[i] - x[i]), bound) << codec->name() << " i=" << i << " x=" << x[i];
      // Same rounding as the scalar reference in base/dtype.
      const uint16_t ref = bf ? floatToBf16(x[i]) : floatToHalf(x[i]);
      uint16_t got;
      std::memcpy(&got, wire.data() + 2 * i, 2);
      ASSERT_EQ(got, ref) << codec->name() << " i=" << i;
    }
  }
}

TEST(CompressionCodec, OneBitIsScaledSignWithBoundedError) {
  const size_t block = 64, n = 1000;  // a partial last block
  auto x = gaussian(n, 2);
  auto codec = makeOneBitCodec(block);
  std::vector<uint8_t> wire(codec->wireBytes(1024));
  EXPECT_EQ(wire.size(), 1024 / 8 + 16 * 4u);
  std::vector<float> y(n);
  codec->encode(x.data(), nullptr, n, 1024, wire.data());
  codec->decode(wire.data(), n, 1024, y.data());
  for (size_t b = 0; b < n; b += block) {
    const size_t m = std::min(block, n - b);
    double abs = 0, sq = 0, err = 0;
    for (size_t i = b; i < b + m; ++i) abs += std::fabs(x[i]), sq += double(x[i]) * x[i];
    const double s = abs / m;
    for (size_t i = b; i < b + m; ++i) {
      ASSERT_NEAR(std::fabs(y[i]), s, 1e-5 * s);
      ASSERT_EQ(y[i] >= 0, x[i] >= 0) << i;
      err += (y[i] - x[i]) * double(y[i] - x[i]);
    }
    EXPECT_NEAR(err, sq - m * s * s, 1e-3 * sq);  // the known squared error
    EXPECT_LE(err, sq);
  }
  // decodeAdd combines; the residual form leaves exactly x - decode(x).
  std::vector<float> acc(n, 1.0f), res(n, 0.0f);
  codec->decodeAdd(wire.data(), n, 1024, acc.data());
  for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(acc[i], 1.0f + y[i]);
  codec->encode(x.data(), res.data(), n, 1024, wire.data());
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(res[i], x[i] - y[i], 1e-6) << i;
}

TEST(CompressionLinalg, OrthonormalisationGivesOrthonormalColumnsOfTheSameSpan) {
  for (size_t r : {4u, 24u}) {  // Gram-Schmidt, Householder
    const size_t m = 100;
    auto p = gaussian(m * r, 3 + r);
    const auto orig = p;
    std::vector<float> work(2 * m * r);
    orthonormalize(p.data(), m, r, work.data());
    std::vector<float> g(r * r);
    gemm(true, false, r, r, m, 1.0f, p.data(), p.data(), 0.0f, g.data());
    for (size_t i = 0; i < r; ++i)
      for (size_t j = 0; j < r; ++j) ASSERT_NEAR(g[i * r + j], i == j ? 1.0f : 0.0f, 1e-4) << r;
    // Projecting the original columns onto the new ones keeps them.
    std::vector<float> c(r * r), back(m * r);
    gemm(true, false, r, r, m, 1.0f, p.data(), orig.data(), 0.0f, c.data());
    gemm(false, false, m, r, r, 1.0f, p.data(), c.data(), 0.0f, back.data());
    for (size_t i = 0; i < m * r; ++i) ASSERT_NEAR(back[i], orig[i], 1e-3) << r;
  }
}

// Where the build found Debian's serial OpenBLAS, it is the one this process
// loaded (the RPATH beat the system's pthread alternative): no BLAS thread
// pool in the ranks (src/compression/CMakeLists.txt says what it cost).
TEST(CompressionLinalg, TheSerialOpenBlasIsTheOneLoaded) {
#if defined(WEFT_SERIAL_OPENBLAS)
  EXPECT_EQ(openblas_get_parallel(), 0)
      << "libopenblas.so.0 resolved to a threaded build: check the RUNPATH of the binary";
#else
  GTEST_SKIP() << "built without the serial OpenBLAS (Debian: libopenblas0-serial)";
#endif
}

// ---- compressed allreduce on the thread model ------------------------------

TEST(CompressionGroup, CastMatchesSerialReference) {
  const int n = 3;
  const size_t count = 1001;
  for (const char* spec : {"fp16", "bf16"}) {
    const bool bf = spec[0] == 'b';
    auto in = [&](int r, int) { return gaussian(count, 10 + r); };
    auto out = runGroup(n, spec, count, 1, in);
    auto q = [&](float v) {
      return bf ? bf16ToFloat(floatToBf16(v)) : halfToFloat(floatToHalf(v));
    };
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += q(in(r, 0)[i]);
      const float want = q(sum / n);
      for (int r = 0; r < n; ++r) ASSERT_EQ(out[r][0][i], want) << spec << " i=" << i;
    }
  }
}

// Large cast buffers run pipelined in slices (two_phase.cc): the result must
// still be the per-element serial reference, in place and not.
TEST(CompressionGroup, PipelinedCastMatchesSerialReference) {
  const size_t count = (size_t{6} << 20) + 77;  // 24 MiB of fp32: 3 slices
  for (int n : {2, 3}) {
    for (const char* spec : {"fp16", "bf16"}) {
      const bool bf = spec[0] == 'b';
      std::vector<std::vector<float>> in(n);
      for (int r = 0; r < n; ++r) in[r] = gaussian(count, 20 + r);
      auto q = [&](float v) {
        return bf ? bf16ToFloat(floatToBf16(v)) : halfToFloat(floatToHalf(v));
      };
      std::vector<float> want(count);
      for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += q(in[r][i]);
        want[i] = q(sum / static_cast<float>(n));
      }
      std::vector<std::vector<float>> out(n);
      Status st = runLocalGroup(n, [&](CollRunner& runner) -> Status {
        auto c = make(spec);
        const int r = runner.rank();
        // Rank 0 in place, the others not.
        out[r] = r == 0 ? in[r] : std::vector<float>(count);
        const float* src = r == 0 ? out[r].data() : in[r].data();
        return c->allReduce(runner, src, out[r].data(), count, weftFloat32, true);
      });
      ASSERT_TRUE(st.isOk()) << st.message();
      for (int r = 0; r < n; ++r) {
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) bad += out[r][i] != want[i];
        EXPECT_EQ(bad, 0u) << spec << " n=" << n << " rank " << r;
      }
    }
  }
}

TEST(CompressionGroup, ResultsAreBitIdenticalOnEveryRank) {
  const int n = 4;
  const size_t count = 4099;
  for (const char* spec : {"onebit", "onebit:block=64", "topk:ratio=0.05",
                           "topk:ratio=0.05,random=1", "powersgd:rank=2", "fp16", "bf16"}) {
    auto out =
        runGroup(n, spec, count, 3, [&](int r, int s) { return gaussian(count, 100 * s + r); });
    for (int s = 0; s < 3; ++s)
      for (int r = 1; r < n; ++r)
        ASSERT_EQ(std::memcmp(out[r][s].data(), out[0][s].data(), count * 4), 0)
            << spec << " step " << s << " rank " << r;
  }
}

TEST(CompressionGroup, TopKWithRatioOneIsExact) {
  const int n = 3;
  const size_t count = 257;
  auto in = [&](int r, int) { return gaussian(count, 20 + r); };
  auto out = runGroup(n, "topk:ratio=1", count, 1, in, false);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += in(r, 0)[i];
    ASSERT_EQ(out[0][0][i], sum) << i;
  }
}

TEST(CompressionGroup, TopKKeepsTheLargestEntries) {
  const int n = 2;
  const size_t count = 1000;
  auto in = [&](int r, int) { return gaussian(count, 30 + r); };
  auto out = runGroup(n, "topk:ratio=0.01,ef=0", count, 1, in, false);  // k = 10
  std::vector<float> want(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    auto x = in(r, 0);
    std::vector<size_t> idx(count);
    for (size_t i = 0; i < count; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    for (int k = 0; k < 10; ++k) want[idx[k]] += x[idx[k]];
  }
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[0][0][i], want[i]) << i;
}

// Large buffers select among candidates from a sampled threshold: the same
// entries as the exact selection, ties (many here) broken by lower index.
TEST(CompressionGroup, TopKOnLargeBuffersSelectsExactlyWithTies) {
  const int n = 2;
  const size_t count = 300000, k = 3000;
  auto in = [&](int r, int) {
    auto g = gaussian(count, 40 + r);
    for (float& v : g) v = std::round(v * 4.0f) / 4.0f;  // many equal magnitudes
    return g;
  };
  auto out = runGroup(n, "topk:ratio=0.01,ef=0", count, 1, in, false);
  std::vector<float> want(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    auto x = in(r, 0);
    std::vector<size_t> idx(count);
    for (size_t i = 0; i < count; ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    for (size_t j = 0; j < k; ++j) want[idx[j]] += x[idx[j]];
  }
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += out[0][0][i] != want[i];
  EXPECT_EQ(bad, 0u);
}

// Error feedback: sum over steps of the results tracks the sum of the true
// averages; the gap is the (averaged) residual, which stays bounded, while
// without feedback it grows with the number of steps.
double runningGap(const std::string& spec, int steps) {
  const int n = 2;
  const size_t count = 256;
  // A persistent bias (some coordinates always small and positive) is what a
  // biased compressor without feedback never transmits.
  auto in = [&](int r, int s) {
    auto g = gaussian(count, 1000 * s + r);
    for (size_t i = 0; i < count; ++i) g[i] = g[i] * (i % 2 ? 1.0f : 0.05f) + 0.02f;
    return g;
  };
  auto out = runGroup(n, spec, count, steps, in);
  std::vector<double> gap(count, 0.0);
  for (int s = 0; s < steps; ++s) {
    auto a = in(0, s), b = in(1, s);
    for (size_t i = 0; i < count; ++i) gap[i] += out[0][s][i] - (a[i] + b[i]) / 2.0;
  }
  double worst = 0;
  for (double g : gap) worst = std::max(worst, std::fabs(g));
  return worst;
}

TEST(CompressionGroup, OneBitErrorFeedbackKeepsRunningSumsClose) {
  const double ef = runningGap("onebit:block=64", 1000);
  const double noEf = runningGap("onebit:block=64,ef=0", 1000);
  std::printf("running-sum gap after 1000 steps: with feedback %g, without %g\n", ef, noEf);
  EXPECT_LT(ef, 10.0) << "residual grew: gap " << ef;
  EXPECT_GT(noEf, 4 * ef) << "ef " << ef << " no ef " << noEf;
}

TEST(CompressionGroup, TopKErrorFeedbackKeepsRunningSumsClose) {
  const double ef = runningGap("topk:ratio=0.05", 1000);
  const double noEf = runningGap("topk:ratio=0.05,ef=0", 1000);
  std::printf("running-sum gap after 1000 steps: with feedback %g, without %g\n", ef, noEf);
  EXPECT_LT(ef, 10.0) << "residual grew: gap " << ef;
  EXPECT_GT(noEf, 4 * ef) << "ef " << ef << " no ef " << noEf;
}

TEST(CompressionGroup, PowerSgdErrorFeedbackKeepsRunningSumsClose) {
  const double ef = runningGap("powersgd:rank=1", 1000);
  const double noEf = runningGap("powersgd:rank=1,ef=0", 1000);
  std::printf("running-sum gap after 1000 steps: with feedback %g, without %g\n", ef, noEf);
  EXPECT_LT(ef, 10.0) << "residual grew: gap " << ef;
  EXPECT_GT(noEf, 4 * ef) << "ef " << ef << " no ef " << noEf;
}

TEST(CompressionGroup, PowerSgdIsExactOnLowRankMatrices) {
  const int n = 3;
  for (size_t r : {2u, 4u, 20u}) {  // Gram-Schmidt, and Householder for 20
    const size_t rows = 64, cols = 48;
    const auto u = gaussian(rows * r, 7);  // shared column space
    auto in = [&](int rank, int) {
      auto v = gaussian(cols * r, 50 + rank);
      std::vector<float> m(rows * cols);
      gemm(false, true, rows, cols, r, 1.0f, u.data(), v.data(), 0.0f, m.data());
      return m;
    };
    const std::string spec = "powersgd:rank=" + std::to_string(r) + ",rows=64,cols=48,rate=1";
    auto out = runGroup(n, spec, rows * cols, 1, in);
    double maxAbs = 0, maxErr = 0;
    for (size_t i = 0; i < rows * cols; ++i) {
      double want = 0;
      for (int k = 0; k < n; ++k) want += in(k, 0)[i];
      want /= n;
      maxAbs = std::max(maxAbs, std::fabs(want));
      maxErr = std::max(maxErr, std::fabs(out[0][0][i] - want));
    }
    EXPECT_LT(maxErr, 1e-4 * maxAbs) << "rank " << r << ": max error " << maxErr;
  }
}

// PowerSGD as the paper writes it, on whole matrices through BLAS: the
// serial reference for the fused row kernels (and their deferred residual
// update, padding of reshaped vectors, odd ranks and widths).
std::vector<std::vector<float>> powerSgdReference(int n, size_t rows, size_t cols, size_t r,
                                                  size_t count, bool ef, int steps,
                                                  const InputFn& inputs) {
  const weftCompressorParams_t params = defaultParams();
  std::vector<float> q(cols * r);
  SplitMix rng(params.seed + 0x51ED2701ull);
  for (float& v : q) v = static_cast<float>(rng.normal());
  std::vector<std::vector<float>> res(n, std::vector<float>(rows * cols, 0.0f));
  std::vector<std::vector<float>> outs;
  std::vector<float> work(2 * rows * r);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> m(n, std::vector<float>(rows * cols, 0.0f));
    std::vector<float> p(rows * r, 0.0f), pk(rows * r), qn(cols * r, 0.0f), qk(cols * r);
    for (int k = 0; k < n; ++k) {
      const auto x = inputs(k, s);
      for (size_t i = 0; i < count; ++i) m[k][i] = (ef ? res[k][i] : 0.0f) + x[i];
      gemm(false, false, rows, r, cols, 1.0f, m[k].data(), q.data(), 0.0f, pk.data());
      for (size_t i = 0; i < p.size(); ++i) p[i] += pk[i];
    }
    orthonormalize(p.data(), rows, r, work.data());
    for (int k = 0; k < n; ++k) {
      gemm(true, false, cols, r, rows, 1.0f, m[k].data(), p.data(), 0.0f, qk.data());
      for (size_t i = 0; i < qn.size(); ++i) qn[i] += qk[i];
    }
    for (float& v : qn) v /= static_cast<float>(n);
    q = qn;
    std::vector<float> hat(rows * cols);
    gemm(false, true, rows, cols, r, 1.0f, p.data(), q.data(), 0.0f, hat.data());
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < count; ++i) res[k][i] = m[k][i] - hat[i];
    outs.emplace_back(hat.begin(), hat.begin() + count);
  }
  return outs;
}

TEST(CompressionGroup, PowerSgdMatchesTheSerialReferenceOverSteps) {
  struct Case {
    const char* spec;
    size_t rows, cols, r, count;
    bool ef;
  };
  // 1000 elements reshape to 32 x 32 with 24 of padding; 37 x 29: widths
  // that are no multiple of the vector width; rank 8: the largest fused.
  for (const Case& c : {Case{"powersgd:rank=3", 32, 32, 3, 1000, true},
                        Case{"powersgd:rank=3,ef=0", 32, 32, 3, 1000, false},
                        Case{"powersgd:rank=4,rows=37,cols=29", 37, 29, 4, 37 * 29, true},
                        Case{"powersgd:rank=8,rows=40,cols=64", 40, 64, 8, 40 * 64, true},
                        Case{"powersgd:rank=1,rows=64,cols=64", 64, 64, 1, 64 * 64, true}})
    for (bool scalar : {false, true}) {
      const int n = 3, steps = 4;
      auto in = [&](int rank, int step) { return gaussian(c.count, 1000 * step + rank); };
      const auto want = powerSgdReference(n, c.rows, c.cols, c.r, c.count, c.ef, steps, in);
      // The scalar kernels (CPUs without AVX2) as well as the vector ones.
      psgdUseScalarKernels(scalar);
      const auto got = runGroup(n, c.spec, c.count, steps, in);
      psgdUseScalarKernels(false);
      for (int s = 0; s < steps; ++s) {
        double maxAbs = 0, maxErr = 0;
        for (size_t i = 0; i < c.count; ++i) {
          maxAbs = std::max(maxAbs, std::fabs(static_cast<double>(want[s][i])));
          maxErr = std::max(maxErr, std::fabs(static_cast<double>(got[0][s][i]) - want[s][i]));
        }
        EXPECT_LT(maxErr, 1e-3 * maxAbs)
            << c.spec << (scalar ? " scalar" : "") << " step " << s << ": max error " << maxErr;
        for (int k = 1; k < n; ++k)
          EXPECT_EQ(std::memcmp(got[k][s].data(), got[0][s].data(), c.count * 4), 0)
              << c.spec << " rank " << k << " step " << s;
      }
    }
}

// M^ (expand, and the residual update in project) is computed alike by the
// AVX2 and the scalar kernels, bit for bit, so that ranks on different CPUs
// agree; the dot products (P, Q) may round differently.
TEST(CompressionKernels, VectorAndScalarKernelsAgree) {
  for (size_t r = 1; r <= kMaxFusedRank; ++r)
    for (size_t ld : {37u, 64u})
      for (size_t width : {ld, ld - 3}) {
        const size_t rows = 6;
        const auto qt = gaussian(r * ld, 1), p = gaussian(rows * r, 2), in = gaussian(rows * ld, 3);
        const auto res0 = gaussian(rows * ld, 4);
        std::vector<float> out[2], res[2], pn[2], back[2];
        for (int scalar = 0; scalar < 2; ++scalar) {
          psgdUseScalarKernels(scalar != 0);
          // Unaligned on purpose: the streaming path starts with a head.
          std::vector<float> o(rows * ld + 1, 0.0f);
          psgdExpandRows(r, ld, width, rows, p.data(), qt.data(), o.data() + 1, true);
          psgdStreamFence();
          out[scalar] = o;
          res[scalar] = res0;
          pn[scalar].assign(rows * r, 0.0f);
          for (size_t i = 0; i < rows; ++i)
            psgdProjectRow(r, ld, width, in.data() + i * ld, res[scalar].data() + i * ld,
                           p.data() + i * r, qt.data(), pn[scalar].data() + i * r);
          back[scalar].assign(r * ld, 0.0f);
          psgdBackProjectRows(r, ld, width, rows, in.data(), p.data(), back[scalar].data());
        }
        psgdUseScalarKernels(false);
        EXPECT_EQ(out[0], out[1]) << "expand, r " << r << " ld " << ld << " width " << width;
        EXPECT_EQ(res[0], res[1]) << "residual, r " << r << " ld " << ld << " width " << width;
        for (size_t i = 0; i < pn[0].size(); ++i) EXPECT_NEAR(pn[0][i], pn[1][i], 1e-3f) << i;
        for (size_t i = 0; i < back[0].size(); ++i) EXPECT_NEAR(back[0][i], back[1][i], 1e-3f) << i;
        // And expand against the definition.
        for (size_t i = 0; i < rows; ++i)
          for (size_t j = 0; j < width; ++j) {
            double v = 0;
            for (size_t k = 0; k < r; ++k) v += double(p[i * r + k]) * qt[k * ld + j];
            EXPECT_NEAR(out[0][1 + i * ld + j], v, 1e-4 * (1 + std::fabs(v)));
          }
      }
}

TEST(CompressionGroup, PowerSgdSendsSmallTensorsUncompressedAndExactly) {
  // Two tensors: 64x64 (compressed at rank 1) and a 1x10 bias (uncompressed).
  const size_t shapes[] = {64, 64, 1, 10};
  weftCompressorParams_t p = defaultParams();
  p.rank = 1;
  p.numTensors = 2;
  p.shapes = shapes;
  const size_t count = 64 * 64 + 10;
  std::vector<std::vector<float>> out(2);
  double wire = 0, plain = 0;
  Status st = runLocalGroup(2, [&](CollRunner& runner) -> Status {
    std::unique_ptr<Compressor> c;
    WEFT_RETURN_IF_ERROR(Compressor::create(weftCompressPowerSGD, p, &c));
    auto x = gaussian(count, 60 + runner.rank());
    out[runner.rank()].resize(count);
    WEFT_RETURN_IF_ERROR(
        c->allReduce(runner, x.data(), out[runner.rank()].data(), count, weftFloat32, false));
    if (runner.rank() == 0) wire = c->lastWireBytes(), plain = c->lastPlainBytes();
    return Status::ok();
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  auto a = gaussian(count, 60), b = gaussian(count, 61);
  for (size_t i = 64 * 64; i < count; ++i) EXPECT_EQ(out[0][i], a[i] + b[i]) << i;
  // 2 ranks: allreduce of 10 + 64 (P), then 64 (Q) floats, each 2(n-1)/n*4 bytes.
  EXPECT_DOUBLE_EQ(wire, 4.0 * (10 + 64 + 64));
  EXPECT_DOUBLE_EQ(plain, 4.0 * count);
}

TEST(CompressionGroup, Bf16InputsWork) {
  const int n = 2;
  const size_t count = 3000;
  std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(count));
  Status st = runLocalGroup(n, [&](CollRunner& runner) -> Status {
    auto c = make("onebit");
    auto x = gaussian(count, 70 + runner.rank());
    std::vector<uint16_t> xb(count);
    for (size_t i = 0; i < count; ++i) xb[i] = floatToBf16(x[i]);
    return c->allReduce(runner, xb.data(), out[runner.rank()].data(), count, weftBfloat16, true);
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(out[0], out[1]);
  size_t nonzero = 0;
  for (uint16_t v : out[0]) nonzero += bf16ToFloat(v) != 0.0f;
  EXPECT_GT(nonzero, count / 2);
}

// ---- bad input ---------------------------------------------------------------

TEST(CompressionParams, BadParamsAreRejectedWithClearMessages) {
  weftCompressKind_t kind;
  weftCompressorParams_t p;
  auto expectBad = [&](const char* spec, const char* words) {
    Status st = parseSpec(spec, &kind, &p);
    EXPECT_FALSE(st.isOk()) << spec;
    EXPECT_NE(st.message().find(words), std::string::npos) << spec << ": " << st.message();
  };
  expectBad("powersgd:rank=0", "at least 1");
  expectBad("powersgd:rank=-3", "at least 1");
  expectBad("topk:ratio=0", "(0, 1]");
  expectBad("topk:ratio=1.5", "(0, 1]");
  expectBad("onebit:block=12", "multiple of 8");
  expectBad("zip", "unknown compressor");
  expectBad("topk:foo=1", "unknown compressor option");
  expectBad("powersgd:rows=10", "both rows and cols");
  EXPECT_TRUE(parseSpec("powersgd:rank=4,rows=4096,cols=4096", &kind, &p).isOk());
  EXPECT_EQ(kind, weftCompressPowerSGD);
  EXPECT_EQ(p.rank, 4);
  EXPECT_EQ(p.rows, 4096u);
}

TEST(CompressionParams, ShapeMismatchWrongDtypeAndReuseAreErrors) {
  Status st = runLocalGroup(1, [&](CollRunner& runner) -> Status {
    std::vector<float> x(100, 1.0f), y(100);
    auto c = make("powersgd:rows=10,cols=11");
    Status s = c->allReduce(runner, x.data(), y.data(), 100, weftFloat32, true);
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("does not match count 100"), std::string::npos) << s.message();

    auto t = make("topk:ratio=0.1");
    EXPECT_TRUE(t->allReduce(runner, x.data(), y.data(), 100, weftFloat32, true).isOk());
    s = t->allReduce(runner, x.data(), y.data(), 50, weftFloat32, true);
    EXPECT_EQ(s.code(), weftInvalidUsage);
    EXPECT_NE(s.message().find("one compressor per buffer"), std::string::npos) << s.message();
    s = t->allReduce(runner, x.data(), y.data(), 100, weftInt32, true);
    EXPECT_NE(s.message().find("not int32"), std::string::npos) << s.message();
    t->reset();
    EXPECT_TRUE(t->allReduce(runner, x.data(), y.data(), 50, weftFloat32, true).isOk());
    return Status::ok();
  });
  EXPECT_TRUE(st.isOk()) << st.message();
}

}  // namespace
}  // namespace weft::compression
