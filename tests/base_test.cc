// Foundation pieces: byte-size parsing and the logger's level, subsystem
// filter and file name pattern.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/env.h"
#include "base/log.h"

namespace weft {
namespace {

TEST(Env, ParsesByteSizes) {
  EXPECT_EQ(parseBytes("0"), 0u);
  EXPECT_EQ(parseBytes("4096"), 4096u);
  EXPECT_EQ(parseBytes("4K"), 4096u);
  EXPECT_EQ(parseBytes("16M"), 16u << 20);
  EXPECT_EQ(parseBytes("2G"), 2ull << 30);
  EXPECT_EQ(parseBytes("1TB"), 1ull << 40);
  EXPECT_FALSE(parseBytes(""));
  EXPECT_FALSE(parseBytes("-1"));
  EXPECT_FALSE(parseBytes("12Q"));
  EXPECT_FALSE(parseBytes("99999999999999999999"));
  EXPECT_FALSE(parseBytes(" -1"));  // strtoull would wrap it to 2^64-1
  EXPECT_FALSE(parseBytes(std::string("5\0G", 3)));
  EXPECT_FALSE(parseBytes("+5"));
  EXPECT_FALSE(parseBytes("17179869184G"));  // overflows 64 bits
}

TEST(Env, IntegersFallBackOnGarbage) {
  setenv("WEFT_TEST_INT", "12", 1);
  EXPECT_EQ(envInt("TEST_INT", 5), 12);
  setenv("WEFT_TEST_INT", "12abc", 1);
  EXPECT_EQ(envInt("TEST_INT", 5), 5);
  unsetenv("WEFT_TEST_INT");
  EXPECT_EQ(envInt("TEST_INT", 5), 5);
}

TEST(Env, NcclNamesWorkOnceEnabled) {
  setenv("NCCL_TEST_ALIAS", "33", 1);
  // Only this process's first call decides; run it in a child.
  const pid_t pid = fork();
  if (pid == 0) {
    const bool before = envInt("TEST_ALIAS", 1) == 1;
    enableNcclEnvAliases();
    const bool after = envInt("TEST_ALIAS", 1) == 33;
    setenv("WEFT_TEST_ALIAS", "44", 1);
    const bool weftWins = envInt("TEST_ALIAS", 1) == 44;
    _exit(before && after && weftWins ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unsetenv("NCCL_TEST_ALIAS");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Runs only when re-executed by the test below: the logger reads its
// settings once per process, so it needs a fresh one.
TEST(LogChild, WritesLines) {
  if (std::getenv("WEFT_TEST_LOG_CHILD") == nullptr) GTEST_SKIP() << "helper for Log.*";
  WEFT_INFO(kLogInit, "init line %d", 1);
  WEFT_INFO(kLogColl, "coll line %d", 2);
  WEFT_TRACE(kLogShm, "trace line %d", 3);
  WEFT_WARN(kLogShm, "warn line %d", 4);
}

TEST(Log, LevelSubsystemAndFilePattern) {
  char dir[] = "/tmp/weft-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("WEFT_TEST_LOG_CHILD", "1", 1);
    setenv("WEFT_DEBUG", "INFO", 1);
    setenv("WEFT_DEBUG_SUBSYS", "INIT,SHM", 1);
    setenv("WEFT_DEBUG_FILE", (std::string(dir) + "/log.%h.%p").c_str(), 1);
    execl("/proc/self/exe", "base_test", "--gtest_filter=LogChild.*", nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string path = std::string(dir) + "/log." + host + "." + std::to_string(pid);
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no log file " << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string log = text.str();
  EXPECT_NE(log.find("WEFT INFO init line 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("coll line"), std::string::npos) << log;   // subsystem filtered out
  EXPECT_EQ(log.find("trace line"), std::string::npos) << log;  // above the level
  EXPECT_NE(log.find("WEFT WARN warn line 4"), std::string::npos) << log;
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace weft
