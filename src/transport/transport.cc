#include "transport/transport.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/ifname.h"

namespace weft {

namespace {

// Only meaningful for a process on this host (a shm peer).
bool processAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child that its parent has not reaped yet is a zombie: dead too.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

net::SockAddr peerAddr(const PeerInfo& p) {
  net::SockAddr a;
  std::memcpy(&a.storage, p.addr, std::min<size_t>(p.addrLen, sizeof p.addr));
  a.len = std::min<uint32_t>(p.addrLen, sizeof p.addr);
  return a;
}

}  // namespace

Status Transports::create(Bootstrap& bootstrap, std::unique_ptr<Transports>* out) {
  const int rank = bootstrap.rank();
  const int nranks = bootstrap.nranks();
  const auto& peers = bootstrap.peers();
  std::unique_ptr<Transports> t(new Transports());
  t->rank_ = rank;
  t->send_.assign(nranks, nullptr);
  t->recv_.assign(nranks, nullptr);
  t->onTcp_.assign(nranks, false);
  for (const PeerInfo& p : peers) t->pids_.push_back(p.pid);

  // Every rank sees the same table, so every rank takes the same decisions
  // below and makes the same collective calls (WEFT_SHM_DISABLE must be the
  // same on every rank).
  const bool shmDisabled = envInt("SHM_DISABLE", 0) != 0;
  bool anyLocalPair = false, anyRemotePair = false;
  for (int a = 0; a < nranks; ++a)
    for (int b = a + 1; b < nranks; ++b) {
      const bool sameHost = peers[a].hostHash == peers[b].hostHash;
      (sameHost && !shmDisabled ? anyLocalPair : anyRemotePair) = true;
    }
  std::vector<bool> onShm(nranks, false);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    const bool sameHost = peers[p].hostHash == peers[rank].hostHash;
    onShm[p] = sameHost && !shmDisabled;
    t->onTcp_[p] = !onShm[p];
  }

  const ShmOptions shmOptions = ShmOptions::fromEnv();
  t->slotBytes_ = shmOptions.slotBytes;
  // The fewest slots of the transports this rank uses.
  size_t fewestSlots = SIZE_MAX;
  if (anyLocalPair) {
    WEFT_RETURN_IF_ERROR(ShmTransport::create(bootstrap, shmOptions, onShm, &t->shm_));
    fewestSlots = shmOptions.slots;
  }
  if (anyRemotePair) {
    // Listen on the interface WEFT_SOCKET_IFNAME/FAMILY pick, else on the
    // one this rank reached the bootstrap root through.
    net::SockAddr at = peerAddr(peers[rank]);
    bool chosen = false;
    WEFT_RETURN_IF_ERROR(net::addressFromSocketEnv(&at, &chosen));
    if (!anyLocalPair) {
      // No shm channel shares the chunk: TCP's own, the smallest any rank
      // asks for (a receiver's slots must hold every frame it is sent).
      std::vector<uint64_t> slotOf(nranks, 0);
      slotOf[rank] = tcpOnlySlotBytes();
      WEFT_RETURN_IF_ERROR(bootstrap.allGather(slotOf.data(), sizeof(uint64_t)));
      t->slotBytes_ = *std::min_element(slotOf.begin(), slotOf.end());
    }
    const TcpOptions tcpOptions = TcpOptions::fromEnv(t->slotBytes_);
    WEFT_RETURN_IF_ERROR(TcpTransport::create(bootstrap, tcpOptions, t->onTcp_, at, &t->tcp_));
    fewestSlots = std::min<size_t>(fewestSlots, tcpOptions.slots);
  }
  if (fewestSlots != SIZE_MAX) t->slotsPerChannel_ = fewestSlots;
  // The ring's message order depends on it (algorithms/ring_schedule.h), so
  // every rank takes the fewest of all: a WEFT_TCP_SLOTS set on some hosts
  // only, which TCP itself copes with, must not split that order.
  std::vector<uint64_t> slotsOf(nranks, 0);
  slotsOf[rank] = t->slotsPerChannel_;
  WEFT_RETURN_IF_ERROR(bootstrap.allGather(slotsOf.data(), sizeof(uint64_t)));
  t->slotsPerChannel_ = *std::min_element(slotsOf.begin(), slotsOf.end());
  t->allTcp_ = t->tcp_ != nullptr;
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    if (onShm[p]) {
      t->allTcp_ = false;
      t->send_[p] = &t->shm_->sendTo(p);
      t->recv_[p] = &t->shm_->recvFrom(p);
    } else {
      t->send_[p] = &t->tcp_->sendTo(p);
      t->recv_[p] = &t->tcp_->recvFrom(p);
    }
  }
  *out = std::move(t);
  return Status::ok();
}

Transports::~Transports() = default;

bool Transports::directEnabled() const {
  return !tcp_ && shm_ && shm_->directEnabled();
}

size_t Transports::directMinBytes() const {
  return shm_ ? shm_->directMinBytes() : SIZE_MAX;
}

int Transports::abortedBy() const {
  if (const int by = abortedBy_.load(std::memory_order_acquire)) return by;
  if (shm_)
    if (const int by = shm_->abortedBy()) return by;
  if (tcp_)
    if (const int by = tcp_->abortedBy()) return by;
  return 0;
}

weftResult_t Transports::abortCode() const {
  // The same order as abortedBy(): the reason of the poisoning it reports.
  if (abortedBy_.load(std::memory_order_acquire))
    return static_cast<weftResult_t>(abortCode_.load(std::memory_order_acquire));
  if (shm_ && shm_->abortedBy()) return shm_->abortCode();
  if (tcp_ && tcp_->abortedBy()) return tcp_->abortCode();
  return weftSuccess;
}

void Transports::poison(int byRank, weftResult_t why) {
  int expected = 0;
  if (abortedBy_.compare_exchange_strong(expected, byRank + 1))
    abortCode_.store(why, std::memory_order_release);
  if (shm_) shm_->poison(byRank, why);
  if (tcp_) tcp_->poison(byRank, why);
}

void Transports::markClosed() {
  if (shm_) shm_->markClosed();
  if (tcp_) tcp_->markClosed();
}

PeerState Transports::peerState(int peer, std::string* why) const {
  if (peer == rank_) return PeerState::kAlive;
  if (usesTcp(peer)) {
    switch (tcp_->peerState(peer, why)) {
      case TcpPeerState::kAlive:
        return PeerState::kAlive;
      case TcpPeerState::kClosed:
        return PeerState::kClosed;
      case TcpPeerState::kDead:
        return PeerState::kDead;
    }
  }
  if (processAlive(pids_[peer])) return PeerState::kAlive;
  if (shm_ && shm_->peerClosed(peer)) return PeerState::kClosed;
  if (why != nullptr) *why = "its process is gone";
  return PeerState::kDead;
}

void Transports::park(long ns) {
  if (tcp_) {
    tcp_->wait(ns);
    return;
  }
  timespec nap{0, ns};
  nanosleep(&nap, nullptr);
}

Status Transports::flush(const std::function<Status()>& check) {
  if (!tcp_) return Status::ok();
  uint32_t idle = 0;
  while (tcp_->pendingSends()) {
    if (tcp_->progress()) {
      idle = 0;
      continue;
    }
    if (++idle > 64) tcp_->wait(50 * 1000);
    WEFT_RETURN_IF_ERROR(check());
  }
  return Status::ok();
}

}  // namespace weft
