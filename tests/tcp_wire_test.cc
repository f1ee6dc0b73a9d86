// The parsers of bytes that arrive from outside on TCP: the connection hello
// and the frame headers (transport/tcp/wire.h), and WEFT_SOCKET_IFNAME /
// WEFT_SOCKET_FAMILY (bootstrap/ifname.h). Plus a job that keeps running
// correctly while strangers connect to its TCP listener with garbage.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "bootstrap/ifname.h"
#include "core/comm.h"
#include "harness/multirank.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/wire.h"

namespace weft {
namespace {

using tcp::FrameHeader;
using tcp::Hello;

Hello goodHello() {
  Hello h{};
  h.magic = tcp::kHelloMagic;
  h.version = tcp::kWireVersion;
  h.kind = static_cast<uint16_t>(tcp::ConnKind::kData);
  h.fromRank = 1;
  h.toRank = 0;
  h.socketIndex = 1;
  h.nsocks = 2;
  h.token = tcp::connectionToken(42);
  return h;
}
const tcp::HelloExpect kExpect{0, 4, 2, tcp::connectionToken(42)};

TEST(TcpWire, TokenIsNotTheSecretAndDependsOnIt) {
  EXPECT_NE(tcp::connectionToken(42), 42u);
  EXPECT_NE(tcp::connectionToken(42), tcp::connectionToken(43));
  EXPECT_EQ(tcp::connectionToken(7), tcp::connectionToken(7));
}

TEST(TcpWire, HelloAcceptsAValidOne) {
  Hello h = goodHello(), out{};
  EXPECT_TRUE(tcp::parseHello(&h, sizeof h, kExpect, &out).isOk());
  EXPECT_EQ(out.fromRank, 1);
  h.kind = static_cast<uint16_t>(tcp::ConnKind::kControl);
  EXPECT_TRUE(tcp::parseHello(&h, sizeof h, kExpect, &out).isOk());
}

TEST(TcpWire, HelloRejectsEveryBadField) {
  Hello out{};
  auto rejects = [&](auto mutate, weftResult_t code = weftRemoteError) {
    Hello h = goodHello();
    mutate(h);
    const Status st = tcp::parseHello(&h, sizeof h, kExpect, &out);
    EXPECT_FALSE(st.isOk());
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_FALSE(st.message().empty());
  };
  rejects([](Hello& h) { h.magic ^= 1; });
  rejects([](Hello& h) { h.version = 99; });
  rejects([](Hello& h) { h.token ^= 1; });
  rejects([](Hello& h) { h.toRank = 2; });
  rejects([](Hello& h) { h.fromRank = 0; });  // itself
  rejects([](Hello& h) { h.fromRank = 4; });
  rejects([](Hello& h) { h.fromRank = -1; });
  rejects([](Hello& h) { h.kind = 9; });
  rejects([](Hello& h) { h.socketIndex = 2; });
  rejects([](Hello& h) { h.nsocks = 3; }, weftInvalidUsage);  // a real peer set up differently
  Hello h = goodHello();
  EXPECT_FALSE(tcp::parseHello(&h, sizeof h - 1, kExpect, &out).isOk());  // truncated
  EXPECT_FALSE(tcp::parseHello(&h, 0, kExpect, &out).isOk());
}

FrameHeader dataHeader(uint64_t seq, uint64_t bytes) {
  FrameHeader f{};
  f.magic = tcp::kFrameMagic;
  f.version = tcp::kWireVersion;
  f.type = static_cast<uint16_t>(tcp::FrameType::kData);
  f.seq = seq;
  f.bytes = bytes;
  return f;
}

TEST(TcpWire, DataHeaderChecksSequenceSizeAndMagic) {
  FrameHeader out{};
  FrameHeader f = dataHeader(5, 4096);
  EXPECT_TRUE(tcp::parseDataHeader(&f, sizeof f, 5, 4096, &out).isOk());
  EXPECT_EQ(out.bytes, 4096u);
  EXPECT_TRUE(tcp::parseDataHeader(&f, sizeof f, 2, 4096, &out).isOk());   // later than due: fine
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 6, 4096, &out).isOk());  // earlier than due
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 5, 4095, &out).isOk());  // too big
  f = dataHeader(5, ~0ull);                                                // claims a huge payload
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 5, 1 << 20, &out).isOk());
  f = dataHeader(5, 1);
  f.magic = 0;
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 5, 4096, &out).isOk());
  f = dataHeader(5, 1);
  f.type = static_cast<uint16_t>(tcp::FrameType::kAbort);
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 5, 4096, &out).isOk());
  f = dataHeader(5, 1);
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f - 3, 5, 4096, &out).isOk());
  f = dataHeader(5, 1);
  f.reserved[39] = 1;  // reserved bytes travel as zero
  EXPECT_FALSE(tcp::parseDataHeader(&f, sizeof f, 5, 4096, &out).isOk());
}

// A socket buffer below a segment stalls TCP on its probe timer (a 512 KiB
// sendrecv took 9 ms with 16 KiB buffers and never ended with 4 KiB): such
// a setting is raised to 64 KiB; larger ones and 0 (autotuning) are kept.
TEST(TcpWire, SocketBuffersAreAtLeast64K) {
  auto bufFor = [](const char* value) {
    setenv("WEFT_SOCKET_BUF_BYTES", value, 1);
    const int b = TcpOptions::fromEnv(256 << 10).bufBytes;
    unsetenv("WEFT_SOCKET_BUF_BYTES");
    return b;
  };
  EXPECT_EQ(bufFor("4096"), 64 << 10);
  EXPECT_EQ(bufFor("16K"), 64 << 10);
  EXPECT_EQ(bufFor("1M"), 1 << 20);
  EXPECT_EQ(bufFor("0"), 0);
}

TEST(TcpWire, ControlHeaderChecksTypeAndRank) {
  FrameHeader out{};
  FrameHeader f = dataHeader(3, 0);
  f.type = static_cast<uint16_t>(tcp::FrameType::kAbort);
  const uint64_t timeout = uint64_t(weftTimeout) << 32;  // the reason rides in the high bits
  f.seq = timeout | 3;                                   // rank 2 timed out
  EXPECT_TRUE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.seq = 3;  // no reason
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.seq = (uint64_t(weftNumResults) << 32) | 3;  // no such reason
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.seq = timeout;  // no rank
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.seq = timeout | 5;  // rank 4 of 4
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.type = static_cast<uint16_t>(tcp::FrameType::kClose);
  f.seq = 0;
  EXPECT_TRUE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f.bytes = 8;  // control frames have no payload
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
  f = dataHeader(0, 0);
  EXPECT_FALSE(tcp::parseControlHeader(&f, sizeof f, 4, &out).isOk());
}

TEST(SocketIfname, ParsesNcclSyntax) {
  net::IfaceFilter f;
  ASSERT_TRUE(net::parseIfaceFilter("eth,ib", &f).isOk());
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_FALSE(f.matches("et"));

  ASSERT_TRUE(net::parseIfaceFilter("=eth0", &f).isOk());
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_FALSE(f.matches("eth01"));

  ASSERT_TRUE(net::parseIfaceFilter("^docker,lo", &f).isOk());
  EXPECT_TRUE(f.exclude);
  EXPECT_FALSE(f.matches("docker0"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_TRUE(f.matches("eth0"));

  ASSERT_TRUE(net::parseIfaceFilter("^=docker0", &f).isOk());
  EXPECT_TRUE(f.exclude && f.exact);
  EXPECT_FALSE(f.matches("docker0"));
  EXPECT_TRUE(f.matches("docker1"));

  ASSERT_TRUE(net::parseIfaceFilter(" eth0 ,,ib0", &f).isOk());
  EXPECT_EQ(f.names.size(), 2u);
  EXPECT_EQ(f.names[0], "eth0");
}

TEST(SocketIfname, RejectsEmptyAndOverlongNames) {
  net::IfaceFilter f;
  for (const char* bad : {"", "^", "=", "^=", ",,", "averyveryverylongname0"}) {
    const Status st = net::parseIfaceFilter(bad, &f);
    EXPECT_FALSE(st.isOk()) << "'" << bad << "'";
    EXPECT_NE(st.message().find("WEFT_SOCKET_IFNAME"), std::string::npos) << st.message();
  }
}

TEST(SocketIfname, Family) {
  int fam = -1;
  ASSERT_TRUE(net::parseFamily("AF_INET", &fam).isOk());
  EXPECT_EQ(fam, AF_INET);
  ASSERT_TRUE(net::parseFamily("af_inet6", &fam).isOk());
  EXPECT_EQ(fam, AF_INET6);
  ASSERT_TRUE(net::parseFamily("6", &fam).isOk());
  EXPECT_EQ(fam, AF_INET6);
  ASSERT_TRUE(net::parseFamily("", &fam).isOk());
  EXPECT_EQ(fam, AF_UNSPEC);
  EXPECT_FALSE(net::parseFamily("AF_UNIX", &fam).isOk());
}

TEST(SocketIfname, LoopbackIsFoundByExactName) {
  net::IfaceFilter f;
  ASSERT_TRUE(net::parseIfaceFilter("=lo", &f).isOk());
  const auto found = net::findInterfaces(&f, AF_INET);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].name, "lo");
  EXPECT_EQ(found[0].addr.toString(), "127.0.0.1:0");
}

// The address a rank advertises unprompted skips container and VM bridges,
// whose addresses exist only on their own host, unless nothing else is up.
TEST(SocketIfname, DefaultInterfaceSkipsLocalBridges) {
  auto named = [](std::initializer_list<const char*> names) {
    std::vector<net::IfaceAddr> v;
    for (const char* n : names) v.push_back({n, {}});
    return v;
  };
  const auto pick = [](const std::vector<net::IfaceAddr>& v) {
    const net::IfaceAddr* p = net::preferredInterface(v);
    return p == nullptr ? std::string("(none)") : p->name;
  };
  EXPECT_EQ(pick(named({"docker0", "virbr0", "eth0", "ib0"})), "eth0");
  EXPECT_EQ(pick(named({"enp1s0", "docker0"})), "enp1s0");
  EXPECT_EQ(pick(named({"docker0", "virbr1"})), "docker0");
  EXPECT_EQ(pick(named({"lo"})), "lo");
  EXPECT_EQ(pick({}), "(none)");
}

// Strangers connect to a running job's TCP listener and send garbage, a
// wrong token, a truncated hello, or a frame header claiming a huge size:
// they are dropped and the job's collectives stay correct.
TEST(TcpSecurity, GarbageConnectionsDoNotDisturbTheJob) {
  test::RunOptions opts;
  opts.env = {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_TIMEOUT_MS", "30000"}};
  test::runRanks(
      3,
      [](weftComm_t comm, int rank, int n) {
        // Every rank's listener address, gathered with a collective.
        net::SockAddr mine = comm->transport->tcpListenAddress();
        std::vector<net::SockAddr> all(n);
        std::vector<uint8_t> raw(n * sizeof(net::SockAddr));
        std::memcpy(raw.data() + rank * sizeof mine, &mine, sizeof mine);
        RANK_CHECK_OK(weftAllGather(raw.data() + rank * sizeof mine, raw.data(), sizeof mine,
                                    weftUint8, comm, nullptr));
        std::memcpy(all.data(), raw.data(), raw.size());
        const net::SockAddr target = all[(rank + 1) % n];
        std::vector<int> fds;
        auto connectAndSend = [&](const void* data, size_t bytes) {
          const int fd = ::socket(target.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
          RANK_ASSERT(fd >= 0);
          RANK_ASSERT(
              ::connect(fd, reinterpret_cast<const sockaddr*>(&target.storage), target.len) == 0)
              << "connect to " << target.toString();
          if (bytes > 0) (void)!::send(fd, data, bytes, MSG_NOSIGNAL);
          fds.push_back(fd);
        };
        const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
        connectAndSend(garbage, sizeof garbage);
        Hello h{};
        h.magic = tcp::kHelloMagic;
        h.version = tcp::kWireVersion;
        h.kind = static_cast<uint16_t>(tcp::ConnKind::kData);
        h.fromRank = rank;
        h.toRank = (rank + 1) % n;
        h.nsocks = 2;
        h.token = 12345;  // wrong
        connectAndSend(&h, sizeof h);
        connectAndSend(&h, 7);  // truncated
        FrameHeader f{};
        f.magic = tcp::kFrameMagic;
        f.version = tcp::kWireVersion;
        f.type = static_cast<uint16_t>(tcp::FrameType::kData);
        f.bytes = ~0ull;
        connectAndSend(&f, sizeof f);
        connectAndSend(nullptr, 0);  // silent
        for (int round = 0; round < 20; ++round) {
          std::vector<float> x(300000, float(rank + 1));
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), x.size(), weftFloat32, weftSum, comm, nullptr));
          RANK_EXPECT(x[0] == float(n * (n + 1) / 2) && x.back() == x[0]) << x[0];
        }
        for (int fd : fds) ::close(fd);
      },
      opts);
}

}  // namespace
}  // namespace weft
