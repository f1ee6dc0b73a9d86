// Shared-memory transport between ranks on one host.
//
// Each rank creates one segment holding a FIFO for every peer that sends to
// it: a ring of slots plus a head (advanced by the sender) and a tail
// (advanced by the receiver) on their own cache lines. Senders write their
// data - or a reduction's result - straight into the receiver's slot. Once
// every rank has mapped every peer's segment the names are unlinked, so
// nothing is left in /dev/shm whatever happens to the processes later.
//
// The segment header also carries an abort word: a rank that fails or aborts
// sets it in every peer's segment, so every rank's waits end at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/channel.h"
#include "transport/shm/segment.h"

namespace weft {

struct ShmFifo;

class ShmSendChannel final : public SendChannel {
 public:
  ShmSendChannel(ShmFifo* fifo, char* slots, uint32_t nslots, size_t slotBytes, bool direct);
  void* tryAcquire() override;
  void commit(size_t bytes) override;
  size_t slotBytes() const override { return slotBytes_; }
  bool canPublish() const override { return direct_; }
  void publish(const void* src, size_t bytes) override;
  bool drained() override;

 private:
  bool direct_;
  ShmFifo* fifo_;
  char* slots_;
  uint32_t nslots_;
  size_t slotBytes_;
  uint64_t head_ = 0;      // next slot to fill (we own the shared copy)
  uint64_t tailSeen_ = 0;  // last tail read from the receiver
};

class ShmRecvChannel final : public RecvChannel {
 public:
  ShmRecvChannel(ShmFifo* fifo, char* slots, uint32_t nslots, size_t slotBytes, int peerPid);
  const void* tryPeek(size_t* bytes) override;
  void release() override;
  bool peekedPublished() const override { return peekedPublished_; }
  Status readPublished(void* dst, size_t offset, size_t bytes) override;

 private:
  int peerPid_;
  bool peekedPublished_ = false;
  ShmFifo* fifo_;
  char* slots_;
  uint32_t nslots_;
  size_t slotBytes_;
  uint64_t tail_ = 0;      // next slot to read (we own the shared copy)
  uint64_t headSeen_ = 0;  // last head read from the sender
};

struct ShmOptions {
  uint32_t slots = 4;                // WEFT_SHM_SLOTS
  size_t slotBytes = 256 << 10;      // WEFT_SHM_SLOT_BYTES
  bool direct = true;                // WEFT_SHM_DIRECT: single copy by cross-memory attach
  size_t directMinBytes = 64 << 10;  // WEFT_SHM_DIRECT_MIN: smaller messages use the FIFOs
  static ShmOptions fromEnv();
};

class ShmTransport {
 public:
  // Collective over the bootstrap: every rank must call it. Channels exist
  // for the peers with onShm[peer] set, which must be on this host; the
  // others get none (they are reached by another transport).
  static Status create(Bootstrap& bootstrap, const ShmOptions& options,
                       const std::vector<bool>& onShm, std::unique_ptr<ShmTransport>* out);
  ~ShmTransport();

  SendChannel& sendTo(int peer) { return *send_[peer]; }
  RecvChannel& recvFrom(int peer) { return *recv_[peer]; }
  size_t slotBytes() const { return options_.slotBytes; }
  // Whether every rank can read every peer's memory (cross-memory attach).
  bool directEnabled() const { return options_.direct; }
  size_t directMinBytes() const { return options_.directMinBytes; }

  // Set once any rank has poisoned the communicator; 1 + that rank.
  int abortedBy() const;
  // Why it was poisoned (weftTimeout, weftRemoteError, ...); weftSuccess if not.
  weftResult_t abortCode() const;
  // Tells every peer (and ourselves) to stop: their waits fail at once.
  void poison(int byRank, weftResult_t why = weftRemoteError);
  // Says that this rank left normally (its communicator was destroyed), so a
  // peer that finds the process gone knows it did not crash.
  void markClosed();
  bool peerClosed(int peer) const;

 private:
  ShmTransport() = default;
  int rank_ = 0;
  int nranks_ = 0;
  ShmOptions options_;
  std::vector<ShmSegment> segments_;  // [rank]: that rank's incoming FIFOs
  std::vector<std::unique_ptr<ShmSendChannel>> send_;
  std::vector<std::unique_ptr<ShmRecvChannel>> recv_;
};

}  // namespace weft
