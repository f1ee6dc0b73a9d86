// Bootstrap security: strangers that connect to the rendezvous root while a
// job is meeting there - with garbage, a truncated hello held open, a
// silent connection held open, a wrong secret, and a valid-looking hello
// that claims a huge rank count - are dropped and logged, and the job meets,
// runs and is correct without waiting for them. The wire checks themselves
// are unit-tested here too (and fuzzed in tests/fuzz/).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "harness/multirank.h"
#include "weft/weft.h"

namespace weft {
namespace {

int connectTo(const net::SockAddr& addr) {
  for (int attempt = 0; attempt < 500; ++attempt) {  // the root may not listen yet
    const int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0) return fd;
    close(fd);
    usleep(10000);
  }
  return -1;
}

void sendBytes(int fd, const void* p, size_t n) {
  (void)!send(fd, p, n, MSG_NOSIGNAL);
}

TEST(BootstrapSecurity, StrangersHeldOpenDuringRendezvous) {
  constexpr int n = 4;
  char tmpl[] = "/tmp/weft-bsec-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const int port = test::freeTcpPort();
  test::RankSignal attacked, finished;
  test::RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.init = test::InitMode::kWeftEnv;
  opts.env = {{"WEFT_ADDR", "127.0.0.1:" + std::to_string(port)},
              {"WEFT_SECRET", "the-right-secret"},
              {"WEFT_DEBUG", "WARN"},
              {"WEFT_DEBUG_SUBSYS", "BOOTSTRAP"},
              {"WEFT_DEBUG_FILE", dir + "/log.%p"}};
  test::runRanksRaw(
      n + 1,  // the last process is the attacker, not a rank
      [&](const test::RankContext& ctx) {
        if (ctx.rank == n) {
          net::SockAddr root;
          RANK_ASSERT(net::parseHostPort("127.0.0.1:" + std::to_string(port), &root).isOk());
          std::vector<int> held;
          // Garbage, then closed.
          const int g = connectTo(root);
          RANK_ASSERT(g >= 0) << "cannot reach the root";
          std::vector<uint8_t> noise(1000);
          for (size_t i = 0; i < noise.size(); ++i) noise[i] = uint8_t(i * 131 + 7);
          sendBytes(g, noise.data(), noise.size());
          close(g);
          // A truncated hello (right magic), held open.
          wire::Hello hello{};
          hello.magic = wire::kHelloMagic;
          hello.secret = 12345;
          hello.rank = 0;
          hello.nranks = n;
          const int t = connectTo(root);
          sendBytes(t, &hello, sizeof hello / 2);
          held.push_back(t);
          // Silent, held open.
          held.push_back(connectTo(root));
          // A whole hello with a wrong secret claiming to be rank 0.
          const int w = connectTo(root);
          sendBytes(w, &hello, sizeof hello);
          held.push_back(w);
          // Valid-looking header with a huge rank count.
          hello.nranks = 1 << 30;
          hello.rank = (1 << 30) - 1;
          const int h = connectTo(root);
          sendBytes(h, &hello, sizeof hello);
          held.push_back(h);
          attacked.post(n - 1);
          for (int q = 0; q < n; ++q) finished.wait();
          for (int fd : held) close(fd);
          return;
        }
        // The ranks of a 4-rank job (the harness set WEFT_WORLD_SIZE to n+1).
        setenv("WEFT_WORLD_SIZE", std::to_string(n).c_str(), 1);
        // Rank 0 hosts the root and arrives at once; the others come after the
        // strangers, so the root meets them in the middle of the rendezvous.
        if (ctx.rank != 0) attacked.wait();
        const auto t0 = std::chrono::steady_clock::now();
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        // Strangers get 5 s to send a hello; nobody may wait for them.
        RANK_EXPECT(ms < 4000) << "init took " << ms << " ms with strangers connected";
        test::setCurrentComm(comm);
        std::vector<int64_t> v(5000, ctx.rank + 1);
        RANK_CHECK_OK(
            weftAllReduce(v.data(), v.data(), v.size(), weftInt64, weftSum, comm, nullptr));
        RANK_EXPECT_EQ(v[4999], int64_t(n * (n + 1) / 2));
        test::setCurrentComm(nullptr);
        RANK_CHECK_OK(weftCommDestroy(comm));
        finished.post();
      },
      opts);
  // Rank 0 hosted the root; its log says what was dropped.
  std::string logs;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string f = dir + "/" + e->d_name;
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      logs += ss.str();
      std::remove(f.c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
  EXPECT_NE(logs.find("wrong secret"), std::string::npos) << logs;
  EXPECT_NE(logs.find("dropped a connection"), std::string::npos) << logs;
}

TEST(BootstrapWire, DecodersRejectWhatTheyShould) {
  wire::Hello h{};
  h.magic = wire::kHelloMagic;
  h.secret = 42;
  h.rank = 1;
  h.nranks = 2;
  h.info.rank = 1;
  net::SockAddr a;
  ASSERT_TRUE(net::parseHostPort("127.0.0.1:1234", &a).isOk());
  std::memcpy(h.info.addr, &a.storage, a.len);
  h.info.addrLen = a.len;
  wire::Hello out{};
  EXPECT_TRUE(wire::decodeHello(&h, sizeof h, 42, &out).isOk());
  EXPECT_FALSE(wire::decodeHello(&h, sizeof h, 43, &out).isOk());
  EXPECT_FALSE(wire::decodeHello(&h, sizeof h - 1, 42, &out).isOk());
  wire::Hello bad = h;
  bad.nranks = 1 << 30;
  bad.rank = 5;
  bad.info.rank = 5;
  EXPECT_FALSE(wire::decodeHello(&bad, sizeof bad, 42, &out).isOk());
  bad = h;
  bad.info.addrLen = 1000;
  EXPECT_FALSE(wire::decodeHello(&bad, sizeof bad, 42, &out).isOk());
  std::vector<PeerInfo> table;
  EXPECT_FALSE(wire::decodePeerTable(&h.info, sizeof h.info, 2, &table).isOk());
  PeerInfo two[2] = {h.info, h.info};
  two[0].rank = 0;
  EXPECT_TRUE(wire::decodePeerTable(two, sizeof two, 2, &table).isOk());
  wire::GatherHeader g{wire::kGatherMagic, uint64_t(1) << 62};
  EXPECT_FALSE(wire::decodeGatherHeader(&g, sizeof g, 8).isOk());
  weftUniqueId id;
  std::memset(&id, 0xff, sizeof id);
  uint64_t secret;
  EXPECT_FALSE(decodeUniqueId(id, &a, &secret).isOk());
}

}  // namespace
}  // namespace weft
