// Convergence: data-parallel softmax regression on a synthetic
// classification set generated here, 4 ranks each training on its own shard,
// gradients averaged by plain allreduce or by each compressed allreduce.
// After the same number of steps every compressor's loss is within 2% of
// uncompressed training's, and 1-bit without error feedback is visibly worse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness/multirank.h"
#include "weft/weft.h"

namespace {

constexpr int kFeatures = 128;
constexpr int kClasses = 16;
constexpr int kPerRank = 256;
constexpr int kParams = kClasses * kFeatures + kClasses;  // W (row-major), then b

struct Shard {
  std::vector<float> x;  // kPerRank x kFeatures
  std::vector<int> y;
};

// Class centres plus noise; features on scales from 0.2 to 2, so that the
// gradient's coordinates differ widely in size (hard for sign compression
// without error feedback).
Shard makeShard(int rank) {
  std::mt19937 gen(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(kClasses * kFeatures);
  for (float& c : centres) c = normal(gen);
  std::vector<float> scale(kFeatures);
  for (int j = 0; j < kFeatures; ++j) scale[j] = 0.2f + 1.8f * j / (kFeatures - 1);
  std::mt19937 own(99 + rank);
  std::uniform_int_distribution<int> cls(0, kClasses - 1);
  Shard s;
  for (int i = 0; i < kPerRank; ++i) {
    const int y = cls(own);
    s.y.push_back(y);
    for (int j = 0; j < kFeatures; ++j)
      s.x.push_back((centres[y * kFeatures + j] + 3.0f * normal(own)) * scale[j]);
  }
  return s;
}

// L2 regularisation makes the objective strongly convex: training reaches a
// plateau, so that "the same loss after the same steps" is meaningful.
constexpr double kL2 = 0.02;

// Mean cross-entropy over the shard plus the L2 term; fills grad when not
// null.
double lossAndGrad(const Shard& s, const std::vector<float>& w, std::vector<float>* grad) {
  if (grad) grad->assign(kParams, 0.0f);
  double loss = 0;
  std::vector<double> p(kClasses);
  for (int i = 0; i < kPerRank; ++i) {
    const float* x = &s.x[i * kFeatures];
    double mx = -1e300;
    for (int c = 0; c < kClasses; ++c) {
      double z = w[kClasses * kFeatures + c];
      for (int j = 0; j < kFeatures; ++j) z += w[c * kFeatures + j] * x[j];
      p[c] = z;
      mx = std::max(mx, z);
    }
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (double& v : p) v /= sum;
    loss -= std::log(std::max(p[s.y[i]], 1e-30));
    if (!grad) continue;
    for (int c = 0; c < kClasses; ++c) {
      const float g = static_cast<float>((p[c] - (c == s.y[i] ? 1.0 : 0.0)) / kPerRank);
      for (int j = 0; j < kFeatures; ++j) (*grad)[c * kFeatures + j] += g * x[j];
      (*grad)[kClasses * kFeatures + c] += g;
    }
  }
  double reg = 0;
  for (int i = 0; i < kClasses * kFeatures; ++i) {
    reg += 0.5 * kL2 * w[i] * w[i];
    if (grad) (*grad)[i] += static_cast<float>(kL2 * w[i]);
  }
  return loss / kPerRank + reg;
}

// Trains with `spec` ("" = plain weftAllReduce) and returns the loss over
// all ranks' data after `steps` steps.
double train(weftComm_t comm, int rank, const std::string& spec, int steps) {
  const Shard shard = makeShard(rank);
  std::vector<float> w(kParams, 0.0f), grad;
  weftCompressor_t c = nullptr;
  const size_t shapes[] = {kClasses, kFeatures, 1, kClasses};
  if (spec == "powersgd") {
    weftCompressorParams_t p = WEFT_COMPRESSOR_PARAMS_INITIALIZER;
    p.rank = 4;
    p.numTensors = 2;
    p.shapes = shapes;
    RANK_CHECK_OK(weftCompressorCreate(comm, weftCompressPowerSGD, &p, &c));
  } else if (!spec.empty()) {
    RANK_CHECK_OK(weftCompressorCreateFromString(comm, spec.c_str(), &c));
  }
  const float lr = 0.1f;
  for (int t = 0; t < steps; ++t) {
    lossAndGrad(shard, w, &grad);
    if (c)
      RANK_CHECK_OK(weftCompressedAllReduce(grad.data(), grad.data(), kParams, weftFloat32, weftAvg,
                                            c, comm, nullptr));
    else
      RANK_CHECK_OK(
          weftAllReduce(grad.data(), grad.data(), kParams, weftFloat32, weftAvg, comm, nullptr));
    for (int i = 0; i < kParams; ++i) w[i] -= lr * grad[i];
  }
  if (c) RANK_CHECK_OK(weftCompressorDestroy(c));
  double local = lossAndGrad(shard, w, nullptr), total = 0;
  RANK_CHECK_OK(weftAllReduce(&local, &total, 1, weftFloat64, weftAvg, comm, nullptr));
  return total;
}

TEST(CompressionConvergence, CompressedTrainingMatchesUncompressed) {
  weft::test::runRanks(4, [](weftComm_t comm, int rank, int) {
    const int steps = 200;
    const double plain = train(comm, rank, "", steps);
    const double start = std::log(static_cast<double>(kClasses));
    RANK_ASSERT(plain < 0.5 * start) << "uncompressed training did not learn: loss " << plain;
    for (const char* spec : {"onebit", "powersgd", "topk:ratio=0.1", "fp16", "bf16"}) {
      const double loss = train(comm, rank, spec, steps);
      if (rank == 0) std::printf("%-16s loss %.5f (uncompressed %.5f)\n", spec, loss, plain);
      RANK_EXPECT(std::fabs(loss - plain) <= 0.02 * plain)
          << spec << ": loss " << loss << " vs uncompressed " << plain;
    }
    const double noEf = train(comm, rank, "onebit:ef=0", steps);
    if (rank == 0) std::printf("%-16s loss %.5f\n", "onebit:ef=0", noEf);
    RANK_EXPECT(noEf > 1.1 * plain)
        << "1-bit without error feedback: loss " << noEf << " vs uncompressed " << plain;
  });
}

}  // namespace
