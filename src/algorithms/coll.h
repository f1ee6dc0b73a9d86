// What an algorithm is given: the call's arguments and a context that
// reaches peers only through channels (transport/channel.h).
//
// An algorithm is a plain function that runs one collective to completion on
// the calling thread. It never blocks in the kernel: when none of its
// channels can move it calls Progress::idle(), which spins, then yields, then
// sleeps, and fails the collective on abort, timeout or a dead peer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/reduce.h"
#include "transport/channel.h"
#include "weft/weft.h"

namespace weft {

enum class CollKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  AllToAllV,  // per-peer counts and displacements (CollArgs::sendCounts...)
  Send,
  Recv,
};
const char* collName(CollKind kind);

struct RedOp {
  kernels::ReduceKind kind = kernels::ReduceKind::Sum;
  bool average = false;  // sum, then divide by nranks once at the end
  bool preMul = false;   // every rank's contribution is scaled by `scalar` first (sum)
  alignas(8) unsigned char scalar[8] = {};  // one element of the dtype
};

struct CollArgs {
  CollKind kind = CollKind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's meaning for each kind (per-rank count for gathers)
  weftDataType_t dtype = weftFloat32;
  RedOp op;
  int root = 0;  // Broadcast, Reduce, Gather, Scatter
  int peer = 0;  // Send, Recv
  // AllToAllV: nranks entries each, in elements; `count` is unused. The
  // arrays must outlive the call (the API layer keeps copies for queued work).
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  // Set by the tuner (tuner.h). Pipelined algorithms (chain) move at most
  // this many bytes per step, 0 meaning the channel slot; algorithms that
  // choose single copy by size (gather, scatter) use it only if singleCopy.
  size_t chunkBytes = 0;
  // Set by the tuner: how many segments hier allreduce pipelines the buffer
  // in (hier_allreduce.cc); 0: its own rule (hierSegments).
  size_t segments = 0;
  bool singleCopy = true;
};

// Health of the communicator as seen from inside a collective.
class HealthMonitor {
 public:
  virtual ~HealthMonitor() = default;
  // Cheap: true once abort or a peer failure has been flagged.
  virtual bool failed() const = 0;
  // Slower: checks abort flags, dead peers and the timeout deadline.
  virtual Status check() = 0;
  // Moves transport work that no channel call drives (network sends still
  // queued, control messages); called on every idle round. True if anything
  // moved: the algorithm then looks at its channels again before any failure
  // is reported (data that arrived with a peer's abort is still used).
  virtual bool poll() { return false; }
  // Waits up to ns nanoseconds, returning early when the transport has news
  // (epoll on network sockets); plain sleep by default.
  virtual void park(long ns);
  // True when every peer's arrivals end park() at once (all on sockets, no
  // shared memory): a wait can then sleep in park() instead of spinning.
  virtual bool wakesOnArrival() const { return false; }
  // True when this communicator has more ranks on a host than CPUs they may
  // use: the peer a rank waits for may be waiting for this rank's CPU, so a
  // wait gives the CPU up after a short spin.
  virtual bool oversubscribed() const { return false; }
};

// Back-off for a loop that polls channels.
class Progress {
 public:
  explicit Progress(HealthMonitor& health) : health_(health) {}
  // Call after a pass over the channels that moved something.
  void made() {
    idleRounds_ = 0;
    failureSeen_ = false;
    recheck_ = false;
  }
  // Call after a pass that moved nothing. Returns an error to give up with.
  Status idle();

 private:
  Status checkHealth();  // check(), with one more pass on a failure
  HealthMonitor& health_;
  uint32_t idleRounds_ = 0;
  // A failure was seen and one more pass was granted (see idle()).
  bool failureSeen_ = false;
  // check() failed before that pass: check again after it, and report this.
  bool recheck_ = false;
  Status deferred_;
  int64_t nextCheckNs_ = 0;  // CLOCK_MONOTONIC time of the next due check()
};

class Tuner;

class CollContext {
 public:
  virtual ~CollContext() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual SendChannel& sendTo(int peer) = 0;
  virtual RecvChannel& recvFrom(int peer) = 0;
  virtual HealthMonitor& health() = 0;
  // Bytes per pipelined chunk; equals every channel's slotBytes().
  virtual size_t chunkBytes() const = 0;
  // The fewest slots any channel of the communicator has, the same on every
  // rank: an algorithm whose message order depends on it (ring_schedule.h)
  // gets the same order on both ends of every channel.
  virtual size_t slotsPerChannel() const { return 2; }
  // Messages of at least this many bytes go by single copy where the channel
  // can publish (SendChannel::canPublish); SIZE_MAX turns that off.
  virtual size_t directMinBytes() const { return SIZE_MAX; }
  // The host a rank runs on, as a small index (0 for the first host seen);
  // the hierarchical algorithms group ranks by it. One host by default.
  virtual int hostOf(int rank) const {
    (void)rank;
    return 0;
  }
  // The communicator's tuner, or nullptr for default parameters.
  virtual const Tuner* tuner() const { return nullptr; }
  // The ring the ring and chain algorithms follow (ring_order.h): the rank
  // at ring position `pos`, and a rank's position. Rank order by default.
  virtual int ringRank(int pos) const { return pos; }
  virtual int ringPos(int rank) const { return rank; }
};

// Blocking helpers built on Progress.
Status acquireSlot(SendChannel& ch, Progress& progress, void** slot);
// Waits for the next slot and checks that it holds exactly `expectBytes`:
// a different size means the ranks called different collectives.
Status peekSlot(RecvChannel& ch, Progress& progress, size_t expectBytes, const void** data);

// The arithmetic of a reducing step, with PreMulSum and avg folded in:
// contribute() turns local input into what goes on the wire (a copy, or a
// copy scaled by the PreMulSum scalar); combine() folds local input into
// incoming partial results; finish() applies avg's single division.
void contribute(void* dst, const void* local, size_t count, const CollArgs& args);
void combine(void* dst, const void* local, const void* incoming, size_t count,
             const CollArgs& args);
void finish(void* buf, size_t count, const CollArgs& args, int nranks);

}  // namespace weft
