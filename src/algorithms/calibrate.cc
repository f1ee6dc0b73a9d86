// The tuner's parameters for a new communicator, agreed by all ranks.
//
// Rank 0 decides where they come from: parameters this process measured
// before (a split communicator on the same machine), WEFT_TUNER_FILE, a
// calibration, or the defaults. A calibration is short and bounded: rank 0
// ping-pongs small messages with one peer per link class (the first other
// rank on its host; the first rank on another host), streams one buffer
// through the FIFO, lets the same-host peer read two published buffers
// (single copy) and times a local reduction. Each phase stops at its time
// budget, so a loaded machine costs at most a few milliseconds per link.
// When every rank is its own host, all ranks then time a few rounds of
// swapping words with one partner and with up to seven (the fan-out).
// Rank 0 then applies the WEFT_TUNER_* overrides and broadcasts the result,
// so every rank models the same machine and makes the same choices.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/byte_collectives.h"
#include "algorithms/detail.h"
#include "algorithms/select.h"
#include "algorithms/tuner.h"
#include "base/env.h"
#include "base/log.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

using Clock = std::chrono::steady_clock;

double usSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The ping-pong of one link: at least kMinPings rounds (the first ones warm
// up connections and caches), then more until kPhaseBudgetUs; never past
// kHardLimitUs, however slow the rounds.
constexpr double kPhaseBudgetUs = 1000;
constexpr double kHardLimitUs = 10000;
constexpr int kMinPings = 8;
constexpr int kMaxPings = 48;

// The copies are the collectives' own (kernels::copy), which step around
// the 4 KiB alias window: with std::memcpy the stream's receiver, copying
// from a page-aligned slot into a buffer malloc put 16 bytes past a page,
// ran at 2.4 GB/s where the sender ran at 7.5, and shared memory was
// calibrated at 2.7-2.9 GB/s (2 ranks; a staged sendrecv moves 10 GB/s each
// way). With kernels::copy: 8.6-12.8 GB/s in eight runs.
Status sendBytes(SendChannel& ch, Progress& pr, const void* data, size_t bytes) {
  void* slot;
  WEFT_RETURN_IF_ERROR(acquireSlot(ch, pr, &slot));
  kernels::copy(slot, data, bytes);
  ch.commit(bytes);
  return Status::ok();
}

Status recvBytes(RecvChannel& ch, Progress& pr, void* data, size_t bytes) {
  const void* src;
  WEFT_RETURN_IF_ERROR(peekSlot(ch, pr, bytes, &src));
  kernels::copy(data, src, bytes);
  ch.release();
  return Status::ok();
}

struct Word {
  uint64_t more = 0;  // 1: another round follows
  double value = 0;   // a measurement the peer reports
};

// Ping-pong: rank 0 (`leader`) sends, the peer echoes, until the leader
// says stop. Returns the one-way latency in us (leader only): the best
// round, since the model describes the machine, not the load on it now.
Status pingPong(CollContext& ctx, int peer, bool leader, double* oneWayUs) {
  Progress pr(ctx.health());
  SendChannel& out = ctx.sendTo(peer);
  RecvChannel& in = ctx.recvFrom(peer);
  std::vector<double> rtt;
  const auto start = Clock::now();
  for (int i = 0;; ++i) {
    Word w;
    if (leader) {
      const double elapsed = usSince(start);
      w.more = i + 1 < kMaxPings && elapsed < kHardLimitUs &&
                       (i + 1 < kMinPings || elapsed < kPhaseBudgetUs)
                   ? 1
                   : 0;
      const auto t0 = Clock::now();
      WEFT_RETURN_IF_ERROR(sendBytes(out, pr, &w, sizeof(w)));
      Word echo;
      WEFT_RETURN_IF_ERROR(recvBytes(in, pr, &echo, sizeof(echo)));
      rtt.push_back(usSince(t0));
    } else {
      WEFT_RETURN_IF_ERROR(recvBytes(in, pr, &w, sizeof(w)));
      WEFT_RETURN_IF_ERROR(sendBytes(out, pr, &w, sizeof(w)));
    }
    if (!w.more) break;
  }
  if (leader) {
    // The first rounds fault pages in.
    if (rtt.size() > 4) rtt.erase(rtt.begin(), rtt.begin() + 2);
    *oneWayUs = *std::min_element(rtt.begin(), rtt.end()) / 2;
  }
  return Status::ok();
}

// Streams buf through the FIFO slots; the peer copies it out into its own
// buf and acknowledges. Returns the leader's elapsed us.
Status stream(CollContext& ctx, int peer, bool leader, std::vector<char>& buf, double* us) {
  Progress pr(ctx.health());
  SendChannel& out = ctx.sendTo(peer);
  RecvChannel& in = ctx.recvFrom(peer);
  const size_t slot = ctx.chunkBytes();
  const size_t total = buf.size();
  const auto t0 = Clock::now();
  Word w;
  if (leader) {
    for (size_t off = 0; off < total; off += slot) {
      const size_t bytes = std::min(slot, total - off);
      WEFT_RETURN_IF_ERROR(sendBytes(out, pr, buf.data() + off, bytes));
    }
    WEFT_RETURN_IF_ERROR(recvBytes(in, pr, &w, sizeof(w)));
    *us = usSince(t0);
  } else {
    for (size_t off = 0; off < total; off += slot) {
      const size_t bytes = std::min(slot, total - off);
      WEFT_RETURN_IF_ERROR(recvBytes(in, pr, buf.data() + off, bytes));
    }
    WEFT_RETURN_IF_ERROR(sendBytes(out, pr, &w, sizeof(w)));
  }
  return Status::ok();
}

// The leader publishes `total` bytes; the peer reads them by single copy
// kReads times and reports its best read. Returns that time in us. One cold
// read (pages the kernel pins for the first time) measured 5-8 us for
// 16 KiB and a single-copy bandwidth of 5.6-10 GB/s from run to run, which
// made pairwise all-to-all look cheaper than direct at 2 ranks from 64 to
// 256 KiB per peer, where direct took 0.6x its time.
Status publishedRead(CollContext& ctx, int peer, bool leader, size_t total, double* us) {
  Progress pr(ctx.health());
  SendChannel& out = ctx.sendTo(peer);
  RecvChannel& in = ctx.recvFrom(peer);
  std::vector<char> buf(total, 1);
  Word w;
  if (leader) {
    void* slot;
    WEFT_RETURN_IF_ERROR(acquireSlot(out, pr, &slot));
    out.publish(buf.data(), total);
    WEFT_RETURN_IF_ERROR(recvBytes(in, pr, &w, sizeof(w)));  // after the peer released
    while (!out.drained()) WEFT_RETURN_IF_ERROR(pr.idle());
    *us = w.value;
    return Status::ok();
  }
  size_t bytes = 0;
  while (!in.tryPeek(&bytes)) WEFT_RETURN_IF_ERROR(pr.idle());
  if (!in.peekedPublished() || bytes != total)
    return Status(weftInternalError, "tuner calibration: expected a published buffer");
  constexpr int kReads = 4;
  Status st;
  w.value = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kReads && st.isOk(); ++i) {
    const auto t0 = Clock::now();
    st = in.readPublished(buf.data(), 0, total);
    w.value = std::min(w.value, usSince(t0));
  }
  in.release();
  WEFT_RETURN_IF_ERROR(st);
  return sendBytes(out, pr, &w, sizeof(w));
}

double gbpsFrom(size_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0;
}

// One link class against `peer`: alpha from the better of two ping-pongs,
// one before the streams and one after, bandwidth from
// the best of a few streams of up to `most` bytes. The first stream only
// warms up: it faults in both ends' slots and buffers (a page fault per
// 4 KiB, and a VM's are slow) and lets TCP grow its window; over TCP a cold
// 256 KiB stream measured 0.06 GB/s on a loopback that moves 3 GB/s. So a
// stream covers every slot of the channel once (at most `most` bytes), and
// the buffers are the same in every round. Leaves `lp` alone where a
// measurement is implausible.
Status measureLink(CollContext& ctx, int peer, bool leader, size_t most, LinkParams* lp) {
  constexpr int kMinStreams = 2, kMaxStreams = 4;
  constexpr double kStreamBudgetUs = 5000;
  double oneWay = 0;
  WEFT_RETURN_IF_ERROR(pingPong(ctx, peer, leader, &oneWay));
  const size_t total = std::min(most, ctx.slotsPerChannel() * ctx.chunkBytes());
  std::vector<char> buf(total, 1);
  double us = std::numeric_limits<double>::infinity();
  const auto start = Clock::now();
  Progress pr(ctx.health());
  for (int round = 0;; ++round) {
    double took = 0;
    WEFT_RETURN_IF_ERROR(stream(ctx, peer, leader, buf, &took));
    if (round > 0) us = std::min(us, took);
    // The leader says whether another round follows.
    Word w;
    if (leader) {
      w.more =
          round + 1 < kMinStreams || (round + 1 < kMaxStreams && usSince(start) < kStreamBudgetUs);
      WEFT_RETURN_IF_ERROR(sendBytes(ctx.sendTo(peer), pr, &w, sizeof(w)));
    } else {
      WEFT_RETURN_IF_ERROR(recvBytes(ctx.recvFrom(peer), pr, &w, sizeof(w)));
    }
    if (!w.more) break;
  }
  // Again once the link is warm: a ping-pong at start-up now and then
  // measures 200-450 us round trips where the rest take 14 (TCP loopback).
  double warmOneWay = 0;
  WEFT_RETURN_IF_ERROR(pingPong(ctx, peer, leader, &warmOneWay));
  oneWay = std::min(oneWay, warmOneWay);
  if (!leader) return Status::ok();
  LinkParams m{oneWay, gbpsFrom(total, us - oneWay)};
  TunerParams probe = defaultTunerParams();
  probe.link[0] = m;
  if (tunerParamsValid(probe)) *lp = m;
  return Status::ok();
}

Status measureCma(CollContext& ctx, int peer, bool leader, LinkParams* lp) {
  constexpr size_t kSmall = 16 << 10, kBig = 1 << 20;
  double tSmall = 0, tBig = 0;
  WEFT_RETURN_IF_ERROR(publishedRead(ctx, peer, leader, kSmall, &tSmall));
  WEFT_RETURN_IF_ERROR(publishedRead(ctx, peer, leader, kBig, &tBig));
  if (!leader || tBig <= tSmall) return Status::ok();
  const double beta = (tBig - tSmall) / static_cast<double>(kBig - kSmall);  // us per byte
  LinkParams m{std::max(0.05, tSmall - kSmall * beta), 1e-3 / beta};
  TunerParams probe = defaultTunerParams();
  probe.link[0] = m;
  if (tunerParamsValid(probe)) *lp = m;
  return Status::ok();
}

// The network fan-out (tuner.h): every rank at once swaps a word with one
// partner (r XOR 1, a recursive-doubling step), then with up to seven
// (r XOR 1..7, a direct step within groups of eight), round after round;
// rank 0 times each round. All ranks take part, so whatever the extra peers
// cost on this machine is in it: the calls and wake-ups per message,
// senders converging on one receiver. Each extra partner costs the
// difference of the best wide and the best single round over the extra
// partners: best, as in the ping-pong, because the model describes the
// machine, not the load on it now. The rounds are fixed in number, so every
// rank knows when the phase ends; a round waits on at most seven peers.
// The best single-partner round is a one-way latency too, taken with every
// rank busy: the ping-pong's may be longer here, when ranks that wait for
// it share its CPUs (4 ranks on 2 vCPUs: 35-56 us in some runs, where the
// swap's best was 6-11). Needs 3 ranks or more; sets the us per extra
// partner and the best swap on rank 0 only.
struct Fanout {
  double perPeerUs = 0;
  double swapUs = 0;
};
Status measureFanout(CollContext& ctx, Fanout* out) {
  constexpr int kRounds = 24, kWarmup = 4, kWidest = 7;
  const int n = ctx.nranks(), r = ctx.rank();
  const int most = std::min(n - 1, kWidest);  // rank 0's partners in the wide round
  Progress pr(ctx.health());
  // Sends first, then receives: a send only needs a free slot, which the
  // partner's previous round freed, so no order deadlocks.
  auto round = [&](int width) -> Status {
    const Word w;
    for (int j = 1; j <= width; ++j) {
      if ((r ^ j) < n) WEFT_RETURN_IF_ERROR(sendBytes(ctx.sendTo(r ^ j), pr, &w, sizeof(w)));
    }
    Word got;
    for (int j = 1; j <= width; ++j) {
      if ((r ^ j) < n) WEFT_RETURN_IF_ERROR(recvBytes(ctx.recvFrom(r ^ j), pr, &got, sizeof(got)));
    }
    return Status::ok();
  };
  std::vector<double> one, wide;
  for (int i = 0; i < kRounds; ++i) {
    // Alternating, so that a slow moment of the host weighs on both.
    auto t0 = Clock::now();
    WEFT_RETURN_IF_ERROR(round(1));
    const double t1 = usSince(t0);
    t0 = Clock::now();
    WEFT_RETURN_IF_ERROR(round(kWidest));
    const double t2 = usSince(t0);
    if (i >= kWarmup) {
      one.push_back(t1);
      wide.push_back(t2);
    }
  }
  if (r != 0) return Status::ok();
  const double best1 = *std::min_element(one.begin(), one.end());
  const double bestWide = *std::min_element(wide.begin(), wide.end());
  *out = {std::max(0.0, (bestWide - best1) / (most - 1)), best1};
  return Status::ok();
}

double measureReduceGbps() {
  constexpr size_t kCount = 64 << 10;  // floats: 256 KiB, cache-resident
  std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f);
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = Clock::now();
    kernels::reduce(a.data(), a.data(), b.data(), kCount, weftFloat32, kernels::ReduceKind::Sum);
    const double us = usSince(t0);
    if (us > 0) best = std::max(best, gbpsFrom(kCount * sizeof(float), us));
  }
  return best;
}

// Parameters this process agreed on before, for later communicators.
std::mutex gCacheMu;
bool gCached = false;
bool gCachedNet = false;     // the cached net link was measured
bool gCachedFanout = false;  // and the fan-out
TunerParams gCache;

enum Source : uint32_t { kDefaults = 0, kFile = 1, kCalibrate = 2, kCached = 3 };
const char* sourceName(uint32_t s) {
  switch (s) {
    case kFile:
      return "file";
    case kCalibrate:
      return "calibration";
    case kCached:
      return "an earlier communicator";
    default:
      return "defaults";
  }
}

// On an oversubscribed host (tuner.h) the ping-pong measured the hand-off
// plus the wait for a peer that was not running, since the ranks not in the
// ping-pong compete for the CPUs. The model charges that wait per awaited
// peer (schedUs x the chance a peer is not running), so the excess over the
// unloaded hand-off becomes schedUs and the shm latency keeps its default.
// The bandwidth run waited the same way (4 ranks on 2 CPUs measured 2 GB/s
// against 29 unloaded), which made the ring, with its two copies per byte,
// look slower than recursive doubling at 16 MiB, where forced runs show the
// opposite: the shm bandwidth keeps its default too.
void splitScheduling(const TunerShape& shape, TunerParams* p) {
  const int shm = static_cast<int>(LinkClass::Shm);
  const TunerParams d = defaultTunerParams();
  const double notRunning =
      1.0 - static_cast<double>(shape.hostCpus) / std::max(shape.ranksPerHost, 1);
  if (notRunning <= 0) return;
  p->link[shm].gbps = d.link[shm].gbps;
  const double excess = p->link[shm].alphaUs - d.link[shm].alphaUs;
  if (excess <= 0) return;
  // At most twice the default: a short ping-pong's wait is a whole time
  // slice now and then, which a step of a large pipelined call, whose peers
  // are running by then, does not pay (4 ranks on 2 CPUs measured 158 us,
  // and took recursive doubling at 2 MiB, 1.26x slower than the ring).
  p->schedUs = std::clamp(excess / notRunning, p->schedUs, 2 * p->schedUs);
  p->link[shm].alphaUs = d.link[shm].alphaUs;
}

}  // namespace

void resetTunerCacheForTesting() {
  std::lock_guard<std::mutex> lock(gCacheMu);
  gCached = false;
  gCachedNet = false;
  gCachedFanout = false;
}

Status tunerParamsFor(CollContext& ctx, std::span<const int> hostOf, const TunerShape& shape,
                      TunerParams* out) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  *out = defaultTunerParams();
  int shmPeer = -1, netPeer = -1;
  for (int p = 1; p < n && p < static_cast<int>(hostOf.size()); ++p) {
    if (hostOf[p] == hostOf[0] && shmPeer < 0) shmPeer = p;
    if (hostOf[p] != hostOf[0] && netPeer < 0) netPeer = p;
  }
  const auto file = envString("TUNER_FILE");
  // Every rank its own host (flat algorithms run over the network alone) and
  // a step with more than one peer to time: the calibration measures the
  // fan-out, and a cache without one does not do.
  const bool fansOut = shape.nhosts == n && n >= 3;

  // Rank 0's plan.
  uint32_t source = kDefaults;
  TunerParams params = defaultTunerParams();
  if (r == 0) {
    std::lock_guard<std::mutex> lock(gCacheMu);
    if (gCached && (netPeer < 0 || gCachedNet) && (!fansOut || gCachedFanout)) {
      source = kCached;
      params = gCache;
    }
  }
  if (r == 0 && source == kDefaults && file) {
    std::ifstream in(*file, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      std::string why;
      if (auto p = parseTunerFile(text.str().substr(0, 64 * 1024 + 1), params, &why)) {
        source = kFile;
        params = *p;
      } else {
        WEFT_WARN(kLogTuning, "WEFT_TUNER_FILE %s is not a valid tuner file (%s); recalibrating",
                  file->c_str(), why.c_str());
      }
    }
  }
  if (r == 0 && source == kDefaults && n > 1 && envInt("TUNER_CALIBRATE", 1) != 0)
    source = kCalibrate;
  if (n > 1) WEFT_RETURN_IF_ERROR(algo::broadcastBytes(ctx, &source, sizeof(source)));

  if (source == kCalibrate) {
    const auto t0 = Clock::now();
    const bool leader = r == 0;
    if (shmPeer >= 0 && (leader || r == shmPeer)) {
      const int peer = leader ? shmPeer : 0;
      WEFT_RETURN_IF_ERROR(
          measureLink(ctx, peer, leader, 4 << 20, &params.link[static_cast<int>(LinkClass::Shm)]));
      // Both ends see the same channel pair; the leader's says whether it publishes.
      uint32_t cma = leader && ctx.sendTo(peer).canPublish() ? 1 : 0;
      Progress pr(ctx.health());
      if (leader) {
        WEFT_RETURN_IF_ERROR(sendBytes(ctx.sendTo(peer), pr, &cma, sizeof(cma)));
      } else {
        WEFT_RETURN_IF_ERROR(recvBytes(ctx.recvFrom(peer), pr, &cma, sizeof(cma)));
      }
      if (cma)
        WEFT_RETURN_IF_ERROR(
            measureCma(ctx, peer, leader, &params.link[static_cast<int>(LinkClass::Cma)]));
    }
    if (netPeer >= 0 && (leader || r == netPeer)) {
      WEFT_RETURN_IF_ERROR(measureLink(ctx, leader ? netPeer : 0, leader, 4 << 20,
                                       &params.link[static_cast<int>(LinkClass::Net)]));
    }
    if (fansOut) {
      Fanout fanout;
      WEFT_RETURN_IF_ERROR(measureFanout(ctx, &fanout));
      if (leader) {
        LinkParams& net = params.link[static_cast<int>(LinkClass::Net)];
        params.netFanoutUs = fanout.perPeerUs;
        if (fanout.swapUs > 0) net.alphaUs = std::min(net.alphaUs, fanout.swapUs);
      }
    }
    if (leader && shmPeer >= 0 && oversubscribed(shape)) splitScheduling(shape, &params);
    if (leader) {
      if (const double g = measureReduceGbps(); g > 0) params.reduceGbps = g;
      WEFT_INFO(kLogTuning, "calibrated in %.0f us", usSince(t0));
      if (file) {
        std::ofstream f(*file, std::ios::trunc);
        f << formatTunerFile(params);
        if (!f) WEFT_WARN(kLogTuning, "cannot write WEFT_TUNER_FILE %s", file->c_str());
      }
    }
  }
  if (r == 0) {
    if (source == kCalibrate || source == kFile) {
      std::lock_guard<std::mutex> lock(gCacheMu);
      gCached = true;
      gCachedNet = gCachedNet || netPeer >= 0;
      gCachedFanout = gCachedFanout || (source == kCalibrate && fansOut);
      gCache = params;
    }
    applyTunerEnv(&params);
    if (!tunerParamsValid(params)) params = defaultTunerParams();
  }
  if (n > 1) WEFT_RETURN_IF_ERROR(algo::broadcastBytes(ctx, &params, sizeof(params)));
  if (!tunerParamsValid(params)) params = defaultTunerParams();
  const LinkParams* l = params.link;
  WEFT_INFO(kLogTuning,
            "tuner parameters from %s: shm %.2f us %.1f GB/s, cma %.2f us %.1f GB/s, net %.2f us "
            "%.2f GB/s (fan-out %.2f us per extra peer), reduce %.1f GB/s, sched %.1f us",
            sourceName(source), l[0].alphaUs, l[0].gbps, l[1].alphaUs, l[1].gbps, l[2].alphaUs,
            l[2].gbps, params.netFanoutUs, params.reduceGbps, params.schedUs);
  *out = params;
  return Status::ok();
}

}  // namespace weft
