// The tuner (algorithms/tuner.h): the WEFT_ALGO / WEFT_PROTO parser and the
// calibration-file parser on good and garbage input, the cost model's
// choices in clear-cut cases, restrictions, that the defaults on one host
// make the choices the measured size rules made, and the calibration at
// communicator creation (real ranks) with its file round trip.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/hier.h"
#include "algorithms/ring_order.h"
#include "algorithms/select.h"
#include "algorithms/spec.h"
#include "algorithms/tuner.h"
#include "core/comm.h"
#include "harness/multirank.h"
#include "kernels/reduce.h"

namespace weft {
namespace {

constexpr int kAllReduce = static_cast<int>(CollKind::AllReduce);
constexpr int kBroadcast = static_cast<int>(CollKind::Broadcast);
constexpr int kAllGather = static_cast<int>(CollKind::AllGather);

const std::string_view kNames[] = {"ring", "direct", "chain"};

uint64_t allowed(const SelectionSpec& s, int kind) {
  return s.allowed.at(kind);
}

// ---------------------------------------------------------------------------
// The WEFT_ALGO / WEFT_PROTO parser.

TEST(TunerSpec, Lists) {
  auto s = parseSelectionSpec("ring,chain", kNames, "WEFT_ALGO");
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(allowed(s, kAllReduce), 0b101u);
  EXPECT_TRUE(s.restricted[kAllReduce]);
  s = parseSelectionSpec("^Direct", kNames, "WEFT_ALGO");
  EXPECT_EQ(allowed(s, kBroadcast), 0b101u);
  s = parseSelectionSpec("", kNames, "WEFT_ALGO");
  EXPECT_FALSE(s.restricted[kAllReduce]);
  EXPECT_EQ(allowed(s, kAllReduce), 0b111u);
}

TEST(TunerSpec, Sections) {
  auto s = parseSelectionSpec(" ring ; All_Reduce : direct ;broadcast:^chain", kNames, "X");
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(allowed(s, kAllReduce), 0b010u);  // the section wins over the plain list
  EXPECT_EQ(allowed(s, kBroadcast), 0b011u);
  EXPECT_EQ(allowed(s, kAllGather), 0b001u);  // the plain list
  s = parseSelectionSpec("allreduce:ring;allreduce:chain", kNames, "X");
  EXPECT_EQ(allowed(s, kAllReduce), 0b100u);  // the later wins
  EXPECT_FALSE(s.restricted[kAllGather]);
}

TEST(TunerSpec, UnknownNamesWarn) {
  auto s = parseSelectionSpec("bogus;nocoll:ring", kNames, "WEFT_ALGO");
  EXPECT_EQ(s.warnings.size(), 2u);
  EXPECT_EQ(allowed(s, kAllReduce), 0u);  // a list of nothing known allows nothing
  EXPECT_NE(s.warnings[0].find("WEFT_ALGO"), std::string::npos);
}

TEST(TunerSpec, GarbageNeverCrashes) {
  const char* inputs[] = {
      ";;;", ":",     "^",           "^^ring",       "allreduce:",       ":ring",
      ",,,", "a:b:c", "allreduce:^", "\x01\xff:;^,", "ring;;allreduce:;"};
  for (const char* in : inputs) {
    auto s = parseSelectionSpec(in, kNames, "X");
    EXPECT_EQ(s.allowed.size(), s.restricted.size()) << in;
    EXPECT_LE(s.warnings.size(), 16u) << in;
  }
  std::mt19937 rng(7);
  const char alphabet[] = "ringdect^:;, _-AZ\t\x80";
  for (int i = 0; i < 2000; ++i) {
    std::string in(rng() % 40, ' ');
    for (char& c : in) c = alphabet[rng() % (sizeof(alphabet) - 1)];
    auto s = parseSelectionSpec(in, kNames, "X");
    for (uint64_t m : s.allowed) EXPECT_EQ(m & ~0b111ull, 0u) << in;
  }
}

TEST(TunerSpec, AlgoSpecMasksOverTheTable) {
  const auto masks = parseAlgoSpec("allreduce:ring");
  ASSERT_EQ(masks.size(), static_cast<size_t>(CollKind::Recv) + 1);
  const auto table = allAlgorithms();
  for (size_t i = 0; i < table.size() && i < 32; ++i) {
    const bool on = (masks[static_cast<int>(table[i].kind)] >> i) & 1;
    if (table[i].kind == CollKind::AllReduce) {
      EXPECT_EQ(on, std::string_view(table[i].name) == "ring") << table[i].name;
    } else {
      EXPECT_TRUE(on) << table[i].name;  // other collectives unrestricted
    }
  }
}

// ---------------------------------------------------------------------------
// The calibration file.

TunerParams sample() {
  TunerParams p = defaultTunerParams();
  p.link[0] = {0.75, 31.5};
  p.link[1] = {1.25, 22.0};
  p.link[2] = {40.0, 1.125};
  p.reduceGbps = 17.0;
  p.schedUs = 12.5;
  p.netFanoutUs = 6.25;
  return p;
}

void expectSame(const TunerParams& a, const TunerParams& b) {
  for (int l = 0; l < kNumLinks; ++l) {
    EXPECT_DOUBLE_EQ(a.link[l].alphaUs, b.link[l].alphaUs) << l;
    EXPECT_DOUBLE_EQ(a.link[l].gbps, b.link[l].gbps) << l;
  }
  EXPECT_DOUBLE_EQ(a.reduceGbps, b.reduceGbps);
  EXPECT_DOUBLE_EQ(a.schedUs, b.schedUs);
  EXPECT_DOUBLE_EQ(a.netFanoutUs, b.netFanoutUs);
}

TEST(TunerFile, RoundTrip) {
  const TunerParams p = sample();
  std::string why;
  auto back = parseTunerFile(formatTunerFile(p), defaultTunerParams(), &why);
  ASSERT_TRUE(back) << why;
  expectSame(*back, p);
}

TEST(TunerFile, MissingKeysKeepBase) {
  std::string why;
  auto p = parseTunerFile("weft-tuner 1\r\n  net.gbps\t2.5  # measured\n\n", sample(), &why);
  ASSERT_TRUE(p) << why;
  TunerParams want = sample();
  want.link[2].gbps = 2.5;
  expectSame(*p, want);
}

TEST(TunerFile, RejectsGarbage) {
  const std::string bad[] = {
      "",
      "# only a comment\n",
      "weft-tuner 2\n",
      "shm.gbps 3\n",                        // no header
      "weft-tuner 1\nshm.gbps\n",            // no value
      "weft-tuner 1\nshm.gbps 3 4\n",        // two values
      "weft-tuner 1\nshm.gbps 3 4 5\n",      // too many words
      "weft-tuner 1\nshm.speed 3\n",         // unknown key
      "weft-tuner 1\nshm.gbps nan\n",        // not finite
      "weft-tuner 1\nshm.gbps inf\n",        //
      "weft-tuner 1\nshm.gbps -3\n",         // out of range
      "weft-tuner 1\nshm.alpha_us 0\n",      //
      "weft-tuner 1\nshm.alpha_us 1e300\n",  //
      "weft-tuner 1\nshm.gbps 3x\n",         // trailing junk
      "weft-tuner 1\nshm.gbps 0x\n",         //
      std::string("weft-tuner 1\nshm.gbps 3\0junk", 27),
      "weft-tuner 1\n" + std::string(70000, 'x'),  // too large
      "weft-tuner 1\nshm.gbps " + std::string(100, '9') + "\n",
      "weft-tuner 1\nsched.us -1\n",  // out of range
      "weft-tuner 1\nnet.fanout_us -0.5\n",
      "weft-tuner 1\nnet.fanout_us 1e9\n",
  };
  for (const std::string& text : bad) {
    std::string why;
    EXPECT_FALSE(parseTunerFile(text, defaultTunerParams(), &why)) << text.substr(0, 40);
    EXPECT_FALSE(why.empty());
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string text = "weft-tuner 1\n";
    const size_t len = rng() % 80;
    for (size_t j = 0; j < len; ++j) text.push_back(static_cast<char>(rng() % 256));
    auto p = parseTunerFile(text, defaultTunerParams(), nullptr);
    if (p) {
      EXPECT_TRUE(tunerParamsValid(*p));
    }
  }
}

TEST(TunerParams, EnvOverrides) {
  setenv("WEFT_TUNER_SHM_ALPHA_US", "5.5", 1);
  setenv("WEFT_TUNER_NET_GBPS", "garbage", 1);
  setenv("WEFT_TUNER_REDUCE_GBPS", "-1", 1);
  setenv("WEFT_TUNER_SCHED_US", "0", 1);
  setenv("WEFT_TUNER_NET_FANOUT_US", "2.5", 1);
  TunerParams p = defaultTunerParams();
  applyTunerEnv(&p);
  unsetenv("WEFT_TUNER_SHM_ALPHA_US");
  unsetenv("WEFT_TUNER_NET_GBPS");
  unsetenv("WEFT_TUNER_REDUCE_GBPS");
  unsetenv("WEFT_TUNER_SCHED_US");
  unsetenv("WEFT_TUNER_NET_FANOUT_US");
  EXPECT_EQ(p.netFanoutUs, 2.5);
  EXPECT_EQ(p.schedUs, 0.0);  // 0 is allowed: it turns the oversubscription term off
  EXPECT_EQ(p.link[0].alphaUs, 5.5);
  EXPECT_EQ(p.link[2].gbps, defaultTunerParams().link[2].gbps);
  EXPECT_EQ(p.reduceGbps, defaultTunerParams().reduceGbps);
  EXPECT_TRUE(tunerParamsValid(defaultTunerParams()));
}

// ---------------------------------------------------------------------------
// The model and the choice.

Status noRun(CollContext&, const CollArgs&) {
  return Status::ok();
}

// A table with every algorithm the model knows for allreduce, plus one it
// does not know.
const Algorithm kFullTable[] = {
    {CollKind::AllReduce, "ring", "", "", noRun},
    {CollKind::AllReduce, "direct", "", "", noRun},
    {CollKind::AllReduce, "tree", "", "", noRun},
    {CollKind::AllReduce, "rhd", "", "", noRun},
    {CollKind::AllReduce, "recdoubling", "", "", noRun},
    {CollKind::AllReduce, "hier", "", "", noRun},
    {CollKind::AllReduce, "mystery", "", "", noRun},
    {CollKind::AllGather, "ring", "", "", noRun},
    {CollKind::AllGather, "direct", "", "", noRun},
    {CollKind::Broadcast, "chain", "", "", noRun},
    {CollKind::Broadcast, "direct", "", "", noRun},
    {CollKind::Gather, "direct", "", "", noRun},
};

TunerShape shape(int n, int hosts = 1, bool publish = true, size_t slot = 256 << 10) {
  TunerShape s;
  s.nranks = n;
  s.nhosts = hosts;
  s.ranksPerHost = (n + hosts - 1) / hosts;
  s.canPublish = publish && hosts == 1 && n > 1;
  s.slotBytes = slot;
  s.directMinBytes = 64 << 10;
  return s;
}

std::string pickIn(std::span<const Algorithm> table, CollKind kind, size_t bytes,
                   const TunerShape& s, const char* algo = "", const char* proto = "") {
  const Restrictions r = parseRestrictions(algo, proto, table, false);
  const Choice c = chooseFor(kind, bytes, s, defaultTunerParams(), table, r);
  return c.alg ? c.alg->name : "none";
}

TEST(TunerModel, ClearCutChoices) {
  const auto& t = kFullTable;
  // One host, 8 ranks: latency-bound tiny messages take one step.
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(8)), "direct");
  // Four hosts of four: large messages cross the network once per slice.
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 64 << 20, shape(16, 4)), "hier");
  // hier is pointless on one host.
  EXPECT_NE(pickIn(t, CollKind::AllReduce, 64 << 20, shape(16, 1)), "hier");
  // Large per-peer blocks go single copy, small ones through the FIFOs.
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(4)), "direct");
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1024, shape(4)), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(4, 1, false)), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(8, 2)), "ring");  // across hosts
  // One rank per host: above the single-slot sizes, recursive halving and
  // doubling's 2 log2(n) network rounds beat the ring's 2(n-1)...
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 1 << 20, shape(4, 4)), "rhd");
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 64 << 20, shape(8, 8)), "rhd");
  // ...but not where the counts are equal (2 ranks) or its fold steps cost
  // more (3 ranks), nor on one host, where it is not a default candidate.
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 1 << 20, shape(2, 2)), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 1 << 20, shape(3, 3)), "ring");
  for (size_t bytes : {size_t{1} << 10, size_t{1} << 20, size_t{64} << 20})
    EXPECT_NE(pickIn(t, CollKind::AllReduce, bytes, shape(8, 1)), "rhd") << bytes;
  // The model never takes a name it has no formula for unless asked to.
  for (size_t bytes : {size_t{8}, size_t{1} << 16, size_t{1} << 26}) {
    EXPECT_NE(pickIn(t, CollKind::AllReduce, bytes, shape(8, 2)), "mystery");
  }
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(8), "allreduce:mystery"), "mystery");
}

TEST(TunerModel, FanOutAcrossHosts) {
  const auto& t = kFullTable;
  // Small messages across 64 hosts: direct's 63 peers in one step cost more
  // than recursive doubling's 6 steps with one peer each...
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(64, 64)), "recdoubling");
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 4096, shape(64, 64)), "recdoubling");
  // ...but at 4 hosts one step with 3 peers is still cheaper than two.
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(4, 4)), "direct");
  // The term is what decides it: without it direct wins at 64 hosts too.
  TunerParams p = defaultTunerParams();
  p.netFanoutUs = 0;
  const Restrictions none = parseRestrictions("", "", t, false);
  EXPECT_STREQ(chooseFor(CollKind::AllReduce, 8, shape(64, 64), p, t, none).alg->name, "direct");
  // It is charged per peer beyond the first, and only over the network.
  p = defaultTunerParams();
  const double d4 = predictCost(CollKind::AllReduce, "direct", 8, shape(4, 4), p)->us;
  p.netFanoutUs += 10;
  EXPECT_NEAR(predictCost(CollKind::AllReduce, "direct", 8, shape(4, 4), p)->us - d4, 20.0, 1e-9);
  EXPECT_EQ(predictCost(CollKind::AllReduce, "direct", 8, shape(4, 1), p)->us,
            predictCost(CollKind::AllReduce, "direct", 8, shape(4, 1), defaultTunerParams())->us);
  // Recursive doubling stays off on one host that is not oversubscribed.
  for (size_t bytes : {size_t{8}, size_t{1} << 16})
    EXPECT_NE(pickIn(t, CollKind::AllReduce, bytes, shape(64, 1)), "recdoubling") << bytes;
}

TEST(TunerModel, LogStepAlgorithmsAcrossHosts) {
  const std::span<const Algorithm> t = allAlgorithms();
  // One rank per host on 4 and 8 hosts: a network round per step makes the
  // log2(n)-step algorithms cheaper at small sizes...
  for (int n : {4, 8}) {
    EXPECT_EQ(pickIn(t, CollKind::ReduceScatter, 1024, shape(n, n)), "rhd") << n;
    EXPECT_EQ(pickIn(t, CollKind::AllGather, 1024, shape(n, n)), "recdoubling") << n;
    EXPECT_EQ(pickIn(t, CollKind::Reduce, 4096, shape(n, n)), "binomial") << n;
    EXPECT_EQ(pickIn(t, CollKind::AllToAll, 1024, shape(n, n)), "bruck") << n;
    // ...and where their bytes dominate, the pipelines and pairwise return.
    EXPECT_EQ(pickIn(t, CollKind::Broadcast, 16 << 20, shape(n, n)), "chain") << n;
    // (Broadcast keeps the chain: back-to-back calls overlap its hops.)
    EXPECT_EQ(pickIn(t, CollKind::Broadcast, 4096, shape(n, n)), "chain") << n;
    EXPECT_EQ(pickIn(t, CollKind::Reduce, 16 << 20, shape(n, n)), "chain") << n;
    EXPECT_EQ(pickIn(t, CollKind::AllToAll, 1 << 20, shape(n, n)), "pairwise") << n;
  }
  // At 2 hosts each is one step like the linear one: the tie keeps it.
  for (size_t bytes : {size_t{64}, size_t{1} << 20}) {
    EXPECT_EQ(pickIn(t, CollKind::ReduceScatter, bytes, shape(2, 2)), "ring") << bytes;
    EXPECT_EQ(pickIn(t, CollKind::AllGather, bytes, shape(2, 2)), "ring") << bytes;
    EXPECT_EQ(pickIn(t, CollKind::Broadcast, bytes, shape(2, 2)), "chain") << bytes;
    EXPECT_EQ(pickIn(t, CollKind::AllToAll, bytes, shape(2, 2)), "pairwise") << bytes;
  }
  // On one host they stay off.
  for (size_t bytes : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
    for (CollKind k : {CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
                       CollKind::Reduce, CollKind::AllToAll}) {
      const std::string pick = pickIn(t, k, bytes, shape(8, 1));
      EXPECT_TRUE(pick != "rhd" && pick != "recdoubling" && pick != "binomial" && pick != "bruck")
          << collName(k) << " " << bytes << ": " << pick;
    }
  }
}

// At 2 ranks rhd allreduce moves what the ring moves in as many steps, and
// its formula gives the ring's cost summed in another order: with the
// parameters one TCP calibration measured it came out an ulp cheaper, and
// the tuner took rhd at 32 MiB (1.42x the ring's time). Ties within
// rounding keep table order, for any calibration near that one.
TEST(TunerModel, TwoHostsKeepTheRingWhereRhdTiesIt) {
  const std::span<const Algorithm> t = allAlgorithms();
  const TunerShape s = shape(2, 2, false, 512 << 10);
  for (double alpha : {5.0, 7.19, 9.0, 25.0})
    for (double gbps : {2.4, 2.61, 3.0})
      for (double reduce : {18.0, 22.0, 26.6}) {
        TunerParams p = defaultTunerParams();
        p.link[static_cast<int>(LinkClass::Net)].alphaUs = alpha;
        p.link[static_cast<int>(LinkClass::Net)].gbps = gbps;
        p.reduceGbps = reduce;
        for (size_t bytes = 2 << 20; bytes <= (64u << 20); bytes *= 2)
          EXPECT_STREQ(chooseFor(CollKind::AllReduce, bytes, s, p, t, Restrictions{}).alg->name,
                       "ring")
              << bytes << " bytes, net " << alpha << " us " << gbps << " GB/s, reduce " << reduce;
      }
}

// How a launcher deals ranks to hosts decides whether hier reduce-scatter
// and all-gather can run their intra-host stage per host (algo::
// stagesPerHost): the model asks the same question of the shape.
TEST(HostLayout, EvenRankRuns) {
  using V = std::vector<int>;
  for (const V& yes : {V{}, V{0}, V{0, 0}, V{0, 1}, V{0, 0, 1, 1}, V{3, 3, 0, 0, 7, 7},
                       V{0, 0, 0, 1, 1, 1}, V{1, 1, 0, 0}})
    EXPECT_TRUE(algo::hostsAreEvenRankRuns(yes)) << ::testing::PrintToString(yes);
  for (const V& no : {V{0, 1, 0, 1}, V{0, 0, 1}, V{0, 1, 1}, V{0, 0, 1, 1, 0, 0},
                      V{0, 0, 1, 1, 2, 2, 2, 2}, V{0, 1, 1, 0}})
    EXPECT_FALSE(algo::hostsAreEvenRankRuns(no)) << ::testing::PrintToString(no);
  // The per-host stages also need a host's blocks to fill a chunk.
  EXPECT_TRUE(algo::stagesPerHost(true, 4, 64 << 10, 256 << 10));
  EXPECT_FALSE(algo::stagesPerHost(true, 4, (64 << 10) - 1, 256 << 10));
  EXPECT_FALSE(algo::stagesPerHost(false, 4, 1 << 20, 256 << 10));
  EXPECT_FALSE(algo::stagesPerHost(true, 0, 1 << 20, 256 << 10));
}

// hier reduce-scatter and all-gather either run the intra-host stage once
// per host (H x log2(m) steps) or reorder all N bytes through scratch once
// (log2(m) steps and a copy of N): the model charges whichever runs.
TEST(TunerModel, HierChargesPerHostStepsOrTheReorderingCopy) {
  const TunerParams p = defaultTunerParams();
  const double shmAlpha = p.link[static_cast<int>(LinkClass::Shm)].alphaUs;
  const double shmUsPerByte = 1e-3 / p.link[static_cast<int>(LinkClass::Shm)].gbps;
  const int hosts = 8, perHost = 4, n = hosts * perHost;
  const TunerShape runs = shape(n, hosts);
  TunerShape dealt = runs;
  dealt.hostsAreRankRuns = false;
  ASSERT_FALSE(oversubscribed(runs));
  for (CollKind k : {CollKind::ReduceScatter, CollKind::AllGather}) {
    // A host's blocks fill a chunk: H-1 more rounds of log2(4) = 2 steps,
    // against a copy of N.
    const size_t block = 1 << 20;
    const double perHostUs = predictCost(k, "hier", block, runs, p)->us;
    const double reorderUs = predictCost(k, "hier", block, dealt, p)->us;
    // All-gather's per-host path also crosses hosts over a ring in place:
    // H-1 network steps where the reordering path takes log2(H).
    const double ringSteps = k == CollKind::AllGather ? (hosts - 1) - 3 : 0;
    EXPECT_NEAR(reorderUs - perHostUs,
                double(block) * n * shmUsPerByte - (hosts - 1) * 2 * shmAlpha -
                    ringSteps * p.link[static_cast<int>(LinkClass::Net)].alphaUs,
                1e-6)
        << collName(k);
    EXPECT_GT(reorderUs, perHostUs) << collName(k);
    // Below a chunk per host both layouts reorder.
    const size_t small = runs.slotBytes / perHost - 1;
    EXPECT_EQ(predictCost(k, "hier", small, runs, p)->us,
              predictCost(k, "hier", small, dealt, p)->us)
        << collName(k);
    // Per host, the steps grow with the hosts; the bytes per rank do not.
    TunerParams slowSteps = p;
    slowSteps.link[static_cast<int>(LinkClass::Shm)].alphaUs = 100;
    const double moreSteps = predictCost(k, "hier", block, runs, slowSteps)->us - perHostUs;
    EXPECT_NEAR(moreSteps, hosts * 2 * (100 - shmAlpha), 1e-6) << collName(k);
  }
}

// Hier allreduce's pipeline: the choice carries its K segments (CollArgs::
// segments) to the call, the algorithm's own rule unless WEFT_HIER_SEGMENTS
// replaces it; other algorithms get none. The model charges the K it runs.
TEST(TunerModel, HierAllReduceCarriesItsSegments) {
  const TunerParams p = defaultTunerParams();
  const TunerShape s = shape(16, 2);  // 8 ranks a host: slices of N/8
  ASSERT_FALSE(oversubscribed(s));
  for (size_t bytes = 64 << 10; bytes <= (size_t{1} << 30); bytes *= 2) {
    const auto cost = predictCost(CollKind::AllReduce, "hier", bytes, s, p);
    ASSERT_TRUE(cost);
    EXPECT_EQ(cost->segments, algo::hierSegments(bytes, 8, s.slotBytes)) << bytes;
    EXPECT_EQ(predictCost(CollKind::AllReduce, "ring", bytes, s, p)->segments, 0u);
  }
  // Each segment's steps again: with dear network steps the difference
  // between 8 segments and 1 is 7 x 2 x log2(2) network steps and as many
  // x log2(8) shm ones, where the network lane is the slower.
  TunerParams dear = p;
  dear.link[static_cast<int>(LinkClass::Net)].alphaUs = 5000;
  const size_t eight = s.slotBytes * 8 * 2 * 8, one = s.slotBytes;  // 8 and 1 segments
  ASSERT_EQ(predictCost(CollKind::AllReduce, "hier", eight, s, dear)->segments, 8u);
  ASSERT_EQ(predictCost(CollKind::AllReduce, "hier", one, s, dear)->segments, 1u);
  EXPECT_GT(predictCost(CollKind::AllReduce, "hier", eight, s, dear)->us, 8 * 2 * 5000.0);
  EXPECT_LT(predictCost(CollKind::AllReduce, "hier", one, s, dear)->us, 2 * 5000.0 + 1000);
  Restrictions hier = parseRestrictions("allreduce:hier", "", allAlgorithms(), false);
  const size_t mid = 16 << 20;
  const Choice picked = chooseFor(CollKind::AllReduce, mid, s, p, allAlgorithms(), hier);
  ASSERT_STREQ(picked.alg->name, "hier");
  EXPECT_EQ(picked.segments, algo::hierSegments(mid, 8, s.slotBytes));
  hier.hierSegments = 5;
  const Choice five = chooseFor(CollKind::AllReduce, mid, s, p, allAlgorithms(), hier);
  EXPECT_EQ(five.segments, 5u);
  // Priced at the count it runs (weft-info's time with WEFT_HIER_SEGMENTS).
  EXPECT_DOUBLE_EQ(five.predictedUs, predictCost(CollKind::AllReduce, "hier", mid, s, p, 5)->us);
  EXPECT_NE(five.predictedUs, picked.predictedUs);
  EXPECT_EQ(predictCost(CollKind::AllReduce, "hier", mid, s, p, 5)->segments, 5u);
  EXPECT_EQ(predictCost(CollKind::AllReduce, "ring", mid, s, p, 5)->segments, 0u);
  // Never more segments than bytes.
  EXPECT_EQ(predictCost(CollKind::AllReduce, "hier", 37, s, p, 64)->segments, 37u);
  // Dear enough, the count given loses hier the tuner's free choice it had:
  // with dear network steps 64 segments cost 63 x 2 more of them.
  const Restrictions free = parseRestrictions("", "", allAlgorithms(), false);
  ASSERT_STREQ(chooseFor(CollKind::AllReduce, mid, s, dear, allAlgorithms(), free).alg->name,
               "hier");
  Restrictions sixtyFour = free;
  sixtyFour.hierSegments = 64;
  EXPECT_STRNE(chooseFor(CollKind::AllReduce, mid, s, dear, allAlgorithms(), sixtyFour).alg->name,
               "hier");
  Restrictions ring = parseRestrictions("allreduce:ring", "", allAlgorithms(), false);
  ring.hierSegments = 5;
  EXPECT_EQ(chooseFor(CollKind::AllReduce, mid, s, p, allAlgorithms(), ring).segments, 0u);
}

// WEFT_HIER_SEGMENTS: 1 to 64 replaces the rule's count; anything else is
// reported and left to the tuner.
TEST(TunerRestrictions, HierSegmentsFromTheEnvironment) {
  const std::pair<const char*, size_t> cases[] = {{"3", 3},  {"64", 64}, {"0", 0},
                                                  {"65", 0}, {"-2", 0},  {"many", 0}};
  for (const auto& [text, want] : cases) {
    setenv("WEFT_HIER_SEGMENTS", text, 1);
    resetAlgorithmSelectionForTesting();
    EXPECT_EQ(envRestrictions().hierSegments, want) << text;
  }
  unsetenv("WEFT_HIER_SEGMENTS");
  resetAlgorithmSelectionForTesting();
  EXPECT_EQ(envRestrictions().hierSegments, 0u);
}

// Recursive halving and doubling pair ranks `mask` apart: where hosts are
// runs of consecutive ranks, a power of two each, the steps below the
// ranks per host stay on shared memory, and only the others pay the
// network. Dealt otherwise, every step is charged the network's cost.
TEST(TunerModel, RecursiveStepsWithinAHostPaySharedMemory) {
  const TunerParams p = defaultTunerParams();
  const double shmAlpha = p.link[static_cast<int>(LinkClass::Shm)].alphaUs;
  const double netAlpha = p.link[static_cast<int>(LinkClass::Net)].alphaUs;
  const TunerShape runs = shape(16, 2);  // 2 hosts of 8: 3 steps inside, 1 across
  TunerShape dealt = runs;
  dealt.hostsAreRankRuns = false;
  ASSERT_FALSE(oversubscribed(runs));
  // At 0 bytes only the steps count.
  EXPECT_NEAR(predictCost(CollKind::AllReduce, "recdoubling", 0, runs, p)->us,
              3 * shmAlpha + netAlpha, 1e-9);
  EXPECT_NEAR(predictCost(CollKind::AllReduce, "recdoubling", 0, dealt, p)->us, 4 * netAlpha, 1e-9);
  EXPECT_NEAR(predictCost(CollKind::AllReduce, "rhd", 0, runs, p)->us,
              2 * (3 * shmAlpha + netAlpha), 1e-9);
  EXPECT_NEAR(predictCost(CollKind::ReduceScatter, "rhd", 0, runs, p)->us, 3 * shmAlpha + netAlpha,
              1e-9);
  EXPECT_NEAR(predictCost(CollKind::AllGather, "recdoubling", 0, runs, p)->us,
              3 * shmAlpha + netAlpha, 1e-9);
  // With bytes, the steps within a host are cheaper than across.
  for (CollKind k : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather}) {
    const char* name = k == CollKind::AllGather ? "recdoubling" : "rhd";
    EXPECT_LT(predictCost(k, name, 1 << 20, runs, p)->us,
              predictCost(k, name, 1 << 20, dealt, p)->us)
        << collName(k);
  }
  // A small allreduce across hosts: one network step and three within the
  // host beat hier's two network steps and six within.
  EXPECT_EQ(pickIn(kFullTable, CollKind::AllReduce, 8, runs), "recdoubling");
}

TEST(TunerModel, PredictionsAreSane) {
  const TunerParams p = defaultTunerParams();
  for (const Algorithm& a : kFullTable) {
    for (int n : {1, 2, 3, 5, 8, 64}) {
      for (int hosts : {1, 2}) {
        if (hosts > n) continue;
        double last = 0;
        for (size_t bytes = 0; bytes <= (size_t{1} << 30); bytes = bytes ? bytes * 4 : 1) {
          const auto c = predictCost(a.kind, a.name, bytes, shape(n, hosts), p);
          if (!c) break;
          EXPECT_FALSE(std::isnan(c->us)) << a.name;
          EXPECT_GE(c->us, 0) << a.name;
          if (std::isfinite(c->us)) {
            EXPECT_GE(c->us, last * 0.999) << a.name << " n=" << n << " bytes=" << bytes;
            last = c->us;
          }
          EXPECT_GT(c->chunkBytes, 0u);
          EXPECT_LE(c->chunkBytes, size_t{256} << 10);
        }
      }
    }
  }
}

TEST(TunerModel, ChainPipelinesWithSmallerChunks) {
  const auto c = predictCost(CollKind::Broadcast, "chain", 1 << 20, shape(8), defaultTunerParams());
  ASSERT_TRUE(c);
  EXPECT_LT(c->chunkBytes, size_t{256} << 10);  // 8 stages: fill time matters
  const auto two =
      predictCost(CollKind::Broadcast, "chain", 1 << 20, shape(2), defaultTunerParams());
  EXPECT_EQ(two->chunkBytes, size_t{256} << 10);  // one hop: no fill to hide
}

TEST(TunerRestrictions, AlgoAndProto) {
  const auto& t = kFullTable;
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(8), "allreduce:ring"), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 8, shape(8), "^direct,recdoubling,tree,rhd"), "ring");
  // Forced but cannot run (direct takes one slot at most): the model's pick.
  EXPECT_EQ(pickIn(t, CollKind::AllReduce, 1 << 20, shape(2), "allreduce:direct"), "ring");
  // WEFT_PROTO: no single copy.
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(4), "", "^cma"), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(4), "", "allgather:simple"), "ring");
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 1 << 20, shape(4), "", "broadcast:simple"), "direct");
  // Only single copy: taken even below the size where it pays.
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 64, shape(4), "", "allgather:cma"), "direct");
  EXPECT_EQ(pickIn(t, CollKind::Broadcast, 1 << 20, shape(4), "", "cma"), "direct");
  // Single copy cannot run without publishing channels: the default instead.
  EXPECT_EQ(pickIn(t, CollKind::AllGather, 64, shape(4, 1, false), "", "allgather:cma"), "ring");

  // An algorithm with both protocols is told whether it may copy once.
  const Restrictions simpleOnly = parseRestrictions("", "gather:simple", kFullTable, false);
  Choice c =
      chooseFor(CollKind::Gather, 1 << 20, shape(4), defaultTunerParams(), kFullTable, simpleOnly);
  EXPECT_FALSE(c.singleCopy);
  EXPECT_EQ(c.proto, Proto::Simple);
  c = chooseFor(CollKind::Gather, 1 << 20, shape(4), defaultTunerParams(), kFullTable,
                parseRestrictions("", "", kFullTable, false));
  EXPECT_TRUE(c.singleCopy);
  EXPECT_EQ(c.proto, Proto::Cma);
}

// The measured size rules the tuner replaced, for the algorithms of that time.
std::string oldRule(CollKind kind, size_t bytes, int n, size_t slot, bool publish,
                    size_t directMin) {
  switch (kind) {
    case CollKind::AllReduce:
      return bytes <= slot && bytes * n <= 256 * 1024 ? "direct" : "ring";
    case CollKind::AllGather:
      return publish && n > 1 && bytes > 0 && bytes >= directMin ? "direct" : "ring";
    case CollKind::AllToAll:
      return publish && n > 1 && bytes > 0 && bytes >= directMin ? "direct" : "pairwise";
    case CollKind::Broadcast:
    case CollKind::Reduce:
      return "chain";
    case CollKind::ReduceScatter:
      return "ring";
    default:
      return "direct";
  }
}

TEST(TunerDefaults, ReproduceTheMeasuredRulesOnOneHost) {
  // Only the algorithms the rules knew, whatever the table holds by now.
  const Restrictions r =
      parseRestrictions("ring,direct,chain,pairwise,p2p", "", allAlgorithms(), false);
  for (size_t slot : {size_t{64} << 10, size_t{256} << 10}) {
    for (int n = 2; n <= 8; ++n) {
      for (bool publish : {false, true}) {
        TunerShape s = shape(n, 1, publish, slot);
        for (CollKind kind :
             {CollKind::AllReduce, CollKind::AllGather, CollKind::AllToAll, CollKind::Broadcast,
              CollKind::Reduce, CollKind::ReduceScatter, CollKind::Gather, CollKind::Scatter}) {
          for (size_t bytes = 1; bytes <= (size_t{16} << 20); bytes *= 2) {
            const Choice c = chooseFor(kind, bytes, s, defaultTunerParams(), allAlgorithms(), r);
            ASSERT_NE(c.alg, nullptr);
            EXPECT_EQ(c.alg->name, oldRule(kind, bytes, n, slot, s.canPublish, s.directMinBytes))
                << collName(kind) << " bytes=" << bytes << " n=" << n << " slot=" << slot
                << " publish=" << publish;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Oversubscription: more ranks on a host than CPUs for them.

std::string pick(CollKind kind, size_t bytes, const TunerShape& s,
                 const TunerParams& p = defaultTunerParams()) {
  const Choice c = chooseFor(kind, bytes, s, p, allAlgorithms(), Restrictions{});
  return c.alg ? c.alg->name : "none";
}

constexpr CollKind kEveryKind[] = {
    CollKind::AllReduce, CollKind::AllGather,     CollKind::AllToAll, CollKind::Broadcast,
    CollKind::Reduce,    CollKind::ReduceScatter, CollKind::Gather,   CollKind::Scatter};

TEST(TunerOversubscribed, NormalShapesKeepTheirPlan) {
  // Unknown CPUs, exactly enough, or more: every choice and prediction is
  // the one the model made before it knew of CPUs.
  for (int hosts : {1, 2}) {
    for (int n = 2; n <= 9; ++n) {
      if (hosts > n) continue;
      const TunerShape base = shape(n, hosts);
      for (int cpus : {base.ranksPerHost, base.ranksPerHost + 1, 64}) {
        TunerShape s = base;
        s.hostCpus = cpus;
        EXPECT_FALSE(oversubscribed(s));
        for (CollKind kind : kEveryKind) {
          for (size_t bytes = 1; bytes <= (size_t{64} << 20); bytes *= 4) {
            const Restrictions none;
            const Choice a =
                chooseFor(kind, bytes, base, defaultTunerParams(), allAlgorithms(), none);
            const Choice b = chooseFor(kind, bytes, s, defaultTunerParams(), allAlgorithms(), none);
            ASSERT_TRUE(a.alg && b.alg);
            EXPECT_STREQ(a.alg->name, b.alg->name)
                << collName(kind) << " bytes=" << bytes << " n=" << n << " cpus=" << cpus;
            EXPECT_EQ(a.chunkBytes, b.chunkBytes);
            EXPECT_DOUBLE_EQ(a.predictedUs, b.predictedUs);
          }
        }
      }
    }
  }
}

TEST(TunerOversubscribed, FourRanksOnTwoCpusTakeRecursiveDoublingWhenSmall) {
  TunerShape s = shape(4);
  EXPECT_EQ(pick(CollKind::AllReduce, 8, s), "direct");
  EXPECT_EQ(pick(CollKind::AllReduce, 256 << 10, s), "ring");
  s.hostCpus = 2;
  ASSERT_TRUE(oversubscribed(s));
  // What the forced runs measured at 4 ranks on 2 CPUs, pinned, with no
  // spin: direct up to 2 KiB (its one step waits on three peers at once,
  // which overlap), recursive doubling at 8-32 KiB, the ring from 128 KiB.
  for (size_t bytes : {size_t{8}, size_t{2} << 10})
    EXPECT_EQ(pick(CollKind::AllReduce, bytes, s), "direct") << bytes;
  EXPECT_EQ(pick(CollKind::AllReduce, 32 << 10, s), "recdoubling");
  for (size_t bytes : {size_t{256} << 10, size_t{8} << 20})
    EXPECT_EQ(pick(CollKind::AllReduce, bytes, s), "ring") << bytes;
  // Reduce-scatter: recursive halving's two steps while latency dominates
  // (in one sweep it beat the ring by 1.10-1.33x from 32 B to 32 KiB in
  // all, 20 forced runs each), the ring once its halves' bytes count.
  for (size_t perRank : {size_t{2}, size_t{2} << 10})
    EXPECT_EQ(pick(CollKind::ReduceScatter, perRank, s), "rhd") << perRank;
  EXPECT_EQ(pick(CollKind::ReduceScatter, size_t{2} << 20, s), "ring");
  // All-gather: one partner per step beats every peer at once (direct) and
  // n-1 steps (ring) while latency dominates.
  for (size_t perRank : {size_t{2}, size_t{1} << 10, size_t{32} << 10})
    EXPECT_EQ(pick(CollKind::AllGather, perRank, s), "recdoubling") << perRank;
  // Its bytes pay the square root of the exchanges' factor (no reduction):
  // the ring from 512 KiB in all, not from 64 KiB.
  for (size_t perRank : {size_t{128} << 10, size_t{2} << 20})
    EXPECT_EQ(pick(CollKind::AllGather, perRank, s), "ring") << perRank;
  // All-to-all: Bruck's log2(n) partners while small, not once the bytes
  // count; with CPUs enough, pairwise or direct as before.
  for (size_t perPeer : {size_t{8}, size_t{2} << 10})
    EXPECT_EQ(pick(CollKind::AllToAll, perPeer, s), "bruck") << perPeer;
  EXPECT_NE(pick(CollKind::AllToAll, 256 << 10, s), "bruck");
  EXPECT_NE(pick(CollKind::AllToAll, 8, shape(4)), "bruck");
  // Direct waits on every peer: it costs more than on a host with CPUs.
  TunerShape enough = s;
  enough.hostCpus = 4;
  EXPECT_GT(predictCost(CollKind::AllReduce, "direct", 8, s, defaultTunerParams())->us,
            predictCost(CollKind::AllReduce, "direct", 8, enough, defaultTunerParams())->us);
  // The penalty grows with the oversubscription.
  TunerShape worse = s;
  worse.hostCpus = 1;
  EXPECT_GT(predictCost(CollKind::AllReduce, "ring", 8, worse, defaultTunerParams())->us,
            predictCost(CollKind::AllReduce, "ring", 8, s, defaultTunerParams())->us);
  // Forcing still wins over the model.
  const Restrictions ring = parseRestrictions("allreduce:ring", "", allAlgorithms(), false);
  EXPECT_STREQ(
      chooseFor(CollKind::AllReduce, 8, s, defaultTunerParams(), allAlgorithms(), ring).alg->name,
      "ring");
}

// Direct broadcast's readers take turns at the root's pages, so on an
// oversubscribed host each still reads at the link's rate: the model must
// not charge them a CPU's share, or online tuning never times direct where
// it ran fastest in one sweep (4 ranks on 2 CPUs, 128 KiB-8 MiB, with the
// single-copy figures a calibration measured there: charged a CPU's share,
// direct lay beyond 3x of the cheapest prediction, the binomial tree's, at
// every one of those sizes).
TEST(TunerOversubscribed, DirectBroadcastReadsAtTheLinksRate) {
  TunerShape s = shape(4);
  TunerParams p = defaultTunerParams();
  p.link[static_cast<int>(LinkClass::Cma)] = {1.45, 7.0};
  TunerShape crowded = s;
  crowded.hostCpus = 2;
  ASSERT_TRUE(oversubscribed(crowded));
  std::vector<double> waits;
  for (size_t bytes : {size_t{128} << 10, size_t{2} << 20, size_t{8} << 20}) {
    const double reads = 3.0 * static_cast<double>(bytes) * 1e-3 / 7.0;
    // The same reads with CPUs enough or not: what crowding adds (the
    // hand-off's wait) does not grow with the bytes.
    const double roomy = predictCost(CollKind::Broadcast, "direct", bytes, s, p)->us;
    const double tight = predictCost(CollKind::Broadcast, "direct", bytes, crowded, p)->us;
    EXPECT_GT(roomy, reads) << bytes;
    waits.push_back(tight - roomy);
    EXPECT_NEAR(waits.back(), waits.front(), 1e-6) << bytes;
    const std::vector<Choice> trials = trialChoices(CollKind::Broadcast, bytes, crowded, p,
                                                    allAlgorithms(), Restrictions{}, 3.0, 3);
    bool timed = false;
    for (const Choice& c : trials) timed = timed || std::string(c.alg->name) == "direct";
    EXPECT_TRUE(timed) << bytes;
  }
}

// Below the per-peer size from which the model takes single copy (a fixed
// 64 KiB, not a calibration), single-copy all-to-all still runs in the
// trials from an eighth of it, so measurement can take it where it wins
// (4 ranks on 2 CPUs, 32 KiB per peer: direct 34 us, pairwise 74); the
// model's own choice does not change, and smaller blocks are not timed.
TEST(TunerTrials, SingleCopyIsTimedFromAnEighthOfItsSize) {
  TunerShape s = shape(4);
  s.hostCpus = 2;
  const TunerParams p = defaultTunerParams();
  auto timesDirect = [&](size_t perPeer) {
    const std::vector<Choice> trials =
        trialChoices(CollKind::AllToAll, perPeer, s, p, allAlgorithms(), Restrictions{}, 100.0, 3);
    for (const Choice& c : trials) {
      if (std::string(c.alg->name) == "direct") return true;
    }
    return false;
  };
  EXPECT_TRUE(timesDirect(s.directMinBytes));
  EXPECT_TRUE(timesDirect(s.directMinBytes / 2));
  EXPECT_TRUE(timesDirect(s.directMinBytes / 8));
  EXPECT_FALSE(timesDirect(s.directMinBytes / 8 - 4));
  EXPECT_FALSE(timesDirect(1024));
  for (size_t perPeer : {s.directMinBytes / 8, s.directMinBytes / 2})
    EXPECT_STRNE(
        chooseFor(CollKind::AllToAll, perPeer, s, p, allAlgorithms(), Restrictions{}).alg->name,
        "direct")
        << perPeer;
  // No shared memory to publish: never.
  s.canPublish = false;
  EXPECT_FALSE(timesDirect(s.directMinBytes));
}

TEST(TunerOversubscribed, SchedZeroTurnsTheModelOff) {
  TunerParams p = defaultTunerParams();
  p.schedUs = 0;
  for (int n : {3, 4, 8}) {
    TunerShape s = shape(n);
    TunerShape over = s;
    over.hostCpus = 1;
    for (CollKind kind : kEveryKind) {
      for (size_t bytes = 1; bytes <= (size_t{16} << 20); bytes *= 8)
        EXPECT_EQ(pick(kind, bytes, over, p), pick(kind, bytes, s, p))
            << collName(kind) << " " << bytes;
    }
  }
}

// Two "hosts" (WEFT_HOSTID, network namespaces) on one 2-CPU machine, ranks
// 0,1 and 2,3, each pinned to CPU rank mod 2: each host alone has a CPU per
// rank, the machine has two ranks per CPU. Measured so (4 ranks, hosts by
// rank / 2, weftrun's pinning), every allreduce from 8 B to 32 KiB took
// 0.85-1.6 ms, the ranks spinning through time slices their peer needed.
TEST(TunerOversubscribed, RanksOfHostsSharingAMachineCountTogether) {
  auto rec = [](int cpu, uint32_t machine) {
    CpuRecord r;
    r.mask[0] = uint64_t{1} << cpu;
    r.count = 1;
    r.machine = machine;
    return r;
  };
  const int twoHosts[] = {0, 0, 1, 1};
  const CpuRecord oneMachine[] = {rec(0, 7), rec(1, 7), rec(0, 7), rec(1, 7)};
  EXPECT_EQ(worstHostCpus(oneMachine, twoHosts), 2);  // no host is oversubscribed...
  EXPECT_TRUE(machineOversubscribed(oneMachine));     // ...the machine is
  // ...and the model gives each host its share of the machine: 1 CPU.
  EXPECT_EQ(modelHostCpus(oneMachine, twoHosts), 1);
  // Two machines: each runs two ranks on two CPUs.
  const CpuRecord twoMachines[] = {rec(0, 7), rec(1, 7), rec(0, 9), rec(1, 9)};
  EXPECT_FALSE(machineOversubscribed(twoMachines));
  EXPECT_EQ(modelHostCpus(twoMachines, twoHosts), 2);
  // Unknown machines are each their own.
  const CpuRecord unknown[] = {rec(0, 0), rec(0, 0), rec(0, 0)};
  EXPECT_FALSE(machineOversubscribed(unknown));
  const int threeHosts[] = {0, 1, 2};
  EXPECT_EQ(modelHostCpus(unknown, threeHosts), 1);
  // Three ranks confined to one CPU of one machine.
  const CpuRecord crowded[] = {rec(0, 5), rec(0, 5), rec(0, 5)};
  EXPECT_TRUE(machineOversubscribed(crowded));
  // Containers on one node, each with a CPU quota of its own: the quotas
  // do not add up to one machine-wide cap.
  CpuRecord pods[4];
  for (int i = 0; i < 4; ++i) {
    pods[i] = rec(0, 5);
    pods[i].mask[0] = 0xff;  // CPUs 0-7
    pods[i].count = 8;
    pods[i].quota = 2;
  }
  EXPECT_FALSE(machineOversubscribed(pods));
  // Two pods of two ranks: each its quota of 2, which the machine's 8 CPUs
  // do not cut.
  EXPECT_EQ(modelHostCpus(pods, twoHosts), 2);
  // Two hosts on one machine whose ranks each have CPUs of their own: no cut.
  const CpuRecord ownCpus[] = {rec(0, 3), rec(1, 3), rec(2, 3), rec(3, 3)};
  EXPECT_EQ(modelHostCpus(ownCpus, twoHosts), 2);
  // Three hosts of 2 ranks on one 4-CPU machine: 4/6 of a CPU per rank, so
  // a host's 2 ranks have 1 CPU in the model (floor of 4/3).
  const CpuRecord six[] = {rec(0, 3), rec(1, 3), rec(2, 3), rec(3, 3), rec(0, 3), rec(1, 3)};
  const int threePairs[] = {0, 0, 1, 1, 2, 2};
  EXPECT_EQ(worstHostCpus(six, threePairs), 2);
  EXPECT_EQ(modelHostCpus(six, threePairs), 1);
}

// A rank's record: these CPUs in its mask (and counted), a quota, a machine.
CpuRecord cpuRecord(std::initializer_list<int> cpus, uint32_t quota = 0, uint32_t machine = 0) {
  CpuRecord r;
  for (int c : cpus) r.mask[c / 64] |= uint64_t{1} << (c % 64);
  r.count = static_cast<uint32_t>(cpus.size());
  r.quota = quota;
  r.machine = machine;
  return r;
}

TEST(TunerOversubscribed, HostCpusAreTheUnionOfTheRanksMasks) {
  auto rec = [](std::initializer_list<int> cpus, uint32_t quota = 0) {
    return cpuRecord(cpus, quota);
  };
  const int oneHost[] = {0, 0, 0, 0};
  // A launcher binding each rank to a core of its own: 4 CPUs, not 1.
  const CpuRecord bound[] = {rec({0}), rec({1}), rec({2}), rec({3})};
  EXPECT_EQ(worstHostCpus(bound, oneHost), 4);
  // All confined to the same two cores.
  const CpuRecord shared[] = {rec({0, 1}), rec({0, 1}), rec({0, 1}), rec({0, 1})};
  EXPECT_EQ(worstHostCpus(shared, oneHost), 2);
  // A CPU quota caps a wide mask.
  const CpuRecord quota[] = {rec({0, 1, 2, 3, 64, 65}, 3), rec({0, 1, 2, 3, 64, 65}, 3),
                             rec({0, 1, 2, 3, 64, 65}, 3), rec({0, 1, 2, 3, 64, 65}, 3)};
  EXPECT_EQ(worstHostCpus(quota, oneHost), 3);
  // Two hosts: the crowded one decides, scaled to the most ranks per host.
  const int twoHosts[] = {0, 0, 0, 0, 1, 1, 1, 1};
  const CpuRecord mixed[] = {rec({0, 1, 2, 3}), rec({0, 1, 2, 3}), rec({0, 1, 2, 3}),
                             rec({0, 1, 2, 3}), rec({0}),          rec({0}),
                             rec({0}),          rec({0})};
  EXPECT_EQ(worstHostCpus(mixed, twoHosts), 1);
  // Unknown counts: nothing is claimed.
  const CpuRecord unknown[] = {CpuRecord{}, CpuRecord{}};
  const int two[] = {0, 0};
  EXPECT_EQ(worstHostCpus(unknown, two), 0);
  // This process: what sched_getaffinity says, at least one.
  uint64_t mask[16];
  const int mine = usableCpus(mask);
  EXPECT_GE(mine, 1);
  int bits = 0;
  for (uint64_t w : mask) bits += __builtin_popcountll(w);
  EXPECT_GE(bits, 1);
}

TEST(CpuBind, SpreadCpuDealsTheRanksSharingAMaskOverItsCpus) {
  auto rec = [](std::initializer_list<int> cpus, uint32_t machine = 7) {
    return cpuRecord(cpus, 0, machine);
  };
  auto spread = [](std::span<const CpuRecord> ranks) {
    std::vector<int> cpus;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) cpus.push_back(spreadCpuFor(ranks, r));
    return cpus;
  };
  // Four ranks left on the same two CPUs (2 and 65): dealt round-robin.
  const CpuRecord shared[] = {rec({2, 65}), rec({2, 65}), rec({2, 65}), rec({2, 65})};
  EXPECT_EQ(spread(shared), (std::vector<int>{2, 65, 2, 65}));
  // Two groups by mask, interleaved by rank: each group counts on its own.
  const CpuRecord groups[] = {rec({0, 1}), rec({2, 3}), rec({0, 1}), rec({2, 3})};
  EXPECT_EQ(spread(groups), (std::vector<int>{0, 2, 1, 3}));
  // A launcher bound them already, a mask no one else shares, another
  // machine, an unknown machine, an unknown count: left alone.
  const CpuRecord bound[] = {rec({0}), rec({1}), rec({0})};
  EXPECT_EQ(spread(bound), (std::vector<int>{-1, -1, -1}));
  const CpuRecord alone[] = {rec({0, 1}), rec({0, 1, 2})};
  EXPECT_EQ(spread(alone), (std::vector<int>{-1, -1}));
  const CpuRecord machines[] = {rec({0, 1}, 1), rec({0, 1}, 2)};
  EXPECT_EQ(spread(machines), (std::vector<int>{-1, -1}));
  const CpuRecord unknown[] = {rec({0, 1}, 0), rec({0, 1}, 0)};
  EXPECT_EQ(spread(unknown), (std::vector<int>{-1, -1}));
  CpuRecord uncounted[] = {rec({0, 1}), rec({0, 1})};
  uncounted[0].count = uncounted[1].count = 0;
  EXPECT_EQ(spread(uncounted), (std::vector<int>{-1, -1}));
}

// This process's CPUs, in order.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(CpuBind, BindsEachRankToItsShareOfTheMaskWhereAsked) {
  const std::vector<int> mine = allowedCpus();
  uint64_t mask[16];
  // A CPU quota of one counts as one CPU: nothing is bound then.
  if (mine.size() < 2 || usableCpus(mask) < 2)
    GTEST_SKIP() << "this process may run on one CPU only";
  // core: rank i on the (i mod C)-th allowed CPU, and the collectives still
  // run (the engine thread, started later, inherits the binding).
  auto boundInTurn = [mine](weftComm_t comm, int rank, int n) {
    const std::vector<int> now = allowedCpus();
    RANK_ASSERT(now.size() == 1) << now.size() << " CPUs";
    RANK_EXPECT_EQ(now[0], mine[static_cast<size_t>(rank) % mine.size()]);
    std::vector<float> x(1000, float(rank + 1));
    RANK_CHECK_OK(weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr));
    RANK_EXPECT(x[999] == float(n * (n + 1) / 2));
  };
  auto unbound = [mine](weftComm_t, int, int) { RANK_EXPECT(allowedCpus() == mine); };
  test::RunOptions core;
  core.env = {{"WEFT_CPU_BIND", "core"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(3, boundInTurn, core);
  // auto: only where the ranks outnumber the CPUs.
  test::RunOptions crowded;
  crowded.env = {
      {"WEFT_CPU_BIND", "auto"}, {"WEFT_TUNER_HOST_CPUS", "1"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(2, boundInTurn, crowded);
  test::RunOptions roomy;
  roomy.env = {
      {"WEFT_CPU_BIND", "auto"}, {"WEFT_TUNER_HOST_CPUS", "64"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(2, unbound, roomy);
  // none, the default: the launcher's masks stay.
  test::RunOptions none;
  none.env = {{"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(2, unbound, none);
}

TEST(CpuBind, AnUnknownValueFailsInitAndSaysWhatWorks) {
  test::RunOptions opts;
  opts.env = {{"WEFT_CPU_BIND", "cores"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanksRaw(
      2,
      [](const test::RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_EXPECT_RESULT(ctx.initComm(&comm), weftInvalidArgument);
        const std::string why = weftGetLastError(nullptr);
        RANK_EXPECT(why.find("WEFT_CPU_BIND is 'cores'") != std::string::npos) << why;
        RANK_EXPECT(why.find("none, auto") != std::string::npos) << why;
      },
      opts);
}

TEST(RingOrder, GroupsRanksByHostThenPackageAndCache) {
  auto at = [](int package, int cache) {
    CpuRecord r;
    r.package = package;
    r.cache = cache;
    return r;
  };
  using Order = std::vector<int>;
  const int oneHost[] = {0, 0, 0, 0};
  // Unbound ranks, or ranks on CPUs of one cache, keep rank order: ranks
  // sharing a CPU are not put side by side (ring_order.h).
  const CpuRecord unbound[] = {CpuRecord{}, CpuRecord{}, CpuRecord{}, CpuRecord{}};
  EXPECT_EQ(ringOrderFor(unbound, oneHost), (Order{0, 1, 2, 3}));
  const CpuRecord oneCache[] = {at(0, 0), at(0, 0), at(0, 0), at(0, 0)};
  EXPECT_EQ(ringOrderFor(oneCache, oneHost), (Order{0, 1, 2, 3}));
  // Ranks dealt round-robin to two sockets: one crossing each way.
  const CpuRecord sockets[] = {at(0, 0), at(1, 8), at(0, 0), at(1, 8)};
  EXPECT_EQ(ringOrderFor(sockets, oneHost), (Order{0, 2, 1, 3}));
  // Two caches in one package, the second holding the lower ranks.
  const CpuRecord caches[] = {at(0, 1), at(0, 0), at(0, 1), at(0, 0)};
  EXPECT_EQ(ringOrderFor(caches, oneHost), (Order{1, 3, 0, 2}));
  // Ranks dealt round-robin to two hosts; the host decides before the cache.
  const int dealt[] = {0, 1, 0, 1};
  EXPECT_EQ(ringOrderFor(unbound, dealt), (Order{0, 2, 1, 3}));
  const CpuRecord pairs[] = {at(0, 1), at(0, 1), at(0, 0), at(0, 0)};
  EXPECT_EQ(ringOrderFor(pairs, dealt), (Order{2, 0, 3, 1}));
  // This process: where sysfs describes its lowest allowed CPU's last-level
  // cache, its id and size.
  CpuRecord mine;
  usableCpus(mine.mask);
  readCpuPlacement(&mine);
  int first = 0;
  while (first < 1024 && !(mine.mask[first / 64] & (uint64_t{1} << (first % 64)))) ++first;
  const std::string l3 = "/sys/devices/system/cpu/cpu" + std::to_string(first) + "/cache/index3";
  if (std::filesystem::exists(l3 + "/size") && std::filesystem::exists(l3 + "/id")) {
    EXPECT_GE(mine.cache, 0);
    EXPECT_GT(mine.cacheKiB, 0u);
  }
}

// ---------------------------------------------------------------------------
// Through the environment and a context.

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    resetAlgorithmSelectionForTesting();
  }
  ~ScopedEnv() {
    unsetenv(name_);
    resetAlgorithmSelectionForTesting();
  }

 private:
  const char* name_;
};

TEST(TunerEnv, ProtoRestrictsTheRealTable) {
  CollArgs a;
  a.kind = CollKind::AllGather;
  a.count = 1 << 20;
  EXPECT_STRNE(selectAlgorithm(a, 4, 64 << 10).name, "direct");  // no publishing channels
  {
    ScopedEnv e("WEFT_PROTO", "send:simple");
    EXPECT_FALSE(p2pSingleCopyAllowed());
  }
  {
    ScopedEnv e("WEFT_PROTO", "^bogus");
    EXPECT_TRUE(p2pSingleCopyAllowed());
  }
}

// ---------------------------------------------------------------------------
// Calibration at communicator creation, with real ranks.

std::string tempPath(const char* tag) {
  return (std::filesystem::temp_directory_path() /
          ("weft-tuner-" + std::string(tag) + "-" + std::to_string(getpid())))
      .string();
}

TEST(TunerCalibration, AgreedAndWrittenToTheFile) {
  const std::string file = tempPath("cal");
  std::filesystem::remove(file);
  test::RunOptions opts;
  opts.env = {{"WEFT_TUNER_FILE", file}, {"WEFT_TUNER_CALIBRATE", "1"}};
  test::runRanks(
      3,
      [](weftComm_t comm, int rank, int n) {
        RANK_ASSERT(comm->tuner != nullptr);
        const TunerParams p = comm->tuner->params();
        RANK_EXPECT(tunerParamsValid(p));
        RANK_EXPECT_EQ(comm->tuner->shape().nranks, n);
        // One host, unless the shared memory is off (then every rank is one).
        RANK_EXPECT(comm->tuner->shape().nhosts == 1 || std::getenv("WEFT_SHM_DISABLE"));
        // Every rank holds the same parameters: compare them through a max
        // and a min allreduce.
        double mine[8] = {p.link[0].alphaUs, p.link[0].gbps, p.link[1].alphaUs, p.link[1].gbps,
                          p.link[2].alphaUs, p.link[2].gbps, p.reduceGbps,      p.netFanoutUs};
        double hi[8], lo[8];
        RANK_CHECK_OK(weftAllReduce(mine, hi, 8, weftFloat64, weftMax, comm, nullptr));
        RANK_CHECK_OK(weftAllReduce(mine, lo, 8, weftFloat64, weftMin, comm, nullptr));
        for (int i = 0; i < 8; ++i) RANK_EXPECT(hi[i] == lo[i]) << "parameter " << i;
        // Collectives still run and are right after the calibration.
        std::vector<float> x(100000, float(rank + 1));
        RANK_CHECK_OK(
            weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr));
        RANK_EXPECT(x[99999] == float(n * (n + 1) / 2));
      },
      opts);
  std::ifstream in(file);
  ASSERT_TRUE(in) << "rank 0 did not write " << file;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string why;
  EXPECT_TRUE(parseTunerFile(text, defaultTunerParams(), &why)) << why << "\n" << text;

  // A second job loads the file instead of calibrating.
  const TunerParams custom = sample();
  {
    std::ofstream out(file, std::ios::trunc);
    out << formatTunerFile(custom);
  }
  test::runRanks(
      2,
      [custom](weftComm_t comm, int, int) {
        const TunerParams p = comm->tuner->params();
        RANK_EXPECT(p.link[0].alphaUs == custom.link[0].alphaUs);
        RANK_EXPECT(p.link[2].gbps == custom.link[2].gbps);
        RANK_EXPECT(p.reduceGbps == custom.reduceGbps);
      },
      opts);
  std::filesystem::remove(file);
}

// Every rank its own host (shared memory off): all ranks time the fan-out
// together and agree on what rank 0 measured; the collectives the tuner then
// picks are right.
TEST(TunerCalibration, MeasuresTheFanOutWhenEveryRankIsAHost) {
  test::RunOptions opts;
  opts.env = {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_TUNER_CALIBRATE", "1"}};
  for (int n : {4, 5}) {
    test::runRanks(
        n,
        [](weftComm_t comm, int rank, int n) {
          RANK_ASSERT(comm->tuner != nullptr);
          RANK_EXPECT_EQ(comm->tuner->shape().nhosts, n);
          const TunerParams p = comm->tuner->params();
          RANK_EXPECT(tunerParamsValid(p));
          // Measured, not the default (a timing never lands on it exactly).
          RANK_EXPECT(p.netFanoutUs != defaultTunerParams().netFanoutUs) << p.netFanoutUs;
          double mine[2] = {p.netFanoutUs, p.link[2].alphaUs}, hi[2], lo[2];
          RANK_CHECK_OK(weftAllReduce(mine, hi, 2, weftFloat64, weftMax, comm, nullptr));
          RANK_CHECK_OK(weftAllReduce(mine, lo, 2, weftFloat64, weftMin, comm, nullptr));
          RANK_EXPECT(hi[0] == lo[0] && hi[1] == lo[1]);
          for (size_t count : {size_t{2}, size_t{3000}, size_t{100000}}) {
            std::vector<double> x(count, rank + 1.0);
            RANK_CHECK_OK(
                weftAllReduce(x.data(), x.data(), count, weftFloat64, weftSum, comm, nullptr));
            RANK_EXPECT(x[count - 1] == n * (n + 1) / 2.0) << count;
          }
        },
        opts);
  }
}

// Parameters cached from a communicator that could not measure the fan-out
// (2 ranks) do not stand in for one that can: it calibrates again.
TEST(TunerCalibration, ACacheWithoutTheFanOutDoesNotServeOneThatNeedsIt) {
  test::RunOptions opts;
  opts.env = {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_TUNER_CALIBRATE", "1"}};
  test::runRanks(
      4,
      [](weftComm_t comm, int rank, int n) {
        resetTunerCacheForTesting();
        weftComm_t pair = nullptr, all = nullptr;
        RANK_CHECK_OK(weftCommSplit(comm, rank / 2, rank, &pair, nullptr));
        RANK_EXPECT(pair->tuner->params().netFanoutUs == defaultTunerParams().netFanoutUs);
        RANK_CHECK_OK(weftCommSplit(comm, 0, rank, &all, nullptr));
        RANK_EXPECT_EQ(all->tuner->shape().nhosts, n);
        RANK_EXPECT(all->tuner->params().netFanoutUs != defaultTunerParams().netFanoutUs);
        RANK_CHECK_OK(weftCommDestroy(all));
        RANK_CHECK_OK(weftCommDestroy(pair));
      },
      opts);
}

TEST(TunerCalibration, SkippedGivesDefaultsAndOverrides) {
  test::RunOptions opts;
  opts.env = {{"WEFT_TUNER_CALIBRATE", "0"}, {"WEFT_TUNER_NET_ALPHA_US", "77"}};
  test::runRanks(
      2,
      [](weftComm_t comm, int, int) {
        const TunerParams p = comm->tuner->params();
        const TunerParams d = defaultTunerParams();
        RANK_EXPECT(p.link[0].alphaUs == d.link[0].alphaUs);
        RANK_EXPECT(p.link[0].gbps == d.link[0].gbps);
        RANK_EXPECT(p.link[2].alphaUs == 77.0);
      },
      opts);
}

// A communicator sets the size above which copies stream past the cache
// to half of each rank's share of its last-level cache (kernels/reduce.h):
// here 4 unbound ranks share the L3 of the lowest allowed CPU.
TEST(CpuLayout, StreamThresholdIsHalfEachRanksShareOfTheLastLevelCache) {
  if (std::getenv("WEFT_NT_COPY_THRESHOLD")) GTEST_SKIP() << "WEFT_NT_COPY_THRESHOLD is set";
  CpuRecord mine;
  usableCpus(mine.mask);
  readCpuPlacement(&mine);
  if (mine.cacheKiB == 0) GTEST_SKIP() << "sysfs gives no last-level cache size";
  const size_t expected = std::max<size_t>(size_t{1} << 20, (size_t{mine.cacheKiB} << 10) / 4 / 2);
  test::runRanks(
      4, [&](weftComm_t, int, int) { RANK_EXPECT_EQ(kernels::streamThreshold(), expected); });
  // No communicator in this process: the default.
  EXPECT_EQ(kernels::streamThreshold(), size_t{1} << 20);
  // The smallest share any communicator reports counts, never below 1 MiB.
  kernels::useCacheShare(size_t{32} << 20);
  EXPECT_EQ(kernels::streamThreshold(), size_t{16} << 20);
  kernels::useCacheShare(size_t{64} << 20);
  EXPECT_EQ(kernels::streamThreshold(), size_t{16} << 20);
  kernels::useCacheShare(size_t{8} << 20);
  EXPECT_EQ(kernels::streamThreshold(), size_t{4} << 20);
  kernels::useCacheShare(size_t{1} << 20);
  EXPECT_EQ(kernels::streamThreshold(), size_t{1} << 20);
}

TEST(TunerOversubscribed, AgreedAtCreationAndOverridable) {
  // Whatever this machine has, every rank models the same CPU count.
  test::runRanks(3, [](weftComm_t comm, int, int) {
    RANK_ASSERT(comm->tuner != nullptr);
    const TunerShape& s = comm->tuner->shape();
    RANK_EXPECT(s.hostCpus >= 1);
    double mine = s.hostCpus, hi = 0, lo = 0;
    RANK_CHECK_OK(weftAllReduce(&mine, &hi, 1, weftFloat64, weftMax, comm, nullptr));
    RANK_CHECK_OK(weftAllReduce(&mine, &lo, 1, weftFloat64, weftMin, comm, nullptr));
    RANK_EXPECT(hi == lo);
  });
  // Calibrating on an oversubscribed host: what the ping-pong measured
  // beyond the default hand-off went into schedUs, never below its default.
  test::RunOptions cal;
  cal.env = {{"WEFT_TUNER_HOST_CPUS", "1"}, {"WEFT_TUNER_CALIBRATE", "1"}};
  test::runRanks(
      3,
      [](weftComm_t comm, int, int n) {
        const TunerParams p = comm->tuner->params();
        const TunerParams d = defaultTunerParams();
        RANK_EXPECT(tunerParamsValid(p));
        if (comm->tuner->shape().ranksPerHost == n) {
          RANK_EXPECT(p.schedUs >= d.schedUs);
          RANK_EXPECT(p.link[0].alphaUs <= d.link[0].alphaUs);
        }
      },
      cal);
  // Room for every rank: waits keep their long spin.
  test::RunOptions roomy;
  roomy.env = {{"WEFT_TUNER_HOST_CPUS", "64"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(
      2, [](weftComm_t comm, int, int) { RANK_EXPECT(!comm->health.oversubscribed()); }, roomy);
  // WEFT_TUNER_HOST_CPUS=1: four ranks on one CPU take recursive doubling
  // for a small all-gather (the ring otherwise), and get the right sums.
  test::RunOptions opts;
  opts.env = {{"WEFT_TUNER_HOST_CPUS", "1"}, {"WEFT_TUNER_CALIBRATE", "0"}};
  test::runRanks(
      4,
      [](weftComm_t comm, int rank, int n) {
        const TunerShape& s = comm->tuner->shape();
        RANK_EXPECT(s.hostCpus == 1);
        // Waits spin briefly (Progress::idle): the host is crowded whether
        // the ranks talk shared memory or, under WEFT_SHM_DISABLE, TCP.
        RANK_EXPECT(comm->health.oversubscribed());
        if (s.ranksPerHost == n) {  // not under WEFT_SHM_DISABLE (one host per rank)
          RANK_EXPECT(oversubscribed(s));
          RANK_EXPECT(std::string(comm->tuner->choose(CollKind::AllGather, 64).alg->name) ==
                      "recdoubling");
        }
        std::vector<float> x(16, float(rank + 1));
        RANK_CHECK_OK(
            weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr));
        RANK_EXPECT(x[15] == float(n * (n + 1) / 2));
        std::vector<int32_t> all(4 * n, -1), own(4, rank);
        RANK_CHECK_OK(weftAllGather(own.data(), all.data(), 4, weftInt32, comm, nullptr));
        for (int i = 0; i < 4 * n; ++i) RANK_EXPECT(all[i] == i / 4);
      },
      opts);
}

// ---------------------------------------------------------------------------
// weft-info, run as a program.

std::string runInfo(const std::string& args, int* status) {
  const std::string cmd = std::string(WEFT_BIN_DIR) + "/weft-info " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  *status = pclose(p);
  return out;
}

TEST(WeftInfo, ListsEveryAlgorithm) {
  int status = -1;
  const std::string out = runInfo("", &status);
  EXPECT_EQ(status, 0) << out;
  for (const Algorithm& a : allAlgorithms()) {
    bool found = false;
    const std::string coll = collName(a.kind);
    for (size_t pos = out.find(coll); pos != std::string::npos; pos = out.find(coll, pos + 1)) {
      const std::string line = out.substr(pos, out.find('\n', pos) - pos);
      if (line.find(" " + std::string(a.name) + " ") != std::string::npos &&
          line.find(a.description) != std::string::npos)
        found = true;
    }
    EXPECT_TRUE(found) << coll << " " << a.name << " missing from:\n" << out;
    EXPECT_NE(out.find(a.cost), std::string::npos) << a.cost;
  }
}

TEST(WeftInfo, PlansEverySize) {
  int status = -1;
  const std::string out = runInfo("--plan -n 8 --hosts 2 --coll allreduce --dtype float", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("8 ranks on 2 host(s)"), std::string::npos) << out;
  for (size_t size = 8; size <= (size_t{1} << 30); size *= 2) {
    EXPECT_NE(out.find("\n" + std::string(12 - std::to_string(size).size(), ' ') +
                       std::to_string(size) + " "),
              std::string::npos)
        << size;
  }
  const std::string all = runInfo("--plan -n 4 --max 1M --all", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(all.find("# AllGather"), std::string::npos);
  EXPECT_NE(all.find(" cma "), std::string::npos) << all;  // single copy at 1 MiB
}

// With WEFT_SHM_DISABLE a job puts every pair on TCP and models each rank
// as a host of its own, so single copy (which needs shared memory) is out;
// the plan must say what such a job would run.
TEST(WeftInfo, ShmDisabledPlansEveryRankAsAHost) {
  int status = -1;
  const std::string shm = runInfo("--plan -n 2 --coll allgather --min 4M --max 4M", &status);
  EXPECT_EQ(status, 0) << shm;
  EXPECT_NE(shm.find(" cma "), std::string::npos) << shm;
  setenv("WEFT_SHM_DISABLE", "1", 1);
  const std::string tcp = runInfo("--plan -n 2 --coll allgather --min 4M --max 4M", &status);
  unsetenv("WEFT_SHM_DISABLE");
  EXPECT_EQ(status, 0) << tcp;
  EXPECT_NE(tcp.find("2 ranks on 2 host(s)"), std::string::npos) << tcp;
  EXPECT_EQ(tcp.find(" cma "), std::string::npos) << tcp;
}

TEST(WeftInfo, PlansAnOversubscribedHost) {
  int status = -1;
  const std::string normal = runInfo("--plan -n 4 --coll allgather --max 4K", &status);
  EXPECT_EQ(status, 0) << normal;
  EXPECT_EQ(normal.find("recdoubling"), std::string::npos) << normal;
  EXPECT_EQ(normal.find("oversubscribed"), std::string::npos) << normal;
  const std::string over =
      runInfo("--plan -n 4 --coll allgather --max 4K --cpus-per-host 2", &status);
  EXPECT_EQ(status, 0) << over;
  EXPECT_NE(over.find("4 per host on 2 CPUs (oversubscribed model)"), std::string::npos) << over;
  EXPECT_NE(over.find("recdoubling"), std::string::npos) << over;
  EXPECT_EQ(over.find("ring"), std::string::npos) << over;
  // As many CPUs as ranks: the normal plan.
  const std::string enough =
      runInfo("--plan -n 4 --coll allgather --max 4K --cpus-per-host 4", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(enough.substr(enough.find("# AllGather")), normal.substr(normal.find("# AllGather")));
  runInfo("--plan -n 4 --cpus-per-host two", &status);
  EXPECT_NE(status, 0);
}

// Ranks dealt to hosts in turn: the plan says so, and hier reduce-scatter
// is charged its reordering copy.
TEST(WeftInfo, PlansRanksDealtRoundRobin) {
  int status = -1;
  const std::string args = "--plan -n 8 --hosts 2 --coll reducescatter --min 64M --max 64M --all";
  const std::string blocks = runInfo(args, &status);
  EXPECT_EQ(status, 0) << blocks;
  EXPECT_EQ(blocks.find("not in blocks"), std::string::npos) << blocks;
  const std::string turns = runInfo(args + " --round-robin", &status);
  EXPECT_EQ(status, 0) << turns;
  EXPECT_NE(turns.find("8 ranks on 2 host(s), 4 per host, not in blocks of consecutive ranks"),
            std::string::npos)
      << turns;
  // The hier row's predicted time (the last column) grows.
  auto hierUs = [](const std::string& out) {
    const size_t at = out.find(" hier ");
    if (at == std::string::npos) return -1.0;
    const size_t eol = out.find('\n', at);
    const std::string row = out.substr(at, eol - at);
    return std::stod(row.substr(row.find_last_of(' ') + 1));
  };
  ASSERT_GT(hierUs(blocks), 0) << blocks;
  EXPECT_GT(hierUs(turns), hierUs(blocks)) << blocks << turns;
}

TEST(WeftInfo, BadArgumentsSayWhy) {
  int status = -1;
  std::string out = runInfo("--plan", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("-n"), std::string::npos) << out;
  out = runInfo("--plan -n 4 --coll nosuch", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("nosuch"), std::string::npos) << out;
  out = runInfo("--plan -n 4 --hosts 9", &status);
  EXPECT_NE(status, 0);
  out = runInfo("--plan -n 4 --max junk", &status);
  EXPECT_NE(status, 0);
}

}  // namespace
}  // namespace weft
