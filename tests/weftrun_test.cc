// Tests of the weftrun launcher (tools/weftrun.cc), run as a real program.
//
// Every wait here is bounded: weftrun runs under a deadline, and a test that
// outlives it kills weftrun's process and fails instead of hanging.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string WeftrunPath() {
  if (const char* dir = std::getenv("WEFT_BIN_DIR")) return std::string(dir) + "/weftrun";
#ifdef WEFT_BIN_DIR
  return std::string(WEFT_BIN_DIR) + "/weftrun";
#else
  return "weftrun";  // from PATH
#endif
}

struct Result {
  int code = -1;  // exit code, or 128+signo
  bool timed_out = false;
  std::string out;  // weftrun's stdout
  double seconds = 0;
};

// Runs weftrun with `args`, capturing its stdout. `on_line` sees each stdout
// line as it arrives and may act on weftrun's pid. Gives up after `limit`.
Result RunWeftrun(const std::vector<std::string>& args, Clock::duration limit,
                  const std::function<void(pid_t, const std::string&)>& on_line = {}) {
  Result res;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe failed";
    return res;
  }
  std::string path = WeftrunPath();
  std::vector<char*> argv;
  argv.push_back(path.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);

  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    execvp(argv[0], argv.data());
    _exit(126);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);

  std::string pending;
  auto drain = [&] {
    char buf[4096];
    ssize_t r;
    while ((r = read(fds[0], buf, sizeof(buf))) > 0) {
      res.out.append(buf, static_cast<size_t>(r));
      pending.append(buf, static_cast<size_t>(r));
    }
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (on_line) on_line(pid, line);
    }
  };

  int status = 0;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 10);
    drain();
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (Clock::now() - start > limit) {
      res.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  drain();
  close(fds[0]);
  res.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

// True once `pid` no longer runs (gone, or a zombie nobody has reaped yet).
bool IsGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = s.rfind(')');
  return paren == std::string::npos || (paren + 2 < s.size() && s[paren + 2] == 'Z');
}

bool WaitGone(pid_t pid, Clock::duration limit) {
  const auto deadline = Clock::now() + limit;
  while (!IsGone(pid)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/weftrun_test.XXXXXX";
    const char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Weftrun, SetsEnvironmentPerRank) {
  const int n = 4;
  Result r = RunWeftrun({"-n", std::to_string(n), "--tag-output", "sh", "-c",
                         "echo $WEFT_RANK $WEFT_WORLD_SIZE $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE "
                         "$WEFT_ADDR $WEFT_SECRET"},
                        seconds(20));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.code, 0) << r.out;

  std::set<int> seen;
  std::set<std::string> addrs, secrets;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    // "[tag] rank size local_rank local_size 127.0.0.1:port secret"
    std::istringstream fields(line);
    char open = 0, close = 0;
    int tag = -1, rank = -1, size = -1, local_rank = -1, local_size = -1;
    std::string addr, secret, extra;
    fields >> open >> tag >> close >> rank >> size >> local_rank >> local_size >> addr >> secret;
    ASSERT_TRUE(fields && open == '[' && close == ']' && !(fields >> extra))
        << "unexpected line: " << line;
    EXPECT_EQ(rank, tag);
    EXPECT_EQ(size, n);
    EXPECT_EQ(local_rank, tag);
    EXPECT_EQ(local_size, n);
    const std::string host = "127.0.0.1:";
    ASSERT_EQ(addr.rfind(host, 0), 0u) << addr;
    const int port = std::stoi(addr.substr(host.size()));
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
    EXPECT_EQ(secret.size(), 16u) << secret;
    EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos) << secret;
    seen.insert(tag);
    addrs.insert(addr);
    secrets.insert(secret);
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(addrs.size(), 1u) << "all ranks must share one address";
  EXPECT_EQ(secrets.size(), 1u) << "all ranks must share one secret";
}

// Lines "[tag] a b c ..." of a --tag-output run, by tag.
std::map<int, std::vector<std::string>> FieldsByRank(const std::string& out) {
  std::map<int, std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    char open = 0, close = 0;
    int tag = -1;
    fields >> open >> tag >> close;
    if (!fields || open != '[' || close != ']') {
      ADD_FAILURE() << "unexpected line: " << line;
      continue;
    }
    std::string f;
    while (fields >> f) rows[tag].push_back(f);
  }
  return rows;
}

// 5 ranks on 2 hosts: rank i on host i * 2 / 5, so ranks 0-2 on the first
// and 3-4 on the second, as by-slot mapping fills one node first; local ranks
// count from 0 on each host. Without --hosts no rank gets a host identity.
TEST(Weftrun, HostsDealsRanksInBlocksWithLocalRanksAndHostIds) {
  Result r = RunWeftrun({"-n", "5", "--hosts", "2", "--tag-output", "sh", "-c",
                         "echo $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE ${WEFT_HOSTID:-none}"},
                        seconds(20));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = FieldsByRank(r.out);
  const std::vector<std::vector<std::string>> want = {{"0", "3", "weftrun-host0"},
                                                      {"1", "3", "weftrun-host0"},
                                                      {"2", "3", "weftrun-host0"},
                                                      {"0", "2", "weftrun-host1"},
                                                      {"1", "2", "weftrun-host1"}};
  ASSERT_EQ(rows.size(), want.size()) << r.out;
  for (int rank = 0; rank < 5; ++rank) EXPECT_EQ(rows.at(rank), want[rank]) << "rank " << rank;

  Result plain =
      RunWeftrun({"-n", "2", "--tag-output", "sh", "-c", "echo ${WEFT_HOSTID:-none}"}, seconds(20));
  ASSERT_EQ(plain.code, 0) << plain.out;
  for (const auto& [rank, fields] : FieldsByRank(plain.out))
    EXPECT_EQ(fields, std::vector<std::string>{"none"}) << "rank " << rank;

  EXPECT_EQ(RunWeftrun({"-n", "2", "--hosts", "3", "true"}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"-n", "2", "--hosts", "0", "true"}, seconds(20)).code, 2);
}

TEST(Weftrun, ExplicitPort) {
  Result r = RunWeftrun(
      {"-n", "2", "--port", "23456", "--tag-output", "sh", "-c", "echo $WEFT_ADDR"}, seconds(20));
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("[0] 127.0.0.1:23456\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] 127.0.0.1:23456\n"), std::string::npos) << r.out;
}

TEST(Weftrun, SecretDiffersBetweenJobs) {
  auto secret = [] {
    Result r = RunWeftrun({"-n", "1", "sh", "-c", "echo $WEFT_SECRET"}, seconds(20));
    EXPECT_EQ(r.code, 0);
    return r.out;
  };
  EXPECT_NE(secret(), secret());
}

// One rank sleeps, another exits 3 once the sleeper is up: weftrun must
// return 3 promptly and the sleeper (and what it started) must be gone.
TEST(Weftrun, FailingRankStopsTheOthers) {
  TempDir dir;
  const std::string pidfile = dir.path() + "/pid";
  const std::string script =
      "case $WEFT_RANK in "
      "0) sleep 30 & echo $$ $! > '" +
      pidfile + ".tmp' && mv '" + pidfile + ".tmp' '" + pidfile +
      "'; wait ;; "
      "1) while [ ! -s '" +
      pidfile +
      "' ]; do sleep 0.01; done; exit 3 ;; "
      "*) exec sleep 30 ;; esac";
  Result r = RunWeftrun({"-n", "3", "sh", "-c", script}, seconds(20));
  ASSERT_FALSE(r.timed_out) << "weftrun did not return";
  EXPECT_EQ(r.code, 3);
  // SIGTERM suffices here, so there is no need to wait out the 3 s grace.
  EXPECT_LT(r.seconds, 10.0);

  std::ifstream in(pidfile);
  pid_t shell = 0, sleeper = 0;
  ASSERT_TRUE(in >> shell >> sleeper);
  EXPECT_TRUE(WaitGone(shell, seconds(5))) << "rank 0 survived";
  EXPECT_TRUE(WaitGone(sleeper, seconds(5))) << "a process started by rank 0 survived";
}

// A rank that ignores SIGTERM gets SIGKILL after the grace period.
TEST(Weftrun, RankIgnoringSigtermIsKilled) {
  TempDir dir;
  const std::string flag = dir.path() + "/trapped";
  const std::string script = "if [ $WEFT_RANK = 0 ]; then trap '' TERM; touch '" + flag +
                             "'; sleep 30; else while [ ! -e '" + flag +
                             "' ]; do sleep 0.01; done; exit 4; fi";
  Result r = RunWeftrun({"-n", "2", "sh", "-c", script}, seconds(20));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 4);
  EXPECT_GE(r.seconds, 2.5);  // waited for the grace period
  EXPECT_LT(r.seconds, 15.0);
}

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Per rank (from --tag-output), the CPU list its process may run on, as
// /proc/self/status prints it ("3" or "0-1").
std::map<int, std::string> RankCpuLists(const std::string& out) {
  std::map<int, std::string> lists;
  for (const auto& [rank, fields] : FieldsByRank(out)) {
    if (fields.size() == 2 && fields[0] == "Cpus_allowed_list:") lists[rank] = fields[1];
  }
  return lists;
}

// Ranks are pinned round-robin, also when they outnumber the CPUs (5 ranks
// on 2 CPUs: 0, 1, 0, 1, 0), and --bind-to none leaves them the whole set.
TEST(Weftrun, PinsRankIToCpuIModCEvenWhenOversubscribed) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  const std::vector<int> two(all.begin(), all.begin() + std::min<size_t>(2, all.size()));
  cpu_set_t restricted, saved;
  CPU_ZERO(&restricted);
  for (int c : two) CPU_SET(c, &restricted);
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  // weftrun inherits the restricted set; this process gets its own back.
  ASSERT_EQ(sched_setaffinity(0, sizeof restricted, &restricted), 0);
  const std::vector<std::string> show = {"--tag-output", "grep", "Cpus_allowed_list",
                                         "/proc/self/status"};
  std::vector<std::string> pinned = {"-n", "5"}, unpinned = {"-n", "5", "--bind-to", "none"};
  pinned.insert(pinned.end(), show.begin(), show.end());
  unpinned.insert(unpinned.end(), show.begin(), show.end());
  Result p = RunWeftrun(pinned, seconds(20));
  Result u = RunWeftrun(unpinned, seconds(20));
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);

  ASSERT_EQ(p.code, 0) << p.out;
  const auto lists = RankCpuLists(p.out);
  ASSERT_EQ(lists.size(), 5u) << p.out;
  for (const auto& [rank, list] : lists)
    EXPECT_EQ(list, std::to_string(two[rank % two.size()])) << "rank " << rank;

  ASSERT_EQ(u.code, 0) << u.out;
  const std::string both = two.size() == 1 ? std::to_string(two[0])
                           : two[1] == two[0] + 1
                               ? std::to_string(two[0]) + "-" + std::to_string(two[1])
                               : std::to_string(two[0]) + "," + std::to_string(two[1]);
  const auto free = RankCpuLists(u.out);
  ASSERT_EQ(free.size(), 5u) << u.out;
  for (const auto& [rank, list] : free) EXPECT_EQ(list, both) << "rank " << rank;
}

TEST(Weftrun, SignalDeathGives128PlusSigno) {
  Result r =
      RunWeftrun({"-n", "2", "sh", "-c", "if [ $WEFT_RANK = 1 ]; then kill -KILL $$; fi; sleep 30"},
                 seconds(20));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 128 + SIGKILL);
}

TEST(Weftrun, AllSucceedGivesZero) {
  Result r = RunWeftrun({"-n", "3", "true"}, seconds(20));
  EXPECT_EQ(r.code, 0);
}

TEST(Weftrun, ForwardsSigterm) {
  int ready = 0;
  Result r = RunWeftrun({"-n", "2", "--tag-output", "sh", "-c", "echo ready; exec sleep 30"},
                        seconds(20), [&](pid_t weftrun, const std::string& line) {
                          if (line.find("ready") != std::string::npos && ++ready == 2) {
                            kill(weftrun, SIGTERM);
                          }
                        });
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(ready, 2);
  EXPECT_EQ(r.code, 128 + SIGTERM);
}

TEST(Weftrun, TimeoutKillsTheJob) {
  Result r = RunWeftrun({"-n", "2", "--timeout", "0.3", "sleep", "30"}, seconds(20));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 124);
}

TEST(Weftrun, MissingProgramIs127) {
  Result r = RunWeftrun({"-n", "2", "/nonexistent/weft-no-such-program"}, seconds(20));
  EXPECT_EQ(r.code, 127);
}

TEST(Weftrun, BadArguments) {
  EXPECT_EQ(RunWeftrun({}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"true"}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"-n", "0", "true"}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"-n", "2"}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"-n", "2", "--port", "x", "true"}, seconds(20)).code, 2);
  EXPECT_EQ(RunWeftrun({"--frobnicate", "-n", "2", "true"}, seconds(20)).code, 2);
  Result help = RunWeftrun({"-h"}, seconds(20));
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: weftrun"), std::string::npos);
}

}  // namespace
