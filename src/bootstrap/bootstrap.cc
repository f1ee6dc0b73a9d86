#include "bootstrap/bootstrap.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "base/env.h"
#include "base/log.h"

namespace weft {
namespace {

constexpr uint32_t kIdMagic = 0x57454654;  // "WEFT"
constexpr uint64_t kHelloMagic = 0x7765667468656c6full;
constexpr uint64_t kTableMagic = 0x7765667474626c65ull;
constexpr uint64_t kStarMagic = 0x7765667473746172ull;
constexpr uint64_t kGatherMagic = 0x7765667467617468ull;

struct UniqueIdLayout {
  uint32_t magic;
  uint32_t addrLen;
  uint64_t secret;
  uint8_t addr[28];
};
static_assert(sizeof(UniqueIdLayout) <= WEFT_UNIQUE_ID_BYTES);
static_assert(sizeof(sockaddr_in6) <= sizeof(PeerInfo::addr));

struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  PeerInfo info;
};

struct StarHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t pad;
};

struct GatherHeader {
  uint64_t magic;
  uint64_t bytes;
};

net::Deadline deadlineIn(int64_t ms) {
  return net::Clock::now() + std::chrono::milliseconds(ms);
}

net::SockAddr toSockAddr(const uint8_t* bytes, uint32_t len) {
  net::SockAddr a;
  std::memcpy(&a.storage, bytes, std::min<size_t>(len, sizeof(PeerInfo::addr)));
  a.len = len;
  return a;
}

// Serves one rendezvous: collects a hello from every rank, answers each
// with the full table.
void serveRoot(net::Socket listener, uint64_t secret) {
  const auto deadline = deadlineIn(bootstrapTimeoutMs());
  std::vector<net::Socket> conns;
  std::vector<PeerInfo> table;
  int nranks = -1, arrived = 0;
  while (nranks < 0 || arrived < nranks) {
    net::Socket s;
    if (!net::acceptOne(listener, deadline, &s).isOk()) {
      WEFT_WARN(kLogBootstrap, "bootstrap root: gave up with %d of %d ranks arrived", arrived,
                nranks);
      return;
    }
    Hello hello{};
    // A short deadline per hello, so a silent connection cannot stall the root.
    const auto helloDeadline = std::min(deadline, deadlineIn(5000));
    if (!net::recvAll(s, &hello, sizeof hello, helloDeadline).isOk() ||
        hello.magic != kHelloMagic || hello.secret != secret) {
      WEFT_WARN(kLogBootstrap, "bootstrap root: dropped a connection without a valid hello");
      continue;
    }
    if (nranks < 0) {
      if (hello.nranks <= 0 || hello.nranks > (1 << 20)) continue;
      nranks = hello.nranks;
      conns.resize(nranks);
      table.resize(nranks);
    }
    if (hello.nranks != nranks || hello.rank < 0 || hello.rank >= nranks ||
        conns[hello.rank].valid()) {
      WEFT_WARN(kLogBootstrap,
                "bootstrap root: dropped rank %d of %d (expected %d ranks, or rank seen twice)",
                hello.rank, hello.nranks, nranks);
      continue;
    }
    table[hello.rank] = hello.info;
    conns[hello.rank] = std::move(s);
    ++arrived;
  }
  for (auto& c : conns) {
    const uint64_t magic = kTableMagic;
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
  // FNV-1a: stable across processes and builds.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

Status encodeUniqueId(const net::SockAddr& root, uint64_t secret, weftUniqueId* id) {
  UniqueIdLayout layout{};
  layout.magic = kIdMagic;
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
  if (layout.magic != kIdMagic || layout.addrLen == 0 || layout.addrLen > sizeof layout.addr)
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

  // Listen on the interface that reaches the root: peers will reach us there.
  net::SockAddr local = net::localAddressOf(toRootService);
  local.setPort(0);
  net::Socket listener;
  net::SockAddr bound;
  WEFT_RETURN_IF_ERROR(net::listenOn(local, &listener, &bound));

  Hello hello{};
  hello.magic = kHelloMagic;
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
  if (!st.isOk() || magic != kTableMagic)
    return makeError(st.isOk() ? weftRemoteError : st.code(),
                     "rank %d: the bootstrap root at %s did not send the rank table (%s). Do all "
                     "ranks agree on the number of ranks (%d here), and is each rank used once?",
                     rank, root.toString().c_str(), st.isOk() ? "bad reply" : st.message().c_str(),
                     nranks);
  b->peers_.resize(nranks);
  WEFT_RETURN_IF_ERROR(
      net::recvAll(toRootService, b->peers_.data(), nranks * sizeof(PeerInfo), deadline));
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
    StarHello hello{kStarMagic, secret_, rank_, 0};
    return net::sendAll(toRoot_, &hello, sizeof hello, deadline);
  }
  ranks_.resize(nranks_);
  int connected = 1;
  while (connected < nranks_) {
    net::Socket s;
    Status st = net::acceptOne(listener, deadline, &s);
    if (!st.isOk())
      return makeError(weftTimeout, "rank 0: only %d of %d ranks connected to the bootstrap",
                       connected, nranks_);
    StarHello hello{};
    if (!net::recvAll(s, &hello, sizeof hello, std::min(deadline, deadlineIn(5000))).isOk() ||
        hello.magic != kStarMagic || hello.secret != secret_ || hello.rank <= 0 ||
        hello.rank >= nranks_ || ranks_[hello.rank].valid()) {
      WEFT_WARN(kLogBootstrap, "rank 0: dropped a bootstrap connection without a valid hello");
      continue;
    }
    ranks_[hello.rank] = std::move(s);
    ++connected;
  }
  return Status::ok();
}

Status Bootstrap::allGather(void* data, size_t bytes) {
  if (nranks_ == 1) return Status::ok();
  char* base = static_cast<char*>(data);
  const auto deadline = deadlineIn(bootstrapTimeoutMs());
  const GatherHeader header{kGatherMagic, bytes};
  if (rank_ != 0) {
    WEFT_RETURN_IF_ERROR(net::sendAll(toRoot_, &header, sizeof header, deadline));
    WEFT_RETURN_IF_ERROR(net::sendAll(toRoot_, base + rank_ * bytes, bytes, deadline));
    return net::recvAll(toRoot_, base, bytes * nranks_, deadline);
  }
  for (int r = 1; r < nranks_; ++r) {
    GatherHeader got{};
    WEFT_RETURN_IF_ERROR(net::recvAll(ranks_[r], &got, sizeof got, deadline));
    if (got.magic != kGatherMagic || got.bytes != bytes)
      return makeError(weftInvalidUsage,
                       "bootstrap allgather: rank %d sent %llu bytes where %zu were expected "
                       "(ranks are setting up different things)",
                       r, static_cast<unsigned long long>(got.bytes), bytes);
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

Status Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  return allGather(dummy.data(), 1);
}

}  // namespace weft
