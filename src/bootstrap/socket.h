// Thin TCP socket helpers for the bootstrap: addresses, listen, connect with
// retry, and whole-buffer send/receive bounded by a deadline.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

#include "base/status.h"

namespace weft::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  std::string toString() const;  // "1.2.3.4:5" or "[::1]:5"
  int family() const { return storage.ss_family; }
  int port() const;
  void setPort(int port);
};

// Parses "host:port" or "[v6addr]:port"; host may be a name.
Status parseHostPort(const std::string& text, SockAddr* out);
// The address this host advertises for its listeners when nothing else
// says: the interface WEFT_SOCKET_IFNAME/WEFT_SOCKET_FAMILY pick if set, else
// WEFT_BOOTSTRAP_ADDR's host if set, else the first non-loopback IPv4
// interface that is up, else 127.0.0.1.
SockAddr defaultLocalAddress();

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// Listens on `addr` (port 0 picks one); `bound` receives the actual address.
Status listenOn(const SockAddr& addr, Socket* out, SockAddr* bound);
// Accepts one connection, waiting at most until `deadline`.
Status acceptOne(const Socket& listener, Deadline deadline, Socket* out);
// Connects, retrying refused/unreachable attempts until `deadline`.
Status connectWithRetry(const SockAddr& addr, Deadline deadline, Socket* out);
Status sendAll(const Socket& s, const void* data, size_t bytes, Deadline deadline);
Status recvAll(const Socket& s, void* data, size_t bytes, Deadline deadline);
// The local address of a connected socket (the interface that reaches the peer).
SockAddr localAddressOf(const Socket& s);

}  // namespace weft::net
