#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/env.h"
#include "bootstrap/ifname.h"

namespace weft::net {
namespace {

int remainingMs(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on fd; false on timeout.
bool waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remainingMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
              sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(int port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

Status parseHostPort(const std::string& text, SockAddr* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return makeError(weftInvalidArgument, "address '%s' is not [ipv6]:port", text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
      return makeError(weftInvalidArgument, "address '%s' is not host:port", text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return makeError(weftInvalidArgument, "cannot resolve address '%s': %s", text.c_str(),
                     gai_strerror(rc));
  std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::ok();
}

SockAddr defaultLocalAddress() {
  SockAddr addr;
  bool chosen = false;
  if (addressFromSocketEnv(&addr, &chosen).isOk() && chosen) return addr;
  if (auto configured = envString("BOOTSTRAP_ADDR")) {
    if (parseHostPort(*configured + (configured->find(':') == std::string::npos ? ":0" : ""), &addr)
            .isOk())
      return addr;
  }
  // IPv4 interfaces that are up, loopback only where there is nothing else.
  const std::vector<IfaceAddr> found = findInterfaces(nullptr, AF_INET);
  if (const IfaceAddr* pick = preferredInterface(found)) return pick->addr;
  auto* in = reinterpret_cast<sockaddr_in*>(&addr.storage);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.len = sizeof(sockaddr_in);
  return addr;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  close();
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status listenOn(const SockAddr& addr, Socket* out, SockAddr* bound) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return makeError(weftSystemError, "socket(): %s", strerror(errno));
  const int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0)
    return makeError(weftSystemError, "cannot listen on %s: %s", addr.toString().c_str(),
                     strerror(errno));
  if (::listen(s.fd(), 1024) != 0)
    return makeError(weftSystemError, "listen on %s: %s", addr.toString().c_str(), strerror(errno));
  if (bound != nullptr) {
    bound->len = sizeof bound->storage;
    getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->len);
  }
  *out = std::move(s);
  return Status::ok();
}

Status acceptOne(const Socket& listener, Deadline deadline, Socket* out) {
  for (;;) {
    if (!waitFor(listener.fd(), POLLIN, deadline))
      return makeError(weftTimeout, "timed out waiting for a connection");
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      *out = Socket(fd);
      return Status::ok();
    }
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
      return makeError(weftSystemError, "accept: %s", strerror(errno));
  }
}

Status connectWithRetry(const SockAddr& addr, Deadline deadline, Socket* out) {
  int lastErr = 0;
  for (;;) {
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return makeError(weftSystemError, "socket(): %s", strerror(errno));
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0) {
      const int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      *out = std::move(s);
      return Status::ok();
    }
    lastErr = errno;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return makeError(weftSystemError, "could not connect to %s: %s", addr.toString().c_str(),
                   strerror(lastErr));
}

Status sendAll(const Socket& s, const void* data, size_t bytes, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(s.fd(), p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(s.fd(), POLLOUT, deadline))
        return makeError(weftTimeout, "timed out sending to a peer");
      continue;
    }
    return makeError(weftRemoteError, "connection to a peer broke while sending: %s",
                     strerror(errno));
  }
  return Status::ok();
}

Status recvAll(const Socket& s, void* data, size_t bytes, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    if (!waitFor(s.fd(), POLLIN, deadline))
      return makeError(weftTimeout, "timed out waiting for a peer's message");
    const ssize_t n = ::recv(s.fd(), p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    return makeError(weftRemoteError, "a peer closed its connection (did it exit or crash?)%s%s",
                     n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
  }
  return Status::ok();
}

SockAddr localAddressOf(const Socket& s) {
  SockAddr a;
  a.len = sizeof a.storage;
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a.storage), &a.len);
  return a;
}

}  // namespace weft::net
