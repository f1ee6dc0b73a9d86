// The tuner: an alpha-beta-gamma cost model that picks, per collective and
// message size, the cheapest algorithm the table holds and WEFT_ALGO /
// WEFT_PROTO allow, and the pipeline chunk it should run with.
//
// Model. Every transfer runs over one of three link classes:
//   shm - same host, staged through the receiver's FIFO slots (protocol
//         "simple": the sender copies in, the receiver copies out);
//   cma - same host, single copy: the receiver reads the sender's buffer
//         (cross-memory attach; protocol "cma");
//   net - across hosts (TCP; protocol "simple").
// A link class has a latency alpha (us per message step) and a bandwidth
// (GB/s, the inverse of beta); reductions cost gamma per byte (reduceGbps).
// Each algorithm's formula (tuner.cc, keyed by collective and name) counts
// steps x alpha + bytes x beta + reduced bytes x gamma on its critical path
// for the communicator's shape (ranks, hosts, ranks per host). Names the
// model has no formula for are taken only when WEFT_ALGO leaves nothing else.
//
// Fan-out. A step that exchanges with k peers at once over the network pays
// alpha once (the messages are in flight together) plus netFanoutUs for
// each peer beyond the first: every message still costs its sender and its
// receiver a call and a wake-up, and k senders converge on one receiver.
// Without it, direct allreduce (one step, n-1 peers) looked cheapest at any
// scale for small messages (64 hosts: up to 8 KiB). The calibration measures
// it on the communicator itself when every rank is its own host.
//
// Oversubscription. When a host runs more ranks than it has CPUs for them
// (TunerShape::hostCpus < ranksPerHost), some peers are not running at any
// moment. A rank that waits for such a peer does not spin (progress.cc:
// no pause rounds on an oversubscribed host): it yields its CPU to let
// the peer in, so each peer a step awaits costs, on average, a scheduling
// delay (schedUs) times the chance the peer is not running
// (1 - cpus/ranks). The model adds schedUs x (1 - C/R) to every step that
// waits on one peer, and schedUs x (1 - (C/R)^k) to one that waits on k at
// once (the last of them): the ring's many steps pay it most, and
// algorithms that wait on one partner per step for few steps (recursive
// doubling) become candidates without WEFT_ALGO (tuner.cc says which),
// taken where their bytes cost less than direct's single step. With enough
// CPUs the term is zero and every choice is as before.
// WEFT_TUNER_SCHED_US=0 turns the model off.
// A rank that runs C/R of the time also copies and reduces at C/R of a
// core's speed: the shm and single-copy byte costs and the reduction cost
// are scaled by R/C (the network's is the NIC's and is not). The exchanges
// (direct, recursive halving and doubling, Bruck) pay R/C once more on
// those byte costs: pinned forced runs at 4 ranks on 2 CPUs measured their
// bytes at about twice the ring's cost (tuner.cc, Model::paired). That puts
// the switch from recursive doubling to the ring at 128 KiB there, where
// the forced runs put it (between 32 and 128 KiB).
//
// Parameters: built-in defaults (fitted so that on one host the tuner makes
// the choices the size rules it replaced made from measurements), replaced
// by a calibration at communicator creation (calibrate.cc) or by a cached
// calibration file (WEFT_TUNER_FILE), then by WEFT_TUNER_* overrides.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/algorithms.h"
#include "base/status.h"

namespace weft {

enum class Proto : uint8_t { Simple = 0, Cma = 1 };
constexpr int kNumProtos = 2;
constexpr uint8_t kProtoSimple = 1u << 0;
constexpr uint8_t kProtoCma = 1u << 1;
const char* protoName(Proto p);

enum class LinkClass { Shm = 0, Cma = 1, Net = 2 };
constexpr int kNumLinks = 3;
const char* linkName(LinkClass l);

struct LinkParams {
  double alphaUs = 0;  // per message step
  double gbps = 0;     // 1e9 bytes per second
};

// Plain data: it travels between ranks as bytes.
struct TunerParams {
  LinkParams link[kNumLinks];
  double reduceGbps = 0;
  // us lost per awaited peer that is not running, on an oversubscribed host
  // (see above); 0 turns the oversubscription term off.
  double schedUs = 0;
  // us each peer beyond the first adds to a step that exchanges with several
  // peers at once over the network (direct allreduce: n-1 sends and n-1
  // receives in one step, whose latencies overlap but whose calls, wake-ups
  // and incast do not).
  double netFanoutUs = 0;
};

TunerParams defaultTunerParams();
// WEFT_TUNER_{SHM,CMA,NET}_ALPHA_US, WEFT_TUNER_{SHM,CMA,NET}_GBPS,
// WEFT_TUNER_REDUCE_GBPS, WEFT_TUNER_SCHED_US, WEFT_TUNER_NET_FANOUT_US; values that do not parse
// or are out of range are reported and ignored.
void applyTunerEnv(TunerParams* p);
// Every value finite and inside the range a real machine can have.
bool tunerParamsValid(const TunerParams& p);

// The calibration file: "weft-tuner 1" on the first line, then "key value"
// lines (shm.alpha_us, shm.gbps, cma.alpha_us, cma.gbps, net.alpha_us,
// net.gbps, net.fanout_us, reduce.gbps, sched.us); '#' starts a comment. Keys missing from the file
// keep the values of `base`. Pure functions; parseTunerFile accepts any bytes
// and returns nullopt (with a reason) for anything but a well-formed file.
std::string formatTunerFile(const TunerParams& p);
std::optional<TunerParams> parseTunerFile(std::string_view text, const TunerParams& base,
                                          std::string* why);

// What the model needs to know of the communicator.
struct TunerShape {
  int nranks = 1;
  int nhosts = 1;
  int ranksPerHost = 1;              // the most on any host
  bool canPublish = false;           // every peer's channel can publish (single copy)
  size_t slotBytes = 256 << 10;      // the channels' slot (largest chunk)
  size_t directMinBytes = SIZE_MAX;  // single copy from this per-peer size
  // Every host's ranks are consecutive and as many (hier.h:
  // hostsAreEvenRankRuns), so the hierarchical reduce-scatter and
  // all-gather can run their intra-host stage per host without reordering.
  bool hostsAreRankRuns = true;
  // CPUs the ranks of the most crowded host may run on together (the union
  // of their affinity masks, capped by a cgroup CPU quota); 0: unknown,
  // taken as enough. Fewer than ranksPerHost: oversubscribed.
  int hostCpus = 0;
};
// More ranks on a host than CPUs for them.
bool oversubscribed(const TunerShape& shape);

// One prediction: microseconds, and the chunk the algorithm should use.
struct Cost {
  double us = 0;
  size_t chunkBytes = 0;
  size_t segments = 0;  // hier allreduce's pipeline segments; 0 elsewhere
};
// bytes = count x dtype size, in CollArgs' sense of count. nullopt when the
// model has no formula for (kind, name). `segments`: hier allreduce's
// pipeline segments to price (WEFT_HIER_SEGMENTS); 0: the algorithm's rule.
std::optional<Cost> predictCost(CollKind kind, std::string_view name, size_t bytes,
                                const TunerShape& shape, const TunerParams& params,
                                size_t segments = 0);
// Which protocols the algorithm uses (kProtoSimple | kProtoCma).
uint8_t algorithmProtos(CollKind kind, std::string_view name);

// WEFT_ALGO and WEFT_PROTO, parsed: per table entry allowed or not, per
// collective the allowed protocols.
struct Restrictions {
  uint64_t algo[16] = {};  // [kind]: bit i = allAlgorithms()[i] allowed
  bool algoRestricted[16] = {};
  uint8_t proto[16] = {};  // [kind]: kProtoSimple | kProtoCma
  bool protoRestricted[16] = {};
  // WEFT_HIER_SEGMENTS: hier allreduce's pipeline segments, in place of the
  // model's pick (0: the model's); the model prices hier at this count.
  size_t hierSegments = 0;
};
Restrictions parseRestrictions(std::string_view algoSpec, std::string_view protoSpec,
                               std::span<const Algorithm> table, bool logWarnings);
// From the environment, parsed once (resetAlgorithmSelectionForTesting()
// forgets it).
const Restrictions& envRestrictions();
// Changes whenever envRestrictions() is re-read.
uint64_t restrictionsGeneration();

struct Choice {
  const Algorithm* alg = nullptr;
  Proto proto = Proto::Simple;
  bool singleCopy = true;  // algorithms with both protocols may use cma
  size_t chunkBytes = 0;   // 0: the slot
  size_t segments = 0;     // CollArgs::segments
  double predictedUs = 0;  // NaN where the model has no formula
  bool fellBack = false;   // the restrictions left nothing that runs here
};
// The choice for `bytes` (count x dtype size) of `kind`: the cheapest
// runnable algorithm allowed; if none is allowed, the cheapest runnable one.
Choice chooseFor(CollKind kind, size_t bytes, const TunerShape& shape, const TunerParams& params,
                 std::span<const Algorithm> table, const Restrictions& restrictions);
// The algorithms worth timing for this call (online.h): the model's choice
// (chooseFor) first, then the others that run here, are allowed and are
// modelled, whatever their default policy (Entry's flags stand in for
// measurement, which replaces them), cheapest predicted first, those within
// `spread` times the cheapest prediction, at most `most` in all.
// Hierarchical algorithms only across hosts; single-copy-only algorithms from
// an eighth of the per-peer size where the model takes single copy.
std::vector<Choice> trialChoices(CollKind kind, size_t bytes, const TunerShape& shape,
                                 const TunerParams& params, std::span<const Algorithm> table,
                                 const Restrictions& restrictions, double spread, int most);

// A communicator's tuner: its shape and agreed parameters.
class Tuner {
 public:
  Tuner(const TunerShape& shape, const TunerParams& params);
  const TunerShape& shape() const { return shape_; }
  const TunerParams& params() const { return params_; }
  // Cached per (kind, bytes). Not thread-safe: a communicator runs one
  // collective at a time (the engine's driver lock), so it needs no lock.
  Choice choose(CollKind kind, size_t bytes) const;
  uint64_t id() const { return id_; }

 private:
  // The hot path pays a lookup, not the model.
  struct CacheEntry {
    uint64_t generation = 0;  // of the env restrictions
    size_t bytes = 0;
    int kind = -1;
    Choice choice;
  };
  static constexpr int kCacheSize = 64;
  TunerShape shape_;
  TunerParams params_;
  uint64_t id_;
  mutable std::array<CacheEntry, kCacheSize> cache_{};
};

// The choice for a call on ctx (ctx.tuner() if it has one, else the default
// parameters for one host and the context's channels). Logged at
// WEFT_DEBUG=INFO WEFT_DEBUG_SUBSYS=TUNING the first time per kind and size.
Choice chooseAlgorithm(const CollArgs& args, CollContext& ctx);

// Whether lone sends and receives may go single copy (WEFT_PROTO send/recv).
bool p2pSingleCopyAllowed();

// Parameters for a new communicator, the same on every rank (rank 0 decides
// and broadcasts them): what this process measured for an earlier
// communicator; else WEFT_TUNER_FILE if it holds a valid file; else a
// calibration over ctx's channels unless WEFT_TUNER_CALIBRATE=0 (written to
// WEFT_TUNER_FILE if that is set); else the defaults; then WEFT_TUNER_*
// overrides. Collective over ctx: every rank calls it before any collective.
// hostOf[r] is rank r's host index; shape is the communicator's, with
// hostCpus agreed (agreeCpuLayout). On an oversubscribed host the
// calibration's ping-pong is itself a step that awaits a peer which may not
// be running: what it measures beyond the default shm latency (the unloaded
// hand-off) is taken as scheduling delay and sets schedUs (never below the
// default), the shm latency keeping its default.
Status tunerParamsFor(CollContext& ctx, std::span<const int> hostOf, const TunerShape& shape,
                      TunerParams* out);

// The settings that pick each call's algorithm, which must be alike on
// every rank, since ranks that pick differently exchange different messages
// and hang or fail mid-call: WEFT_ALGO, WEFT_PROTO, WEFT_HIER_SEGMENTS
// (`restrictions`), online tuning (`onlineRounds`: WEFT_TUNER_ONLINE_ROUNDS,
// 0 where WEFT_TUNER_ONLINE=0) and where single copy starts
// (`directMinBytes`: WEFT_SHM_DIRECT_MIN, 0 where single copy is off).
// Collective over ctx at set-up; an InvalidUsage error on every rank, naming
// the setting and two ranks' values, where any rank's differ.
Status agreeSelection(CollContext& ctx, const Restrictions& restrictions, int onlineRounds,
                      size_t directMinBytes);

// A communicator's shape from its ranks' host indices and channels
// (hostCpus unknown: agreeCpuLayout fills it in).
TunerShape tunerShapeFor(CollContext& ctx, std::span<const int> hostOf);

// CPUs this process may run on: its affinity mask (sched_getaffinity, which
// reflects the cpuset), capped by a cgroup v2 cpu.max quota. `mask` gets
// one bit per CPU (word i, bit j: CPU 64i+j; CPUs past the array are only
// counted). Returns the count.
int usableCpus(uint64_t (&mask)[16]);
// What one rank contributes to agreeCpuLayout: its mask (as usableCpus), its
// CPU count (which may exceed the mask's 1024 bits) and its cgroup quota.
struct CpuRecord {
  uint64_t mask[16] = {};
  uint32_t count = 0;  // 0: unknown
  uint32_t quota = 0;  // CPUs, rounded up; 0: none
  // Where the lowest CPU of the mask sits, for the ring's order
  // (ring_order.h): sysfs package and last-level cache ids (-1: unknown),
  // and that cache's size (0: unknown).
  int32_t package = -1;
  int32_t cache = -1;
  uint32_t cacheKiB = 0;
  // The kernel it runs under: a hash of /proc/sys/kernel/random/boot_id, 0
  // if unknown. Ranks with the same one share its CPUs whatever host they
  // count as (WEFT_HOSTID, network namespaces, containers on one node).
  uint32_t machine = 0;
};
// Per host the union of its ranks' masks (at least the widest count),
// capped by the smallest quota; the host with the most ranks per CPU, its
// CPU count scaled to the most ranks on any host. 0 where nothing is known.
int worstHostCpus(std::span<const CpuRecord> ranks, std::span<const int> hostOf);
// What the model takes for a host's CPUs: worstHostCpus, or fewer where
// hosts share a machine (CpuRecord::machine: WEFT_HOSTID, network
// namespaces, containers on one node): the worst machine's CPUs per rank
// (the union of its ranks' masks, quotas left out) times the most ranks on
// any host. Two hosts of 2 ranks on one 2-CPU machine are 1 CPU each, not 2:
// taken as 2, their calibration timed shared memory at 1.8-2.4 GB/s (the
// other host's ranks running) and kept it, the model then took the ring
// over hier allreduce at 2-8 MiB by that figure in some runs and not others.
int modelHostCpus(std::span<const CpuRecord> ranks, std::span<const int> hostOf);
// Some kernel runs more of the ranks than the CPUs their masks allow
// together (the union, as above), counting ranks by CpuRecord::machine
// (an unknown machine is one of its own).
bool machineOversubscribed(std::span<const CpuRecord> ranks);
// The CPU rank `me` takes when the ranks that share its machine
// (CpuRecord::machine) and exactly its CPU mask spread over that mask: the
// i-th of them in rank order on the (i mod C)-th of the mask's C CPUs, as
// weftrun and mpirun --bind-to core do. -1 where its mask holds one CPU or
// is unknown, its machine is unknown, or no other rank shares the mask (a
// launcher bound the ranks already).
int spreadCpuFor(std::span<const CpuRecord> ranks, int me);

// What the ranks' CPU records tell a communicator (agreeCpuLayout).
struct CpuLayout {
  // Per host, the CPUs its ranks may run on together: modelHostCpus (the
  // union of their masks, capped by the smallest quota and by the host's
  // share of a machine it shares with other hosts), or
  // WEFT_TUNER_HOST_CPUS if set (rank 0's value, broadcast).
  int hostCpus = 0;
  // The same as if every rank were a host of its own (the tuner's view when
  // ranks on one host talk TCP).
  int ownHostCpus = 0;
  // machineOversubscribed() of the records: ranks of different hosts that
  // share a kernel's CPUs. Their waits must yield as on an oversubscribed
  // host (Progress::idle), though each host alone has CPUs enough.
  bool machineOversubscribed = false;
  // The ranks in ring order (ringOrderFor).
  std::vector<int> ringOrder;
  // spreadCpuFor this rank (WEFT_CPU_BIND binds it there); -1: none.
  int spreadCpu = -1;
  // This rank's last-level cache over the ranks of its host whose lowest
  // CPU shares it (all of them when unbound); 0 when the size is unknown.
  size_t cacheShareBytes = 0;
};
// All-gathers every rank's CpuRecord and derives the layout. Collective over
// ctx: every rank calls it, before any collective that the tuner picks.
Status agreeCpuLayout(CollContext& ctx, std::span<const int> hostOf, CpuLayout* out);

}  // namespace weft
