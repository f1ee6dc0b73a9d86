#include "transport/tcp/tcp_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {

constexpr int kListenerRef = 0;
constexpr int kDataRef = 1;
constexpr int kCtrlInRef = 2;
constexpr int kCtrlOutRef = 3;
// A connection that has not said hello within this long is dropped.
constexpr int kHelloTimeoutMs = 5000;
constexpr int kMinSocketBufBytes = 64 << 10;

void setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void tuneSocket(int fd, const TcpOptions& o) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (o.bufBytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o.bufBytes, sizeof o.bufBytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.bufBytes, sizeof o.bufBytes);
  }
  if (!o.congestion.empty() && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, o.congestion.data(),
                                          static_cast<socklen_t>(o.congestion.size())) != 0) {
    // Not loaded, or not in net.ipv4.tcp_allowed_congestion_control for an
    // unprivileged process: the connection keeps the kernel's default.
    // Said once per process; the sockets work either way.
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      const int err = errno;
      if (o.congestionAsked) {
        WEFT_WARN(kLogNet,
                  "WEFT_SOCKET_CC=%s: setting it failed (%s); the sockets keep the kernel's "
                  "congestion control (load the module, or add it to "
                  "net.ipv4.tcp_allowed_congestion_control)",
                  o.congestion.c_str(), std::strerror(err));
      } else {
        WEFT_INFO(kLogNet, "congestion control %s not set (%s): the kernel's default stays",
                  o.congestion.c_str(), std::strerror(err));
      }
    }
  }
}

net::SockAddr addrFrom(const uint8_t* bytes, uint32_t len) {
  net::SockAddr a;
  std::memcpy(&a.storage, bytes, std::min<size_t>(len, sizeof(PeerInfo::addr)));
  a.len = std::min<uint32_t>(len, sizeof(PeerInfo::addr));
  return a;
}

}  // namespace

size_t tcpOnlySlotBytes() {
  const uint64_t bytes = envBytes("TCP_SLOT_BYTES", 512 << 10);
  return static_cast<size_t>((std::clamp<uint64_t>(bytes, 4096, 1u << 30) + 63) / 64 * 64);
}

TcpOptions TcpOptions::fromEnv(size_t slotBytes) {
  TcpOptions o;
  const int64_t perThread = std::clamp<int64_t>(envInt("NSOCKS_PERTHREAD", 2), 1, 64);
  const int64_t threads = std::clamp<int64_t>(envInt("SOCKET_NTHREADS", 1), 1, 16);
  o.nsocks = static_cast<uint32_t>(std::clamp<int64_t>(perThread * threads, 1, 64));
  o.slots = static_cast<uint32_t>(std::clamp<int64_t>(envInt("TCP_SLOTS", 16), 2, 256));
  o.slots = std::max(o.slots, 2 * o.nsocks);
  o.slotBytes = slotBytes;
  o.bufBytes = static_cast<int>(std::min<uint64_t>(envBytes("SOCKET_BUF_BYTES", 0), 1u << 30));
  if (const std::optional<std::string> cc = envString("SOCKET_CC")) {
    o.congestion = *cc == "system" ? std::string() : *cc;
    o.congestionAsked = true;
  }
  if (o.bufBytes > 0 && o.bufBytes < kMinSocketBufBytes) {
    // Below a segment's worth (64 KiB on loopback), a receiver's window
    // opens too little to send an update, and the sender waits for the
    // kernel's probe timer: transfers of a few hundred KiB took seconds.
    WEFT_WARN(kLogNet,
              "WEFT_SOCKET_BUF_BYTES=%d is below %d bytes, where TCP stalls on its probe timer; "
              "using %d (unset it to let the kernel size the buffers)",
              o.bufBytes, kMinSocketBufBytes, kMinSocketBufBytes);
    o.bufBytes = kMinSocketBufBytes;
  }
  return o;
}

// ---- send channel ----

TcpSendChannel::TcpSendChannel(TcpTransport& t, TcpPeer& peer, const TcpOptions& o)
    : t_(t),
      peer_(peer),
      nslots_(o.slots),
      nsocks_(o.nsocks),
      slotBytes_(o.slotBytes),
      buf_(allocatePages(o.slots * o.slotBytes)),
      stagingPool_(buf_.get(), o.slots, o.slotBytes),
      headers_(o.slots),
      payload_(o.slots, nullptr),
      staging_(o.slots, nullptr),
      unsent_(o.slots, 0),
      socks_(o.nsocks) {
  for (Sock& s : socks_) s.queued.assign(nslots_, 0);
}

void* TcpSendChannel::tryAcquire() {
  stalled_ = false;
  if (!slotFree(head_)) {
    progress();
    stalled_ = !slotFree(head_);
    if (stalled_) return nullptr;
  }
  // Slot head_ holds no buffer (its last chunk left), so at most slots - 1
  // are taken and the pool has one.
  if (acquired_ == nullptr) acquired_ = stagingPool_.take();
  return acquired_;
}

void TcpSendChannel::commit(size_t bytes) {
  staging_[head_ % nslots_] = std::exchange(acquired_, nullptr);
  queue(bytes, staging_[head_ % nslots_]);
}

void TcpSendChannel::commitFrom(void* /*slot*/, const void* src, size_t bytes) {
  queue(bytes, static_cast<const char*>(src));
}

void TcpSendChannel::queue(size_t bytes, const char* src) {
  payload_[head_ % nslots_] = src;
  tcp::FrameHeader& h = headers_[head_ % nslots_];
  h.magic = tcp::kFrameMagic;
  h.version = tcp::kWireVersion;
  h.type = static_cast<uint16_t>(tcp::FrameType::kData);
  h.seq = head_;
  h.bytes = bytes;
  unsent_[head_ % nslots_] = 1;
  // The socket with the fewest chunks the kernel has not taken yet.
  uint32_t pick = nextSock_;
  for (uint32_t i = 1; i < nsocks_; ++i) {
    const uint32_t k = (nextSock_ + i) % nsocks_;
    if (socks_[k].count < socks_[pick].count) pick = k;
  }
  if (pick != nextSock_) ++offTurn_;
  nextSock_ = (pick + 1) % nsocks_;
  Sock& s = socks_[pick];
  s.queued[(s.first + s.count) % nslots_] = head_;
  ++s.count;
  ++head_;
  progress();
}

bool TcpSendChannel::pending() const {
  for (const Sock& s : socks_)
    if (s.count > 0) return true;
  return false;
}

bool TcpSendChannel::readsFrom(const void* p, size_t bytes) {
  progress();
  const char* lo = static_cast<const char*>(p);
  for (uint32_t slot = 0; slot < nslots_; ++slot) {
    if (!unsent_[slot] || staging_[slot] != nullptr) continue;
    const char* src = payload_[slot];
    if (src < lo + bytes && lo < src + headers_[slot].bytes) return true;
  }
  return false;
}

void TcpSendChannel::moveSources(const void* from, size_t bytes, const void* to) {
  const char* lo = static_cast<const char*>(from);
  for (uint32_t slot = 0; slot < nslots_; ++slot) {
    if (!unsent_[slot] || staging_[slot] != nullptr) continue;
    const char* src = payload_[slot];
    // A frame part-written goes on from the same offset of the copy.
    if (src >= lo && src + headers_[slot].bytes <= lo + bytes)
      payload_[slot] = static_cast<const char*>(to) + (src - lo);
  }
}

bool TcpSendChannel::drained() {
  progress();
  stalled_ = pending();
  return !stalled_;
}

bool TcpSendChannel::progress() {
  // Once the communicator is poisoned nothing more is sent: a failed
  // collective's sends may point into memory its caller has taken back.
  if (peer_.stopped() || t_.abortedBy() != 0) {
    // Nothing will be written: stop asking epoll for writability, which
    // would otherwise report the socket ready on every poll.
    for (uint32_t k = 0; k < nsocks_; ++k) {
      if (socks_[k].armed && !peer_.stopped()) t_.wantWritable(peer_.dataFds[k], false);
      socks_[k].armed = false;
    }
    return false;
  }
  bool moved = false;
  for (uint32_t k = 0; k < nsocks_; ++k) {
    Sock& s = socks_[k];
    while (s.count > 0) {
      const uint32_t slot = static_cast<uint32_t>(s.queued[s.first] % nslots_);
      const tcp::FrameHeader& h = headers_[slot];
      const size_t total = sizeof h + h.bytes;
      iovec iov[2];
      int n = 0;
      if (s.offset < sizeof h) {
        iov[n++] = {const_cast<char*>(reinterpret_cast<const char*>(&h)) + s.offset,
                    sizeof h - s.offset};
        iov[n++] = {const_cast<char*>(payload_[slot]), h.bytes};
      } else {
        iov[n++] = {const_cast<char*>(payload_[slot]) + (s.offset - sizeof h), total - s.offset};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      const ssize_t sent = ::sendmsg(peer_.dataFds[k], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (!s.armed) {
            t_.wantWritable(peer_.dataFds[k], true);
            s.armed = true;
          }
          break;
        }
        t_.dataEnded(peer_, std::string("send failed: ") + strerror(errno));
        return moved;
      }
      moved = true;
      s.offset += static_cast<size_t>(sent);
      if (s.offset == total) {
        s.offset = 0;
        unsent_[slot] = 0;
        if (staging_[slot] != nullptr) stagingPool_.give(std::exchange(staging_[slot], nullptr));
        s.first = (s.first + 1) % nslots_;
        --s.count;
      }
    }
    if (s.count == 0 && s.armed) {
      t_.wantWritable(peer_.dataFds[k], false);
      s.armed = false;
    }
  }
  return moved;
}

// ---- receive channel ----

TcpRecvChannel::TcpRecvChannel(TcpTransport& t, TcpPeer& peer, const TcpOptions& o)
    : t_(t),
      peer_(peer),
      nslots_(o.slots),
      nsocks_(o.nsocks),
      slotBytes_(o.slotBytes),
      buf_(allocatePages(o.slots * o.slotBytes)),
      stagingPool_(buf_.get(), o.slots, o.slotBytes),
      bytes_(o.slots),
      landedAt_(o.slots, nullptr),
      staging_(o.slots, nullptr),
      // No slot number is claimed or complete yet: the first use of slot i
      // is slot number i.
      claimed_(o.slots, UINT64_MAX),
      complete_(o.slots, UINT64_MAX),
      socks_(o.nsocks) {}

const void* TcpRecvChannel::tryPeek(size_t* bytes) {
  stalled_ = false;
  if (!filled(tail_)) {
    // Any socket may carry the next chunk. A socket the last read found
    // empty is read again once epoll reports it (TcpTransport::progress,
    // every idle round): a waiting rank then makes one epoll_wait per round
    // instead of failed recvs as well, and never takes a socket's lock while
    // the sender's data is being queued.
    for (uint32_t k = 0; k < nsocks_ && !filled(tail_); ++k)
      if (!socks_[k].drained) progressSocket(k);
    stalled_ = !filled(tail_);
    if (stalled_) return nullptr;
  }
  *bytes = bytes_[tail_ % nslots_];
  if (char* landed = landedAt_[tail_ % nslots_]) return landed;
  return staging_[tail_ % nslots_];
}

void TcpRecvChannel::land(void* dst, size_t capacity) {
  landings_.push_back({static_cast<char*>(dst), capacity});
}

void TcpRecvChannel::clearLandings() {
  // A name is dropped when its slot is released, and a payload goes to a
  // named address only while its slot is unreleased: with no names left
  // (every collective that succeeded) nothing can still land.
  if (landings_.empty()) return;
  landings_.clear();
  // Only a collective that failed leaves named slots behind; a payload still
  // on its way to a named address finishes in the slot instead, so nothing
  // is written to the caller's memory after this.
  for (Sock& s : socks_) {
    const uint32_t slot = static_cast<uint32_t>(s.seq % nslots_);
    if (s.inPayload && s.dest != nullptr && landedAt_[slot] != nullptr) {
      s.dest = stageIn(slot);
      landedAt_[slot] = nullptr;
    }
  }
  for (uint64_t seq = tail_; seq < tail_ + nslots_; ++seq) {
    const uint32_t slot = static_cast<uint32_t>(seq % nslots_);
    if (filled(seq) && landedAt_[slot] != nullptr) {
      stageIn(slot);
      landedAt_[slot] = nullptr;
    }
  }
}

char* TcpRecvChannel::stageIn(uint32_t slot) {
  // Slot numbers seq and seq + slots share a slot, and the first is released
  // (its buffer given back) before the second is claimed: at most one buffer
  // per slot, so the pool never runs dry.
  if (staging_[slot] == nullptr) staging_[slot] = stagingPool_.take();
  return staging_[slot];
}

void TcpRecvChannel::release() {
  landedAt_[tail_ % nslots_] = nullptr;
  if (char* b = std::exchange(staging_[tail_ % nslots_], nullptr)) stagingPool_.give(b);
  if (!landings_.empty()) landings_.pop_front();
  ++tail_;
  // A socket whose next frame's slot was taken was taken out of the epoll
  // set (it stays readable, which would end every wait at once): once that
  // slot is free it can read again.
  for (uint32_t k = 0; k < nsocks_; ++k) {
    Sock& s = socks_[k];
    if (s.paused && s.seq < tail_ + nslots_) {
      s.paused = false;
      t_.wantReadable(peer_.dataFds[k], true);
    }
  }
}

bool TcpRecvChannel::progress() {
  bool moved = false;
  for (uint32_t k = 0; k < nsocks_; ++k) moved |= progressSocket(k);
  return moved;
}

// Up to `want` bytes for `to`: what an earlier read fetched ahead first,
// then the socket. A header read fetches up to 4 KiB (Sock::pre) ahead, so a
// small frame (header and payload) costs one recv instead of two; payload
// reads go from the socket straight to their destination. Returns the bytes
// moved, 0 at EOF, -1 on error (errno).
ssize_t TcpRecvChannel::pull(Sock& s, int fd, char* to, size_t want, bool header) {
  if (s.preOff == s.preLen && header) {
    const ssize_t n = ::recv(fd, s.pre.data(), s.pre.size(), MSG_DONTWAIT);
    if (n <= 0) return n;
    s.preOff = 0;
    s.preLen = static_cast<size_t>(n);
  }
  if (s.preOff < s.preLen) {
    const size_t c = std::min(want, s.preLen - s.preOff);
    std::memcpy(to, s.pre.data() + s.preOff, c);
    s.preOff += c;
    return static_cast<ssize_t>(c);
  }
  return ::recv(fd, to, want, MSG_DONTWAIT);
}

bool TcpRecvChannel::progressSocket(uint32_t k) {
  Sock& s = socks_[k];
  if (peer_.malformed || s.ended) return false;
  const int fd = peer_.dataFds[k];
  bool moved = false;
  // Reads up to `want` bytes to `to` (s.got counts them); false when the
  // socket has nothing more for now, or ended.
  auto read = [&](char* to, size_t want, bool header) {
    for (;;) {
      const ssize_t n = pull(s, fd, to, want, header);
      if (n > 0) {
        moved = true;
        s.drained = false;
        s.got += static_cast<size_t>(n);
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        s.drained = true;
      } else {
        s.ended = true;
        t_.recvSocketEnded(peer_, fd, n == 0 ? "connection closed" : strerror(errno));
      }
      return false;
    }
  };
  for (;;) {
    if (!s.inPayload) {
      if (!s.haveHeader) {
        char* at = reinterpret_cast<char*>(s.header) + s.got;
        if (!read(at, sizeof s.header - s.got, true)) return moved;
        if (s.got < sizeof s.header) continue;
        tcp::FrameHeader h;
        Status st = tcp::parseDataHeader(s.header, sizeof s.header, s.minSeq, slotBytes_, &h);
        if (st.isOk() && h.seq < tail_)
          st = makeError(weftRemoteError, "data frame %llu arrived again after it was used",
                         static_cast<unsigned long long>(h.seq));
        if (!st.isOk()) {
          t_.malformed(peer_, "malformed data from the peer: " + st.message());
          return moved;
        }
        s.seq = h.seq;
        s.minSeq = h.seq + 1;
        s.payload = h.bytes;
        s.got = 0;
        s.haveHeader = true;
      }
      // Its slot still holds an unreleased chunk: wait for release().
      if (s.seq >= tail_ + nslots_) {
        if (!s.paused) {
          s.paused = true;
          t_.wantReadable(fd, false);
        }
        return moved;
      }
      const uint32_t slotIndex = static_cast<uint32_t>(s.seq % nslots_);
      if (claimed_[slotIndex] == s.seq) {
        t_.malformed(peer_, "malformed data from the peer: data frame " + std::to_string(s.seq) +
                                " arrived on two sockets");
        return moved;
      }
      claimed_[slotIndex] = s.seq;
      s.haveHeader = false;
      s.inPayload = true;
      s.dest = nullptr;
      const uint64_t named = s.seq - tail_;
      if (named < landings_.size()) {
        const Landing& l = landings_[named];
        if (l.dst != nullptr && s.payload <= l.capacity) s.dest = l.dst;
      }
      landedAt_[slotIndex] = s.dest;
      if (s.dest == nullptr) s.dest = stageIn(slotIndex);
    }
    if (s.got < s.payload) {
      if (!read(s.dest + s.got, s.payload - s.got, false)) return moved;
      if (s.got < s.payload) continue;
    }
    bytes_[s.seq % nslots_] = s.payload;
    complete_[s.seq % nslots_] = s.seq;
    s.inPayload = false;
    s.got = 0;
  }
}

// ---- transport ----

Status TcpTransport::create(Bootstrap& bootstrap, const TcpOptions& options,
                            const std::vector<bool>& remote, const net::SockAddr& listenAt,
                            std::unique_ptr<TcpTransport>* out) {
  const int rank = bootstrap.rank();
  const int nranks = bootstrap.nranks();
  if (options.slotBytes > (size_t{1} << 30))
    return makeError(weftInvalidArgument,
                     "the chunk size (WEFT_SHM_SLOT_BYTES) is %zu bytes; the TCP transport "
                     "takes at most 1G",
                     options.slotBytes);
  std::unique_ptr<TcpTransport> t(new TcpTransport());
  t->rank_ = rank;
  t->nranks_ = nranks;
  t->peers_.resize(nranks);

  // Step 1: listen, and tell everyone where.
  struct Addr {
    uint32_t len;
    uint8_t bytes[28];
  };
  std::vector<Addr> addrs(nranks);
  net::SockAddr at = listenAt;
  at.setPort(0);
  Status st = net::listenOn(at, &t->listener_, &t->listenAddr_);
  if (st.isOk()) {
    addrs[rank].len = t->listenAddr_.len;
    std::memcpy(addrs[rank].bytes, &t->listenAddr_.storage,
                std::min<size_t>(t->listenAddr_.len, sizeof addrs[rank].bytes));
  }
  WEFT_RETURN_IF_ERROR(bootstrap.agree(st, "listen for TCP connections"));
  WEFT_RETURN_IF_ERROR(bootstrap.allGather(addrs.data(), sizeof(Addr)));

  const uint64_t token = tcp::connectionToken(bootstrap.secret());
  int expected = 0;
  for (int p = 0; p < nranks; ++p) {
    if (p == rank || !remote[p]) continue;
    t->peers_[p].rank = p;
    t->peers_[p].dataFds.assign(options.nsocks, -1);
    // Its control socket, and its data sockets if it is the lower rank.
    expected += 1 + (p < rank ? static_cast<int>(options.nsocks) : 0);
  }

  // Step 2: open our outgoing sockets (the peer's kernel queues them until
  // its accept loop below takes them): a control socket to every peer, and
  // the data sockets to every higher rank.
  const auto deadline = net::Clock::now() + std::chrono::milliseconds(bootstrapTimeoutMs());
  st = Status::ok();
  for (int p = 0; p < nranks && st.isOk(); ++p) {
    TcpPeer& peer = t->peers_[p];
    if (peer.rank < 0) continue;
    const net::SockAddr to = addrFrom(addrs[p].bytes, addrs[p].len);
    for (uint32_t k = p > rank ? 0 : options.nsocks; k <= options.nsocks && st.isOk(); ++k) {
      net::Socket s;
      st = net::connectWithRetry(to, deadline, &s);
      if (!st.isOk()) break;
      tuneSocket(s.fd(), options);
      tcp::Hello h{};
      h.magic = tcp::kHelloMagic;
      h.version = tcp::kWireVersion;
      h.kind = static_cast<uint16_t>(k < options.nsocks ? tcp::ConnKind::kData
                                                        : tcp::ConnKind::kControl);
      h.fromRank = rank;
      h.toRank = p;
      h.socketIndex = k < options.nsocks ? k : 0;
      h.nsocks = options.nsocks;
      h.token = token;
      st = net::sendAll(s, &h, sizeof h, deadline);
      if (!st.isOk()) break;
      const int fd = dup(s.fd());
      if (k < options.nsocks) {
        peer.dataFds[k] = fd;
      } else {
        peer.ctrlOut = fd;
      }
    }
  }

  // Step 3: accept the peers' sockets. Anything that does not present a
  // valid hello is dropped and logged; it does not fail the set-up.
  struct Pending {
    int fd;
    net::Clock::time_point until;
    unsigned char buf[sizeof(tcp::Hello)] = {};
    size_t got = 0;
  };
  std::vector<Pending> pending;
  const tcp::HelloExpect expect{rank, nranks, options.nsocks, token};
  int accepted = 0;
  while (st.isOk() && accepted < expected) {
    const auto now = net::Clock::now();
    if (now >= deadline) {
      st = makeError(weftTimeout,
                     "rank %d: only %d of %d TCP connections from peers arrived within %lld ms",
                     rank, accepted, expected, static_cast<long long>(bootstrapTimeoutMs()));
      break;
    }
    std::vector<pollfd> fds;
    fds.push_back({t->listener_.fd(), POLLIN, 0});
    for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) {
      st = makeError(weftSystemError, "poll: %s", strerror(errno));
      break;
    }
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(t->listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Pending p;
        p.fd = fd;
        p.until = now + std::chrono::milliseconds(kHelloTimeoutMs);
        pending.push_back(p);
      }
    }
    for (size_t i = 0; i < pending.size();) {
      Pending& p = pending[i];
      const ssize_t n = ::recv(p.fd, p.buf + p.got, sizeof p.buf - p.got, MSG_DONTWAIT);
      bool drop = false;
      std::string why;
      if (n > 0) p.got += static_cast<size_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop = true;
        why = "closed before its hello was complete";
      } else if (p.got < sizeof p.buf && net::Clock::now() > p.until) {
        drop = true;
        why = "sent no complete hello in time";
      } else if (p.got == sizeof p.buf) {
        tcp::Hello h;
        Status hs = tcp::parseHello(p.buf, p.got, expect, &h);
        if (hs.code() == weftInvalidUsage) {
          st = hs;  // a real peer configured differently: fail, do not wait
          ::close(p.fd);
          pending.erase(pending.begin() + i);
          break;
        }
        TcpPeer* peer = hs.isOk() ? &t->peers_[h.fromRank] : nullptr;
        if (hs.isOk() && peer->rank < 0)
          hs = makeError(weftRemoteError, "rank %d is not reached over TCP", h.fromRank);
        const bool data = h.kind == static_cast<uint16_t>(tcp::ConnKind::kData);
        if (hs.isOk() && data && h.fromRank > rank)
          hs = makeError(weftRemoteError,
                         "rank %d opened a data socket, but the lower rank of a pair opens them",
                         h.fromRank);
        int* slot = nullptr;
        if (hs.isOk()) slot = data ? &peer->dataFds[h.socketIndex] : &peer->ctrlIn;
        if (hs.isOk() && *slot >= 0)
          hs = makeError(weftRemoteError, "a second connection for the same socket of rank %d",
                         h.fromRank);
        if (hs.isOk()) {
          *slot = p.fd;
          tuneSocket(p.fd, options);
          ++accepted;
          pending.erase(pending.begin() + i);
          continue;
        }
        drop = true;
        why = hs.message();
      }
      if (drop) {
        WEFT_WARN(kLogNet, "rank %d: dropped a TCP connection: %s", rank, why.c_str());
        ::close(p.fd);
        pending.erase(pending.begin() + i);
        continue;
      }
      ++i;
    }
  }
  for (const Pending& p : pending) ::close(p.fd);
  WEFT_RETURN_IF_ERROR(bootstrap.agree(st, "set up its TCP connections"));

  // Step 4: channels and the epoll set.
  t->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (t->epfd_ < 0) return makeError(weftSystemError, "epoll_create1: %s", strerror(errno));
  auto watch = [&](int fd, uint32_t events, int kind, int peer, uint32_t index) {
    setNonBlocking(fd);
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = t->fdRefs_.size();
    if (static_cast<size_t>(fd) >= t->refOfFd_.size()) {
      t->refOfFd_.resize(fd + 1);
      t->interest_.resize(fd + 1);
    }
    t->refOfFd_[fd] = t->fdRefs_.size();
    t->interest_[fd] = events;
    t->fdRefs_.push_back({kind, peer, index});
    epoll_ctl(t->epfd_, EPOLL_CTL_ADD, fd, &ev);
  };
  setNonBlocking(t->listener_.fd());
  watch(t->listener_.fd(), EPOLLIN, kListenerRef, -1, 0);
  t->send_.resize(nranks);
  t->recv_.resize(nranks);
  for (int p = 0; p < nranks; ++p) {
    TcpPeer& peer = t->peers_[p];
    if (peer.rank < 0) continue;
    // Readable while the receive channel has free slots; writable is asked
    // for only while a send is blocked.
    for (uint32_t k = 0; k < options.nsocks; ++k) watch(peer.dataFds[k], EPOLLIN, kDataRef, p, k);
    watch(peer.ctrlIn, EPOLLIN | EPOLLRDHUP, kCtrlInRef, p, 0);
    watch(peer.ctrlOut, 0, kCtrlOutRef, p, 0);
    t->send_[p] = std::make_unique<TcpSendChannel>(*t, peer, options);
    t->recv_[p] = std::make_unique<TcpRecvChannel>(*t, peer, options);
    if (!t->send_[p]->ok() || !t->recv_[p]->ok())
      st = makeError(weftSystemError, "cannot allocate %u TCP slots of %zu bytes for rank %d",
                     options.slots, options.slotBytes, p);
    t->sendList_.push_back(t->send_[p].get());
  }
  WEFT_RETURN_IF_ERROR(bootstrap.agree(st, "allocate its TCP buffers"));
  WEFT_INFO(kLogNet,
            "tcp transport: listening on %s, %zu peers, %u sockets per peer, %u slots of %zu KiB",
            t->listenAddr_.toString().c_str(), t->sendList_.size(), options.nsocks, options.slots,
            options.slotBytes >> 10);
  *out = std::move(t);
  return Status::ok();
}

TcpTransport::~TcpTransport() {
  send_.clear();
  recv_.clear();
  for (TcpPeer& p : peers_) {
    for (int fd : p.dataFds) {
      if (fd < 0) continue;
      // Closing a socket with unread bytes resets the connection, and a
      // reset discards what this rank sent that the peer has not read yet:
      // read what is left first, so the peer gets a normal end of stream.
      char sink[4096];
      while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
      ::close(fd);
    }
    if (p.ctrlIn >= 0) ::close(p.ctrlIn);
    if (p.ctrlOut >= 0) ::close(p.ctrlOut);
  }
  if (epfd_ >= 0) ::close(epfd_);
}

void TcpTransport::wantReadable(int fd, bool on) {
  setInterestBit(fd, EPOLLIN, on);
}

void TcpTransport::wantWritable(int fd, bool on) {
  setInterestBit(fd, EPOLLOUT, on);
}

void TcpTransport::setInterestBit(int fd, uint32_t bit, bool on) {
  if (fd < 0 || static_cast<size_t>(fd) >= refOfFd_.size()) return;
  const uint32_t events = on ? interest_[fd] | bit : interest_[fd] & ~bit;
  if (events == interest_[fd]) return;
  interest_[fd] = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = refOfFd_[fd];
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
}

void TcpTransport::noteDead(TcpPeer& peer) {
  if (!peer.dead()) return;
  anyDead_.store(true, std::memory_order_release);
  WEFT_INFO(kLogNet, "rank %d: rank %d is gone: %s", rank_, peer.rank, peer.why.c_str());
  unwatch(peer, true, true);
}

void TcpTransport::unwatch(TcpPeer& peer, bool data, bool control) {
  // Ended sockets stay readable (EOF) forever: take them out of the epoll
  // set, or every wait would return at once.
  if (data) {
    for (int fd : peer.dataFds) epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  }
  if (control) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, peer.ctrlIn, nullptr);
    epoll_ctl(epfd_, EPOLL_CTL_DEL, peer.ctrlOut, nullptr);
  }
}

void TcpTransport::dataEnded(TcpPeer& peer, const std::string& why) {
  if (peer.dataEof) return;
  peer.dataEof = true;
  if (peer.why.empty()) peer.why = why;
  unwatch(peer, true, false);
  readControl(peer);  // a normal leaver's kClose is already there
}

void TcpTransport::recvSocketEnded(TcpPeer& peer, int fd, const std::string& why) {
  // A peer that finished closes its sockets while this rank may still read
  // what it sent on its other sockets: only the control socket says whether
  // it left normally.
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  if (peer.why.empty()) peer.why = why;
  readControl(peer);
}

void TcpTransport::malformed(TcpPeer& peer, const std::string& why) {
  if (peer.malformed) return;
  peer.malformed = true;
  peer.why = why;
  WEFT_WARN(kLogNet, "rank %d: rank %d broke the protocol: %s", rank_, peer.rank, why.c_str());
  noteDead(peer);
}

bool TcpTransport::pendingSends() const {
  for (const TcpSendChannel* s : sendList_)
    if (s->pending()) return true;
  return false;
}

bool TcpTransport::progress() {
  bool moved = false;
  for (TcpSendChannel* s : sendList_)
    if (s->pending()) moved |= s->progress();
  epoll_event events[64];
  const int n = epoll_wait(epfd_, events, 64, 0);
  if (n > 0) {
    handleEvents(events, n);
    moved = true;
  }
  return moved;
}

void TcpTransport::wait(long ns) {
  for (TcpSendChannel* s : sendList_)
    if (s->pending()) s->progress();
  epoll_event events[64];
  const timespec ts{0, ns};
  const int n = epoll_pwait2(epfd_, events, 64, &ts, nullptr);
  if (n > 0) handleEvents(events, n);
}

void TcpTransport::handleEvents(const epoll_event* events, int n) {
  for (int i = 0; i < n; ++i) {
    const FdRef& r = fdRefs_[events[i].data.u64];
    if (r.kind == kListenerRef) {
      // The set-up is over: a late connection is not one of ours.
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        WEFT_WARN(kLogNet, "rank %d: dropped a TCP connection that arrived after set-up", rank_);
        ::close(fd);
      }
      continue;
    }
    TcpPeer& peer = peers_[r.peer];
    const uint32_t ev = events[i].events;
    if (r.kind == kDataRef) {
      // A full receive FIFO takes the socket out of the readable set; it is
      // read again once the algorithm releases a slot.
      const bool failed = (ev & (EPOLLERR | EPOLLHUP)) != 0;
      if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) recv_[r.peer]->progressSocket(r.index);
      if (ev & EPOLLOUT) send_[r.peer]->progress();
      // An error the read could not take (its slots are full) ends the
      // peer's data sockets, or epoll would report it on every wait.
      if (failed && !recv_[r.peer]->socketEnded(r.index)) dataEnded(peer, "connection reset");
    } else if (r.kind == kCtrlInRef) {
      readControl(peer);
    } else if (ev & (EPOLLERR | EPOLLHUP)) {
      readControl(peer);  // our control socket to it failed
    }
  }
}

void TcpTransport::readControl(TcpPeer& peer) {
  for (;;) {
    const ssize_t n = ::recv(peer.ctrlIn, peer.ctrlBuf + peer.ctrlGot,
                             sizeof peer.ctrlBuf - peer.ctrlGot, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (!peer.ctrlEof) {
        peer.ctrlEof = true;
        if (peer.why.empty() || !peer.closed)
          peer.why = n == 0 ? "it closed its connections without saying goodbye (did it crash?)"
                            : std::string("connection error: ") + strerror(errno);
        unwatch(peer, false, true);
        noteDead(peer);
      }
      return;
    }
    peer.ctrlGot += static_cast<size_t>(n);
    if (peer.ctrlGot < sizeof peer.ctrlBuf) continue;
    peer.ctrlGot = 0;
    tcp::FrameHeader h;
    Status st = tcp::parseControlHeader(peer.ctrlBuf, sizeof peer.ctrlBuf, nranks_, &h);
    if (!st.isOk()) {
      malformed(peer, "malformed control message: " + st.message());
      return;
    }
    if (h.type == static_cast<uint16_t>(tcp::FrameType::kAbort)) {
      int expected = 0;
      if (abortedBy_.compare_exchange_strong(expected, static_cast<int>(h.seq & 0xffffffffu)))
        abortCode_.store(static_cast<int>(h.seq >> 32), std::memory_order_release);
    } else {
      peer.closed = true;
    }
  }
}

void TcpTransport::sendControl(tcp::FrameType type, uint64_t seq) {
  tcp::FrameHeader h{};
  h.magic = tcp::kFrameMagic;
  h.version = tcp::kWireVersion;
  h.type = static_cast<uint16_t>(type);
  h.seq = seq;
  for (const TcpPeer& p : peers_) {
    if (p.rank < 0 || p.ctrlOut < 0) continue;
    // The control socket carries a few frames ever: its buffer has room.
    (void)::send(p.ctrlOut, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void TcpTransport::clearLandings() {
  for (auto& ch : recv_)
    if (ch) ch->clearLandings();
}

void TcpTransport::poison(int byRank, weftResult_t why) {
  std::lock_guard<std::mutex> lock(controlMu_);
  int expected = 0;
  if (abortedBy_.compare_exchange_strong(expected, byRank + 1))
    abortCode_.store(why, std::memory_order_release);
  sendControl(tcp::FrameType::kAbort,
              (static_cast<uint64_t>(why) << 32) | (static_cast<uint64_t>(byRank) + 1));
}

void TcpTransport::markClosed() {
  std::lock_guard<std::mutex> lock(controlMu_);
  if (closedSent_) return;
  closedSent_ = true;
  sendControl(tcp::FrameType::kClose, 0);
}

TcpPeerState TcpTransport::peerState(int peer, std::string* why) const {
  const TcpPeer& p = peers_[peer];
  if (why != nullptr) *why = p.why;
  if (p.rank < 0) return TcpPeerState::kAlive;
  if (p.dead()) return TcpPeerState::kDead;
  if (p.closed) return TcpPeerState::kClosed;
  return TcpPeerState::kAlive;
}

}  // namespace weft
