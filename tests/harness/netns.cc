#include "harness/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace weft::test {
namespace {

std::atomic<int> labCounter{0};
constexpr const char* kPrefix = "wft";
constexpr int kRootPort = 29500;

// Deletes namespaces named wft<pid>-... whose pid no longer runs.
void removeStale() {
  DIR* d = opendir("/var/run/netns");
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    int pid = 0, n = 0;
    if (std::sscanf(e->d_name, "wft%d-%*d-%n", &pid, &n) == 1 && n > 0 && pid > 0 &&
        kill(pid, 0) != 0 && errno == ESRCH)
      stale.push_back(e->d_name);
  }
  closedir(d);
  for (const auto& s : stale) NetnsLab::ip("netns del " + s);
}

}  // namespace

bool NetnsLab::ip(const std::string& args, std::string* err) {
  const std::string cmd = "ip " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    if (err) *err = "cannot run ip";
    return false;
  }
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  if (rc != 0 && err) *err = "`" + cmd + "` failed: " + out;
  return rc == 0;
}

std::string NetnsLab::unavailable() {
  if (geteuid() != 0) return "network namespace tests need root";
  if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 &&
      access("/usr/bin/ip", X_OK) != 0 && access("/bin/ip", X_OK) != 0)
    return "network namespace tests need iproute2 (`ip`)";
  const std::string probe = std::string(kPrefix) + std::to_string(getpid()) + "-probe-x";
  std::string err;
  if (!ip("netns add " + probe, &err)) return "cannot create a network namespace: " + err;
  ip("netns del " + probe);
  return "";
}

std::string NetnsLab::ipv4(int k, int net) {
  return "10." + std::to_string(77 + net) + ".0." + std::to_string(k + 1);
}

std::string NetnsLab::ipv6(int k, int net) {
  return "fd00:" + std::to_string(77 + net) + "::" + std::to_string(k + 1);
}

NetnsLab::NetnsLab(Options options) : options_(options) {
  if (std::string why = unavailable(); !why.empty()) {
    error_ = why;
    return;
  }
  removeStale();
  const std::string base = std::string(kPrefix) + std::to_string(getpid()) + "-" +
                           std::to_string(labCounter.fetch_add(1)) + "-";
  hub_ = base + "h";
  for (int k = 0; k < options.namespaces; ++k) names_.push_back(base + std::to_string(k));
  const int nets = options.secondNet ? 2 : 1;
  std::vector<std::string> cmds = {"netns add " + hub_};
  for (int net = 0; net < nets; ++net) {
    const std::string br = "br" + std::to_string(net);
    cmds.push_back("-n " + hub_ + " link add " + br + " type bridge");
    cmds.push_back("-n " + hub_ + " link set " + br + " up");
  }
  for (int k = 0; k < options.namespaces; ++k) {
    const std::string& ns = names_[k];
    cmds.push_back("netns add " + ns);
    cmds.push_back("-n " + ns + " link set lo up");
    for (int net = 0; net < nets; ++net) {
      const std::string dev = "eth" + std::to_string(net);
      const std::string hubEnd = "v" + std::to_string(k) + "n" + std::to_string(net);
      cmds.push_back("-n " + hub_ + " link add " + hubEnd + " type veth peer name " + dev +
                     " netns " + ns);
      cmds.push_back("-n " + hub_ + " link set " + hubEnd + " master br" + std::to_string(net) +
                     " up");
      cmds.push_back("-n " + ns + " addr add " + ipv4(k, net) + "/24 dev " + dev);
      cmds.push_back("-n " + ns + " addr add " + ipv6(k, net) + "/64 dev " + dev + " nodad");
      cmds.push_back("-n " + ns + " link set " + dev + " up");
    }
  }
  for (const auto& c : cmds) {
    std::string err;
    if (!ip(c, &err)) {
      error_ = err;
      return;
    }
  }
}

NetnsLab::~NetnsLab() {
  for (const auto& ns : names_) ip("netns del " + ns);
  if (!hub_.empty()) ip("netns del " + hub_);
}

bool NetnsLab::enter(int k) const {
  const std::string path = "/var/run/netns/" + names_[k];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

namespace {

RunOptions withRendezvous(RunOptions opts, const NetnsRun& run) {
  opts.init = InitMode::kWeftEnv;
  const std::string host =
      run.ipv6 ? "[" + NetnsLab::ipv6(run.placement[0]) + "]" : NetnsLab::ipv4(run.placement[0]);
  opts.env.emplace_back("WEFT_ADDR", host + ":" + std::to_string(kRootPort));
  return opts;
}

}  // namespace

void runRanksInNetnsRaw(const NetnsLab& lab, const NetnsRun& run, const RawBody& body,
                        RunOptions opts) {
  const int n = static_cast<int>(run.placement.size());
  runRanksRaw(
      n,
      [&](const RankContext& ctx) {
        RANK_ASSERT(lab.enter(run.placement[ctx.rank]))
            << "cannot enter namespace " << lab.name(run.placement[ctx.rank]) << ": "
            << strerror(errno);
        body(ctx);
      },
      withRendezvous(std::move(opts), run));
}

void runRanksInNetns(const NetnsLab& lab, const NetnsRun& run, const RankBody& body,
                     RunOptions opts) {
  runRanksInNetnsRaw(
      lab, run,
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm)) << "init in namespace " << run.placement[ctx.rank];
        RANK_ASSERT(comm != nullptr);
        setCurrentComm(comm);
        body(comm, ctx.rank, ctx.nranks);
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      std::move(opts));
}

}  // namespace weft::test
