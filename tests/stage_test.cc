// Resumable algorithm stages (algorithms/stage.h): runStages interleaves
// stages so that one can wait on another's progress, reports the first
// error, and waits (Progress::idle) only when no stage moved.
#include "algorithms/stage.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::algo {
namespace {

// Counts idle rounds; fails check() once told to.
class CountingHealth final : public HealthMonitor {
 public:
  bool failed() const override { return fail; }
  Status check() override { return fail ? Status(weftRemoteError, "peer gone") : Status::ok(); }
  bool poll() override {
    ++polls;
    return false;
  }
  void park(long) override {}
  bool fail = false;
  int polls = 0;
};

// Hands `n` values to `out` one per resume, each only once the other
// producer has handed the previous one (a lane waiting on another's output).
Stage producer(std::vector<std::string>& out, const std::vector<int>& other, std::vector<int>& mine,
               const char* name, int n) {
  for (int i = 0; i < n; ++i) {
    while (static_cast<int>(other.size()) < i) co_yield false;
    mine.push_back(i);
    out.push_back(std::string(name) + std::to_string(i));
    co_yield true;
  }
  co_return Status::ok();
}

TEST(Stage, StagesTakeTurnsAndWaitForEachOther) {
  CountingHealth health;
  Progress progress(health);
  std::vector<std::string> log;
  std::vector<int> a, b;
  Stage stages[] = {producer(log, b, a, "a", 3), producer(log, a, b, "b", 3)};
  ASSERT_TRUE(runStages(stages, progress).isOk());
  // Run one after the other, the first would wait for the second for ever;
  // taking turns they alternate.
  EXPECT_EQ(log, (std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "b2"}));
  EXPECT_TRUE(stages[0].done() && stages[1].done());
}

Stage failsAfter(int rounds) {
  for (int i = 0; i < rounds; ++i) co_yield true;
  co_return Status(weftInvalidUsage, "stage failed");
}

Stage waitsForever(int& resumes) {
  for (;;) {
    ++resumes;
    co_yield false;
  }
}

TEST(Stage, TheFirstErrorEndsTheRun) {
  CountingHealth health;
  Progress progress(health);
  int resumes = 0;
  Stage stages[] = {waitsForever(resumes), failsAfter(2)};
  const Status s = runStages(stages, progress);
  EXPECT_EQ(s.code(), weftInvalidUsage);
  EXPECT_NE(s.message().find("stage failed"), std::string::npos) << s.message();
  EXPECT_EQ(resumes, 3);
  EXPECT_FALSE(stages[0].done());  // left where it was
}

TEST(Stage, ANestedStageYieldsThroughItsParent) {
  std::vector<int> seen;
  auto inner = [&seen]() -> Stage {
    seen.push_back(1);
    co_yield false;
    seen.push_back(2);
    co_return Status::ok();
  };
  auto outer = [&seen, inner]() -> Stage {
    WEFT_CO_AWAIT_STAGE(inner());
    seen.push_back(3);
    co_return Status::ok();
  };
  Stage s = outer();
  EXPECT_FALSE(s.resume());  // the inner stage's wait
  EXPECT_EQ(seen, (std::vector<int>{1}));
  while (!s.done()) s.resume();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(s.status().isOk());
}

TEST(Stage, WaitingStagesIdleUntilTheHealthCheckFails) {
  CountingHealth health;
  Progress progress(health);
  int resumes = 0;
  Stage stages[] = {waitsForever(resumes), waitsForever(resumes)};
  health.fail = true;
  const Status s = runStages(stages, progress);
  EXPECT_EQ(s.code(), weftRemoteError) << s.message();
  EXPECT_GE(health.polls, 1);  // idle() ran, not a busy loop that never checks
}

}  // namespace
}  // namespace weft::algo
