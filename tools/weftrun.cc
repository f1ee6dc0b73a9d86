// weftrun: start N local ranks of a program, the way mpirun -np N would on
// one host, with the environment that weft's env bootstrap reads.
//
//   weftrun -n N [--tag-output] [--port P] [--timeout S] prog [args...]
//
// Each rank i gets WEFT_RANK=i, WEFT_WORLD_SIZE=N, WEFT_LOCAL_RANK=i,
// WEFT_LOCAL_SIZE=N, WEFT_ADDR=127.0.0.1:PORT and a shared random WEFT_SECRET.
//
// --hosts H deals the ranks to H simulated hosts in blocks (rank i on host
// i * H / N, as mpirun's default by-slot mapping fills one node before the
// next): each rank gets WEFT_HOSTID naming its host and its local rank and
// size within it, so ranks of one host share memory and the rest talk TCP
// over loopback. It is how the cross-host algorithms (hier) and the tuner's
// choices for several hosts are exercised on one machine; the ranks still
// share this machine's CPUs, which a real cluster's hosts do not.
//
// Lifetime rules:
//  - all ranks live in one process group led by rank 0, so that a signal to
//    the group also reaches anything a rank started;
//  - SIGINT/SIGTERM/SIGHUP sent to weftrun are forwarded to the group;
//  - the first rank that fails (non-zero exit or death by signal) decides the
//    exit code (the code, or 128+signo); the others get SIGTERM, then SIGKILL
//    after a grace period;
//  - each rank gets PR_SET_PDEATHSIG=SIGKILL, so the ranks die with weftrun
//    even if weftrun itself is killed by SIGKILL;
//  - when every rank has exited, whatever is left in the group is killed.
//
// The event loop is a single poll() over a signalfd and, with --tag-output,
// the ranks' stdout/stderr pipes.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 4096;
constexpr auto kGrace = std::chrono::seconds(3);
// After the last rank has exited, how long to keep reading output that a
// leftover process might still hold open.
constexpr auto kDrainLimit = std::chrono::milliseconds(500);
// A partial line longer than this is forwarded without waiting for '\n'.
constexpr size_t kMaxLine = 64 * 1024;
constexpr int kUsageExit = 2;
constexpr int kTimeoutExit = 124;

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: weftrun -n N [options] [--] prog [args...]\n"
               "\n"
               "Starts N local ranks of prog with the weft environment set:\n"
               "  WEFT_RANK, WEFT_WORLD_SIZE, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE,\n"
               "  WEFT_ADDR=127.0.0.1:PORT, WEFT_SECRET=<random 64-bit hex>.\n"
               "\n"
               "options:\n"
               "  -n N            number of ranks (1..%d), required\n"
               "  --tag-output    prefix every output line with [rank]\n"
               "  --port P        rendezvous port (default: a free port)\n"
               "  --timeout S     kill all ranks after S seconds, exit %d\n"
               "  --bind-to W     core (the default): pin rank i to allowed CPU i mod C;\n"
               "                  none: no pinning\n"
               "  --hosts H       deal the ranks to H simulated hosts in blocks (rank i\n"
               "                  on host i*H/N): WEFT_HOSTID, WEFT_LOCAL_RANK and\n"
               "                  WEFT_LOCAL_SIZE per host; TCP between hosts\n"
               "  -h, --help      show this help\n"
               "\n"
               "Exit code: 0 if every rank exits 0, else the first failing rank's\n"
               "exit code (128+signal if it was killed); the remaining ranks are\n"
               "sent SIGTERM, then SIGKILL after %d s.\n",
               kMaxRanks, kTimeoutExit, static_cast<int>(kGrace.count()));
}

[[noreturn]] void UsageError(const char* fmt, const char* arg) {
  std::fprintf(stderr, "weftrun: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr,
               "\nusage: weftrun -n N [--tag-output] [--port P] [--timeout S] [--] prog "
               "[args...]\n(weftrun -h for more)\n");
  std::exit(kUsageExit);
}

struct Options {
  int nranks = 0;
  bool tag_output = false;
  int port = 0;            // 0: pick a free one
  int hosts = 1;           // simulated hosts the ranks are dealt to
  double timeout_s = 0.0;  // 0: none
  enum class Bind { kCore, kNone } bind = Bind::kCore;
  std::vector<char*> argv;  // prog + args, null-terminated
};

std::optional<long> ParseLong(std::string_view s) {
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> ParseSeconds(const char* s) {
  if (*s == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno != 0 || *end != '\0' || !(v > 0.0) || v > 1e7) return std::nullopt;
  return v;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  int i = 1;
  // Returns the value of an option given as "--opt V", "--opt=V" or "-nV".
  auto value = [&](std::string_view arg, std::string_view name) -> const char* {
    if (arg.size() > name.size()) {
      size_t skip = name.size() + (arg[name.size()] == '=' ? 1 : 0);
      return argv[i] + skip;
    }
    if (i + 1 >= argc) UsageError("option %s needs a value", argv[i]);
    return argv[++i];
  };
  auto is_opt = [](std::string_view arg, std::string_view name) {
    return arg == name || (arg.starts_with(name) && arg.size() > name.size() &&
                           (arg[name.size()] == '=' || name == "-n"));
  };
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      PrintUsage(stdout);
      std::exit(0);
    } else if (arg == "--tag-output") {
      o.tag_output = true;
    } else if (is_opt(arg, "-n") || is_opt(arg, "--np")) {
      const char* v = value(arg, arg.starts_with("--np") ? "--np" : "-n");
      auto n = ParseLong(v);
      if (!n || *n < 1 || *n > kMaxRanks) UsageError("bad rank count '%s'", v);
      o.nranks = static_cast<int>(*n);
    } else if (is_opt(arg, "--port")) {
      const char* v = value(arg, "--port");
      auto p = ParseLong(v);
      if (!p || *p < 1 || *p > 65535) UsageError("bad port '%s' (1..65535)", v);
      o.port = static_cast<int>(*p);
    } else if (is_opt(arg, "--bind-to")) {
      const std::string_view v = value(arg, "--bind-to");
      if (v == "core")
        o.bind = Options::Bind::kCore;
      else if (v == "none")
        o.bind = Options::Bind::kNone;
      else
        UsageError("bad --bind-to '%s' (core or none)", argv[i]);
    } else if (is_opt(arg, "--hosts")) {
      const char* v = value(arg, "--hosts");
      auto h = ParseLong(v);
      if (!h || *h < 1 || *h > kMaxRanks) UsageError("bad host count '%s' (1..ranks)", v);
      o.hosts = static_cast<int>(*h);
    } else if (is_opt(arg, "--timeout")) {
      const char* v = value(arg, "--timeout");
      auto t = ParseSeconds(v);
      if (!t) UsageError("bad timeout '%s' (seconds > 0)", v);
      o.timeout_s = *t;
    } else {
      UsageError("unknown option '%s'", argv[i]);
    }
  }
  if (o.nranks == 0) UsageError("%s", "missing -n N");
  if (o.hosts > o.nranks) UsageError("%s", "--hosts is larger than the rank count");
  if (i >= argc) UsageError("%s", "missing program to run");
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  return o;
}

[[gnu::format(printf, 1, 2)]] std::string Format(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "weftrun: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

// A port that was free a moment ago: bind port 0, read it back, close.
int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind");
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) Die("getsockname");
  close(fd);
  return ntohs(addr.sin_port);
}

std::string RandomSecret() {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("open /dev/urandom");
  size_t got = 0;
  while (got < sizeof(v)) {
    ssize_t r = read(fd, reinterpret_cast<char*>(&v) + got, sizeof(v) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) Die("read /dev/urandom");
    got += static_cast<size_t>(r);
  }
  close(fd);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // reader gone (EPIPE) or similar: drop the output
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// One of a rank's output pipes, forwarded line by line with a prefix.
struct Stream {
  int fd = -1;      // read end; -1 once closed
  int out_fd = 1;   // where it goes (1 or 2)
  std::string buf;  // bytes not yet forwarded
  bool at_line_start = true;
};

void Emit(Stream& s, const std::string& prefix, std::string_view data) {
  std::string out;
  out.reserve(data.size() + prefix.size() + 1);
  while (!data.empty()) {
    if (s.at_line_start) out += prefix;
    size_t nl = data.find('\n');
    size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
    out.append(data.substr(0, take));
    s.at_line_start = nl != std::string_view::npos;
    data.remove_prefix(take);
  }
  WriteAll(s.out_fd, out.data(), out.size());
}

// Reads what is available; forwards complete lines. Returns false at EOF.
bool Pump(Stream& s, const std::string& prefix) {
  char chunk[16384];
  ssize_t r = read(s.fd, chunk, sizeof(chunk));
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (r <= 0) {
    if (!s.buf.empty()) {
      s.buf += '\n';
      Emit(s, prefix, s.buf);
      s.buf.clear();
    }
    close(s.fd);
    s.fd = -1;
    return false;
  }
  s.buf.append(chunk, static_cast<size_t>(r));
  size_t last_nl = s.buf.rfind('\n');
  if (last_nl != std::string::npos) {
    Emit(s, prefix, std::string_view(s.buf).substr(0, last_nl + 1));
    s.buf.erase(0, last_nl + 1);
  }
  if (s.buf.size() > kMaxLine) {
    Emit(s, prefix, s.buf);
    s.buf.clear();
  }
  return true;
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
  std::string prefix;
  Stream out, err;
};

class Launcher {
 public:
  explicit Launcher(Options opts) : opts_(std::move(opts)) {}

  int Run() {
    BlockSignals();
    RaiseFdLimit();
    const int port = opts_.port != 0 ? opts_.port : PickFreePort();
    const std::string addr = Format("127.0.0.1:%d", port);
    const std::string secret = RandomSecret();

    ranks_.resize(static_cast<size_t>(opts_.nranks));
    for (int r = 0; r < opts_.nranks; ++r) {
      Spawn(r, addr, secret);
      if (failed_) break;  // cannot even start them all
    }
    if (opts_.timeout_s > 0) {
      timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(opts_.timeout_s));
    }
    Loop();
    if (exit_code_) return *exit_code_;
    if (forwarded_signal_ != 0) return 128 + forwarded_signal_;
    return 0;
  }

 private:
  void BlockSignals() {
    sigemptyset(&handled_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled_, s);
    if (sigprocmask(SIG_BLOCK, &handled_, &saved_mask_) != 0) Die("sigprocmask");
    sigfd_ = signalfd(-1, &handled_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd_ < 0) Die("signalfd");
    // A closed stdout (weftrun ... | head) must not kill the launcher.
    signal(SIGPIPE, SIG_IGN);
  }

  // --tag-output holds two pipes per rank; many ranks need more than the
  // usual soft limit of 1024 descriptors.
  static void RaiseFdLimit() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
  }

  struct HostSlot {
    int host, localRank, localSize;
  };
  // Host h holds the ranks r with r * H / N == h: from ceil(h * N / H) on.
  HostSlot HostOf(int r) const {
    const long n = opts_.nranks, h = opts_.hosts;
    const long host = r * h / n;
    auto first = [&](long k) { return static_cast<int>((k * n + h - 1) / h); };
    return {static_cast<int>(host), r - first(host), first(host + 1) - first(host)};
  }

  void Spawn(int r, const std::string& addr, const std::string& secret) {
    Rank& rk = ranks_[static_cast<size_t>(r)];
    rk.prefix = Format("[%d] ", r);
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (opts_.tag_output) {
      if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
        Fail(1, "pipe failed for rank %d: %s", r, std::strerror(errno));
        for (int fd : {out_pipe[0], out_pipe[1]}) {
          if (fd >= 0) close(fd);
        }
        return;
      }
    }
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      Fail(1, "fork failed for rank %d: %s", r, std::strerror(errno));
      if (opts_.tag_output) {
        for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
      }
      return;
    }
    if (pid == 0) {
      // Child. The parent is single-threaded, so ordinary calls are safe here.
      setpgid(0, pgid_);  // pgid_ == 0 for rank 0: it becomes the leader
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // launcher already gone
      signal(SIGPIPE, SIG_DFL);
      sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) {
        dup2(devnull, 0);
        if (devnull != 0) close(devnull);
      }
      if (opts_.tag_output) {
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
      }
      PinToCpu(r);
      const std::string n = std::to_string(opts_.nranks), i = std::to_string(r);
      setenv("WEFT_RANK", i.c_str(), 1);
      setenv("WEFT_WORLD_SIZE", n.c_str(), 1);
      const HostSlot slot = HostOf(r);
      setenv("WEFT_LOCAL_RANK", std::to_string(slot.localRank).c_str(), 1);
      setenv("WEFT_LOCAL_SIZE", std::to_string(slot.localSize).c_str(), 1);
      if (opts_.hosts > 1) setenv("WEFT_HOSTID", Format("weftrun-host%d", slot.host).c_str(), 1);
      setenv("WEFT_ADDR", addr.c_str(), 1);
      setenv("WEFT_SECRET", secret.c_str(), 1);
      execvp(opts_.argv[0], opts_.argv.data());
      std::fprintf(stderr, "weftrun: cannot execute '%s': %s\n", opts_.argv[0],
                   std::strerror(errno));
      _exit(127);
    }
    // Parent: set the group here too, so there is no window in which a
    // signal to the group misses the new child.
    if (pgid_ == 0) pgid_ = pid;
    setpgid(pid, pgid_);  // may fail with EACCES after exec; the child did it
    rk.pid = pid;
    rk.running = true;
    ++running_;
    if (opts_.tag_output) {
      close(out_pipe[1]);
      close(err_pipe[1]);
      rk.out = Stream{out_pipe[0], 1, {}, true};
      rk.err = Stream{err_pipe[0], 2, {}, true};
      fcntl(rk.out.fd, F_SETFL, O_NONBLOCK);
      fcntl(rk.err.fd, F_SETFL, O_NONBLOCK);
    }
  }

  // Spinning hand-offs between ranks need each rank on its own core; the
  // scheduler alone often stacks two ranks on one. With more ranks than
  // CPUs, rank i still goes to CPU i mod C (as mpirun's --bind-to
  // core:overload-allowed): left to the scheduler, 4 ranks on 2 CPUs ran a
  // shared-memory allreduce of 8 B-1 KiB in 16.6-24.9 us over 200
  // iterations, pinned in 5.2-8.6 us (6 launches each), and no size up to
  // 8 MiB, over shared memory or TCP, ran slower pinned. With the serial
  // OpenBLAS weft now links, unpinned ranks measured as fast as pinned ones
  // at 8 B-32 KiB; the gap left with Debian's pthread OpenBLAS came from
  // its thread pool, which only unpinned ranks start (README, "With more
  // ranks than CPUs").
  void PinToCpu(int r) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    const int ncpus = CPU_COUNT(&allowed);
    if (opts_.bind == Options::Bind::kNone || ncpus == 0) return;
    int want = r % ncpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      if (want-- == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
        return;
      }
    }
  }

  void SignalGroup(int sig) {
    if (pgid_ > 0) kill(-pgid_, sig);
  }

  // Starts the SIGTERM-then-SIGKILL sequence (once).
  void Terminate() {
    if (kill_at_) return;
    SignalGroup(SIGTERM);
    kill_at_ = Clock::now() + kGrace;
  }

  [[gnu::format(printf, 3, 4)]] void Fail(int code, const char* fmt, ...) {
    if (!exit_code_) {
      exit_code_ = code;
      char why[512];
      va_list ap;
      va_start(ap, fmt);
      std::vsnprintf(why, sizeof(why), fmt, ap);
      va_end(ap);
      std::fprintf(stderr, "weftrun: %s%s\n", why,
                   running_ > 0 ? "; terminating the other ranks" : "");
    }
    failed_ = true;
    Terminate();
  }

  void Reap() {
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        Rank& rk = ranks_[r];
        if (rk.pid != pid || !rk.running) continue;
        rk.running = false;
        --running_;
        if (failed_) continue;  // deaths after a failure or signal are its doing
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
          Fail(WEXITSTATUS(status), "rank %zu exited with code %d", r, WEXITSTATUS(status));
        } else if (WIFSIGNALED(status)) {
          int sig = WTERMSIG(status);
          Fail(128 + sig, "rank %zu killed by signal %d (%s)", r, sig, strsignal(sig));
        }
      }
    }
  }

  void HandleSignals() {
    signalfd_siginfo si;
    while (read(sigfd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // Reap() runs after every wake-up
      failed_ = true;                // deaths that follow are the signal's doing
      if (forwarded_signal_ != 0) {
        // Asked twice: stop waiting for a clean exit.
        SignalGroup(SIGKILL);
        kill_at_ = Clock::time_point::max();
        continue;
      }
      forwarded_signal_ = sig;
      SignalGroup(sig);
      if (!kill_at_) kill_at_ = Clock::now() + kGrace;
    }
  }

  void Loop() {
    std::optional<Clock::time_point> drain_until;
    for (;;) {
      Reap();
      if (running_ == 0) {
        if (!drain_until) {
          // Nothing of the job may outlive it.
          SignalGroup(SIGKILL);
          drain_until = Clock::now() + kDrainLimit;
        }
        bool open = false;
        for (auto& rk : ranks_) open = open || rk.out.fd >= 0 || rk.err.fd >= 0;
        if (!open || Clock::now() >= *drain_until) break;
      }

      auto now = Clock::now();
      if (timeout_at_ && now >= *timeout_at_ && running_ > 0) {
        timeout_at_.reset();
        Fail(kTimeoutExit, "timeout after %g s", opts_.timeout_s);
      }
      if (kill_at_ && now >= *kill_at_ && running_ > 0) {
        std::fprintf(stderr, "weftrun: ranks still alive after %d s, sending SIGKILL\n",
                     static_cast<int>(kGrace.count()));
        SignalGroup(SIGKILL);
        kill_at_ = Clock::time_point::max();  // once
      }

      std::vector<pollfd> fds;
      std::vector<Stream*> streams;
      fds.push_back({sigfd_, POLLIN, 0});
      for (auto& rk : ranks_) {
        for (Stream* s : {&rk.out, &rk.err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
      int wait_ms = -1;
      auto limit = [&](std::optional<Clock::time_point> t) {
        if (!t || *t == Clock::time_point::max()) return;
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(*t - now).count();
        ms = ms < 0 ? 0 : ms;
        if (wait_ms < 0 || ms < wait_ms) wait_ms = static_cast<int>(ms);
      };
      if (running_ > 0) {
        limit(timeout_at_);
        limit(kill_at_);
      }
      limit(drain_until);
      int n = poll(fds.data(), fds.size(), wait_ms);
      if (n < 0 && errno != EINTR) Die("poll");
      if (n <= 0) continue;
      if (fds[0].revents != 0) HandleSignals();
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        Rank* owner = nullptr;
        for (auto& rk : ranks_) {
          if (&rk.out == streams[k - 1] || &rk.err == streams[k - 1]) owner = &rk;
        }
        Pump(*streams[k - 1], owner->prefix);
      }
    }
  }

  Options opts_;
  std::vector<Rank> ranks_;
  int running_ = 0;
  pid_t pgid_ = 0;
  int sigfd_ = -1;
  sigset_t handled_{}, saved_mask_{};
  bool failed_ = false;
  int forwarded_signal_ = 0;
  std::optional<int> exit_code_;
  std::optional<Clock::time_point> timeout_at_, kill_at_;
};

}  // namespace

int main(int argc, char** argv) {
  Options opts = ParseArgs(argc, argv);
  return Launcher(std::move(opts)).Run();
}
