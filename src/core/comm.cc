#include "core/comm.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "algorithms/algorithms.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/pmix.h"
#include "core/check.h"

namespace weft {
namespace {

// How often a waiting collective asks whether its peers' processes live,
// starting only once it has waited this long: for a shared-memory peer the
// question reads /proc (processAlive), 20-30 us a peer. Asked at a
// collective's first check, it cost every wait that outlasted the spin, on
// an oversubscribed host nearly every one: 4 ranks on 2 CPUs, 8 B
// allreduce 97-160 us against 18-20.
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(10);

std::mutex registryMu;
// Every communicator ever made, live or dead. Handles are never freed, so a
// stale handle is recognised and answered with an error.
std::unordered_set<const weftComm*>& registry() {
  static auto* set = new std::unordered_set<const weftComm*>();
  return *set;
}

Status checkConfig(const weftConfig_t* config) {
  if (config == nullptr) return Status::ok();
  if (config->magic != WEFT_CONFIG_MAGIC || config->size < sizeof(size_t) + 8 ||
      config->size > (1u << 16))
    return makeError(weftInvalidArgument,
                     "the config was not initialised: declare it as weftConfig_t config = "
                     "WEFT_CONFIG_INITIALIZER; then set fields");
  return Status::ok();
}

int64_t timeoutFrom(const weftConfig_t* config) {
  if (config != nullptr && config->timeoutMs != WEFT_CONFIG_UNDEF_INT)
    return std::max(config->timeoutMs, 0);
  return std::max<int64_t>(envInt("TIMEOUT_MS", 0), 0);
}

bool isReducing(CollKind kind) {
  return kind == CollKind::AllReduce || kind == CollKind::Reduce || kind == CollKind::ReduceScatter;
}

Status runColl(weftComm* comm, CollCall& call, const std::atomic<int64_t>* deadline) {
  CollArgs& args = call.args;
  if (call.flightSeq == 0) call.flightSeq = comm->flight->post(args, call.rawOp);
  comm->collSeq = call.flightSeq;
  if (isReducing(args.kind)) {
    Status st = resolveOp(comm, call.rawOp, args.dtype, &args.op);
    if (!st.isOk()) comm->flight->finish(call.flightSeq, false, st);
    WEFT_RETURN_IF_ERROR(st);
  }
  const Choice choice = comm->online ? comm->online->choose(args, comm->context)
                                     : chooseAlgorithm(args, comm->context);
  const Algorithm& alg = *choice.alg;
  args.chunkBytes = choice.chunkBytes;
  args.singleCopy = choice.singleCopy;
  args.segments = choice.segments;
  WEFT_INFO(kLogColl, "#%llu %s count %zu %s root %d algo %s proto %s chunk %zu segments %zu",
            static_cast<unsigned long long>(comm->collSeq), collName(args.kind), args.count,
            dtypeName(args.dtype), args.root, alg.name, protoName(choice.proto), choice.chunkBytes,
            choice.segments);
  comm->health.beginCollective(deadline);
  comm->flight->start(call.flightSeq, false, alg.name);
  bool mismatch = false;
  Status st =
      comm->checkCalls ? checkCallMatches(comm, call, comm->collSeq, &mismatch) : Status::ok();
  const auto start = std::chrono::steady_clock::now();
  if (st.isOk()) st = alg.run(comm->context, args);
  comm->transport->endCollective();
  if (st.isOk()) st = comm->transport->flush([comm] { return comm->health.check(); });
  if (st.isOk() && comm->online && comm->online->timing()) {
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    // A trial's last call ends with the ranks' all-gather of their times,
    // which must leave nothing in staging slots either.
    st = comm->online->ran(comm->context, took.count());
    comm->transport->endCollective();
    if (st.isOk()) st = comm->transport->flush([comm] { return comm->health.check(); });
  }
  // A mismatch found by WEFT_CHECK is seen alike by every rank before any
  // data moved: the communicator stays usable.
  if (!st.isOk() && !mismatch) commFail(comm, st);
  comm->flight->finish(call.flightSeq, false, st);
  return st;
}

Status stickyError(weftComm* comm) {
  std::lock_guard<std::mutex> lock(comm->errorMu);
  return Status(static_cast<weftResult_t>(comm->asyncError.load()),
                "the communicator failed earlier and cannot be used: " + comm->errorMessage +
                    " (abort it with weftCommAbort and create a new one)");
}

// Rank 0 says where the ring goes when that is not rank order.
void logRingOrder(int rank, const std::vector<int>& ring) {
  bool identity = true;
  for (size_t p = 0; p < ring.size(); ++p) identity = identity && ring[p] == static_cast<int>(p);
  if (rank != 0 || identity) return;
  std::string text;
  for (size_t p = 0; p < ring.size() && p < 64; ++p) text += " " + std::to_string(ring[p]);
  if (ring.size() > 64) text += " ...";
  WEFT_INFO(kLogInit, "ring order by host, package and last-level cache:%s", text.c_str());
}

enum class CpuBind { kNone, kAuto, kCore };

// WEFT_CPU_BIND: none (the default), auto or core.
Status cpuBindFromEnv(CpuBind* out) {
  *out = CpuBind::kNone;
  const auto v = envString("CPU_BIND");
  if (!v || v->empty() || *v == "none") return Status::ok();
  if (*v == "auto") {
    *out = CpuBind::kAuto;
  } else if (*v == "core") {
    *out = CpuBind::kCore;
  } else {
    return makeError(weftInvalidArgument,
                     "WEFT_CPU_BIND is '%s': use none, auto (bind where ranks outnumber CPUs) "
                     "or core",
                     v->c_str());
  }
  return Status::ok();
}

// Pins the calling thread, and so the threads it starts later (the engine's),
// to `cpu`. The ranks' masks were all-gathered before: the layout already
// knows them as the launcher left them.
void bindCallingThread(int rank, int cpu) {
  if (cpu < 0) {
    WEFT_INFO(kLogInit,
              "WEFT_CPU_BIND: rank %d stays on its CPUs (one CPU, or a mask no other rank of "
              "its machine shares)",
              rank);
    return;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    WEFT_WARN(kLogInit, "WEFT_CPU_BIND: rank %d could not bind to CPU %d: %s", rank, cpu,
              std::strerror(errno));
    return;
  }
  WEFT_INFO(kLogInit, "WEFT_CPU_BIND: rank %d bound to CPU %d", rank, cpu);
}

// The communicator's shape (hosts from the peers' host hashes) and the
// parameters every rank agrees on (calibrate.cc).
Status initTuner(weftComm* comm) {
  CpuBind bind;
  WEFT_RETURN_IF_ERROR(cpuBindFromEnv(&bind));
  std::vector<uint64_t> hosts;
  std::vector<int> hostOf(static_cast<size_t>(comm->nranks), 0);
  for (const PeerInfo& p : comm->peers) {
    const auto it = std::find(hosts.begin(), hosts.end(), p.hostHash);
    if (p.rank >= 0 && p.rank < comm->nranks) hostOf[p.rank] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(p.hostHash);
  }
  comm->health.beginCollective();
  // Ranks per host against the CPUs they may use: an oversubscribed host
  // changes how ranks wait (Progress::idle) and, below, the model. Set
  // before the calibration, which then measures the waits the collectives
  // will have.
  TunerShape shape = tunerShapeFor(comm->context, hostOf);
  CpuLayout layout;
  WEFT_RETURN_IF_ERROR(agreeCpuLayout(comm->context, hostOf, &layout));
  shape.hostCpus = layout.hostCpus;
  logRingOrder(comm->rank, layout.ringOrder);
  comm->context.setRingOrder(std::move(layout.ringOrder));
  kernels::useCacheShare(layout.cacheShareBytes);
  if (comm->rank == 0) {
    WEFT_INFO(kLogInit, "copies stream past the cache above %zu KiB (%s)",
              kernels::streamThreshold() >> 10,
              envString("NT_COPY_THRESHOLD") ? "WEFT_NT_COPY_THRESHOLD"
              : layout.cacheShareBytes > 0
                  ? "half of each rank's share of its last-level cache, at least 1 MiB"
                  : "last-level cache unknown: 1 MiB");
  }
  comm->oversubscribed.store(oversubscribed(shape) || layout.machineOversubscribed,
                             std::memory_order_relaxed);
  if (comm->rank == 0 && layout.machineOversubscribed && !oversubscribed(shape))
    WEFT_INFO(kLogInit,
              "ranks of different hosts share one machine's CPUs, more ranks than CPUs: waits "
              "yield as on an oversubscribed host");
  // Before the calibration, which then measures the waits the bound ranks
  // will have. 4 ranks on 2 CPUs, allreduce of 8 B and 32 KiB: bound here
  // as fast as pinned by weftrun before they started, since the build links
  // the serial OpenBLAS (4.04 and 17.08 us against 4.51 and 18.55; with the
  // pthread build's thread pool in every rank, 6.49 and 20.51: README).
  if (bind == CpuBind::kCore ||
      (bind == CpuBind::kAuto && comm->oversubscribed.load(std::memory_order_relaxed)))
    bindCallingThread(comm->rank, layout.spreadCpu);
  // WEFT_SHM_DISABLE: peers on this host go over TCP too; to the model every
  // rank is then a host of its own.
  bool tcpOnHost = false;
  for (int r = 0; r < comm->nranks; ++r) {
    if (r != comm->rank && hostOf[r] == hostOf[comm->rank] && comm->transport->usesTcp(r))
      tcpOnHost = true;
  }
  if (tcpOnHost) {
    for (int r = 0; r < comm->nranks; ++r) hostOf[r] = r;
    shape = tunerShapeFor(comm->context, hostOf);
    shape.hostCpus = layout.ownHostCpus;
  }
  std::unique_ptr<OnlineTuner> online = OnlineTuner::fromEnv();
  WEFT_RETURN_IF_ERROR(agreeSelection(comm->context, envRestrictions(),
                                      online ? online->rounds() : 0,
                                      shape.canPublish ? shape.directMinBytes : 0));
  TunerParams params;
  WEFT_RETURN_IF_ERROR(tunerParamsFor(comm->context, hostOf, shape, &params));
  // Nothing of the agreements or the calibration may stay in TCP staging slots.
  WEFT_RETURN_IF_ERROR(comm->transport->flush([comm] { return comm->health.check(); }));
  comm->tuner = std::make_unique<Tuner>(shape, params);
  comm->online = std::move(online);
  return Status::ok();
}

}  // namespace

bool CommHealth::failed() const {
  return comm_.aborting.load(std::memory_order_relaxed) || comm_.transport->abortedBy() != 0 ||
         comm_.transport->anyPeerDead();
}

bool CommHealth::poll() {
  return comm_.transport->poll();
}

void CommHealth::park(long ns) {
  comm_.transport->park(ns);
}

bool CommHealth::wakesOnArrival() const {
  return comm_.transport->allPeersOnSockets();
}

bool CommHealth::oversubscribed() const {
  return comm_.oversubscribed.load(std::memory_order_relaxed);
}

void CommHealth::beginCollective(const std::atomic<int64_t>* workDeadline) {
  // The clock is first read by check(), which runs only once a collective
  // has spun for a while: a collective that finishes fast reads no clock.
  clockStarted_ = false;
  peerLeftSince_ = {};
  workDeadline_ = workDeadline;
}

Status CommHealth::timedOut(const char* what, int64_t ms) {
  const std::string limit = ms >= 0 ? " of " + std::to_string(ms) + " ms" : "";
  Status st = makeError(weftTimeout,
                        "collective #%llu did not finish within %s%s: a rank did not call it, "
                        "or called a different one (the flight records in WEFT_FLIGHT_DIR, "
                        "merged by tools/weft-hang, say which)",
                        static_cast<unsigned long long>(comm_.collSeq), what, limit.c_str());
  if (!dumped_) {
    dumped_ = true;
    (void)comm_.flight->dump(nullptr, "timeout");
  }
  return st;
}

void CommHealth::noteWaiting() {
  int32_t peers[FlightEntry::kMaxWaiting];
  int n = 0;
  for (int p = 0; p < comm_.nranks; ++p) {
    if (p == comm_.rank) continue;
    if (!comm_.context.sendTo(p).stalled() && !comm_.context.recvFrom(p).stalled()) continue;
    if (n < FlightEntry::kMaxWaiting) peers[n] = p;
    ++n;
  }
  comm_.flight->setWaiting(peers, n);
}

Status CommHealth::check() {
  if (comm_.aborting.load()) return Status(weftInvalidUsage, "the communicator was aborted");
  if (const int by = comm_.transport->abortedBy()) {
    if (by - 1 == comm_.rank && comm_.asyncError.load() != weftSuccess) return stickyError(&comm_);
    if (comm_.transport->abortCode() == weftTimeout) {
      // Every live rank answers a timeout with weftTimeout, and records why.
      if (!dumped_) {
        dumped_ = true;
        (void)comm_.flight->dump(nullptr, "peer-timeout");
      }
      return makeError(weftTimeout,
                       "rank %d timed out in collective #%llu, so this rank stopped waiting "
                       "too; abort this communicator and create a new one",
                       by - 1, static_cast<unsigned long long>(comm_.collSeq));
    }
    return makeError(weftRemoteError,
                     "rank %d stopped the communicator (it aborted, or a collective failed "
                     "there); abort this communicator and create a new one",
                     by - 1);
  }
  noteWaiting();
  const auto now = std::chrono::steady_clock::now();
  if (!clockStarted_) {
    clockStarted_ = true;
    deadline_ = now + std::chrono::milliseconds(comm_.timeoutMs);
    nextPeerCheck_ = now + kPeerCheckInterval;
  }
  if (now >= nextPeerCheck_) {
    nextPeerCheck_ = now + kPeerCheckInterval;
    for (const PeerInfo& p : comm_.peers) {
      std::string why;
      const PeerState state = comm_.transport->peerState(p.rank, &why);
      if (state == PeerState::kAlive) continue;
      if (state == PeerState::kDead)
        return makeError(weftRemoteError, "rank %d (pid %d) died in the middle of a collective: %s",
                         p.rank, p.pid, why.c_str());
      // It destroyed its communicator and exited: fine if it had done its
      // part, which a collective still waiting a second later shows it had not.
      if (peerLeftSince_ == std::chrono::steady_clock::time_point{}) peerLeftSince_ = now;
      if (now - peerLeftSince_ > std::chrono::seconds(1))
        return makeError(weftRemoteError,
                         "rank %d (pid %d) destroyed its communicator and exited while this "
                         "rank still waits in collective #%llu: the ranks called different "
                         "collectives",
                         p.rank, p.pid, static_cast<unsigned long long>(comm_.collSeq));
    }
  }
  if (comm_.timeoutMs > 0 && now >= deadline_)
    return timedOut("the communicator's timeout (WEFT_TIMEOUT_MS)", comm_.timeoutMs);
  if (workDeadline_ != nullptr) {
    const int64_t ns = workDeadline_->load(std::memory_order_relaxed);
    if (ns != 0 &&
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() >= ns)
      return timedOut("the work handle's timeout (Work::setTimeout)", -1);
  }
  return Status::ok();
}

int CommContext::rank() const {
  return comm_.rank;
}
int CommContext::nranks() const {
  return comm_.nranks;
}
SendChannel& CommContext::sendTo(int peer) {
  return comm_.transport->sendTo(peer);
}
RecvChannel& CommContext::recvFrom(int peer) {
  return comm_.transport->recvFrom(peer);
}
HealthMonitor& CommContext::health() {
  return comm_.health;
}
size_t CommContext::chunkBytes() const {
  return comm_.transport->slotBytes();
}
size_t CommContext::slotsPerChannel() const {
  return comm_.transport->slotsPerChannel();
}
const Tuner* CommContext::tuner() const {
  return comm_.tuner.get();
}
size_t CommContext::directMinBytes() const {
  return comm_.transport->directEnabled() ? comm_.transport->directMinBytes() : SIZE_MAX;
}

int CommContext::ringRank(int pos) const {
  return ringRank_.empty() ? pos : ringRank_[static_cast<size_t>(pos)];
}
int CommContext::ringPos(int rank) const {
  return ringPos_.empty() ? rank : ringPos_[static_cast<size_t>(rank)];
}
void CommContext::setRingOrder(std::vector<int> order) {
  ringPos_.assign(order.size(), 0);
  for (size_t p = 0; p < order.size(); ++p)
    ringPos_[static_cast<size_t>(order[p])] = static_cast<int>(p);
  ringRank_ = std::move(order);
}

int CommContext::hostOf(int rank) const {
  std::call_once(hostsOnce_, [this] {
    std::vector<uint64_t> seen;
    for (const PeerInfo& p : comm_.peers) {
      size_t h = 0;
      while (h < seen.size() && seen[h] != p.hostHash) ++h;
      if (h == seen.size()) seen.push_back(p.hostHash);
      hosts_.push_back(static_cast<int>(h));
    }
  });
  return rank >= 0 && rank < static_cast<int>(hosts_.size()) ? hosts_[rank] : 0;
}

Status checkComm(const weftComm* comm) {
  if (comm == nullptr) return Status(weftInvalidArgument, "comm is NULL");
  {
    std::lock_guard<std::mutex> lock(registryMu);
    if (registry().count(comm) == 0)
      return Status(weftInvalidArgument, "comm is not a communicator that weft created");
  }
  if (comm->magic.load() != weftComm::kLive)
    return Status(weftInvalidUsage, "the communicator was destroyed or aborted; create a new one");
  return Status::ok();
}

void commFail(weftComm* comm, const Status& st) {
  {
    std::lock_guard<std::mutex> lock(comm->errorMu);
    int expected = weftSuccess;
    if (comm->asyncError.compare_exchange_strong(expected, st.code()))
      comm->errorMessage = st.message();
  }
  if (comm->transport) comm->transport->poison(comm->rank, st.code());
  WEFT_WARN(kLogColl, "rank %d: %s", comm->rank, st.message().c_str());
}

Status resolveOp(weftComm* comm, int raw, weftDataType_t dtype, RedOp* out) {
  *out = RedOp{};
  switch (raw) {
    case weftSum:
      out->kind = kernels::ReduceKind::Sum;
      return Status::ok();
    case weftProd:
      out->kind = kernels::ReduceKind::Prod;
      return Status::ok();
    case weftMax:
      out->kind = kernels::ReduceKind::Max;
      return Status::ok();
    case weftMin:
      out->kind = kernels::ReduceKind::Min;
      return Status::ok();
    case weftAvg:
      out->average = true;
      return Status::ok();
    default:
      break;
  }
  const long index = static_cast<long>(raw) - weftNumOps;
  std::lock_guard<std::mutex> lock(comm->opsMu);
  if (index < 0 || index >= static_cast<long>(comm->preMulOps.size()) ||
      !comm->preMulOps[index].inUse)
    return makeError(weftInvalidArgument,
                     "invalid op %d: use weftSum, weftProd, weftMax, weftMin, weftAvg or an op "
                     "from weftRedOpCreatePreMulSum on this communicator",
                     raw);
  const PreMulSumOp& op = comm->preMulOps[index];
  if (op.dtype != dtype)
    return makeError(weftInvalidArgument,
                     "op %d was created for dtype %s but the call uses dtype %s", raw,
                     dtypeName(op.dtype), dtypeName(dtype));
  out->preMul = true;
  std::memcpy(out->scalar, op.residence == weftScalarHostImmediate ? op.immediate : op.pointer,
              dtypeSize(dtype));
  return Status::ok();
}

void addToTask(Task& task, const CollCall& call) {
  const CollArgs& a = call.args;
  if (a.kind == CollKind::Send || a.kind == CollKind::Recv) {
    P2POp op;
    op.isSend = a.kind == CollKind::Send;
    op.peer = a.peer;
    op.buf = op.isSend ? const_cast<void*>(a.send) : a.recv;
    op.bytes = a.count * dtypeSize(a.dtype);
    task.p2p.push_back(op);
  } else {
    task.colls.push_back(call);
  }
}

std::shared_ptr<WorkState> postTask(weftComm* comm, Task task) {
  auto work = std::make_shared<WorkState>();
  work->comm = comm;
  work->task = std::move(task);
  work->task.deadline = &work->deadlineNs;
  for (CollCall& call : work->task.colls)
    call.flightSeq = comm->flight->post(call.args, call.rawOp);
  if (!work->task.p2p.empty()) {
    uint64_t bytes = 0;
    for (const P2POp& op : work->task.p2p) bytes += op.bytes;
    work->task.p2pFlightSeq = comm->flight->postP2P(bytes, static_cast<int>(work->task.p2p.size()));
  }
  comm->engine->post(work);
  return work;
}

Status commRunCall(weftComm* comm, CollCall& call, const std::atomic<int64_t>* deadline) {
  if (comm->asyncError.load() != weftSuccess) return stickyError(comm);
  return runColl(comm, call, deadline);
}

Status commRunTask(weftComm* comm, Task& task) {
  if (comm->asyncError.load() != weftSuccess) return stickyError(comm);
  if (task.composite) return task.composite(task.deadline);
  for (CollCall& call : task.colls) WEFT_RETURN_IF_ERROR(runColl(comm, call, task.deadline));
  if (!task.p2p.empty()) {
    if (task.p2pFlightSeq == 0) {
      uint64_t bytes = 0;
      for (const P2POp& op : task.p2p) bytes += op.bytes;
      task.p2pFlightSeq = comm->flight->postP2P(bytes, static_cast<int>(task.p2p.size()));
    }
    comm->health.beginCollective(task.deadline);
    comm->flight->start(task.p2pFlightSeq, true, "p2p");
    Status st = runP2P(comm->context, task.p2p);
    comm->transport->endCollective();
    if (st.isOk()) st = comm->transport->flush([comm] { return comm->health.check(); });
    if (!st.isOk()) commFail(comm, st);
    comm->flight->finish(task.p2pFlightSeq, true, st);
    return st;
  }
  return Status::ok();
}

Status commInit(int nranks, const weftUniqueId& id, int rank, const weftConfig_t* config,
                weftComm** out) {
  *out = nullptr;
  WEFT_RETURN_IF_ERROR(checkConfig(config));
  if (nranks <= 0)
    return makeError(weftInvalidArgument, "nranks is %d; it must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return makeError(weftInvalidArgument, "rank %d is out of range for %d ranks", rank, nranks);
  net::SockAddr root;
  uint64_t secret = 0;
  WEFT_RETURN_IF_ERROR(decodeUniqueId(id, &root, &secret));

  auto comm = std::make_unique<weftComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutMs = timeoutFrom(config);
  if (config != nullptr && config->commName != nullptr) comm->name = config->commName;
  WEFT_RETURN_IF_ERROR(Bootstrap::create(root, secret, rank, nranks, &comm->bootstrap));
  comm->peers = comm->bootstrap->peers();
  WEFT_RETURN_IF_ERROR(Transports::create(*comm->bootstrap, &comm->transport));
  // Names this communicator's flight records alike on every rank, without
  // giving the secret away.
  comm->commId = (secret ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
  comm->commId ^= comm->commId >> 29;
  comm->flight = std::make_shared<FlightRecorder>(flightCapacityFromEnv(), comm->commId, comm->name,
                                                  rank, nranks);
  flightRegister(comm->flight);
  flightInstallSignal();
  comm->checkCalls = checkEnabledFromEnv();
  setLogRank(rank);
  WEFT_RETURN_IF_ERROR(initTuner(comm.get()));
  weftComm* raw = comm.get();
  comm->engine = std::make_unique<Engine>([raw](Task& task) { return commRunTask(raw, task); });
  setLogRank(rank);
  WEFT_INFO(kLogInit, "rank %d of %d ready (timeout %lld ms)", rank, nranks,
            static_cast<long long>(comm->timeoutMs));
  {
    std::lock_guard<std::mutex> lock(registryMu);
    registry().insert(raw);
  }
  *out = comm.release();
  return Status::ok();
}

namespace {

// Any text works as WEFT_SECRET: it is hashed, so "0123abcd" and "0123abce"
// or "right" and "wrong" all differ.
std::optional<uint64_t> configuredSecret() {
  const auto configured = envString("SECRET");
  if (!configured) return std::nullopt;
  return fnv1a("secret:" + *configured);
}

// rank 0 listens at an address every rank read from its environment.
Status uniqueIdAt(const std::string& addrText, int rank, int size, weftUniqueId* id) {
  net::SockAddr root;
  WEFT_RETURN_IF_ERROR(net::parseHostPort(addrText, &root));
  // Every rank must derive the same secret; WEFT_SECRET makes it a real one.
  const uint64_t secret = configuredSecret().value_or(fnv1a(addrText + "/" + std::to_string(size)));
  if (rank == 0) {
    net::SockAddr bound;
    Status st = startBootstrapRoot(root, secret, &bound);
    if (!st.isOk()) {
      // The address may name this host by an address we cannot bind: listen
      // on every interface with that port instead.
      net::SockAddr any;
      any.storage.ss_family = root.family();
      any.len = root.len;
      any.setPort(root.port());
      Status again = startBootstrapRoot(any, secret, &bound);
      if (!again.isOk())
        return makeError(weftSystemError, "rank 0 cannot listen on %s: %s", addrText.c_str(),
                         st.message().c_str());
    }
  }
  return encodeUniqueId(root, secret, id);
}

// The launcher's rank 0 makes a unique id as weftGetUniqueId does (a
// listener on an ephemeral port, a random secret unless WEFT_SECRET is set)
// and publishes it through PMIx.
Status uniqueIdThroughPmix(weftUniqueId* id) {
  std::string hex;
  WEFT_RETURN_IF_ERROR(pmix::shareFromRankZero(
      [](std::string* out) -> Status {
        const uint64_t secret = configuredSecret().value_or(randomU64());
        net::SockAddr bound;
        WEFT_RETURN_IF_ERROR(startBootstrapRoot(net::defaultLocalAddress(), secret, &bound));
        weftUniqueId made;
        WEFT_RETURN_IF_ERROR(encodeUniqueId(bound, secret, &made));
        static const char kDigits[] = "0123456789abcdef";
        out->clear();
        for (unsigned char c : made.internal) {
          out->push_back(kDigits[c >> 4]);
          out->push_back(kDigits[c & 15]);
        }
        return Status::ok();
      },
      bootstrapTimeoutMs(), &hex));
  if (hex.size() != 2 * sizeof id->internal)
    return makeError(weftSystemError,
                     "the unique id published through PMIx has %zu digits, not %zu", hex.size(),
                     2 * sizeof id->internal);
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < sizeof id->internal; ++i)
    id->internal[i] = static_cast<char>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
  return Status::ok();
}

}  // namespace

Status commInitFromEnv(const weftConfig_t* config, weftComm** out) {
  *out = nullptr;
  const LaunchRank lr = rankFromEnv();
  if (lr.rank < 0 || lr.size <= 0)
    return Status(weftInvalidArgument,
                  "no rank and world size in the environment: set WEFT_RANK and "
                  "WEFT_WORLD_SIZE (or launch with weftrun, torchrun, mpirun or srun)");
  weftUniqueId id;
  if (const auto addr = explicitAddressFromEnv()) {
    WEFT_RETURN_IF_ERROR(uniqueIdAt(*addr, lr.rank, lr.size, &id));
    return commInit(lr.size, id, lr.rank, config, out);
  }
  if (pmix::launchedUnderPmix()) {
    const Status st = uniqueIdThroughPmix(&id);
    if (st.isOk()) return commInit(lr.size, id, lr.rank, config, out);
    WEFT_WARN(kLogBootstrap, "%s; trying the other launcher variables", st.message().c_str());
  }
  Status slurmError;
  std::optional<std::string> addr = slurmAddressFromEnv(lr.rank, &slurmError);
  WEFT_RETURN_IF_ERROR(slurmError);
  if (!addr) addr = localMpirunAddressFromEnv();
  if (!addr)
    return Status(weftInvalidArgument,
                  "no rendezvous address in the environment: set WEFT_ADDR=host:port of rank "
                  "0 (or MASTER_ADDR and MASTER_PORT)");
  WEFT_RETURN_IF_ERROR(uniqueIdAt(*addr, lr.rank, lr.size, &id));
  return commInit(lr.size, id, lr.rank, config, out);
}

Status commSplit(weftComm* comm, int color, int key, const weftConfig_t* config, weftComm** out) {
  *out = nullptr;
  WEFT_RETURN_IF_ERROR(checkConfig(config));
  if (color < 0 && color != WEFT_SPLIT_NOCOLOR)
    return makeError(weftInvalidArgument, "color %d is negative (use WEFT_SPLIT_NOCOLOR)", color);
  WEFT_RETURN_IF_ERROR(comm->engine->drain());
  struct Entry {
    int32_t color, key, rank;
  };
  std::vector<Entry> entries(comm->nranks);
  entries[comm->rank] = {color, key, comm->rank};
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(entries.data(), sizeof(Entry)));

  std::vector<Entry> members;
  for (const Entry& e : entries)
    if (e.color == color && color != WEFT_SPLIT_NOCOLOR) members.push_back(e);
  std::sort(members.begin(), members.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].rank == comm->rank) newRank = static_cast<int>(i);

  // The first member of each new communicator hosts its rendezvous.
  std::vector<weftUniqueId> ids(comm->nranks);
  std::memset(ids.data(), 0, ids.size() * sizeof(weftUniqueId));
  if (newRank == 0) {
    net::SockAddr bound;
    net::SockAddr here = net::defaultLocalAddress();
    const uint64_t secret = randomU64();
    WEFT_RETURN_IF_ERROR(startBootstrapRoot(here, secret, &bound));
    WEFT_RETURN_IF_ERROR(encodeUniqueId(bound, secret, &ids[comm->rank]));
  }
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(ids.data(), sizeof(weftUniqueId)));
  if (newRank < 0) return Status::ok();
  weftConfig_t inherited = WEFT_CONFIG_INITIALIZER;
  inherited.timeoutMs = static_cast<int>(comm->timeoutMs);
  return commInit(static_cast<int>(members.size()), ids[members[0].rank], newRank,
                  config != nullptr ? config : &inherited, out);
}

Status commFinalize(weftComm* comm) {
  WEFT_RETURN_IF_ERROR(comm->engine->drain());
  if (comm->asyncError.load() != weftSuccess) return stickyError(comm);
  return comm->bootstrap->barrier();
}

void commDestroy(weftComm* comm) {
  if (comm->engine) {
    (void)comm->engine->drain();
    comm->engine->stop();
  }
  if (comm->transport && !comm->aborting.load()) comm->transport->markClosed();
  comm->magic.store(weftComm::kDead);
  if (comm->flight) flightUnregister(comm->flight.get());
  comm->engine.reset();
  comm->transport.reset();
  comm->bootstrap.reset();
}

void commAbort(weftComm* comm) {
  comm->aborting.store(true);
  if (comm->transport) comm->transport->poison(comm->rank);
  commDestroy(comm);
}

}  // namespace weft
