// Rendezvous: unique ids, a root that cannot be reached, and connections
// from outside that must not disturb a job.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launch_env.h"
#include "harness/multirank.h"

namespace weft {
namespace {

TEST(Bootstrap, UniqueIdCarriesAddressAndSecret) {
  net::SockAddr addr;
  ASSERT_TRUE(net::parseHostPort("127.0.0.1:4321", &addr).isOk());
  weftUniqueId id;
  ASSERT_TRUE(encodeUniqueId(addr, 0x1234abcdull, &id).isOk());
  net::SockAddr back;
  uint64_t secret = 0;
  ASSERT_TRUE(decodeUniqueId(id, &back, &secret).isOk());
  EXPECT_EQ(back.toString(), "127.0.0.1:4321");
  EXPECT_EQ(secret, 0x1234abcdull);

  ASSERT_TRUE(net::parseHostPort("[::1]:99", &addr).isOk());
  ASSERT_TRUE(encodeUniqueId(addr, 7, &id).isOk());
  ASSERT_TRUE(decodeUniqueId(id, &back, &secret).isOk());
  EXPECT_EQ(back.toString(), "[::1]:99");
}

TEST(Bootstrap, GarbageUniqueIdIsRejectedWithAMessage) {
  weftUniqueId id;
  std::memset(&id, 0x5a, sizeof id);
  weftComm_t comm = nullptr;
  EXPECT_EQ(weftCommInitRank(&comm, 2, id, 0), weftInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(weftGetLastError(nullptr)).find("unique id"), std::string::npos);
}

TEST(Bootstrap, UnreachableRootFailsNamingTheAddress) {
  const int port = test::freeTcpPort();  // nothing listens there
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  setenv("WEFT_RANK", "1", 1);
  setenv("WEFT_WORLD_SIZE", "2", 1);
  setenv("WEFT_ADDR", addr.c_str(), 1);
  setenv("WEFT_BOOTSTRAP_TIMEOUT_MS", "300", 1);
  weftComm_t comm = nullptr;
  const weftResult_t rc = weftCommInitFromEnv(&comm, nullptr);
  const std::string message = weftGetLastError(nullptr);
  for (const char* v : {"WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_ADDR", "WEFT_BOOTSTRAP_TIMEOUT_MS"})
    unsetenv(v);
  EXPECT_EQ(rc, weftSystemError);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(message.find(addr), std::string::npos) << message;
  EXPECT_NE(message.find("WEFT_BOOTSTRAP_TIMEOUT_MS"), std::string::npos) << message;
}

TEST(LaunchEnv, FirstSlurmHostOfAHostList) {
  EXPECT_EQ(firstSlurmHost("node1"), "node1");
  EXPECT_EQ(firstSlurmHost("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(firstSlurmHost("gpu1,node[07-09]"), "gpu1");
  EXPECT_EQ(firstSlurmHost("node[12,3-4]"), "node12");
  EXPECT_EQ(firstSlurmHost("rack[2-3]-n[001-004]-ib"), "rack2-n001-ib");
  EXPECT_EQ(firstSlurmHost("a-b.example.org"), "a-b.example.org");
  for (const char* bad : {"", "node[", "node[]", "node[x-y]", "node]1", "[-3]", "no de1"})
    EXPECT_EQ(firstSlurmHost(bad), "") << bad;
}

TEST(LaunchEnv, PortFromJobIdIsStableAndInRange) {
  EXPECT_EQ(portFromJobId("4242.0"), portFromJobId("4242.0"));
  EXPECT_NE(portFromJobId("4242.0"), portFromJobId("4242.1"));
  for (int job = 0; job < 1000; ++job) {
    const uint16_t p = portFromJobId(std::to_string(job));
    EXPECT_GE(p, 20000);
    EXPECT_LT(p, 40000);
  }
}

// Opens a connection to addr and writes `bytes` (which may be nothing).
void connectAndSend(const net::SockAddr& addr, const std::vector<uint8_t>& bytes) {
  const int fd = socket(addr.family(), SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0 &&
      !bytes.empty())
    (void)!write(fd, bytes.data(), bytes.size());
  close(fd);
}

TEST(Bootstrap, StrangersAtTheRootDoNotDisturbTheJob) {
  test::runRanksRaw(3, [](const test::RankContext& ctx) {
    if (ctx.rank == 0) {
      net::SockAddr root;
      uint64_t secret = 0;
      RANK_ASSERT(decodeUniqueId(ctx.id, &root, &secret).isOk());
      // Random bytes, a truncated hello, a hello-sized message with a wrong
      // secret and a huge claimed rank count, and a silent connection.
      std::vector<uint8_t> noise(200);
      for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 37 + 11);
      connectAndSend(root, noise);
      connectAndSend(root, std::vector<uint8_t>(9, 0x77));
      std::vector<uint8_t> forged(128, 0);
      const uint64_t magic = 0x7765667468656c6full;  // the hello magic
      const uint64_t wrongSecret = secret ^ 1;
      const int32_t hugeRanks[2] = {0, 1 << 30};
      std::memcpy(forged.data(), &magic, 8);
      std::memcpy(forged.data() + 8, &wrongSecret, 8);
      std::memcpy(forged.data() + 16, hugeRanks, 8);
      connectAndSend(root, forged);
      connectAndSend(root, {});
    }
    weftComm_t comm = nullptr;
    RANK_CHECK_OK(ctx.initComm(&comm));
    test::setCurrentComm(comm);
    std::vector<int32_t> v(1000, ctx.rank + 1);
    RANK_CHECK_OK(weftAllReduce(v.data(), v.data(), v.size(), weftInt32, weftSum, comm, nullptr));
    RANK_EXPECT_EQ(v[999], 6);
    RANK_CHECK_OK(weftCommDestroy(comm));
  });
}

}  // namespace
}  // namespace weft
