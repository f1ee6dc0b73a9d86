#include "harness/multirank.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "weft/weft.hpp"

namespace weft::test {
namespace {

constexpr char kRecordSep = '\x1e';
constexpr int kMaxMessages = 40;

// Child-side state (meaningless in the parent, where g_rank is -1).
int g_rank = -1;
int g_logFd = -1;
bool g_failed = false;
int g_messages = 0;
int g_suppressed = 0;
weftComm_t g_comm = nullptr;
std::vector<std::string> g_trace;

const char* resultName(weftResult_t r) {
  switch (r) {
    case weftSuccess:
      return "weftSuccess";
    case weftUnhandledCudaError:
      return "weftUnhandledCudaError";
    case weftSystemError:
      return "weftSystemError";
    case weftInternalError:
      return "weftInternalError";
    case weftInvalidArgument:
      return "weftInvalidArgument";
    case weftInvalidUsage:
      return "weftInvalidUsage";
    case weftRemoteError:
      return "weftRemoteError";
    case weftInProgress:
      return "weftInProgress";
    case weftTimeout:
      return "weftTimeout";
    default:
      return "weft<unknown result>";
  }
}

std::string describeResult(weftResult_t r) {
  std::ostringstream os;
  os << resultName(r) << " (" << int(r) << ", \"";
  const char* s = weftGetErrorString(r);
  os << (s ? s : "<null>") << "\")";
  return os.str();
}

void writeAll(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    left -= size_t(w);
  }
}

void recordFailure(const std::string& msg) {
  g_failed = true;
  if (g_logFd < 0) {
    // Used in the parent: an ordinary gtest failure.
    ADD_FAILURE() << msg;
    return;
  }
  if (g_messages >= kMaxMessages) {
    ++g_suppressed;
    return;
  }
  ++g_messages;
  writeAll(g_logFd, msg + kRecordSep);
}

[[noreturn]] void childExit(int code) {
  if (g_suppressed > 0 && g_logFd >= 0) {
    writeAll(g_logFd, "rank " + std::to_string(g_rank) + ": " + std::to_string(g_suppressed) +
                          " more failures not shown" + kRecordSep);
  }
  if (g_logFd >= 0) ::close(g_logFd);
  ::_exit(code);
}

[[noreturn]] void fatalExit() {
  if (g_comm != nullptr) weftCommAbort(g_comm);
  childExit(1);
}

std::string waitStatusText(int status) {
  std::ostringstream os;
  if (WIFEXITED(status)) {
    os << "exited with code " << WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    os << "was killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
  } else {
    os << "ended with wait status " << status;
  }
  return os.str();
}

std::string outcomeText(const Outcome& o) {
  switch (o.kind) {
    case Outcome::kExit:
      return "exit with code " + std::to_string(o.value);
    case Outcome::kSignal:
      return "be killed by signal " + std::to_string(o.value);
    case Outcome::kAny:
      return "end in any way";
  }
  return "?";
}

bool matches(const Outcome& o, int status) {
  switch (o.kind) {
    case Outcome::kExit:
      return WIFEXITED(status) && WEXITSTATUS(status) == o.value;
    case Outcome::kSignal:
      return WIFSIGNALED(status) && WTERMSIG(status) == o.value;
    case Outcome::kAny:
      return true;
  }
  return false;
}

const char* const kLauncherVars[] = {
    "WEFT_RANK",
    "WEFT_WORLD_SIZE",
    "WEFT_ADDR",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURMD_NODENAME",
};

// A test run under mpirun or srun must not rendezvous through the
// launcher's PMIx server: the children are not its processes.
void unsetPmixEnv() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "PMIX_", 5) == 0) names.emplace_back(*e, std::strcspn(*e, "="));
  for (const std::string& n : names) ::unsetenv(n.c_str());
}

void setupChildEnv(const RankContext& ctx, int port, const RunOptions& opts) {
  for (const char* v : kLauncherVars) ::unsetenv(v);
  unsetPmixEnv();
  const std::string rank = std::to_string(ctx.rank);
  const std::string size = std::to_string(ctx.nranks);
  const std::string portStr = std::to_string(port);
  switch (ctx.init) {
    case InitMode::kUniqueId:
      break;
    case InitMode::kWeftEnv:
      ::setenv("WEFT_RANK", rank.c_str(), 1);
      ::setenv("WEFT_WORLD_SIZE", size.c_str(), 1);
      ::setenv("WEFT_ADDR", ("127.0.0.1:" + portStr).c_str(), 1);
      break;
    case InitMode::kTorchEnv:
      ::setenv("RANK", rank.c_str(), 1);
      ::setenv("LOCAL_RANK", rank.c_str(), 1);
      ::setenv("WORLD_SIZE", size.c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", size.c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", portStr.c_str(), 1);
      break;
    case InitMode::kSlurmEnv:
      ::setenv("SLURM_PROCID", rank.c_str(), 1);
      ::setenv("SLURM_NTASKS", size.c_str(), 1);
      ::setenv("SLURM_STEP_NODELIST", "localhost", 1);
      ::setenv("SLURM_JOB_ID", portStr.c_str(), 1);
      ::setenv("SLURM_STEP_ID", "0", 1);
      ::setenv("SLURMD_NODENAME", "localhost", 1);
      ::setenv("MASTER_PORT", portStr.c_str(), 1);
      break;
  }
  for (const auto& [k, v] : opts.env) ::setenv(k.c_str(), v.c_str(), 1);
}

// Runs the body of one child; never returns.
[[noreturn]] void childMain(const RankContext& ctx, int port, const std::string& logPath,
                            const RunOptions& opts, const std::function<void()>& run,
                            pid_t parent) {
  // Die with the parent (e.g. when ctest kills a test that ran too long).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(99);
  g_rank = ctx.rank;
  g_logFd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  g_failed = false;
  g_messages = 0;
  g_suppressed = 0;
  g_comm = nullptr;
  g_trace.clear();
  setupChildEnv(ctx, port, opts);
  const std::string who = "rank " + std::to_string(ctx.rank) + ": ";
  try {
    run();
  } catch (const weft::Error& e) {
    recordFailure(who + "uncaught weft::Error " + describeResult(e.code()) + ": " + e.what());
    fatalExit();
  } catch (const std::exception& e) {
    recordFailure(who + "uncaught exception: " + e.what());
    fatalExit();
  } catch (...) {
    recordFailure(who + "uncaught exception of unknown type");
    fatalExit();
  }
  childExit(g_failed ? 1 : 0);
}

struct Child {
  pid_t pid = -1;
  bool done = false;
  int status = 0;
  bool killed = false;  // by the harness, for running too long
  std::string killReason;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void runImpl(int n, const RunOptions& opts, const std::function<void(const RankContext&)>& child) {
  ASSERT_GE(n, 1) << "runRanks needs at least one rank";
  std::set<std::string> before;
  if (opts.checkShm) {
    for (auto& f : leakedShmFiles()) before.insert(f);
  }

  char dirTemplate[] = "/tmp/weft-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr) << "mkdtemp: " << strerror(errno);
  const std::string dir = dirTemplate;

  RankContext base;
  base.nranks = n;
  base.init = opts.init;
  int port = 0;
  if (opts.init != InitMode::kUniqueId) {
    port = freeTcpPort();
    ASSERT_GT(port, 0) << "no free TCP port";
  }

  // The children are forked first and get the unique id through a pipe: the
  // parent calls weftGetUniqueId only after the last fork. (Forking while the
  // id's rendezvous thread is starting can copy a lock held by that thread
  // into the child -- ASan's allocator takes one in every new thread -- and
  // the child then deadlocks in its first thread creation.)
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  std::vector<Child> kids(n);
  std::vector<int> idWriters;
  for (int k = 0; k < n; ++k) {
    RankContext ctx = base;
    ctx.rank = k;
    const std::string logPath = dir + "/rank" + std::to_string(k) + ".log";
    int idPipe[2] = {-1, -1};
    if (opts.init == InitMode::kUniqueId && ::pipe2(idPipe, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe: " << strerror(errno);
      break;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      if (opts.init == InitMode::kUniqueId) {
        for (int fd : idWriters) ::close(fd);
        ::close(idPipe[1]);
        size_t got = 0;
        char* dst = reinterpret_cast<char*>(&ctx.id);
        while (got < sizeof ctx.id) {
          ssize_t r = ::read(idPipe[0], dst + got, sizeof ctx.id - got);
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) ::_exit(3);  // the parent could not make an id; it reports that
          got += size_t(r);
        }
        ::close(idPipe[0]);
      }
      childMain(
          ctx, port, logPath, opts, [&] { child(ctx); }, parent);
    }
    if (opts.init == InitMode::kUniqueId) {
      ::close(idPipe[0]);
      if (pid > 0) {
        idWriters.push_back(idPipe[1]);
      } else {
        ::close(idPipe[1]);
      }
    }
    if (pid < 0) {
      ADD_FAILURE() << "fork for rank " << k << " failed: " << strerror(errno);
      for (int fd : idWriters) ::close(fd);
      for (int j = 0; j < k; ++j) ::kill(kids[j].pid, SIGKILL);
      for (int j = 0; j < k; ++j) ::waitpid(kids[j].pid, nullptr, 0);
      std::filesystem::remove_all(dir);
      return;
    }
    kids[k].pid = pid;
  }
  if (opts.init == InitMode::kUniqueId) {
    weftUniqueId id;
    const weftResult_t r = weftGetUniqueId(&id);
    if (r != weftSuccess) {
      ADD_FAILURE() << "weftGetUniqueId returned " << describeResult(r) << ": "
                    << weftGetLastError(nullptr);
    } else {
      for (int fd : idWriters)
        writeAll(fd, std::string(reinterpret_cast<const char*>(&id), sizeof id));
    }
    for (int fd : idWriters) ::close(fd);
  }

  auto expectedOf = [&](int k) {
    return k < int(opts.expected.size()) ? opts.expected[k] : Outcome::exitCode(0);
  };

  // Collect the children with a deadline; poll with a short back-off.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + opts.timeout;
  auto graceDeadline = Clock::time_point::max();
  int firstBad = -1;
  int running = n;
  auto pause = std::chrono::microseconds(200);
  while (running > 0) {
    bool progressed = false;
    for (int k = 0; k < n; ++k) {
      if (kids[k].done) continue;
      int status = 0;
      pid_t r = ::waitpid(kids[k].pid, &status, WNOHANG);
      if (r == kids[k].pid || (r < 0 && errno != EINTR)) {
        kids[k].done = true;
        kids[k].status = r < 0 ? 0 : status;
        --running;
        progressed = true;
        if (!matches(expectedOf(k), kids[k].status) && firstBad < 0) {
          firstBad = k;
          graceDeadline = Clock::now() + opts.failGrace;
        }
      }
    }
    if (running == 0) break;
    const auto now = Clock::now();
    if (now >= deadline || now >= graceDeadline) {
      const bool timedOut = now >= deadline;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
      for (int k = 0; k < n; ++k) {
        if (kids[k].done) continue;
        ::kill(kids[k].pid, SIGKILL);
        int status = 0;
        while (::waitpid(kids[k].pid, &status, 0) < 0 && errno == EINTR) {
        }
        kids[k].done = true;
        kids[k].status = status;
        kids[k].killed = true;
        std::ostringstream why;
        if (timedOut) {
          why << "rank " << k << " hung: still running after " << ms
              << " ms (harness timeout); killed";
        } else {
          why << "rank " << k << " hung: still running " << opts.failGrace.count()
              << " ms after rank " << firstBad << " ended unexpectedly; killed";
        }
        kids[k].killReason = why.str();
      }
      running = 0;
      break;
    }
    if (progressed) {
      pause = std::chrono::microseconds(200);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }

  // Report: every child's own messages, then how it ended.
  for (int k = 0; k < n; ++k) {
    const std::string log = readFile(dir + "/rank" + std::to_string(k) + ".log");
    size_t pos = 0;
    int messages = 0;
    while (pos < log.size()) {
      size_t end = log.find(kRecordSep, pos);
      if (end == std::string::npos) end = log.size();
      if (end > pos) {
        ADD_FAILURE() << log.substr(pos, end - pos);
        ++messages;
      }
      pos = end + 1;
    }
    // A child that reported its failures exits with 1: no need to say so.
    const bool explained = messages > 0 && WIFEXITED(kids[k].status) &&
                           WEXITSTATUS(kids[k].status) == 1 &&
                           expectedOf(k).kind == Outcome::kExit && expectedOf(k).value == 0;
    if (kids[k].killed) {
      ADD_FAILURE() << kids[k].killReason;
    } else if (!matches(expectedOf(k), kids[k].status) && !explained) {
      ADD_FAILURE() << "rank " << k << " " << waitStatusText(kids[k].status)
                    << " but was expected to " << outcomeText(expectedOf(k));
    }
  }
  std::filesystem::remove_all(dir);

  if (opts.checkShm) {
    for (const auto& f : leakedShmFiles()) {
      if (before.count(f)) continue;
      ADD_FAILURE() << "/dev/shm/" << f
                    << " was left behind after the run (no live process holds it); removing it";
      std::error_code ec;
      std::filesystem::remove_all("/dev/shm/" + f, ec);
    }
  }
}

std::vector<std::string> weftShmEntries() {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "weft", 4) == 0) out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

// Every /dev/shm/weft* path some live process has open or mapped.
std::set<std::string> heldShmEntries() {
  std::set<std::string> held;
  const std::string prefix = "/dev/shm/";
  auto note = [&](std::string path) {
    if (path.rfind(prefix, 0) != 0) return;
    path = path.substr(prefix.size());
    const size_t cut = path.find_first_of("/ ");
    if (cut != std::string::npos) path.resize(cut);
    if (path.rfind("weft", 0) == 0) held.insert(path);
  };
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return held;
  while (dirent* p = ::readdir(proc)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    const std::string base = std::string("/proc/") + p->d_name;
    if (DIR* fds = ::opendir((base + "/fd").c_str())) {
      while (dirent* f = ::readdir(fds)) {
        if (f->d_name[0] == '.') continue;
        char buf[4096];
        ssize_t len = ::readlink((base + "/fd/" + f->d_name).c_str(), buf, sizeof buf - 1);
        if (len > 0) note(std::string(buf, size_t(len)));
      }
      ::closedir(fds);
    }
    std::ifstream maps(base + "/maps");
    std::string line;
    while (std::getline(maps, line)) {
      const size_t at = line.find(prefix);
      if (at != std::string::npos) note(line.substr(at));
    }
  }
  ::closedir(proc);
  return held;
}

}  // namespace

weftResult_t RankContext::initComm(weftComm_t* comm, weftConfig_t* config) const {
  switch (init) {
    case InitMode::kUniqueId:
      return config ? weftCommInitRankConfig(comm, nranks, id, rank, config)
                    : weftCommInitRank(comm, nranks, id, rank);
    case InitMode::kWeftEnv:
    case InitMode::kTorchEnv:
    case InitMode::kSlurmEnv:
      return weftCommInitFromEnv(comm, config);
  }
  return weftInternalError;
}

void runRanks(int n, const RankBody& body, RunOptions opts) {
  runImpl(n, opts, [&](const RankContext& ctx) {
    weftConfig_t config = opts.config;
    weftComm_t comm = nullptr;
    const weftResult_t r = ctx.initComm(&comm, opts.useConfig ? &config : nullptr);
    RANK_CHECK_OK(r) << "communicator init (rank " << ctx.rank << " of " << ctx.nranks << ")";
    RANK_ASSERT(comm != nullptr) << "init returned success but no communicator";
    setCurrentComm(comm);
    body(comm, ctx.rank, ctx.nranks);
    setCurrentComm(nullptr);
    RANK_EXPECT_OK(weftCommDestroy(comm));
  });
}

void runRanksRaw(int n, const RawBody& body, RunOptions opts) {
  runImpl(n, opts, body);
}

void rankBarrier(weftComm_t comm) {
  int one = 1;
  int n = 0;
  RANK_CHECK_OK(weftCommCount(comm, &n));
  RANK_CHECK_OK(weftAllReduce(&one, &one, 1, weftInt32, weftSum, comm, nullptr)) << "barrier";
  RANK_ASSERT(one == n) << "barrier allreduce gave " << one << ", expected " << n;
}

void setCurrentComm(weftComm_t comm) {
  g_comm = comm;
}
weftComm_t currentComm() {
  return g_comm;
}
bool rankFailed() {
  return g_failed;
}
int currentRank() {
  return g_rank;
}

std::vector<std::string> leakedShmFiles() {
  std::vector<std::string> entries = weftShmEntries();
  if (entries.empty()) return {};
  const std::set<std::string> held = heldShmEntries();
  std::vector<std::string> out;
  for (auto& e : entries) {
    if (held.count(e)) continue;
    struct stat st;
    if (::lstat(("/dev/shm/" + e).c_str(), &st) != 0) continue;  // gone meanwhile
    out.push_back(e);
  }
  return out;
}

int freeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

FailureReporter::FailureReporter(const char* file, int line, const char* expr, bool fatal)
    : fatal_(fatal) {
  std::ostringstream os;
  os << "rank " << g_rank << ": " << file << ":" << line << ": check failed: " << expr;
  head_ = os.str();
}

FailureReporter::FailureReporter(const char* file, int line, const char* expr, bool fatal,
                                 weftResult_t got, weftResult_t want)
    : fatal_(fatal) {
  std::ostringstream os;
  const char* last = weftGetLastError(g_comm);
  os << "rank " << g_rank << ": " << file << ":" << line << ": " << expr << "\n  returned "
     << describeResult(got) << ", expected " << describeResult(want) << "\n  weftGetLastError: \""
     << (last ? last : "<null>") << "\"";
  head_ = os.str();
}

FailureReporter::~FailureReporter() {
  std::string msg = head_;
  const std::string user = user_.str();
  if (!user.empty()) msg += "\n  " + user;
  for (auto it = g_trace.rbegin(); it != g_trace.rend(); ++it) msg += "\n  while: " + *it;
  if (fatal_ && g_logFd >= 0) msg += "\n  (fatal: this rank aborts its communicator and exits)";
  recordFailure(msg);
  if (fatal_ && g_logFd >= 0) fatalExit();
}

RankSignal::RankSignal() {
  if (::pipe2(fds_, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe: " << strerror(errno);
}

RankSignal::~RankSignal() {
  if (fds_[0] >= 0) ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
}

void RankSignal::post(int times) {
  for (int i = 0; i < times; ++i) {
    const char c = 1;
    while (::write(fds_[1], &c, 1) < 0 && errno == EINTR) {
    }
  }
}

void RankSignal::wait() {
  char c;
  ssize_t r;
  while ((r = ::read(fds_[0], &c, 1)) < 0 && errno == EINTR) {
  }
  RANK_ASSERT(r == 1) << "RankSignal::wait: read returned " << r;
}

bool RankSignal::tryWait() {
  pollfd p{fds_[0], POLLIN, 0};
  if (::poll(&p, 1, 0) != 1) return false;
  char c;
  return ::read(fds_[0], &c, 1) == 1;
}

ScopedRankTrace::ScopedRankTrace(std::string text) {
  g_trace.push_back(std::move(text));
}
ScopedRankTrace::~ScopedRankTrace() {
  g_trace.pop_back();
}

}  // namespace weft::test
