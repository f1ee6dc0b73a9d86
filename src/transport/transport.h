// The per-peer transport layer of a communicator: for every peer one
// SendChannel and one RecvChannel, from shared memory when the peer is on
// this host (PeerInfo::hostHash equal) and from TCP otherwise or when
// WEFT_SHM_DISABLE=1. The communicator (core/comm.cc) talks only to this
// class; it answers the questions the health monitor asks (abort, dead
// peers) for whichever transport reaches each peer.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/channel.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace weft {

enum class PeerState {
  kAlive,
  kClosed,  // it destroyed its communicator normally
  kDead,    // its process ended (or its connection broke) without that
};

class Transports {
 public:
  // Collective over the bootstrap: every rank calls it.
  static Status create(Bootstrap& bootstrap, std::unique_ptr<Transports>* out);
  ~Transports();

  SendChannel& sendTo(int peer) { return *send_[peer]; }
  RecvChannel& recvFrom(int peer) { return *recv_[peer]; }
  // Every channel's slot size (the communicator's chunk size): the shm
  // slot, or TCP's own when no two ranks share memory (tcpOnlySlotBytes()).
  size_t slotBytes() const { return slotBytes_; }
  // The fewest slots of any channel of any rank, agreed at creation.
  size_t slotsPerChannel() const { return slotsPerChannel_; }
  // Single copy needs every peer on shm with cross-memory attach.
  bool directEnabled() const;
  size_t directMinBytes() const;
  bool usesTcp(int peer) const { return tcp_ && onTcp_[peer]; }
  // Where this rank's TCP listener is (no address without TCP peers).
  net::SockAddr tcpListenAddress() const { return tcp_ ? tcp_->listenAddress() : net::SockAddr{}; }

  // 1 + the rank that poisoned the communicator, or 0.
  int abortedBy() const;
  // Why it was poisoned (weftTimeout, weftRemoteError, ...); weftSuccess if not.
  weftResult_t abortCode() const;
  // Tells every peer (and this rank) to stop; any thread.
  void poison(int byRank, weftResult_t why = weftRemoteError);
  // This rank leaves normally.
  void markClosed();
  // Cheap: a peer is known dead (without asking the OS).
  bool anyPeerDead() const { return tcp_ && tcp_->anyPeerDead(); }
  // Slower: the state of one peer; `why` says what happened.
  PeerState peerState(int peer, std::string* why) const;

  // Moves network work no channel call drives (pending sends, control
  // messages); called on every idle round of an algorithm.
  bool poll() { return tcp_ && tcp_->progress(); }
  // Waits up to ns for network activity (epoll), or sleeps without TCP peers.
  void park(long ns);
  // Every peer is on TCP: park() ends as soon as anything arrives.
  bool allPeersOnSockets() const { return allTcp_; }
  // Waits until everything committed to TCP channels is handed to the
  // kernel (a collective must not return with bytes only in staging slots:
  // nobody would send them). `check` is asked while nothing moves.
  Status flush(const std::function<Status()>& check);
  // After every collective: no received byte goes to an address it named
  // (RecvChannel::land) from now on.
  void endCollective() {
    if (tcp_) tcp_->clearLandings();
  }

 private:
  Transports() = default;
  int rank_ = 0;
  size_t slotBytes_ = 0;
  size_t slotsPerChannel_ = 2;
  std::vector<int> pids_;
  std::vector<bool> onTcp_;
  bool allTcp_ = false;  // every peer of this rank is on TCP
  std::unique_ptr<ShmTransport> shm_;
  std::unique_ptr<TcpTransport> tcp_;
  std::vector<SendChannel*> send_;
  std::vector<RecvChannel*> recv_;
  std::atomic<int> abortedBy_{0};
  std::atomic<int> abortCode_{weftSuccess};
};

}  // namespace weft
