// weftCommInitFromEnv under a real mpirun, with nothing set by hand: rank
// 0 publishes its rendezvous through Open MPI's PMIx server
// (bootstrap/launch_env.h, bootstrap/pmix.h). On one host, and across two "hosts" (network
// namespaces, harness/netns.h) with shared memory inside each and TCP between them. The ranks are
// this test binary again (Mpirun.Rank, which runs only under these tests), checking an allreduce
// and an all-gather against the serial reference; the weft log says how the ranks met and whom each
// reaches over TCP. Skips without mpirun, and the namespace test when not root or without iproute2.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "harness/netns.h"
#include "weft/weft.h"

namespace weft::test {
namespace {

#define SKIP_WITHOUT_MPIRUN()                                              \
  do {                                                                     \
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0)             \
      GTEST_SKIP() << "no mpirun (scripts/setup.sh installs openmpi-bin)"; \
  } while (0)

// Occurrences of `needle` in `text`.
size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Runs a shell command; its exit status and what it wrote (stderr too).
int runCommand(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output->append(buf, got);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What mpirun runs: this binary's Mpirun.Rank, with the weft log on.
// Under ASan, libpmix's own leaks are suppressed (tests/lsan-pmix.supp).
const std::string kRank = std::string(" -x WEFT_TEST_MPIRUN_RANK=1") +
                          " -x LSAN_OPTIONS=suppressions=" WEFT_SOURCE_DIR
                          "/tests/lsan-pmix.supp:print_suppressions=0:fast_unwind_on_malloc=0" +
                          " -x WEFT_DEBUG=INFO -x WEFT_DEBUG_SUBSYS=BOOTSTRAP,NET " +
                          WEFT_BIN_DIR "/mpirun_test --gtest_filter=Mpirun.Rank";

// One rank of the jobs below; skipped when run any other way.
TEST(Mpirun, Rank) {
  if (std::getenv("WEFT_TEST_MPIRUN_RANK") == nullptr)
    GTEST_SKIP() << "a rank of the mpirun tests, started by them";
  weftComm_t comm = nullptr;
  ASSERT_EQ(weftCommInitFromEnv(&comm, nullptr), weftSuccess) << weftGetLastError(nullptr);
  int n = 0, rank = -1;
  ASSERT_EQ(weftCommCount(comm, &n), weftSuccess);
  ASSERT_EQ(weftCommUserRank(comm, &rank), weftSuccess);
  EXPECT_EQ(std::to_string(rank), std::getenv("OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(std::to_string(n), std::getenv("OMPI_COMM_WORLD_SIZE"));
  // Large enough for several chunks per rank; element i of rank r is
  // r + 1 + i % 7, so the sum is n(n+1)/2 + n * (i % 7), exact in floats.
  const size_t count = size_t(1) << 20;
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = float(rank + 1 + int(i % 7));
  ASSERT_EQ(weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr),
            weftSuccess)
      << weftGetLastError(comm);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += x[i] != float(n * (n + 1) / 2 + n * int(i % 7)) ? 1 : 0;
  EXPECT_EQ(wrong, 0u);
  std::vector<int> all(size_t(n), -1);
  const int mine = 1000 + rank;
  ASSERT_EQ(weftAllGather(&mine, all.data(), 1, weftInt32, comm, nullptr), weftSuccess);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[size_t(q)], 1000 + q);
  EXPECT_EQ(weftCommDestroy(comm), weftSuccess);
  // A second communicator meets through a rendezvous of its own.
  ASSERT_EQ(weftCommInitFromEnv(&comm, nullptr), weftSuccess) << weftGetLastError(nullptr);
  int sum = rank;
  ASSERT_EQ(weftAllReduce(&sum, &sum, 1, weftInt32, weftSum, comm, nullptr), weftSuccess);
  EXPECT_EQ(sum, n * (n - 1) / 2);
  EXPECT_EQ(weftCommDestroy(comm), weftSuccess);
  if (!::testing::Test::HasFailure()) std::printf("mpirun rank %d of %d: results match\n", rank, n);
}

// Three ranks on this host (more than its CPUs here, hence --oversubscribe).
TEST(Mpirun, OneHostRendezvousThroughPmix) {
  SKIP_WITHOUT_MPIRUN();
  std::string output;
  const int rc = runCommand(std::string("timeout -k 5 150 mpirun --allow-run-as-root "
                                        "--oversubscribe -np 3") +
                                kRank,
                            &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(countOf(output, "rendezvous through the launcher's PMIx server"), 2 * 3u) << output;
  EXPECT_EQ(countOf(output, "tcp transport"), 0u) << "one host needs no TCP:\n" << output;
  EXPECT_EQ(countOf(output, ": results match"), 3u) << output;
}

// One mpirun job over two namespaces, 2 ranks in each, with no WEFT_ADDR or
// MASTER_ADDR: rank 0 publishes its rendezvous through Open MPI's PMIx
// server, the ranks of a namespace share memory and the namespaces talk
// TCP, and every rank checks its results. mpirun starts its daemons
// through our agent instead of ssh: `ip netns exec` into the namespace that
// the host name maps to, with a hostname of its own (`unshare --uts`;
// Open MPI names its session directories and shared segments after it).
// mpirun runs inside namespace 0, the only place the daemons can reach it.
TEST(Mpirun, TwoHostsRendezvousThroughPmix) {
  SKIP_WITHOUT_MPIRUN();
  if (std::string why = NetnsLab::unavailable(); !why.empty()) GTEST_SKIP() << why;
  NetnsLab lab({.namespaces = 2});
  ASSERT_TRUE(lab.ok()) << lab.error();
  char dirTemplate[] = "/tmp/weft-mpirun-XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  const std::string agent = dir + "/agent.sh";
  {
    std::ofstream f(agent);
    f << "#!/bin/sh\n"
         "# Called as: agent.sh HOST orted ARGS...; HOST hN runs in namespace N.\n"
         "host=$1; shift\n"
         "eval \"ns=\\${WEFT_TEST_NS_$host:-}\"\n"
         "[ -n \"$ns\" ] || { echo \"agent.sh: no namespace for host $host\" >&2; exit 255; }\n"
         "exec ip netns exec \"$ns\" unshare --uts /bin/sh -c "
         "\"hostname \\\"\\$0\\\" && exec $*\" \"$host\"\n";
  }
  ASSERT_EQ(::chmod(agent.c_str(), 0755), 0);
  std::string output;
  const int rc = runCommand(
      "WEFT_TEST_NS_h0=" + lab.name(0) + " WEFT_TEST_NS_h1=" + lab.name(1) + " ip netns exec " +
          lab.name(0) + " timeout -k 5 150 mpirun --allow-run-as-root --host h0:2,h1:2 -np 4" +
          " --mca plm_rsh_agent " + agent + " --mca plm_rsh_no_tree_spawn 1" +
          " --mca oob_tcp_if_include eth0" + kRank,
      &output);
  std::remove(agent.c_str());
  ::rmdir(dir.c_str());
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(countOf(output, "rendezvous through the launcher's PMIx server"), 2 * 4u) << output;
  // Each rank's TCP peers are the two ranks of the other namespace (two
  // communicators each).
  EXPECT_EQ(countOf(output, "tcp transport: listening on 10.77.0."), 2 * 4u) << output;
  EXPECT_EQ(countOf(output, ", 2 peers,"), 2 * 4u) << output;
  EXPECT_EQ(countOf(output, ": results match"), 4u) << output;
}

}  // namespace
}  // namespace weft::test
