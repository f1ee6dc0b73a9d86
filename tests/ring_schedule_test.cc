// The pipelined ring's step order (algorithms/ring_schedule.h): both ends of
// a channel see the same message order, and the stride it picks for a slot
// count never stalls a ring while one step less does. Checked by running the
// order on model rings: ranks that wait for a message or a free slot as the
// algorithms do.
#include "algorithms/ring_schedule.h"

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

namespace weft::algo {
namespace {

using Step = std::pair<size_t, size_t>;  // (pass, step)

std::vector<Step> order(size_t passes, size_t messages, size_t stride) {
  std::vector<Step> steps;
  Status s = forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) {
    steps.emplace_back(p, j);
    return Status::ok();
  });
  EXPECT_TRUE(s.isOk());
  return steps;
}

// One rank of a model ring; every rank runs the same order. A step first
// takes the message it receives (keeping its slot), then a free slot on the
// channel to the next rank for what it sends, then hands the received slot
// back: as the ring algorithms do.
struct ModelRank {
  size_t pc = 0;         // the step being taken
  bool holding = false;  // has taken the step's incoming message
  size_t sent = 0;       // messages sent to the next rank
  size_t received = 0;   // messages from the previous rank handed back
};

class ModelRing {
 public:
  ModelRing(int n, size_t slots, const std::vector<Step>& steps, size_t messages)
      : ranks_(n), slots_(slots), steps_(steps), messages_(messages) {}

  // Takes rank r's next phase if it can; false while it must wait.
  bool advance(int r) {
    const int n = static_cast<int>(ranks_.size());
    ModelRank& me = ranks_[r];
    if (me.pc == steps_.size()) return false;
    const ModelRank& prev = ranks_[(r + n - 1) % n];
    const ModelRank& next = ranks_[(r + 1) % n];
    const size_t j = steps_[me.pc].second;
    if (j > 0 && !me.holding) {
      if (prev.sent <= me.received) return false;
      me.holding = true;
      return true;
    }
    if (j < messages_) {
      if (me.sent - next.received >= slots_) return false;
      ++me.sent;
    }
    if (j > 0) ++me.received;
    me.holding = false;
    ++me.pc;
    return true;
  }
  bool done() const {
    for (const ModelRank& r : ranks_)
      if (r.pc != steps_.size()) return false;
    return true;
  }
  bool anyCanAdvance() {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      ModelRing probe = *this;
      if (probe.advance(r)) return true;
    }
    return false;
  }
  // Every rank takes one phase at a time from the same state: ranks that
  // stay level with each other, the case that needs a free slot per send.
  bool runLockstep() {
    while (!done()) {
      ModelRing before = *this;
      bool moved = false;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        ModelRing probe = before;
        if (probe.advance(r)) {
          ranks_[r] = probe.ranks_[r];
          moved = true;
        }
      }
      if (!moved) return false;
    }
    return true;
  }
  // Ranks picked at random; false when none can move.
  bool runRandom(std::mt19937& rng) {
    std::uniform_int_distribution<int> pick(0, static_cast<int>(ranks_.size()) - 1);
    while (!done()) {
      if (!anyCanAdvance()) return false;
      for (int tries = 0; tries < 8; ++tries)
        if (advance(pick(rng))) break;
    }
    return true;
  }

 private:
  std::vector<ModelRank> ranks_;
  size_t slots_;
  const std::vector<Step>& steps_;
  size_t messages_;
};

TEST(RingSchedule, EveryStepOnceAndInOrderWithinItsPass) {
  for (size_t messages : {1, 2, 3, 6, 14})
    for (size_t stride = 1; stride <= messages + 1; ++stride)
      for (size_t passes : {0, 1, 2, 5, 17}) {
        std::vector<Step> steps = order(passes, messages, stride);
        ASSERT_EQ(steps.size(), passes * (messages + 1));
        std::vector<size_t> nextStep(passes, 0);
        for (auto [p, j] : steps) {
          ASSERT_LT(p, passes);
          EXPECT_EQ(j, nextStep[p]) << "pass " << p << " stride " << stride;
          nextStep[p] = j + 1;
        }
      }
}

TEST(RingSchedule, ReceiverTakesMessagesInTheOrderTheyWereSent) {
  for (size_t messages : {1, 2, 3, 6, 14})
    for (size_t stride = 1; stride <= messages + 1; ++stride)
      for (size_t passes : {1, 2, 5, 17}) {
        std::vector<Step> sent, received;  // (pass, message)
        for (auto [p, j] : order(passes, messages, stride)) {
          if (j < messages) sent.emplace_back(p, j);
          if (j > 0) received.emplace_back(p, j - 1);
        }
        EXPECT_EQ(sent, received) << messages << " messages, stride " << stride;
      }
}

TEST(RingSchedule, StrideIsOnePerPassWithEnoughSlotsAndNeverBeyondAPass) {
  EXPECT_EQ(ringStride(2, 16), 1u);   // 2 ranks over TCP: every pass one step behind
  EXPECT_EQ(ringStride(14, 16), 1u);  // 8 ranks
  EXPECT_EQ(ringStride(2, 2), 2u);    // only the last receive after the next send
  for (size_t messages = 1; messages <= 40; ++messages)
    for (size_t slots = 2; slots <= 40; ++slots) {
      const size_t stride = ringStride(messages, slots);
      EXPECT_GE(stride, 1u);
      EXPECT_LE(stride, messages);
    }
}

// The stride chosen never stalls a level ring and one less does: the count of
// outstanding messages it rests on is exact.
TEST(RingSchedule, ChosenStrideIsTheSmallestThatKeepsALevelRingMoving) {
  std::vector<std::pair<size_t, size_t>> shapes;  // (messages, slots)
  for (size_t messages = 1; messages <= 16; ++messages)
    for (size_t slots = 2; slots <= 18; ++slots) shapes.emplace_back(messages, slots);
  for (size_t slots : {2, 3, 4, 16}) {  // 16 and 32 ranks
    shapes.emplace_back(30, slots);
    shapes.emplace_back(62, slots);
  }
  for (auto [messages, slots] : shapes) {
    const size_t stride = ringStride(messages, slots);
    const size_t passes = 2 * messages + 3;
    std::vector<Step> steps = order(passes, messages, stride);
    EXPECT_TRUE(ModelRing(3, slots, steps, messages).runLockstep())
        << messages << " messages, " << slots << " slots, stride " << stride;
    if (stride > 1) {
      std::vector<Step> tighter = order(passes, messages, stride - 1);
      EXPECT_FALSE(ModelRing(3, slots, tighter, messages).runLockstep())
          << messages << " messages, " << slots << " slots, stride " << stride - 1;
    }
  }
}

TEST(RingSchedule, ChosenStrideNeverStallsRanksThatRunAtDifferentSpeeds) {
  std::mt19937 rng(12345);
  for (int n : {2, 3, 5, 8})
    for (size_t slots : {2, 3, 4, 16}) {
      const size_t messages = 2 * static_cast<size_t>(n - 1);  // allreduce
      const size_t stride = ringStride(messages, slots);
      std::vector<Step> steps = order(7, messages, stride);
      for (int round = 0; round < 20; ++round)
        ASSERT_TRUE(ModelRing(n, slots, steps, messages).runRandom(rng))
            << n << " ranks, " << slots << " slots, stride " << stride;
    }
}

}  // namespace
}  // namespace weft::algo
