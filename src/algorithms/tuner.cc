// The cost model and the choice (see tuner.h). The formulas are keyed by the
// collective's name and the algorithm's name, so that the model covers
// algorithms a build may or may not have: only names present in the table
// are ever considered.
//
// Notation: n ranks, h hosts, p ranks per host, N the collective's whole
// message (allreduce/broadcast/reduce: the buffer; allgather: the output;
// reducescatter: the input; alltoall: the send buffer), b the block per rank
// or peer, lg = log2 of the largest power of two <= n. A "step" pays alpha
// once. On shm a rank that sends and receives b in one step copies 2b (in
// and out of slots); over the network sending and receiving overlap (b).
#include "algorithms/tuner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "algorithms/hier.h"
#include "algorithms/select.h"
#include "algorithms/spec.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {

constexpr int kNumKinds = static_cast<int>(CollKind::Recv) + 1;
static_assert(kNumKinds <= 16, "Restrictions holds 16 collectives");

// ---------------------------------------------------------------------------
// Parameters.

// Fitted on one host (2 vCPUs): with these, allreduce takes "direct" up to
// about 256 KiB / n in all and the ring above, as the measured size rule
// did; single copy wins over the FIFO ring from well below 64 KiB per peer.
constexpr TunerParams kDefaults{
    {{2.0, 29.0},   // shm: FIFO hand-off ~2 us per step inside a collective
     {1.0, 25.0},   // cma: process_vm_readv, slower per byte than memcpy
     {25.0, 3.0}},  // net: TCP, a conservative 25 Gbit/s-class guess
    18.5,           // reduce: a += b over two streams, one core
    // sched: with a waiter that spun 2000 pauses (~55 us) before it
    // yielded, 28 fitted the forced runs at 4 ranks on 2 CPUs (recursive
    // doubling first up to 256 KiB, the ring from 2 MiB). With the short
    // spin of an oversubscribed host (progress.cc) a wait costs less, and
    // the forced runs put recursive doubling first up to 128 KiB (within 6%
    // of the best there) and the ring from 512 KiB (1.45x faster there):
    // with 28 the model still took recursive doubling at 512 KiB; any value
    // from 8 to 24 (the calibration keeps it within [default, 2 x default])
    // gives the measured choices. With the ranks pinned (weftrun's default
    // since) and no spin, direct won up to 2 KiB and the ring from 128 KiB,
    // which 8-18 give with the exchanges' byte cost (Model::paired) and the
    // overlapping waits of a step on several peers (Model::step).
    12.0,
    // net fan-out: the calibration measured 8-12 us per extra peer over TCP
    // loopback on the development host (4-8 ranks, one per host, on 2 vCPUs),
    // where the net latency measured 6-70 us.
    8.0,
};

struct Range {
  double lo, hi;
};
constexpr Range kAlphaRange{0.01, 1e6};  // us
constexpr Range kGbpsRange{1e-4, 1e4};
constexpr Range kSchedRange{0, 1e6};   // us; 0: no oversubscription term
constexpr Range kFanoutRange{0, 1e6};  // us; 0: a fan-out costs one alpha

bool inRange(double v, Range r) {
  return std::isfinite(v) && v >= r.lo && v <= r.hi;
}

const char* const kLinkKeys[kNumLinks] = {"shm", "cma", "net"};

}  // namespace

const char* protoName(Proto p) {
  return p == Proto::Cma ? "cma" : "simple";
}

const char* linkName(LinkClass l) {
  return kLinkKeys[static_cast<int>(l)];
}

TunerParams defaultTunerParams() {
  return kDefaults;
}

bool tunerParamsValid(const TunerParams& p) {
  for (const LinkParams& l : p.link) {
    if (!inRange(l.alphaUs, kAlphaRange) || !inRange(l.gbps, kGbpsRange)) return false;
  }
  return inRange(p.reduceGbps, kGbpsRange) && inRange(p.schedUs, kSchedRange) &&
         inRange(p.netFanoutUs, kFanoutRange);
}

bool oversubscribed(const TunerShape& shape) {
  return shape.hostCpus > 0 && shape.ranksPerHost > shape.hostCpus;
}

namespace {

std::optional<double> parseDouble(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  char buf[65];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  char* end = nullptr;
  const double v = std::strtod(buf, &end);
  if (end != buf + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Points key ("shm.alpha_us") at its field and range, or returns false.
bool fieldFor(std::string_view key, TunerParams& p, double** field, Range* range) {
  if (key == "reduce.gbps") {
    *field = &p.reduceGbps;
    *range = kGbpsRange;
    return true;
  }
  if (key == "sched.us") {
    *field = &p.schedUs;
    *range = kSchedRange;
    return true;
  }
  if (key == "net.fanout_us") {
    *field = &p.netFanoutUs;
    *range = kFanoutRange;
    return true;
  }
  for (int l = 0; l < kNumLinks; ++l) {
    const std::string prefix = std::string(kLinkKeys[l]) + ".";
    if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = key.substr(prefix.size());
    if (rest == "alpha_us") {
      *field = &p.link[l].alphaUs;
      *range = kAlphaRange;
      return true;
    }
    if (rest == "gbps") {
      *field = &p.link[l].gbps;
      *range = kGbpsRange;
      return true;
    }
  }
  return false;
}

void envOverride(const char* name, double* field, Range range) {
  const auto text = envString(name);
  if (!text) return;
  const auto v = parseDouble(*text);
  if (!v || !inRange(*v, range)) {
    WEFT_WARN(kLogEnv, "WEFT_%s=%s is not a number in [%g, %g]; ignored", name, text->c_str(),
              range.lo, range.hi);
    return;
  }
  *field = *v;
}

}  // namespace

void applyTunerEnv(TunerParams* p) {
  static const char* const kAlpha[kNumLinks] = {"TUNER_SHM_ALPHA_US", "TUNER_CMA_ALPHA_US",
                                                "TUNER_NET_ALPHA_US"};
  static const char* const kGbps[kNumLinks] = {"TUNER_SHM_GBPS", "TUNER_CMA_GBPS",
                                               "TUNER_NET_GBPS"};
  for (int l = 0; l < kNumLinks; ++l) {
    envOverride(kAlpha[l], &p->link[l].alphaUs, kAlphaRange);
    envOverride(kGbps[l], &p->link[l].gbps, kGbpsRange);
  }
  envOverride("TUNER_REDUCE_GBPS", &p->reduceGbps, kGbpsRange);
  envOverride("TUNER_SCHED_US", &p->schedUs, kSchedRange);
  envOverride("TUNER_NET_FANOUT_US", &p->netFanoutUs, kFanoutRange);
}

std::string formatTunerFile(const TunerParams& p) {
  std::string out = "weft-tuner 1\n# alpha: us per message step; gbps: 1e9 bytes/s\n";
  char line[96];
  for (int l = 0; l < kNumLinks; ++l) {
    std::snprintf(line, sizeof(line), "%s.alpha_us %.6g\n%s.gbps %.6g\n", kLinkKeys[l],
                  p.link[l].alphaUs, kLinkKeys[l], p.link[l].gbps);
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "# us per peer beyond the first in a step with several network peers\n"
                "net.fanout_us %.6g\n",
                p.netFanoutUs);
  out += line;
  std::snprintf(line, sizeof(line), "reduce.gbps %.6g\n", p.reduceGbps);
  out += line;
  std::snprintf(line, sizeof(line),
                "# sched: us per awaited peer not running, on an oversubscribed host\n"
                "sched.us %.6g\n",
                p.schedUs);
  out += line;
  return out;
}

std::optional<TunerParams> parseTunerFile(std::string_view text, const TunerParams& base,
                                          std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<TunerParams> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (text.size() > 64 * 1024) return fail("larger than 64 KiB");
  TunerParams p = base;
  bool header = false;
  int lineNo = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++lineNo;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    // Split into words on blanks (space, tab, CR).
    std::string_view words[3];
    int count = 0;
    size_t pos = 0;
    while (pos < line.size()) {
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\r'))
        ++pos;
      if (pos >= line.size()) break;
      size_t end = pos;
      while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
      if (count == 3) return fail("line " + std::to_string(lineNo) + ": too many words");
      words[count++] = line.substr(pos, end - pos);
      pos = end;
    }
    if (count == 0) continue;
    if (!header) {
      if (count != 2 || words[0] != "weft-tuner" || words[1] != "1")
        return fail("the first line is not 'weft-tuner 1'");
      header = true;
      continue;
    }
    if (count != 2) return fail("line " + std::to_string(lineNo) + ": expected 'key value'");
    double* field = nullptr;
    Range range{};
    if (!fieldFor(words[0], p, &field, &range))
      return fail("line " + std::to_string(lineNo) + ": unknown key");
    const auto v = parseDouble(words[1]);
    if (!v || !inRange(*v, range))
      return fail("line " + std::to_string(lineNo) + ": value is not a number in range");
    *field = *v;
  }
  if (!header) return fail("empty");
  return p;
}

// ---------------------------------------------------------------------------
// The model.

namespace {

struct Model {
  const TunerShape& s;
  const TunerParams& p;
  int n, h, ppn;
  // The expected scheduling delay per awaited peer (tuner.h): schedUs times
  // the chance that a peer is not running, 1 - cpus/ranks; 0 with enough
  // CPUs.
  double wait;
  // How much slower a rank copies and reduces than a rank with a CPU of its
  // own: ranks / CPUs on an oversubscribed host (each runs that share of
  // the time), else 1. Only with the oversubscription term on.
  double slow;
  Model(const TunerShape& shape, const TunerParams& params)
      : s(shape),
        p(params),
        n(std::max(shape.nranks, 1)),
        h(std::clamp(shape.nhosts, 1, std::max(shape.nranks, 1))),
        ppn(std::max(shape.ranksPerHost, 1)),
        wait(oversubscribed(shape)
                 ? params.schedUs * (1.0 - static_cast<double>(shape.hostCpus) / ppn)
                 : 0.0),
        slow(wait > 0 ? static_cast<double>(ppn) / shape.hostCpus : 1.0) {}

  double alpha(LinkClass l) const { return p.link[static_cast<int>(l)].alphaUs; }
  // One step over l that waits for `peers` peers. A step that waits on
  // several at once waits for the last of them: one scheduling delay times
  // the chance that any is not running, 1 - (C/R)^peers, not one delay per
  // peer. Pinned at 4 ranks on 2 CPUs with no spin, direct allreduce (one
  // step, three peers) beat recursive doubling (two steps, one peer each)
  // by 1.14-1.26x from 8 B to 2 KiB in three sweeps, where a delay per peer
  // put it 1.5x behind.
  double step(LinkClass l, double peers = 1) const {
    if (wait <= 0 || peers <= 1) return alpha(l) + peers * wait;
    const double running = 1.0 - wait / p.schedUs;  // C/R
    return alpha(l) + p.schedUs * (1.0 - std::pow(running, peers));
  }
  // One step over l that exchanges with `peers` peers at once (tuner.h:
  // fan-out).
  double fanStep(LinkClass l, double peers) const {
    return step(l, peers) + (l == LinkClass::Net ? (peers - 1) * p.netFanoutUs : 0.0);
  }
  // us per byte; the network's share is the NIC's, not the CPU's.
  double beta(LinkClass l) const {
    return 1e-3 / p.link[static_cast<int>(l)].gbps * (l == LinkClass::Net ? 1.0 : slow);
  }
  double gamma() const { return 1e-3 / p.reduceGbps * slow; }
  // The byte costs of the exchanges (direct, recursive halving and
  // doubling, Bruck) over shared memory are scaled by this once more on an
  // oversubscribed host: forced there (4 ranks on 2 CPUs, pinned, median of
  // 8, three sweeps), reduce-scatter took 482-632 us by recursive halving
  // against 233-313 by the ring at 2 MiB, and allreduce 1564-1567 by
  // recursive doubling against 820-826 by the ring, where the formulas
  // give them as many bytes or fewer. Two likely causes, neither measured
  // alone: an exchange's bytes move only while both partners run, where a
  // ring's rank has a running neighbour to move bytes with whichever ranks
  // run; and the ring fuses each reduction with the copy into the next
  // rank's slot, where an exchange copies its half out and then reduces
  // what arrives.
  double paired(LinkClass l) const { return l == LinkClass::Net ? 1.0 : slow; }
  // Recursive-doubling all-gather reduces nothing, so only the first cause
  // applies: it pays the square root of that factor. Against the ring, same
  // host, four sweeps: 0.76-1.03x the ring's time at 128 KiB, 1.13-1.28x at
  // 512 KiB, 1.14-1.18x at 2 MiB (two sweeps since copyOut's threshold
  // follows the cache) and 1.03-1.17x at 8 MiB, where the full factor put
  // the ring ahead from 64 KiB. (Direct all-gather and Bruck keep the full factor: with it the
  // picks match the sweeps, without it direct all-gather wins from 512 KiB
  // on paper and loses 1.5x in the runs.)
  double pairedCopy(LinkClass l) const { return std::sqrt(paired(l)); }
  // The link a flat algorithm's steps wait for.
  LinkClass flat() const { return h > 1 ? LinkClass::Net : LinkClass::Shm; }
  // The link of a recursive halving or doubling step between ranks `mask`
  // apart (exchange.h): where there is no fold and hosts are runs of
  // consecutive ranks, a power of two each, the steps below ranksPerHost
  // stay within a host. Charged at the network's cost, 16 ranks as 2 hosts
  // of 8, recursive doubling's three steps within the host put its 8-byte
  // allreduce at 100 us, behind hier's 62, where it takes one network step
  // and three within the host (31 us): on simulated hosts (4 ranks as 2,
  // 2 CPUs, 8 B-32 KiB) forced recdoubling was the fastest allreduce at
  // every size.
  LinkClass stepLink(int mask) const {
    const bool runs = h > 1 && n == p2() && s.hostsAreRankRuns && (ppn & (ppn - 1)) == 0;
    return runs && mask < ppn ? LinkClass::Shm : flat();
  }
  // Bytes a rank both sends and receives in one step: on shm it copies both.
  double dup(LinkClass l) const { return l == LinkClass::Net ? 1.0 : 2.0; }
  // Flat algorithms whose ranks all cross hosts at once share a host's NIC.
  double share(LinkClass l) const { return l == LinkClass::Net ? ppn : 1.0; }
  int lg() const {
    int k = 0;
    while ((2 << k) <= n) ++k;
    return k;
  }
  int p2() const { return 1 << lg(); }
  int ceilLog2(int x) const {
    int k = 0;
    while ((1 << k) < x) ++k;
    return k;
  }
  // The hierarchical reduce-scatter's and all-gather's intra-host stage
  // with `block` bytes per rank: run once per host (h * log2(p) steps), or
  // once (log2(p) steps) after or before a local reordering copy of all n
  // blocks, as algo::stagesPerHost decides.
  bool hierPerHost(double block) const {
    return algo::stagesPerHost(s.hostsAreRankRuns, ppn, static_cast<size_t>(block), s.slotBytes);
  }
  double hierInsideSteps(double block) const {
    return (hierPerHost(block) ? h : 1) * ceilLog2(ppn);
  }
  double hierReorderBytes(double block) const { return hierPerHost(block) ? 0.0 : block * n; }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// A pipeline of `stages` hops over which chunks of c bytes stream; each hop
// costs alpha + c * perByte. Returns the best chunk (a power of two from
// 4 KiB up to the slot) and its time.
Cost pipeline(const Model& m, LinkClass l, int stages, double bytes, double perByte) {
  Cost best{kInf, m.s.slotBytes};
  const double a = m.step(l);
  if (bytes <= 0) return Cost{stages * a, m.s.slotBytes};
  for (size_t c = m.s.slotBytes; c >= 1; c /= 2) {
    const double chunks = std::ceil(bytes / static_cast<double>(c));
    const double per = std::min<double>(static_cast<double>(c), bytes);
    const double t = (stages + chunks - 1) * (a + per * perByte);
    if (t < best.us) best = Cost{t, c};
    if (c <= 4096) break;  // smaller chunks only add steps
  }
  return best;
}

// Non-power-of-two fix-up of the recursive algorithms: the extra ranks hand
// their input to a partner first and get the result back last.
double foldIn(const Model& m, LinkClass l, double N, bool reduce) {
  if (m.n == m.p2()) return 0;
  return m.step(l) + N * m.beta(l) + (reduce ? N * m.gamma() : 0);
}
double foldOut(const Model& m, LinkClass l, double N) {
  if (m.n == m.p2()) return 0;
  return m.step(l) + m.dup(l) * N * m.beta(l);
}

// What a formula picks besides the time: the pipelined algorithms' chunk,
// hier allreduce's segment count (0: the algorithm's own rule); and what
// the caller set: the count hier allreduce is priced at (WEFT_HIER_SEGMENTS).
struct Knobs {
  size_t chunkBytes = 0;
  size_t segments = 0;
  size_t segmentsGiven = 0;  // 0: the rule's
};
using Formula = double (*)(const Model& m, double bytes, Knobs* knobs);

// --- allreduce (N = bytes) ---
double arRing(const Model& m, double N, Knobs*) {
  const LinkClass l = m.flat();
  const double b = N / m.n;
  // reduce-scatter steps copy b into the next slot and reduce b; all-gather
  // steps forward b and copy it out.
  return 2.0 * (m.n - 1) * m.step(l) + (m.n - 1) * b * (m.beta(l) + m.gamma()) +
         (m.n - 1) * b * m.dup(l) * m.beta(l);
}
double arDirect(const Model& m, double N, Knobs*) {
  const LinkClass l = m.flat();
  if (N > static_cast<double>(m.s.slotBytes)) return kInf;  // runs only within one slot
  // One step, but with every peer.
  return m.fanStep(l, m.n - 1) + m.paired(l) * (m.n - 1) * N * (m.beta(l) * m.share(l) + m.gamma());
}
double arTree(const Model& m, double N, Knobs* knobs) {
  const LinkClass l = m.flat();
  // Two binary trees, each half the data; a chunk goes up (reduced) and
  // down. A rank sends and receives at most 3/2 of it and reduces it once.
  const int depth = m.ceilLog2(m.n);
  const Cost c = pipeline(m, l, 2 * depth, N, 1.5 * m.dup(l) * m.beta(l) * m.share(l) + m.gamma());
  knobs->chunkBytes = c.chunkBytes;
  return c.us;
}
double arRhd(const Model& m, double N, Knobs*) {
  // The halving step between ranks `mask` apart sends and reduces
  // mask/p2 of N, the doubling step back sends as much.
  const LinkClass l = m.flat();
  double t = foldIn(m, l, N, true) + foldOut(m, l, N);
  for (int mask = 1; mask < m.p2(); mask *= 2) {
    const LinkClass k = m.stepLink(mask);
    const double part = N * mask / m.p2();
    t += 2.0 * m.step(k) +
         m.paired(k) * part *
             (m.beta(k) * m.share(k) + m.gamma() + m.dup(k) * m.beta(k) * m.share(k));
  }
  return t;
}
double arRecDoubling(const Model& m, double N, Knobs*) {
  const LinkClass l = m.flat();
  double t = foldIn(m, l, N, true) + foldOut(m, l, N);
  for (int mask = 1; mask < m.p2(); mask *= 2) {
    const LinkClass k = m.stepLink(mask);
    t += m.step(k) + m.paired(k) * N * (m.beta(k) * m.share(k) + m.gamma());
  }
  return t;
}
double arHier(const Model& m, double N, Knobs* knobs) {
  // Recursive-halving reduce-scatter inside each host (shm), rhd (or ring)
  // allreduce of each 1/p slice across hosts (one leader per slice, the slices
  // sharing the NIC), then recursive-doubling all-gather inside; in K
  // segments, each stage's steps K times, the host's stages and the
  // network's overlapping (hier_allreduce.cc).
  const int p = m.ppn, h = m.h;
  const LinkClass s = LinkClass::Shm, net = LinkClass::Net;
  const double inside = (p - 1.0) / p * N;
  const double hostSteps = 2.0 * m.ceilLog2(p) * m.step(s);
  const double hostBytes = inside * (m.beta(s) + m.gamma()) + inside * m.dup(s) * m.beta(s);
  double acrossSteps = 0, acrossBytes = 0;
  if (h > 1) {
    // rhd across a power of two of hosts, else a ring: the same bytes.
    acrossSteps = ((h & (h - 1)) == 0 ? 2.0 * m.ceilLog2(h) : 2.0 * (h - 1)) * m.step(net);
    acrossBytes = 2.0 * (h - 1) / h * N * m.beta(net) + (h - 1.0) / h * (N / p) * m.gamma();
  }
  // K: hier allreduce's own rule (hierSegments), reported with the choice,
  // unless WEFT_HIER_SEGMENTS gives one. Not the K that minimises
  // this formula: that K (one segment wherever the host is oversubscribed,
  // where the lanes add up) lost to the rule where measured. 4 ranks as 2
  // simulated hosts on 2 CPUs, forced, median of 5 alternating rounds,
  // 8 MiB: K = 1 8166 us, 2 9416, 4 8550, 8 (the rule) 6799; 2 MiB: 1929,
  // 1808 (the rule's 2), 2140, 2423. The formula leaves out that a segment
  // small enough stays in cache from one stage to the next.
  // A count given (WEFT_HIER_SEGMENTS) is priced as the call runs it: at
  // most one segment per byte (hier_allreduce.cc cuts at most one per element).
  const size_t given = knobs->segmentsGiven;
  knobs->segments = std::clamp<size_t>(
      given > 0 ? given : algo::hierSegments(static_cast<size_t>(N), p, m.s.slotBytes), 1,
      std::max<size_t>(1, static_cast<size_t>(N)));
  const double k = static_cast<double>(knobs->segments);
  const double host = k * hostSteps + hostBytes, across = k * acrossSteps + acrossBytes;
  // Overlapped, the slower lane sets the pace and the other adds one
  // segment's worth; on an oversubscribed host the lanes' ranks share the
  // CPUs that would overlap them, so the two add up.
  if (m.wait > 0) return host + across;
  return std::max(host, across) + std::min(host, across) / k;
}

// --- reducescatter (N = n * bytes) ---
double rsRing(const Model& m, double bytes, Knobs*) {
  const LinkClass l = m.flat();
  return (m.n - 1) * (m.step(l) + bytes * (m.beta(l) + m.gamma()));
}
double rsRhd(const Model& m, double bytes, Knobs*) {
  const LinkClass l = m.flat();
  const double N = bytes * m.n;
  double t = foldIn(m, l, N, true) + (m.n == m.p2() ? 0 : m.step(l) + m.dup(l) * bytes * m.beta(l));
  for (int mask = 1; mask < m.p2(); mask *= 2) {
    const LinkClass k = m.stepLink(mask);
    t += m.step(k) + m.paired(k) * N * mask / m.p2() * (m.beta(k) * m.share(k) + m.gamma());
  }
  return t;
}
double rsHier(const Model& m, double bytes, Knobs*) {
  // Recursive halving inside the host, then across hosts per slice. The
  // first stage runs once per host (h times the steps) or once after a
  // reordering copy of N (hier_reduce_scatter.cc).
  const int p = m.ppn, h = m.h;
  const double N = bytes * m.n;
  const LinkClass s = LinkClass::Shm, net = LinkClass::Net;
  double t = m.hierInsideSteps(bytes) * m.step(s) + (p - 1.0) / p * N * (m.beta(s) + m.gamma()) +
             m.hierReorderBytes(bytes) * m.beta(s);
  if (h > 1) {
    // Halving across a power of two of hosts, else a ring.
    const double steps = (h & (h - 1)) == 0 ? m.ceilLog2(h) : h - 1.0;
    t += steps * m.step(net) + (h - 1.0) / h * N * m.beta(net) + (h - 1.0) / h * N / p * m.gamma();
  }
  return t;
}

// --- allgather (b = bytes per rank) ---
double agRing(const Model& m, double b, Knobs*) {
  const LinkClass l = m.flat();
  return (m.n - 1) * (m.step(l) + m.dup(l) * b * m.beta(l));
}
double agDirect(const Model& m, double b, Knobs*) {
  // A FIFO hand-off publishes, then each peer's block is read once: every
  // peer must have published.
  const LinkClass c = LinkClass::Cma;
  return m.step(LinkClass::Shm, m.n - 1) + (m.n - 1) * (m.alpha(c) + m.paired(c) * b * m.beta(c));
}
double agRecDoubling(const Model& m, double b, Knobs*) {
  // The step between ranks `mask` apart sends mask/p2 of N.
  const LinkClass l = m.flat();
  const double N = b * m.n;
  double t = foldIn(m, l, b, false) + foldOut(m, l, N);
  for (int mask = 1; mask < m.p2(); mask *= 2) {
    const LinkClass k = m.stepLink(mask);
    t += m.step(k) + m.pairedCopy(k) * N * mask / m.p2() * m.dup(k) * m.beta(k) * m.share(k);
  }
  return t;
}
double agHier(const Model& m, double b, Knobs*) {
  // Across hosts first (one leader per slice, sharing the NIC), then
  // recursive doubling inside the host: once per host, or once before a
  // reordering copy of N (hier_allgather.cc). Per host, the first stage is
  // a ring in place (H-1 steps) with two hosts or blocks of a slot or more,
  // else a doubling into a slice, copied out (N/m + b).
  const int p = m.ppn, h = m.h;
  const double N = b * m.n;
  const LinkClass s = LinkClass::Shm, net = LinkClass::Net;
  const bool perHost = m.hierPerHost(b);
  const bool inPlace = perHost && (h <= 2 || b >= static_cast<double>(m.s.slotBytes));
  double t = m.hierInsideSteps(b) * m.step(s) + (p - 1.0) / p * N * m.dup(s) * m.beta(s) +
             m.hierReorderBytes(b) * m.beta(s) + (perHost && !inPlace ? N / p + b : 0) * m.beta(s);
  if (h > 1) t += (inPlace ? h - 1 : m.ceilLog2(h)) * m.step(net) + (h - 1.0) / h * N * m.beta(net);
  return t;
}

// --- broadcast (N = bytes) ---
double bcChain(const Model& m, double N, Knobs* knobs) {
  const LinkClass l = m.flat();
  // A middle rank copies each chunk in and out; with 2 ranks the root
  // copies in while the receiver copies out.
  const double perByte = (m.n > 2 ? m.dup(l) : 1.0) * m.beta(l);
  const Cost c = pipeline(m, l, m.n - 1, N, perByte);
  knobs->chunkBytes = c.chunkBytes;
  return c.us;
}
double bcDirect(const Model& m, double N, Knobs*) {
  // Every non-root reads the root's pages: the reads serialise at the root,
  // which waits for all of them. Serialised, each read has a CPU to itself
  // on an oversubscribed host too, so the reads pay the link's own rate,
  // not a CPU's share (Model::beta): 4 ranks on 2 CPUs, 128 KiB-8 MiB,
  // direct took 2.3-2.8x one read's time (45 us at 128 KiB, 693 at 2 MiB,
  // medians of 20; faster than the chain there in that sweep, not in the
  // next), where the CPU's share put it at 6x and the trials never timed it.
  const LinkClass c = LinkClass::Cma;
  const double perByte = 1e-3 / m.p.link[static_cast<int>(c)].gbps;
  return m.step(LinkClass::Shm, m.n - 1) + m.alpha(c) + (m.n - 1) * N * perByte;
}
double bcBinomial(const Model& m, double N, Knobs*) {
  // Pipelined one slot at a time, but the root sends every chunk
  // ceil(log2 n) times: its sends set the pace.
  const LinkClass l = m.flat();
  const double c = std::min<double>(N, static_cast<double>(m.s.slotBytes));
  const double chunks = c > 0 ? std::ceil(N / c) : 1;
  return chunks * m.ceilLog2(m.n) * (m.step(l) + c * m.beta(l) * m.share(l));
}

// --- reduce (N = bytes) ---
double rdChain(const Model& m, double N, Knobs* knobs) {
  const LinkClass l = m.flat();
  const Cost c = pipeline(m, l, m.n - 1, N, m.beta(l) + m.gamma());
  knobs->chunkBytes = c.chunkBytes;
  return c.us;
}
double rdBinomial(const Model& m, double N, Knobs*) {
  // The root receives and reduces every chunk ceil(log2 n) times.
  const LinkClass l = m.flat();
  const double c = std::min<double>(N, static_cast<double>(m.s.slotBytes));
  const double chunks = c > 0 ? std::ceil(N / c) : 1;
  return chunks * m.ceilLog2(m.n) * (m.step(l) + c * (m.beta(l) * m.share(l) + m.gamma()));
}

// --- alltoall (b = bytes per peer) ---
double a2aPairwise(const Model& m, double b, Knobs*) {
  const LinkClass l = m.flat();
  return (m.n - 1) * (m.step(l) + m.dup(l) * b * m.beta(l) * m.share(l)) +
         b * m.beta(LinkClass::Shm);
}
double a2aDirect(const Model& m, double b, Knobs*) {
  const LinkClass c = LinkClass::Cma;
  return m.step(LinkClass::Shm, m.n - 1) + (m.n - 1) * (m.alpha(c) + b * m.beta(c)) +
         b * m.beta(LinkClass::Shm);
}
double a2aBruck(const Model& m, double b, Knobs*) {
  const LinkClass l = m.flat();
  const double N = b * m.n;
  // ceil(log2 n) steps of about half the buffer, plus two local rotations.
  return m.ceilLog2(m.n) * (m.step(l) + m.paired(l) * m.dup(l) * N / 2 * m.beta(l) * m.share(l)) +
         2 * N * m.beta(LinkClass::Shm);
}

// --- gather / scatter (b = bytes per rank), send / recv ---
double rootedDirect(const Model& m, double b, Knobs*) {
  // The root moves every peer's block, one after another.
  const bool single = m.s.canPublish && b >= static_cast<double>(m.s.directMinBytes);
  const LinkClass l = m.h > 1 ? LinkClass::Net : (single ? LinkClass::Cma : LinkClass::Shm);
  return m.alpha(LinkClass::Shm) + (m.n - 1) * (m.step(l) + b * m.beta(l));
}
double p2p(const Model& m, double N, Knobs*) {
  const LinkClass l = m.flat();
  return m.step(l) + N * m.beta(l);
}

struct Entry {
  const char* coll;  // normalised collName
  const char* name;
  Formula f;
  uint8_t protos;
  bool byDefault;    // false: taken only when WEFT_ALGO asks for it...
  bool oversub;      // ...or when the host is oversubscribed (tuner.h)...
  bool acrossHosts;  // ...or when the ranks span hosts
};

// Broadcast "direct" is off by default: measured on 2 ranks, its single
// reader loses to the chain, where root and receiver copy in parallel.
// tree, rhd, recdoubling, binomial and bruck are off by default too until
// the model's step costs are fitted to them: on one host here their extra
// steps cost more than the model says (2 ranks, 64 B allreduce: tree 2.1 us
// against 0.7 for ring and direct), so today only WEFT_ALGO picks them
// (across hosts aside: below).
// On an oversubscribed host recursive doubling (allreduce, all-gather) is a
// candidate: there the scheduling delay per awaited peer outweighs its
// extra step (forced at 4 ranks on 2 CPUs with weftrun's pinning, medians
// of 7-8 in three sweeps: recursive doubling allreduce beat the ring up to
// 32 KiB and lost from 128 KiB, which the exchanges' byte cost
// (Model::paired) gives). So is rhd reduce-scatter: the ring won at 2-32 KiB
// by 1.12-1.25x in two early sweeps with no spin (progress.cc), but since
// (down chunks landing, the rotating trials) rhd beat it by 1.10-1.33x at
// every size from 32 B to 32 KiB in one sweep (AMD EPYC, 2 vCPUs, 20 forced
// runs each) and by up to 1.18x in three others; the next sweep had the
// ring ahead by up to 1.13x at 2-32 KiB (a tie within this host's noise),
// where the trials decide. The model takes it up to 32 KiB in all.
// Bruck all-to-all, which also waits on one partner
// per step, is a candidate: forced there over shared memory with the
// short spin, it beat pairwise by 1.5-1.9x from 32 B to 8 KiB in two runs
// (median of 8 each); pinned with no spin, by 1.16-1.4x up to 8 KiB, and
// pairwise won at 32 KiB by 1.23-1.24x (two sweeps), where the model,
// which takes Bruck up to 16 KiB with the exchanges' byte cost, switches.
// The others stay out: binomial broadcast beat the chain by 1.04-1.3x up
// to 512 KiB in one such run and lost by 1.16-1.33x up to 32 KiB in the
// next (unpinned); pinned, it lost by 1.1-1.4x at most sizes from 8 B to
// 8 MiB and won one of three sweeps at 128 KiB and at 2 MiB; binomial
// reduce lost to the chain at every size (1.2-1.6x). The tree waits on up
// to three peers per chunk.
// Across hosts the algorithms with log2(n) steps are candidates (rhd and
// recursive doubling allreduce, rhd reduce-scatter, recursive doubling
// all-gather, binomial reduce, Bruck all-to-all): there a step costs a
// network round (tens of us over TCP), and they take log2(n) or 2 log2(n)
// of them where the ring and the chain take n-1 or 2(n-1), while recursive
// doubling takes log2(n) steps with one peer each where direct takes one
// with n-1 peers (the fan-out term, tuner.h). Their formulas carry what
// they pay for it (fold steps at other counts, Bruck's rotations and
// log2(n) copies of half the buffer, the binomial root's repeated
// receives), so the model takes them where the steps dominate. At 2 ranks
// each costs what the linear one does or more, and the linear one stays.
// Forced over TCP, 4 ranks on 2 CPUs (WEFT_SHM_DISABLE): rhd allreduce
// 1392 us against the ring's 2094 at 1 MiB (median of 5); recursive
// doubling allreduce 167-218 us against direct's 222-260 from 8 B to 8 KiB
// (median of 7); rhd reduce-scatter, recursive doubling all-gather and
// Bruck beat the ring, the ring and pairwise by 1.2-1.9x at 2-32 KiB.
// Binomial broadcast is not a candidate: in back-to-back calls the chain's
// hops overlap from one call to the next while the binomial root sends
// log2(n) times per call, and the chain won at 32 B-8 KiB (10-21 us
// against 22-37, 4 ranks over TCP, median of 8), where the model, which
// counts one call's latency, would take the binomial tree.
constexpr Entry kFormulas[] = {
    {"allreduce", "ring", arRing, kProtoSimple, true, false, false},
    {"allreduce", "direct", arDirect, kProtoSimple, true, false, false},
    {"allreduce", "tree", arTree, kProtoSimple, false, false, false},
    {"allreduce", "rhd", arRhd, kProtoSimple, false, false, true},
    {"allreduce", "recdoubling", arRecDoubling, kProtoSimple, false, true, true},
    {"allreduce", "hier", arHier, kProtoSimple, true, false, false},
    {"reducescatter", "ring", rsRing, kProtoSimple, true, false, false},
    {"reducescatter", "rhd", rsRhd, kProtoSimple, false, true, true},
    {"reducescatter", "hier", rsHier, kProtoSimple, true, false, false},
    {"allgather", "ring", agRing, kProtoSimple, true, false, false},
    {"allgather", "direct", agDirect, kProtoCma, true, false, false},
    {"allgather", "recdoubling", agRecDoubling, kProtoSimple, false, true, true},
    {"allgather", "hier", agHier, kProtoSimple, true, false, false},
    {"broadcast", "chain", bcChain, kProtoSimple, true, false, false},
    {"broadcast", "direct", bcDirect, kProtoCma, false, false, false},
    {"broadcast", "binomial", bcBinomial, kProtoSimple, false, false, false},
    {"reduce", "chain", rdChain, kProtoSimple, true, false, false},
    {"reduce", "binomial", rdBinomial, kProtoSimple, false, false, true},
    {"alltoall", "pairwise", a2aPairwise, kProtoSimple, true, false, false},
    {"alltoall", "direct", a2aDirect, kProtoCma, true, false, false},
    {"alltoall", "bruck", a2aBruck, kProtoSimple, false, true, true},
    {"alltoallv", "pairwise", a2aPairwise, kProtoSimple, true, false, false},
    {"gather", "direct", rootedDirect, kProtoSimple | kProtoCma, true, false, false},
    {"scatter", "direct", rootedDirect, kProtoSimple | kProtoCma, true, false, false},
    {"send", "p2p", p2p, kProtoSimple | kProtoCma, true, false, false},
    {"recv", "p2p", p2p, kProtoSimple | kProtoCma, true, false, false},
};

const Entry* findFormula(CollKind kind, std::string_view name) {
  const std::string coll = normalizeName(collName(kind));
  for (const Entry& e : kFormulas) {
    if (coll == e.coll && name == e.name) return &e;
  }
  return nullptr;
}

// Hierarchical algorithms need more than one host to be worth anything.
bool usefulHere(const Entry& e, const TunerShape& shape) {
  if (std::string_view(e.name) == "hier") return shape.nhosts > 1 && shape.ranksPerHost > 1;
  return true;
}

}  // namespace

std::optional<Cost> predictCost(CollKind kind, std::string_view name, size_t bytes,
                                const TunerShape& shape, const TunerParams& params,
                                size_t segments) {
  const Entry* e = findFormula(kind, name);
  if (!e) return std::nullopt;
  const Model m(shape, params);
  Knobs knobs{shape.slotBytes, 0, segments};
  const double us = m.n == 1 ? 0.0 : e->f(m, static_cast<double>(bytes), &knobs);
  return Cost{us, knobs.chunkBytes, knobs.segments};
}

uint8_t algorithmProtos(CollKind kind, std::string_view name) {
  const Entry* e = findFormula(kind, name);
  return e ? e->protos : kProtoSimple;
}

// ---------------------------------------------------------------------------
// WEFT_ALGO and WEFT_PROTO.

Restrictions parseRestrictions(std::string_view algoSpec, std::string_view protoSpec,
                               std::span<const Algorithm> table, bool logWarnings) {
  // The distinct algorithm names, in table order.
  std::vector<std::string_view> names;
  for (const Algorithm& a : table) {
    if (std::find(names.begin(), names.end(), a.name) == names.end()) names.push_back(a.name);
  }
  const SelectionSpec algo = parseSelectionSpec(algoSpec, names, "WEFT_ALGO");
  const std::string_view protoNames[kNumProtos] = {"simple", "cma"};
  const SelectionSpec proto = parseSelectionSpec(protoSpec, protoNames, "WEFT_PROTO");
  if (logWarnings) {
    for (const auto& w : algo.warnings) WEFT_WARN(kLogTuning, "%s", w.c_str());
    for (const auto& w : proto.warnings) WEFT_WARN(kLogTuning, "%s", w.c_str());
  }
  Restrictions r;
  for (int k = 0; k < kNumKinds; ++k) {
    r.algoRestricted[k] = algo.restricted[k];
    r.protoRestricted[k] = proto.restricted[k];
    r.proto[k] = static_cast<uint8_t>(proto.allowed[k] & 3);
  }
  for (size_t i = 0; i < table.size() && i < 64; ++i) {
    const size_t name = std::find(names.begin(), names.end(), table[i].name) - names.begin();
    const int k = static_cast<int>(table[i].kind);
    if (name < 64 && (algo.allowed[k] >> name) & 1) r.algo[k] |= 1ull << i;
  }
  return r;
}

namespace {

// WEFT_HIER_SEGMENTS: 1 to 64, the same on every rank (agreeSelection
// refuses a communicator whose ranks differ).
size_t hierSegmentsFromEnv() {
  const int64_t k = envInt("HIER_SEGMENTS", 0);
  if (k == 0) return 0;
  if (k < 1 || k > 64) {
    WEFT_WARN(kLogEnv, "WEFT_HIER_SEGMENTS=%lld is not in [1, 64]; the tuner picks the count",
              static_cast<long long>(k));
    return 0;
  }
  return static_cast<size_t>(k);
}

std::atomic<Restrictions*> gRestrictions{nullptr};
std::atomic<uint64_t> gGeneration{1};  // bumped when the restrictions are re-read

}  // namespace

const Restrictions& envRestrictions() {
  Restrictions* r = gRestrictions.load(std::memory_order_acquire);
  if (r) return *r;
  auto* fresh = new Restrictions(parseRestrictions(
      envString("ALGO").value_or(""), envString("PROTO").value_or(""), allAlgorithms(), true));
  fresh->hierSegments = hierSegmentsFromEnv();
  if (gRestrictions.compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *r;
}

uint64_t restrictionsGeneration() {
  return gGeneration.load(std::memory_order_relaxed);
}

void resetAlgorithmSelectionForTesting() {
  delete gRestrictions.exchange(nullptr, std::memory_order_acq_rel);
  gGeneration.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint32_t> parseAlgoSpec(const std::string& spec) {
  const std::span<const Algorithm> table = allAlgorithms();
  const Restrictions r = parseRestrictions(spec, "", table, false);
  std::vector<uint32_t> masks(kNumKinds, 0);
  for (size_t i = 0; i < table.size() && i < 32; ++i) {
    const int k = static_cast<int>(table[i].kind);
    if (!r.algoRestricted[k] || ((r.algo[k] >> i) & 1)) masks[k] |= 1u << i;
  }
  return masks;
}

bool p2pSingleCopyAllowed() {
  const Restrictions& r = envRestrictions();
  for (CollKind k : {CollKind::Send, CollKind::Recv}) {
    if (!(r.proto[static_cast<int>(k)] & kProtoCma)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The choice.

namespace {

// Per-peer message size of a call, for the single-copy threshold.
size_t perPeerBytes(CollKind kind, size_t bytes) {
  (void)kind;  // for every kind with single copy, count is per peer or the whole
  return bytes;
}

struct Candidate {
  int index = -1;
  double us = kInf;
  size_t chunk = 0;
  size_t segments = 0;
  bool modelled = false;
  bool allowed = false;      // by WEFT_ALGO and WEFT_PROTO
  bool policy = false;       // taken by default here (Entry's flags)
  bool worthTrying = false;  // runs, and is worth measuring (trialChoices)
};

// Everything the choice needs to know of one call.
struct Call {
  CollKind kind;
  size_t bytes;
  const TunerShape& shape;
  const TunerParams& params;
  const Restrictions& restrictions;
  uint8_t protoAllowed;
  bool singleCopyPays;
  bool singleCopyMayPay;  // worth a trial (trialChoices), below singleCopyPays' size
};

// Single copy is worth a trial from this fraction of the per-peer size from
// which the model takes it (WEFT_SHM_DIRECT_MIN, 64 KiB): that size is a
// constant, not a calibration, and below it single copy won where the
// trials never timed it (4 ranks on 2 CPUs, all-to-all of 128 KiB, 32 KiB
// per peer, 20 runs each: direct 34 us, pairwise 74, which the tuner ran).
// Where the FIFOs win there, the trials keep them (the same size measured
// later on that host: pairwise 20 us, direct 30).
constexpr size_t kSingleCopyTrialFraction = 8;

Call callFor(CollKind kind, size_t bytes, const TunerShape& shape, const TunerParams& params,
             const Restrictions& restrictions) {
  const int k = static_cast<int>(kind);
  const bool canSingleCopy = shape.canPublish && shape.nranks > 1 && bytes > 0;
  const size_t perPeer = perPeerBytes(kind, bytes);
  return Call{kind,
              bytes,
              shape,
              params,
              restrictions,
              restrictions.protoRestricted[k] ? restrictions.proto[k] : uint8_t{3},
              canSingleCopy && perPeer >= shape.directMinBytes,
              canSingleCopy && perPeer >= shape.directMinBytes / kSingleCopyTrialFraction};
}

// Table entry i for this call; index -1 where it cannot run correctly here.
Candidate evaluate(const Call& call, std::span<const Algorithm> table, size_t i) {
  const Algorithm& a = table[i];
  const int k = static_cast<int>(call.kind);
  const Entry* e = findFormula(call.kind, a.name);
  const uint8_t protos = e ? e->protos : kProtoSimple;
  const bool singleCopyRuns = call.shape.canPublish || call.shape.nranks == 1;
  // WEFT_TUNER_SCHED_US=0 turns the oversubscribed model off altogether.
  const bool oversub = oversubscribed(call.shape) && call.params.schedUs > 0;
  Candidate c;
  // Hard limits: what cannot run correctly here.
  if (protos == kProtoCma && !singleCopyRuns) return c;
  const std::optional<Cost> cost = predictCost(call.kind, a.name, call.bytes, call.shape,
                                               call.params, call.restrictions.hierSegments);
  if (cost && !std::isfinite(cost->us)) return c;  // e.g. direct allreduce over one slot
  c.index = static_cast<int>(i);
  c.modelled = cost.has_value();
  c.us = cost ? cost->us : kInf;
  c.chunk = cost ? cost->chunkBytes : call.shape.slotBytes;
  c.segments = cost ? cost->segments : 0;
  c.allowed = (!call.restrictions.algoRestricted[k] || ((call.restrictions.algo[k] >> i) & 1)) &&
              (protos & call.protoAllowed) != 0;
  const bool useful = e != nullptr && usefulHere(*e, call.shape);
  const bool sensible = useful && (protos != kProtoCma || call.singleCopyPays);
  c.policy = sensible &&
             (e->byDefault || (e->oversub && oversub) || (e->acrossHosts && call.shape.nhosts > 1));
  c.worthTrying =
      useful && (protos != kProtoCma || call.singleCopyMayPay) && c.allowed && c.modelled;
  return c;
}

Choice choiceOf(const Call& call, std::span<const Algorithm> table, const Candidate& pick) {
  Choice out;
  const Algorithm& a = table[pick.index];
  out.alg = &a;
  out.chunkBytes = std::min(pick.chunk ? pick.chunk : call.shape.slotBytes, call.shape.slotBytes);
  out.predictedUs = pick.modelled ? pick.us : std::numeric_limits<double>::quiet_NaN();
  out.segments = pick.segments;  // WEFT_HIER_SEGMENTS's, where it is set
  const uint8_t protos = algorithmProtos(call.kind, a.name);
  out.singleCopy = (call.protoAllowed & kProtoCma) != 0;
  if (protos == kProtoCma) {
    out.proto = Proto::Cma;
  } else if (protos == (kProtoSimple | kProtoCma)) {
    out.proto = out.singleCopy && call.singleCopyPays ? Proto::Cma : Proto::Simple;
  } else {
    out.proto = Proto::Simple;
  }
  return out;
}

}  // namespace

Choice chooseFor(CollKind kind, size_t bytes, const TunerShape& shape, const TunerParams& params,
                 std::span<const Algorithm> table, const Restrictions& restrictions) {
  const Call call = callFor(kind, bytes, shape, params, restrictions);
  // Tiers, best first: allowed by both variables and by default policy;
  // allowed; then (nothing allowed can run) what the defaults would take.
  Candidate best[3];
  for (size_t i = 0; i < table.size() && i < 64; ++i) {
    if (table[i].kind != kind) continue;
    const Candidate c = evaluate(call, table, i);
    if (c.index < 0) continue;
    auto consider = [&](Candidate& slot) {
      // Modelled beats unmodelled; then cheaper; ties keep table order. A
      // tie is within rounding: at 2 ranks rhd's formula is the ring's
      // summed in another order, and with some calibrations it came out one
      // ulp cheaper; picked at 32 MiB over TCP, it took 1.42x the ring's time.
      if (slot.index < 0 || (c.modelled && !slot.modelled) ||
          (c.modelled == slot.modelled && c.us < slot.us * (1.0 - 1e-9)))
        slot = c;
    };
    if (c.allowed && c.policy) consider(best[0]);
    if (c.allowed) consider(best[1]);
    if (c.policy) consider(best[2]);
  }
  const Candidate* pick = nullptr;
  for (const Candidate& c : best) {
    if (c.index >= 0) {
      pick = &c;
      break;
    }
  }
  if (!pick) {
    // Nothing of this kind can run here (cannot happen with the built-in
    // table): the first entry of the kind.
    Choice out;
    for (const Algorithm& a : table) {
      if (a.kind == kind) {
        out.alg = &a;
        break;
      }
    }
    out.predictedUs = std::numeric_limits<double>::quiet_NaN();
    out.chunkBytes = shape.slotBytes;
    return out;
  }
  Choice out = choiceOf(call, table, *pick);
  out.fellBack = pick == &best[2] && best[1].index < 0;
  return out;
}

std::vector<Choice> trialChoices(CollKind kind, size_t bytes, const TunerShape& shape,
                                 const TunerParams& params, std::span<const Algorithm> table,
                                 const Restrictions& restrictions, double spread, int most) {
  const Choice first = chooseFor(kind, bytes, shape, params, table, restrictions);
  std::vector<Choice> out{first};
  if (first.fellBack || shape.nranks < 2) return out;
  const Call call = callFor(kind, bytes, shape, params, restrictions);
  std::vector<Candidate> others;
  double cheapest = std::isfinite(first.predictedUs) ? first.predictedUs : kInf;
  for (size_t i = 0; i < table.size() && i < 64; ++i) {
    if (table[i].kind != kind || &table[i] == first.alg) continue;
    const Candidate c = evaluate(call, table, i);
    if (c.index < 0 || !c.worthTrying) continue;
    others.push_back(c);
    cheapest = std::min(cheapest, c.us);
  }
  std::stable_sort(others.begin(), others.end(),
                   [](const Candidate& a, const Candidate& b) { return a.us < b.us; });
  for (const Candidate& c : others) {
    if (static_cast<int>(out.size()) >= most || c.us > spread * cheapest) break;
    out.push_back(choiceOf(call, table, c));
  }
  return out;
}

namespace {
std::atomic<uint64_t> gNextTunerId{1};
}  // namespace

Tuner::Tuner(const TunerShape& shape, const TunerParams& params)
    : shape_(shape), params_(params), id_(gNextTunerId.fetch_add(1)) {
  if (oversubscribed(shape) && params.schedUs > 0)
    WEFT_INFO(kLogTuning,
              "oversubscribed model in use: %d ranks per host on %d CPUs, %.1f us per awaited "
              "peer (WEFT_TUNER_SCHED_US %.1f x (1 - %d/%d)); one-partner-per-step algorithms are "
              "candidates",
              shape.ranksPerHost, shape.hostCpus,
              params.schedUs * (1.0 - static_cast<double>(shape.hostCpus) / shape.ranksPerHost),
              params.schedUs, shape.hostCpus, shape.ranksPerHost);
  if (shape.nhosts > 1 && !shape.hostsAreRankRuns)
    WEFT_INFO(kLogTuning,
              "ranks are not dealt to the %d hosts in equal blocks of consecutive ranks: hier "
              "reduce-scatter and all-gather reorder the whole buffer through scratch (a block "
              "mapping, e.g. mpirun --map-by slot, avoids that)",
              shape.nhosts);
}

namespace {

void logChoice(const TunerShape& s, const TunerParams& p, CollKind kind, size_t bytes,
               const Choice& c) {
  if (c.fellBack)
    WEFT_WARN(kLogTuning,
              "WEFT_ALGO/WEFT_PROTO allow no %s algorithm that can run %zu bytes here; using %s",
              collName(kind), bytes, c.alg ? c.alg->name : "?");
  char over[96] = "";
  if (oversubscribed(s) && p.schedUs > 0)
    std::snprintf(over, sizeof(over), " (oversubscribed model, %d ranks per host on %d CPUs)",
                  s.ranksPerHost, s.hostCpus);
  char segments[32] = "";
  if (c.segments > 0) std::snprintf(segments, sizeof(segments), " segments %zu", c.segments);
  WEFT_INFO(kLogTuning,
            "%s %zu bytes, %d ranks on %d host(s)%s: %s proto %s chunk %zu%s, predicted %.2f us",
            collName(kind), bytes, s.nranks, s.nhosts, over, c.alg ? c.alg->name : "?",
            protoName(c.proto), c.chunkBytes, segments, c.predictedUs);
}

}  // namespace

Choice Tuner::choose(CollKind kind, size_t bytes) const {
  // Generation 0 marks an empty entry: generations start at 1.
  const uint64_t gen = gGeneration.load(std::memory_order_relaxed) + 1;
  uint64_t h = bytes + 0x632BE59BD9B4E019ull * (static_cast<uint64_t>(kind) + 1);
  h ^= h >> 29;
  CacheEntry& e = cache_[h % kCacheSize];
  if (e.generation == gen && e.kind == static_cast<int>(kind) && e.bytes == bytes) return e.choice;
  const Choice c = chooseFor(kind, bytes, shape_, params_, allAlgorithms(), envRestrictions());
  logChoice(shape_, params_, kind, bytes, c);
  e = CacheEntry{gen, bytes, static_cast<int>(kind), c};
  return c;
}

TunerShape tunerShapeFor(CollContext& ctx, std::span<const int> hostOf) {
  TunerShape shape;
  const int n = ctx.nranks();
  shape.nranks = n;
  std::vector<int> perHost;
  for (int h : hostOf) {
    if (h < 0) continue;
    if (static_cast<size_t>(h) >= perHost.size()) perHost.resize(h + 1, 0);
    ++perHost[h];
  }
  shape.nhosts = 0;
  shape.ranksPerHost = 1;
  for (int c : perHost) {
    if (c > 0) ++shape.nhosts;
    shape.ranksPerHost = std::max(shape.ranksPerHost, c);
  }
  shape.nhosts = std::max(shape.nhosts, 1);
  shape.hostsAreRankRuns = algo::hostsAreEvenRankRuns(hostOf);
  shape.slotBytes = ctx.chunkBytes();
  shape.directMinBytes = ctx.directMinBytes();
  shape.canPublish = n > 1;
  for (int p = 0; p < n && shape.canPublish; ++p) {
    if (p != ctx.rank() && !ctx.sendTo(p).canPublish()) shape.canPublish = false;
  }
  return shape;
}

Choice chooseAlgorithm(const CollArgs& args, CollContext& ctx) {
  const size_t bytes = args.count * dtypeSize(args.dtype);
  if (const Tuner* t = ctx.tuner()) return t->choose(args.kind, bytes);
  // No tuner (tests, tools): default parameters, this context's hosts and
  // channels.
  thread_local std::vector<int> hostOf;
  hostOf.resize(static_cast<size_t>(ctx.nranks()));
  for (int r = 0; r < ctx.nranks(); ++r) hostOf[r] = ctx.hostOf(r);
  const TunerShape shape = tunerShapeFor(ctx, hostOf);
  return chooseFor(args.kind, bytes, shape, defaultTunerParams(), allAlgorithms(),
                   envRestrictions());
}

}  // namespace weft
