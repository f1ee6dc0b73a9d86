#include "bootstrap/bootstrap.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "bootstrap/ifname.h"
#include "bootstrap/wire.h"

namespace weft {
namespace {

using wire::GatherHeader;
using wire::Hello;
using wire::StarHello;
using wire::UniqueIdLayout;

// How long a connection may take to send its first message. Connections are
// read concurrently, so a silent one delays no one; this only bounds how
// long it holds a file descriptor.
constexpr int64_t kHelloWaitMs = 5000;
constexpr size_t kMaxPending = 256;  // unauthenticated connections held at once

net::Deadline deadlineIn(int64_t ms) {
  return net::Clock::now() + std::chrono::milliseconds(ms);
}

net::SockAddr toSockAddr(const uint8_t* bytes, uint32_t len) {
  net::SockAddr a;
  std::memcpy(&a.storage, bytes, std::min<size_t>(len, sizeof(PeerInfo::addr)));
  a.len = len;
  return a;
}

// Accepts connections to `listener` and reads a `msgBytes` first message
// from each, all at once with poll, so that garbage, a truncated message or a
// silent stranger neither blocks nor disturbs the ranks arriving meanwhile.
// take(socket, message) checks the message and keeps the socket (true) or
// refuses it (false: the connection is closed and logged). Returns when
// done() or at the deadline (false).
bool collectHellos(const net::Socket& listener, net::Deadline deadline, size_t msgBytes,
                   const char* who, const std::function<bool(net::Socket&, const char*)>& take,
                   const std::function<bool()>& done) {
  struct Pending {
    net::Socket sock;
    net::Deadline until;
    std::vector<char> buf;
    size_t got = 0;
  };
  std::vector<Pending> pending;
  auto drop = [&](size_t i, const char* why) {
    WEFT_WARN(kLogBootstrap, "%s: dropped a connection: %s", who, why);
    pending.erase(pending.begin() + static_cast<long>(i));
  };
  while (!done()) {
    const auto now = net::Clock::now();
    if (now >= deadline) return false;
    for (size_t i = pending.size(); i-- > 0;)
      if (now >= pending[i].until) drop(i, "no complete hello in time");
    std::vector<pollfd> fds;
    fds.push_back({listener.fd(), POLLIN, 0});
    auto wake = deadline;
    for (const Pending& p : pending) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      wake = std::min(wake, p.until);
    }
    const auto waitMs = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    const int rc =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(waitMs, 0, 1000) + 1));
    if (rc < 0 && errno != EINTR) return false;
    if (rc <= 0) continue;
    // Read from pending connections first (indices shift as they are removed).
    for (size_t i = fds.size() - 1; i >= 1; --i) {
      if (fds[i].revents == 0) continue;
      Pending& p = pending[i - 1];
      const ssize_t n = ::recv(p.sock.fd(), p.buf.data() + p.got, msgBytes - p.got, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) {
        drop(i - 1, "closed before a complete hello");
        continue;
      }
      p.got += static_cast<size_t>(n);
      if (p.got < msgBytes) continue;
      net::Socket sock = std::move(p.sock);
      std::vector<char> msg = std::move(p.buf);
      pending.erase(pending.begin() + static_cast<long>(i - 1));
      (void)take(sock, msg.data());
    }
    if (fds[0].revents != 0) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pending.size() >= kMaxPending) drop(0, "too many unauthenticated connections");
        pending.push_back({net::Socket(fd), std::min(deadline, deadlineIn(kHelloWaitMs)),
                           std::vector<char>(msgBytes), 0});
      }
    }
  }
  return true;
}

// Serves one rendezvous: collects a hello from every rank, answers each
// with the full table.
void serveRoot(net::Socket listener, uint64_t secret) {
  const auto deadline = deadlineIn(bootstrapTimeoutMs());
  std::vector<net::Socket> conns;
  std::vector<PeerInfo> table;
  int nranks = -1, arrived = 0;
  const bool complete = collectHellos(
      listener, deadline, sizeof(Hello), "bootstrap root",
      [&](net::Socket& s, const char* msg) {
        Hello hello{};
        Status st = wire::decodeHello(msg, sizeof hello, secret, &hello);
        if (!st.isOk()) {
          WEFT_WARN(kLogBootstrap, "bootstrap root: dropped a connection: %s",
                    st.message().c_str());
          return false;
        }
        if (nranks < 0) {
          nranks = hello.nranks;
          conns.resize(nranks);
          table.resize(nranks);
        }
        if (hello.nranks != nranks || conns[hello.rank].valid()) {
          WEFT_WARN(kLogBootstrap,
                    "bootstrap root: dropped rank %d of %d (expected %d ranks, or rank seen twice)",
                    hello.rank, hello.nranks, nranks);
          return false;
        }
        table[hello.rank] = hello.info;
        conns[hello.rank] = std::move(s);
        ++arrived;
        return true;
      },
      [&] { return nranks > 0 && arrived == nranks; });
  if (!complete) {
    WEFT_WARN(kLogBootstrap, "bootstrap root: gave up with %d of %d ranks arrived", arrived,
              nranks);
    return;
  }
  for (auto& c : conns) {
    const uint64_t magic = wire::kTableMagic;
    const auto d = deadlineIn(bootstrapTimeoutMs());
    if (!net::sendAll(c, &magic, sizeof magic, d).isOk() ||
        !net::sendAll(c, table.data(), table.size() * sizeof(PeerInfo), d).isOk())
      WEFT_WARN(kLogBootstrap, "bootstrap root: could not send the rank table to a rank");
  }
}

}  // namespace

int64_t bootstrapTimeoutMs() {
  return envInt("BOOTSTRAP_TIMEOUT_MS", 120000);
}

uint64_t randomU64() {
  uint64_t v = 0;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, &v, sizeof v);
    ::close(fd);
    if (n == sizeof v) return v;
  }
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
}

uint64_t localHostHash() {
  std::string id;
  if (auto configured = envString("HOSTID")) {
    id = *configured;
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    id = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    std::getline(boot, bootId);
    id += "|" + bootId;
    char ns[128] = {};
    if (readlink("/proc/self/ns/net", ns, sizeof ns - 1) > 0) id += std::string("|") + ns;
  }
  return fnv1a(id);
}

Status encodeUniqueId(const net::SockAddr& root, uint64_t secret, weftUniqueId* id) {
  UniqueIdLayout layout{};
  layout.magic = wire::kIdMagic;
  layout.addrLen = root.len;
  layout.secret = secret;
  std::memcpy(layout.addr, &root.storage, std::min<size_t>(root.len, sizeof layout.addr));
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, &layout, sizeof layout);
  return Status::ok();
}

Status decodeUniqueId(const weftUniqueId& id, net::SockAddr* root, uint64_t* secret) {
  UniqueIdLayout layout;
  std::memcpy(&layout, id.internal, sizeof layout);
  if (layout.magic != wire::kIdMagic || !wire::validAddress(layout.addr, layout.addrLen))
    return makeError(weftInvalidArgument,
                     "the unique id is not one weftGetUniqueId made (was it broadcast to every "
                     "rank intact?)");
  *root = toSockAddr(layout.addr, layout.addrLen);
  *secret = layout.secret;
  return Status::ok();
}

Status startBootstrapRoot(const net::SockAddr& addr, uint64_t secret, net::SockAddr* bound) {
  net::Socket listener;
  WEFT_RETURN_IF_ERROR(net::listenOn(addr, &listener, bound));
  std::thread(serveRoot, std::move(listener), secret).detach();
  return Status::ok();
}

Status Bootstrap::create(const net::SockAddr& root, uint64_t secret, int rank, int nranks,
                         std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->secret_ = secret;
  const auto deadline = deadlineIn(bootstrapTimeoutMs());

  net::Socket toRootService;
  Status st = net::connectWithRetry(root, deadline, &toRootService);
  if (!st.isOk())
    return makeError(weftSystemError,
                     "rank %d could not reach the bootstrap root at %s within %lld ms (%s). Is "
                     "rank 0 running, and is that address reachable from here? "
                     "(WEFT_BOOTSTRAP_TIMEOUT_MS sets the wait)",
                     rank, root.toString().c_str(), static_cast<long long>(bootstrapTimeoutMs()),
                     st.message().c_str());

  // Listen on the interface WEFT_SOCKET_IFNAME/FAMILY choose, else on the one
  // that reaches the root: peers will reach us there.
  net::SockAddr local = net::localAddressOf(toRootService);
  bool chosen = false;
  WEFT_RETURN_IF_ERROR(net::addressFromSocketEnv(&local, &chosen));
  local.setPort(0);
  net::Socket listener;
  net::SockAddr bound;
  WEFT_RETURN_IF_ERROR(net::listenOn(local, &listener, &bound));

  Hello hello{};
  hello.magic = wire::kHelloMagic;
  hello.secret = secret;
  hello.rank = rank;
  hello.nranks = nranks;
  hello.info.rank = rank;
  hello.info.pid = getpid();
  hello.info.hostHash = localHostHash();
  hello.info.addrLen = bound.len;
  std::memcpy(hello.info.addr, &bound.storage, std::min<size_t>(bound.len, 28));
  WEFT_RETURN_IF_ERROR(net::sendAll(toRootService, &hello, sizeof hello, deadline));

  uint64_t magic = 0;
  st = net::recvAll(toRootService, &magic, sizeof magic, deadline);
  if (!st.isOk() || magic != wire::kTableMagic)
    return makeError(st.isOk() ? weftRemoteError : st.code(),
                     "rank %d: the bootstrap root at %s did not send the rank table (%s). Do all "
                     "ranks agree on the number of ranks (%d here), and is each rank used once?",
                     rank, root.toString().c_str(), st.isOk() ? "bad reply" : st.message().c_str(),
                     nranks);
  std::vector<char> table(nranks * sizeof(PeerInfo));
  WEFT_RETURN_IF_ERROR(net::recvAll(toRootService, table.data(), table.size(), deadline));
  WEFT_RETURN_IF_ERROR(wire::decodePeerTable(table.data(), table.size(), nranks, &b->peers_));
  WEFT_RETURN_IF_ERROR(b->connectStar(listener));
  b->listener_ = std::move(listener);
  *out = std::move(b);
  return Status::ok();
}

Status Bootstrap::connectStar(const net::Socket& listener) {
  const auto deadline = deadlineIn(bootstrapTimeoutMs());
  if (rank_ != 0) {
    WEFT_RETURN_IF_ERROR(
        net::connectWithRetry(toSockAddr(peers_[0].addr, peers_[0].addrLen), deadline, &toRoot_));
    StarHello hello{wire::kStarMagic, secret_, rank_, 0};
    return net::sendAll(toRoot_, &hello, sizeof hello, deadline);
  }
  ranks_.resize(nranks_);
  int connected = 1;
  const bool complete = collectHellos(
      listener, deadline, sizeof(StarHello), "rank 0 (bootstrap star)",
      [&](net::Socket& s, const char* msg) {
        StarHello hello{};
        Status st = wire::decodeStarHello(msg, sizeof hello, secret_, nranks_, &hello);
        if (!st.isOk() || ranks_[hello.rank].valid()) {
          WEFT_WARN(kLogBootstrap, "rank 0: dropped a bootstrap connection: %s",
                    st.isOk() ? "rank seen twice" : st.message().c_str());
          return false;
        }
        ranks_[hello.rank] = std::move(s);
        ++connected;
        return true;
      },
      [&] { return connected == nranks_; });
  if (!complete)
    return makeError(weftTimeout, "rank 0: only %d of %d ranks connected to the bootstrap",
                     connected, nranks_);
  return Status::ok();
}

Status Bootstrap::allGather(void* data, size_t bytes) {
  if (nranks_ == 1) return Status::ok();
  char* base = static_cast<char*>(data);
  const auto deadline = deadlineIn(bootstrapTimeoutMs());
  const GatherHeader header{wire::kGatherMagic, bytes};
  if (rank_ != 0) {
    WEFT_RETURN_IF_ERROR(net::sendAll(toRoot_, &header, sizeof header, deadline));
    WEFT_RETURN_IF_ERROR(net::sendAll(toRoot_, base + rank_ * bytes, bytes, deadline));
    return net::recvAll(toRoot_, base, bytes * nranks_, deadline);
  }
  for (int r = 1; r < nranks_; ++r) {
    GatherHeader got{};
    WEFT_RETURN_IF_ERROR(net::recvAll(ranks_[r], &got, sizeof got, deadline));
    Status st = wire::decodeGatherHeader(&got, sizeof got, bytes);
    if (!st.isOk())
      return makeError(st.code(), "bootstrap allgather: rank %d %s", r, st.message().c_str());
    WEFT_RETURN_IF_ERROR(net::recvAll(ranks_[r], base + r * bytes, bytes, deadline));
  }
  for (int r = 1; r < nranks_; ++r)
    WEFT_RETURN_IF_ERROR(net::sendAll(ranks_[r], base, bytes * nranks_, deadline));
  return Status::ok();
}

Status Bootstrap::serveRendezvous(uint64_t secret) {
  const int fd = ::fcntl(listener_.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return makeError(weftSystemError, "cannot reuse the bootstrap listener");
  std::thread(serveRoot, net::Socket(fd), secret).detach();
  return Status::ok();
}

net::SockAddr Bootstrap::listenerOf(int rank) const {
  return toSockAddr(peers_[rank].addr, peers_[rank].addrLen);
}

Status Bootstrap::agree(const Status& mine, const char* step) {
  std::vector<int32_t> codes(nranks_);
  codes[rank_] = mine.code();
  WEFT_RETURN_IF_ERROR(allGather(codes.data(), sizeof(int32_t)));
  if (!mine.isOk()) return mine;
  for (int r = 0; r < nranks_; ++r)
    if (codes[r] != weftSuccess)
      return makeError(static_cast<weftResult_t>(codes[r]),
                       "rank %d failed to %s (see that rank's error)", r, step);
  return Status::ok();
}

Status Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  return allGather(dummy.data(), 1);
}

}  // namespace weft
