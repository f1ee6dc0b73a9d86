// Online tuning: the model (tuner.h) ranks the algorithms, measurement picks
// among the best of them. For each (collective, dtype, bytes) a communicator
// runs, its first calls try the model's choice and up to two runners-up in
// kPasses passes. Each pass runs every candidate for one segment of calls
// back to back, the first untimed (it pays the page faults of new scratch,
// and the skew the previous algorithm left between the ranks), and each pass
// starts the rotation one candidate later, so that every candidate comes
// first once. A rank's figure for a candidate is the median of its segments'
// means. The ranks then pool those in one small all-gather, and every later
// call of that key runs the candidate whose slowest rank was fastest (the
// model's choice unless beaten by 10%). Every rank sees the same calls in
// the same order, so every rank reaches the same decision at the same call.
//
// Why back to back, and means: in a loop, calls of a pipelined algorithm
// overlap (a chain broadcast's root starts the next call while the tail still
// receives), and one rank's calls alternate between waiting for the others
// and finding the data already there. The mean of a run of calls is what a
// loop sees; the best single call is not. Why passes in turn and a median:
// whichever candidate ran first measured slow for the whole of its run (4
// ranks on 2 CPUs, broadcast 8-512 B, 15 timed calls, medians of 16 trials:
// chain first 7.1 us a call, binomial after it 4.2; binomial first 6.1,
// chain after it 3.8; in a loop chain takes 2.5 and binomial 3.5), so the
// first candidate, the model's choice, lost to a runner-up it beats in a loop.
// Rotating puts another candidate first in each pass, and the median of a
// candidate's three segments leaves one slow segment out. Why each segment
// ends with the ranks waiting for each other, the wait counted in it (this
// rank's wait spread over its timed calls): a rank's calls can end well
// before the collective's work does. A broadcast's root returns once its
// sends sit in socket buffers and runs ahead into the next segment, whose
// candidate then waits while the other ranks drain them. Unsynchronised, 4
// ranks as 2 hosts on 2 CPUs, broadcast of 512 KiB alone in a job: binomial's
// trials said 107-142 us a call and chain's 95-288 (chain's segments after
// binomial's held calls of 1.5-4 ms), so binomial replaced the model's chain
// in 15 runs of 16, where in loops chain takes 135-233 us a call and
// binomial 189-236 (slowest rank). Synchronised: chain 166-237, binomial
// 254-383, and chain stayed in 6 runs of 6, at 2 MiB as well. The wait is
// one all-gather of a byte per segment, in segments the model predicts at
// kSyncFromUs or more. Why more calls for
// cheap calls: 4 ranks on 2 CPUs, one call of a few microseconds takes 4 or
// 120 depending on where the scheduler switched, so a few calls decide by
// chance. A key runs as many timed calls per candidate as fill kBudgetUs of
// the model's prediction, from `rounds` - 1 to kMostRounds - 1 (rounded up
// to a multiple of kPasses), split over the passes: 15 at 128 KiB, 3 at
// 8 MiB there.
//
// Why the longest call of a segment is left out (segments of kTrimFrom
// timed calls or more, the calls of a few hundred microseconds or less): on
// an oversubscribed host one call in a few dozen waits out a peer's time
// slice, 100-400 us against 1-10, and a mean of five calls carries it
// whole. One such call in each of two segments set the slowest rank's
// median: 4 ranks as 2 hosts on 2 CPUs, reduce of 8 B, binomial trials 32 us
// a call (rank 1: 0.5-0.9 us a call bar one call of 155 and one of 378),
// chain 13-19, so the trials took the chain in 4 runs of 4, where loops of
// 30 calls ran it in 12.1 us a call and binomial in 7.8 (slowest rank,
// median of 5 runs): no room there for such a stall every few calls.
//
// Why at all: the model's constants come from a calibration of the links, but
// which algorithm wins also depends on what it does not see (the cache, how
// a hypervisor schedules oversubscribed ranks). Fitted on one 2-CPU VM, its
// picks on another (Intel, 260 MiB L3) lost by up to 1.66x (4 ranks, all-to-
// all at 8 MiB: direct 2523 us, the model's pairwise 4183).
//
// Cost: at most 3 candidates x kPasses x (1 + ceil((kMostRounds - 1) /
// kPasses)) = 54 calls per key (more where `rounds` asks for more) run a
// candidate that may be slower, a one-byte all-gather ends each of their
// 3 x kPasses segments at most (long ones only), and one all-gather of a few doubles ends
// them. A key is (kind, dtype, bytes), at most kMaxKeys per communicator
// (then the model decides alone). Floating-point sums can differ in their
// last bits between the calls that try different algorithms;
// WEFT_TUNER_ONLINE=0 keeps the model's choice.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "algorithms/coll.h"
#include "algorithms/tuner.h"

namespace weft {

class OnlineTuner {
 public:
  static constexpr size_t kMaxKeys = 512;
  // Another candidate replaces the model's choice only below this fraction
  // of its time.
  static constexpr double kMargin = 0.9;
  // A candidate's rounds: enough to fill this much of the model's predicted
  // time, at most kMostRounds.
  static constexpr double kBudgetUs = 4000;
  static constexpr int kMostRounds = 16;
  static constexpr int kPasses = 3;
  // A segment of at least this many timed calls leaves its longest out of
  // its mean (see the top of this file).
  static constexpr int kTrimFrom = 4;
  // Segments whose timed calls the model predicts at this many us or more
  // end with the ranks waiting for each other (see the top of this file).
  // Shorter ones do not: there the wait's own few dozen microseconds, and
  // the scheduling noise in them, would be a large part of the figure.
  static constexpr double kSyncFromUs = 1000;
  // rounds >= 2 (one untimed, then timed ones) is the fewest; budgetUs as
  // kBudgetUs (0: always `rounds`); candidates within `spread` times the
  // model's cheapest prediction, at most `most`; segments predicted at
  // syncFromUs or more end in a wait (kSyncFromUs; infinity: none).
  OnlineTuner(int rounds, double budgetUs, double spread, int most,
              double syncFromUs = std::numeric_limits<double>::infinity());
  // From WEFT_TUNER_ONLINE (0: off, nullptr) and WEFT_TUNER_ONLINE_ROUNDS.
  static std::unique_ptr<OnlineTuner> fromEnv();

  // The fewest calls a candidate runs (WEFT_TUNER_ONLINE_ROUNDS).
  int rounds() const { return rounds_; }

  // The choice for this call.
  Choice choose(const CollArgs& args, CollContext& ctx);
  // This rank's time for the call that choose() answered last, once it ran
  // without error. After a key's last trial it runs the agreement, an
  // all-gather over ctx: every rank must call it for the same calls.
  Status ran(CollContext& ctx, double us);
  // Whether the call choose() answered last is a trial (ran() wants its time).
  bool timing() const { return timing_ != nullptr; }
  // Whether another call like the last one would still be a trial. Read by
  // other threads (weftCommTuningPending) once the calls have completed.
  bool pending() const { return pending_.load(std::memory_order_acquire); }

  // Trial call `call` of a key with `candidates` candidates and segments of
  // `segment` calls: which candidate runs, in which pass, and whether it is
  // timed (not the first of its segment).
  struct TrialCall {
    int candidate;
    int pass;
    bool timed;
  };
  static TrialCall trialCall(int call, int candidates, int segment);
  // Calls per segment for a key that wants `rounds` calls per candidate
  // (one untimed, then timed ones): its timed calls split over the passes.
  static int segmentFor(int rounds);

 private:
  // (kind, dtype, bytes). Not whether the call is in place: that may differ
  // from rank to rank (a reduce is in place at its root only).
  using Key = std::tuple<int, int, size_t>;
  struct Trials {
    std::vector<Choice> candidates;
    double runUs = 0;                                    // the timed sum of the segment under way
    double runMaxUs = 0;                                 // and its longest timed call
    std::vector<std::array<double, kPasses>> segmentUs;  // each segment's mean, per candidate
    int segment = 0;                                     // calls per segment
    bool sync = false;                                   // segments end in a wait
    int calls = 0;
    int decided = -1;
    int total() const { return static_cast<int>(candidates.size()) * kPasses * segment; }
  };
  int roundsFor(double predictedUs) const;
  // A barrier (an all-gather of a byte) and this rank's time in it.
  static Status waitForAll(CollContext& ctx, double* us);
  Status agree(CollContext& ctx, const Key& key, Trials& t);

  int rounds_;
  double budgetUs_;
  double spread_;
  int most_;
  double syncFromUs_;
  uint64_t generation_ = 0;
  std::map<Key, Trials> keys_;
  // The key of the call choose() answered last, while it is a trial.
  std::map<Key, Trials>::value_type* timing_ = nullptr;
  std::atomic<bool> pending_{false};
};

}  // namespace weft
