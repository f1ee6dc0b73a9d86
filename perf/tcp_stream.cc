// tcp_stream: raw TCP throughput with the buffers a collective has, as a
// reference for weft's sendrecv at one message size. iperf3 resends one
// buffer of at most 1 MiB that stays in cache; a 64 MiB sendrecv reads its
// send buffer from memory and writes its receive buffer to memory. This tool
// sends a SIZE-byte buffer over S sockets (socket i carries the i-th part)
// and receives into a SIZE-byte buffer the same way, again and again, from
// one thread over non-blocking sockets, in both directions of each socket
// at once, as a weft rank of a 2-rank sendrecv does.
//
//   tcp_stream listen ADDR PORT [--streams S] [--size BYTES] [--io BYTES]
//                               [--cc NAME]
//   tcp_stream connect ADDR PORT [--streams S] [--size BYTES] [--io BYTES]
//                                [--seconds T] [--cc NAME]
//
// --io is the most one send or receive call moves (1M by default, as
// iperf3's -l 1M in perf/netns-bench.sh); each call drains a socket until
// the kernel would block, so it bounds a call, not a pass.
//
// Each side prints the GB/s (1e9 bytes/s) it received, from its first byte
// to the other side's end of stream: the connecting side sends for T
// seconds, the listening side until the other's stream ends. The connecting
// side retries for a few seconds (the listener may not be up yet). Exit
// status 1 with a message on any socket error; TCP_CONGESTION set after
// connecting applies (nothing has been sent yet beyond the handshake).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tcp_stream: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

size_t parseSize(const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1 << 10;
  if (*end == 'M' || *end == 'm') scale = 1 << 20;
  if (*end == 'G' || *end == 'g') scale = 1 << 30;
  if (end == text || v <= 0 || (*end && end[1])) {
    std::fprintf(stderr, "tcp_stream: '%s' is not a size such as 64M\n", text);
    std::exit(2);
  }
  return static_cast<size_t>(v * scale);
}

addrinfo* resolve(const char* addr, const char* port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr, port, &hints, &res) != 0 || res == nullptr) {
    std::fprintf(stderr, "tcp_stream: cannot resolve %s:%s\n", addr, port);
    std::exit(1);
  }
  return res;
}

void setNonBlocking(int fd) {
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) die("fcntl");
}

// Socket i of s carries bytes [i*size/s, (i+1)*size/s) of the buffer.
size_t partBegin(size_t size, int i, int s) {
  return size * i / s;
}

// Accepts `streams` connections; each first names its part (one byte: the
// stream index).
std::vector<int> acceptAll(const char* addr, const char* port, int streams) {
  addrinfo* ai = resolve(addr, port, true);
  const int lfd = socket(ai->ai_family, SOCK_STREAM, 0);
  if (lfd < 0) die("socket");
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0) die("bind");
  freeaddrinfo(ai);
  if (listen(lfd, streams) != 0) die("listen");
  std::vector<int> fds(streams, -1);
  for (int i = 0; i < streams; ++i) {
    const int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) die("accept");
    unsigned char index = 0;
    if (recv(fd, &index, 1, MSG_WAITALL) != 1 || index >= streams || fds[index] >= 0)
      die("stream index");
    fds[index] = fd;
  }
  close(lfd);
  return fds;
}

int connectRetrying(const char* addr, const char* port) {
  const auto giveUp = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    addrinfo* ai = resolve(addr, port, false);
    const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    const int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc == 0) return fd;
    close(fd);
    if (Clock::now() > giveUp) die("connect (10 s of retries)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<int> connectAll(const char* addr, const char* port, int streams) {
  std::vector<int> fds(streams);
  for (int i = 0; i < streams; ++i) {
    fds[i] = connectRetrying(addr, port);
    const unsigned char index = static_cast<unsigned char>(i);
    if (::send(fds[i], &index, 1, 0) != 1) die("send (stream index)");
  }
  return fds;
}

// Sends from one SIZE-byte buffer and receives into another over every
// socket at once. The connecting side sends for `seconds` and then ends its
// direction of each socket; the listening side ends its direction of a
// socket when the other's ends. Returns the GB/s received, from the first
// byte received to the other side's end of stream.
double duplex(const std::vector<int>& fds, size_t size, size_t io, double seconds, bool leads) {
  const int streams = static_cast<int>(fds.size());
  std::vector<char> out(size), in(size);
  for (size_t i = 0; i < size; i += 4096) out[i] = static_cast<char>(i >> 12);
  std::vector<size_t> sendAt(streams), recvAt(streams);
  std::vector<bool> sending(streams, true), receiving(streams, true);
  std::vector<pollfd> polls(streams);
  for (int i = 0; i < streams; ++i) {
    setNonBlocking(fds[i]);
    sendAt[i] = recvAt[i] = partBegin(size, i, streams);
    polls[i] = {fds[i], POLLIN | POLLOUT, 0};
  }
  const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
  size_t total = 0;
  int open = streams;
  Clock::time_point first{};
  while (open > 0) {
    if (leads && Clock::now() >= stop) {
      for (int i = 0; i < streams; ++i) {
        if (!sending[i]) continue;
        sending[i] = false;
        if (shutdown(fds[i], SHUT_WR) != 0) die("shutdown");
      }
    }
    for (int i = 0; i < streams; ++i)
      polls[i].events =
          static_cast<short>((receiving[i] ? POLLIN : 0) | (sending[i] ? POLLOUT : 0));
    if (poll(polls.data(), polls.size(), 10000) <= 0) die("poll (no progress for 10 s)");
    for (int i = 0; i < streams; ++i) {
      const short ev = polls[i].revents;
      const size_t end = partBegin(size, i + 1, streams);
      // Each direction moves until the kernel has no more for it.
      while (receiving[i] && (ev & (POLLIN | POLLHUP | POLLERR))) {
        const ssize_t n = recv(fds[i], in.data() + recvAt[i], std::min(io, end - recvAt[i]), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n < 0) die("recv");
        if (n == 0) {
          receiving[i] = false;
          --open;
          if (sending[i]) {
            sending[i] = false;
            if (shutdown(fds[i], SHUT_WR) != 0) die("shutdown");
          }
        } else if (n > 0) {
          if (total == 0) first = Clock::now();
          total += static_cast<size_t>(n);
          recvAt[i] += static_cast<size_t>(n);
          if (recvAt[i] == end) recvAt[i] = partBegin(size, i, streams);
        }
      }
      while (sending[i] && (ev & POLLOUT)) {
        const ssize_t n =
            ::send(fds[i], out.data() + sendAt[i], std::min(io, end - sendAt[i]), MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n < 0) die("send");
        sendAt[i] += static_cast<size_t>(n);
        if (sendAt[i] == end) sendAt[i] = partBegin(size, i, streams);
      }
    }
  }
  for (int fd : fds) close(fd);
  const double s = std::chrono::duration<double>(Clock::now() - first).count();
  return s > 0 ? total / s / 1e9 : 0.0;
}

int usage() {
  std::fprintf(stderr,
               "usage: tcp_stream listen|connect ADDR PORT [--streams S] [--size BYTES]\n"
               "                  [--io BYTES] [--seconds T] [--cc NAME]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  const std::string mode = argv[1];
  int streams = 4;
  size_t size = 64 << 20, io = 1 << 20;
  double seconds = 5;
  const char* cc = nullptr;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (arg == "--streams") {
      streams = std::atoi(v);
    } else if (arg == "--size") {
      size = parseSize(v);
    } else if (arg == "--io") {
      io = parseSize(v);
    } else if (arg == "--seconds") {
      seconds = std::atof(v);
    } else if (arg == "--cc") {
      cc = v;
    } else {
      return usage();
    }
  }
  if (streams < 1 || streams > 64 || size < static_cast<size_t>(streams) || seconds <= 0 ||
      (mode != "listen" && mode != "connect"))
    return usage();
  const bool leads = mode == "connect";
  const std::vector<int> fds =
      leads ? connectAll(argv[2], argv[3], streams) : acceptAll(argv[2], argv[3], streams);
  if (cc && *cc) {
    for (int fd : fds) {
      if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, std::strlen(cc)) != 0)
        die("TCP_CONGESTION");
    }
  }
  std::printf("%.3f\n", duplex(fds, size, io, seconds, leads));
  return 0;
}
