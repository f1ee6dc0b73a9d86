// The communicator: what the C handle weftComm_t points at.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/coll.h"
#include "algorithms/online.h"
#include "algorithms/tuner.h"
#include "bootstrap/bootstrap.h"
#include "core/engine.h"
#include "core/flight_recorder.h"
#include "core/work.h"
#include "transport/transport.h"

namespace weft {

struct PreMulSumOp {
  bool inUse = false;
  weftDataType_t dtype = weftFloat32;
  weftScalarResidence_t residence = weftScalarHostImmediate;
  alignas(8) unsigned char immediate[8] = {};
  const void* pointer = nullptr;  // read when the op runs (weftScalarDevice)
};

class CommHealth final : public HealthMonitor {
 public:
  explicit CommHealth(weftComm& comm) : comm_(comm) {}
  bool failed() const override;
  Status check() override;
  bool poll() override;
  void park(long ns) override;
  bool wakesOnArrival() const override;
  bool oversubscribed() const override;
  // workDeadline: the work handle's own deadline, if any (Task::deadline).
  void beginCollective(const std::atomic<int64_t>* workDeadline = nullptr);

 private:
  Status timedOut(const char* what, int64_t ms);
  void noteWaiting();  // the flight recorder's "waiting on"
  weftComm& comm_;
  const std::atomic<int64_t>* workDeadline_ = nullptr;
  bool dumped_ = false;        // this failure's flight record is written
  bool clockStarted_ = false;  // deadline_ and nextPeerCheck_ are set
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::steady_clock::time_point nextPeerCheck_{};
  // When this collective first found a peer that had left normally; such a
  // peer may have finished its part already, so it is not an error at once.
  std::chrono::steady_clock::time_point peerLeftSince_{};
};

class CommContext final : public CollContext {
 public:
  explicit CommContext(weftComm& comm) : comm_(comm) {}
  int rank() const override;
  int nranks() const override;
  SendChannel& sendTo(int peer) override;
  RecvChannel& recvFrom(int peer) override;
  HealthMonitor& health() override;
  size_t chunkBytes() const override;
  size_t slotsPerChannel() const override;
  size_t directMinBytes() const override;
  // From the peers' host hashes: hosts numbered in order of their lowest rank.
  int hostOf(int rank) const override;
  const Tuner* tuner() const override;
  int ringRank(int pos) const override;
  int ringPos(int rank) const override;
  // Ranks in ring order, set once at creation before the engine starts;
  // empty means rank order.
  void setRingOrder(std::vector<int> order);

 private:
  weftComm& comm_;
  std::vector<int> ringRank_;  // [position]
  std::vector<int> ringPos_;   // [rank]
  mutable std::once_flag hostsOnce_;
  mutable std::vector<int> hosts_;  // per rank
};

}  // namespace weft

struct weftComm {
  static constexpr uint64_t kLive = 0x77656674636f6d6dull;  // "weftcomm"
  static constexpr uint64_t kDead = 0x646561642d636f6dull;

  std::atomic<uint64_t> magic{kLive};
  int rank = 0;
  int nranks = 0;
  int64_t timeoutMs = 0;
  std::string name;
  std::vector<weft::PeerInfo> peers;
  std::unique_ptr<weft::Bootstrap> bootstrap;
  std::unique_ptr<weft::Transports> transport;  // per-peer shm or tcp channels
  std::unique_ptr<weft::Tuner> tuner;           // set once the channels exist
  std::unique_ptr<weft::OnlineTuner> online;    // null: WEFT_TUNER_ONLINE=0
  // More ranks on some host than its CPUs (set with the tuner; CommHealth).
  std::atomic<bool> oversubscribed{false};
  weft::CommHealth health{*this};
  weft::CommContext context{*this};
  std::unique_ptr<weft::Engine> engine;
  uint64_t collSeq = 0;  // seq of the collective running or last run
  uint64_t commId = 0;   // same on every rank (names flight records)
  std::shared_ptr<weft::FlightRecorder> flight;
  bool checkCalls = false;  // WEFT_CHECK: compare call fingerprints first
  uint64_t shrinks = 0;     // weftCommShrink calls so far (each gets its own secret)

  std::atomic<bool> aborting{false};
  std::atomic<int> asyncError{weftSuccess};
  std::mutex errorMu;
  std::string errorMessage;  // why asyncError is set

  std::mutex opsMu;
  std::vector<weft::PreMulSumOp> preMulOps;  // op id = weftNumOps + index
};

namespace weft {

// Communicator lifetime. Each returns what the C API returns.
Status commInit(int nranks, const weftUniqueId& id, int rank, const weftConfig_t* config,
                weftComm** out);
Status commInitFromEnv(const weftConfig_t* config, weftComm** out);
Status commSplit(weftComm* comm, int color, int key, const weftConfig_t* config, weftComm** out);
// The survivors of comm without excludeRanks (shrink.cc); needs no excluded rank.
Status commShrink(weftComm* comm, const int* excludeRanks, int nExclude, const weftConfig_t* config,
                  int flags, weftComm** out);
Status commFinalize(weftComm* comm);
// Frees everything but the handle, which stays known as dead so that later
// calls on it get a clear error instead of touching freed memory.
void commDestroy(weftComm* comm);
void commAbort(weftComm* comm);

// Is this a live communicator? Sets a message if not.
Status checkComm(const weftComm* comm);

// Records a communication failure: the communicator stays failed and every
// peer is told to stop waiting.
void commFail(weftComm* comm, const Status& st);

// Runs a task on the calling thread (the engine's runner).
Status commRunTask(weftComm* comm, Task& task);
// Appends a call to a task (sends and receives become point-to-point ops).
void addToTask(Task& task, const CollCall& call);
// Queues a task on the communicator's engine.
std::shared_ptr<WorkState> postTask(weftComm* comm, Task task);
// Runs one collective on the calling thread (deadline: a work handle's own,
// for the collectives of a composite task).
Status commRunCall(weftComm* comm, CollCall& call, const std::atomic<int64_t>* deadline = nullptr);

// Resolves an op for a call (validation happens before).
Status resolveOp(weftComm* comm, int raw, weftDataType_t dtype, RedOp* out);

}  // namespace weft
