// Flight recorder: the last N collectives of one communicator, kept so that a
// hang can be explained after the fact.
//
// Each entry holds the collective's sequence number (the same on every rank
// for the same call), what was called (kind, count, dtype, op, root), the
// algorithm, its state (posted, in progress, done, failed), the peers it was
// waiting on when it last stalled, and wall-clock timestamps. The records are
// written as one JSON file per rank (WEFT_FLIGHT_DIR, default /tmp) on a
// timeout, on SIGUSR1, and on request (weftCommDumpFlightRecord);
// tools/weft-hang merges the files of all ranks and names the rank that never
// posted collective #k or called something different there.
//
// Cost: a mutex taken three times per collective (post, start, end), never
// across a wait; the waiting-on set is filled in on the slow path of
// Progress::idle only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/coll.h"
#include "base/status.h"

namespace weft {

enum class FlightState : uint8_t { Posted, InProgress, Done, Failed };

struct FlightEntry {
  static constexpr int kMaxWaiting = 16;
  uint64_t seq = 0;  // collectives: 1, 2, ...; p2p groups count separately
  bool p2p = false;
  CollKind kind = CollKind::AllReduce;
  uint64_t count = 0;  // elements (collectives) or bytes (p2p groups)
  int dtype = 0;
  int op = -1;    // raw op for reducing kinds, else -1
  int root = -1;  // rooted kinds, else -1
  const char* algo = "";
  FlightState state = FlightState::Posted;
  int nWaiting = 0;  // peers this collective last waited on (first kMaxWaiting kept)
  int32_t waiting[kMaxWaiting] = {};
  int64_t postedUs = 0, startUs = 0, endUs = 0;  // wall clock, microseconds
  std::string error;                             // set when failed
};

class FlightRecorder {
 public:
  FlightRecorder(size_t capacity, uint64_t commId, std::string name, int rank, int nranks);

  // A collective was queued (or is about to run inline); returns its seq.
  uint64_t post(const CollArgs& args, int rawOp);
  // A p2p group was queued; returns its own seq (p2p groups are counted apart).
  uint64_t postP2P(uint64_t bytes, int nops);
  void start(uint64_t seq, bool p2p, const char* algo);
  void finish(uint64_t seq, bool p2p, const Status& st);
  // The collective now running waits on these peers (slow path only).
  void setWaiting(const int32_t* peers, int n);

  // Writes the records as JSON to dir/weft-flight-<job>-<comm>-r<rank>.json;
  // dir null means WEFT_FLIGHT_DIR (default /tmp). Returns the path in *path.
  Status dump(const char* dir, const char* reason, std::string* path = nullptr) const;
  std::string toJson(const char* reason) const;

  uint64_t commId() const { return commId_; }
  int rank() const { return rank_; }

 private:
  FlightEntry* find(uint64_t seq, bool p2p);  // null if overwritten; caller holds mu_

  const bool enabled_;  // WEFT_FLIGHT_RECORDS > 0
  // Held for a few stores on every collective's path, and by a dump: a
  // spin lock costs one atomic exchange where a mutex costs two calls.
  class SpinLock {
   public:
    void lock() {
      while (flag_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
    }
    void unlock() { flag_.clear(std::memory_order_release); }

   private:
    std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
  };
  mutable SpinLock mu_;
  std::vector<FlightEntry> ring_;     // collectives, by seq
  std::vector<FlightEntry> p2pRing_;  // p2p groups, by their own seq
  uint64_t nextSeq_ = 0, nextP2P_ = 0;
  uint64_t running_ = 0;  // seq of the entry in progress (0 = none)
  bool runningP2P_ = false;
  uint64_t commId_;
  std::string name_;
  int rank_, nranks_;
};

// Records every communicator's recorder so a signal can dump them all.
void flightRegister(const std::shared_ptr<FlightRecorder>& rec);
void flightUnregister(const FlightRecorder* rec);
// Dumps every live recorder of this process; returns how many were written.
int flightDumpAll(const char* dir, const char* reason);
// Installs the SIGUSR1 handler (once; only if SIGUSR1 still has its default
// action and WEFT_FLIGHT_SIGNAL is not 0). The handler writes one byte to a
// pipe; a thread reads it and dumps, so nothing unsafe runs in the handler.
void flightInstallSignal();
// WEFT_FLIGHT_RECORDS (default 256; 0 turns the recorder off).
size_t flightCapacityFromEnv();

}  // namespace weft
