#include "algorithms/online.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <string>

#include "algorithms/algorithms.h"
#include "algorithms/byte_collectives.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {
namespace {

int algorithmsOf(CollKind kind) {
  static const auto counts = [] {
    std::array<int, 16> c{};
    for (const Algorithm& a : allAlgorithms()) ++c[static_cast<size_t>(a.kind) % c.size()];
    return c;
  }();
  return counts[static_cast<size_t>(kind) % counts.size()];
}

}  // namespace

OnlineTuner::OnlineTuner(int rounds, double budgetUs, double spread, int most, double syncFromUs)
    : rounds_(std::max(rounds, 2)),
      budgetUs_(budgetUs),
      spread_(spread),
      most_(std::max(most, 1)),
      syncFromUs_(syncFromUs) {}

std::unique_ptr<OnlineTuner> OnlineTuner::fromEnv() {
  if (envInt("TUNER_ONLINE", 1) == 0) return nullptr;
  int64_t rounds = envInt("TUNER_ONLINE_ROUNDS", 4);
  if (rounds < 2 || rounds > 100) {
    WEFT_WARN(kLogTuning, "WEFT_TUNER_ONLINE_ROUNDS=%lld is outside 2..100; using 4",
              static_cast<long long>(rounds));
    rounds = 4;
  }
  // The model's predictions missed by up to 3x (all-gather at 512 KiB,
  // 4 ranks on 2 CPUs: direct predicted 2.1x the ring, measured 0.65x), so
  // candidates come from within 3x of its cheapest.
  return std::make_unique<OnlineTuner>(static_cast<int>(rounds), kBudgetUs, 3.0, 3, kSyncFromUs);
}

int OnlineTuner::roundsFor(double predictedUs) const {
  if (!(predictedUs > 0)) return rounds_;
  const double wanted = std::ceil(budgetUs_ / predictedUs) + 1;
  return static_cast<int>(std::clamp(wanted, static_cast<double>(rounds_),
                                     static_cast<double>(std::max(rounds_, kMostRounds))));
}

OnlineTuner::TrialCall OnlineTuner::trialCall(int call, int candidates, int segment) {
  const int pass = call / (candidates * segment);
  const int turn = call / segment % candidates;
  return TrialCall{(turn + pass) % candidates, pass, call % segment != 0};
}

int OnlineTuner::segmentFor(int rounds) {
  const int timed = std::max(rounds - 1, 1);
  return 1 + (timed + kPasses - 1) / kPasses;
}

Choice OnlineTuner::choose(const CollArgs& args, CollContext& ctx) {
  timing_ = nullptr;
  pending_.store(false, std::memory_order_release);
  const Tuner* tuner = ctx.tuner();
  if (tuner == nullptr || ctx.nranks() < 2) return chooseAlgorithm(args, ctx);
  const size_t bytes = args.count * dtypeSize(args.dtype);
  // Kinds with one algorithm (send, receive, gather, scatter, all-to-all-v)
  // take no key: their counts may differ from rank to rank and call to call.
  if (algorithmsOf(args.kind) < 2) return tuner->choose(args.kind, bytes);
  if (const uint64_t gen = restrictionsGeneration(); gen != generation_) {
    keys_.clear();  // WEFT_ALGO or WEFT_PROTO was read again
    generation_ = gen;
  }
  const Key key{static_cast<int>(args.kind), static_cast<int>(args.dtype), bytes};
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    // The model's choice, logged as without online tuning.
    const Choice model = tuner->choose(args.kind, bytes);
    if (keys_.size() >= kMaxKeys) return model;
    Trials t;
    t.candidates = trialChoices(args.kind, bytes, tuner->shape(), tuner->params(), allAlgorithms(),
                                envRestrictions(), spread_, most_);
    t.segmentUs.assign(t.candidates.size(), {});
    t.segment = segmentFor(roundsFor(t.candidates.front().predictedUs));
    t.sync = (t.segment - 1) * t.candidates.front().predictedUs >= syncFromUs_;
    if (t.candidates.size() == 1) {
      t.decided = 0;
    } else {
      std::string names;
      for (const Choice& c : t.candidates)
        names += std::string(names.empty() ? "" : ", ") + c.alg->name;
      WEFT_INFO(kLogTuning, "online: %s %zu bytes %s: timing %s", collName(args.kind), bytes,
                dtypeName(args.dtype), names.c_str());
    }
    it = keys_.emplace(key, std::move(t)).first;
  }
  Trials& t = it->second;
  if (t.decided >= 0) return t.candidates[t.decided];
  timing_ = &*it;
  pending_.store(true, std::memory_order_release);
  return t
      .candidates[trialCall(t.calls, static_cast<int>(t.candidates.size()), t.segment).candidate];
}

Status OnlineTuner::ran(CollContext& ctx, double us) {
  if (timing_ == nullptr) return Status::ok();
  const Key& key = timing_->first;
  Trials* t = &timing_->second;
  timing_ = nullptr;
  const TrialCall call = trialCall(t->calls, static_cast<int>(t->candidates.size()), t->segment);
  if (call.timed) {
    t->runUs += us;
    t->runMaxUs = std::max(t->runMaxUs, us);
  }
  if ((t->calls + 1) % t->segment == 0) {
    const int timed = t->segment - 1;
    double lagUs = 0;
    if (t->sync) WEFT_RETURN_IF_ERROR(waitForAll(ctx, &lagUs));
    t->segmentUs[call.candidate][call.pass] =
        (timed >= kTrimFrom ? (t->runUs - t->runMaxUs) / (timed - 1) : t->runUs / timed) +
        lagUs / timed;
    t->runUs = 0;
    t->runMaxUs = 0;
  }
  if (++t->calls < t->total()) return Status::ok();
  pending_.store(false, std::memory_order_release);
  return agree(ctx, key, *t);
}

Status OnlineTuner::waitForAll(CollContext& ctx, double* us) {
  const auto start = std::chrono::steady_clock::now();
  const uint8_t mine = 1;
  std::vector<uint8_t> all(static_cast<size_t>(ctx.nranks()));
  WEFT_RETURN_IF_ERROR(algo::allGatherBytes(ctx, &mine, all.data(), 1));
  *us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return Status::ok();
}

Status OnlineTuner::agree(CollContext& ctx, const Key& key, Trials& t) {
  const size_t n = t.candidates.size();
  // This rank's figure per candidate: the median of its segments' means.
  std::vector<double> typical(n);
  for (size_t c = 0; c < n; ++c) {
    std::array<double, kPasses> means = t.segmentUs[c];
    std::sort(means.begin(), means.end());
    typical[c] = means[kPasses / 2];
  }
  std::vector<double> all(n * static_cast<size_t>(ctx.nranks()));
  WEFT_RETURN_IF_ERROR(algo::allGatherBytes(ctx, typical.data(), all.data(), n * sizeof(double)));
  // A candidate's time is its slowest rank's figure: a collective is done
  // when its last rank is (a chain broadcast's root finishes long before
  // the chain's end). The model's choice stays unless another beats it by
  // kMargin: trials are few and single calls noisy, and where the model
  // was right the trials' noise alone overrode it (4 ranks on 2 CPUs,
  // forced: chain broadcast 735 us at 2 MiB, binomial 978, which the trials
  // preferred). Among the others, ties keep the model's order.
  std::vector<double> slowest(n, 0.0);
  for (int r = 0; r < ctx.nranks(); ++r) {
    for (size_t c = 0; c < n; ++c) slowest[c] = std::max(slowest[c], all[r * n + c]);
  }
  size_t pick = 0;
  for (size_t c = 1; c < n; ++c) {
    if (slowest[c] < slowest[pick] && slowest[c] < kMargin * slowest[0]) pick = c;
  }
  t.decided = static_cast<int>(pick);
  std::string times;
  for (size_t c = 0; c < n; ++c) {
    char one[64];
    std::snprintf(one, sizeof one, "%s%s %.2f us", c ? ", " : "", t.candidates[c].alg->name,
                  slowest[c]);
    times += one;
  }
  WEFT_INFO(kLogTuning,
            "online: %s %zu bytes %s: %s (slowest rank, median of %d runs of %d) -> %s%s",
            collName(static_cast<CollKind>(std::get<0>(key))), std::get<2>(key),
            dtypeName(static_cast<weftDataType_t>(std::get<1>(key))), times.c_str(), kPasses,
            t.segment - 1, t.candidates[pick].alg->name, pick == 0 ? " (the model's choice)" : "");
  return Status::ok();
}

}  // namespace weft
