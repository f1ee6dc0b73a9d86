// The progress engine on its own: ordering, waiting callers that drive the
// queue, inline runs, deadlines. Built under TSan in CI (scripts/test.sh).
#include "core/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace weft {
namespace {

// Each task carries its sequence number in colls[0].args.count; the runner
// checks that tasks run in posting order and records which thread ran them.
struct Recorder {
  std::atomic<size_t> next{0};
  std::atomic<int> outOfOrder{0};
  std::atomic<int> concurrent{0};
  std::atomic<int> running{0};

  Status run(Task& task) {
    if (running.fetch_add(1) != 0) concurrent.fetch_add(1);
    const size_t seq = task.colls.at(0).args.count;
    if (seq != next.load()) outOfOrder.fetch_add(1);
    next.store(seq + 1);
    running.fetch_sub(1);
    if (task.colls.at(0).args.root < 0) return Status(weftRemoteError, "injected failure");
    return Status::ok();
  }
};

std::shared_ptr<WorkState> makeWork(size_t seq, bool fail = false) {
  auto w = std::make_shared<WorkState>();
  CollCall call;
  call.args.count = seq;
  call.args.root = fail ? -1 : 0;
  w->task.colls.push_back(call);
  return w;
}

TEST(Engine, PostedWorkRunsInOrderAndWaitReturnsItsResult) {
  Recorder rec;
  Engine engine([&](Task& t) { return rec.run(t); });
  std::vector<std::shared_ptr<WorkState>> works;
  for (size_t i = 0; i < 500; ++i) {
    works.push_back(makeWork(i, i == 250));
    engine.post(works.back());
  }
  for (size_t i = 0; i < works.size(); ++i) {
    Status st = engine.wait(*works[i], std::nullopt);
    EXPECT_EQ(st.code(), i == 250 ? weftRemoteError : weftSuccess) << i;
  }
  EXPECT_EQ(rec.outOfOrder.load(), 0);
  EXPECT_EQ(rec.concurrent.load(), 0);
  EXPECT_EQ(rec.next.load(), 500u);
}

TEST(Engine, InlineRunsAfterEverythingPostedBefore) {
  Recorder rec;
  Engine engine([&](Task& t) { return rec.run(t); });
  size_t seq = 0;
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 3; ++k) engine.post(makeWork(seq++));
    auto inlineWork = makeWork(seq++);
    ASSERT_TRUE(engine.runInline([&] { return rec.run(inlineWork->task); }).isOk());
  }
  ASSERT_TRUE(engine.drain().isOk());
  EXPECT_EQ(rec.outOfOrder.load(), 0);
  EXPECT_EQ(rec.concurrent.load(), 0);
  EXPECT_EQ(rec.next.load(), seq);
}

TEST(Engine, ManyThreadsWaitingDriveTheQueueWithoutRunningTwice) {
  std::atomic<int> runs{0};
  Engine engine([&](Task&) {
    runs.fetch_add(1);
    return Status::ok();
  });
  std::vector<std::shared_ptr<WorkState>> works;
  for (int i = 0; i < 400; ++i) works.push_back(makeWork(0));
  std::vector<std::thread> waiters;
  for (int t = 0; t < 4; ++t)
    waiters.emplace_back([&, t] {
      for (size_t i = t; i < works.size(); i += 4)
        EXPECT_TRUE(engine.wait(*works[i], std::nullopt).isOk());
    });
  for (auto& w : works) engine.post(w);
  for (auto& t : waiters) t.join();
  EXPECT_EQ(runs.load(), 400);
}

TEST(Engine, WaitWithDeadlineReportsInProgress) {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  Engine engine([&](Task& t) {
    if (t.colls.at(0).args.count == 0) {
      started.store(true);
      while (!release.load()) std::this_thread::yield();
    }
    return Status::ok();
  });
  auto blocker = makeWork(0);
  auto queued = makeWork(1);
  engine.post(blocker);
  engine.post(queued);
  // The engine thread is inside the blocker: a deadline wait gives up.
  while (!started.load()) std::this_thread::yield();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  EXPECT_EQ(engine.wait(*queued, deadline).code(), weftInProgress);
  EXPECT_FALSE(queued->done.load());
  release.store(true);
  EXPECT_TRUE(engine.wait(*queued, std::nullopt).isOk());
  EXPECT_TRUE(blocker->done.load());
}

}  // namespace
}  // namespace weft
