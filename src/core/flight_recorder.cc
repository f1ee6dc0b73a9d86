#include "core/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {
namespace {

// The coarse clock (a few ms of resolution, plenty to order a hang's events)
// costs no time-stamp-counter read: the recorder is on every collective's path.
int64_t wallUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

const char* stateName(FlightState s) {
  switch (s) {
    case FlightState::Posted:
      return "posted";
    case FlightState::InProgress:
      return "in progress";
    case FlightState::Done:
      return "done";
    case FlightState::Failed:
      return "failed";
  }
  return "unknown";
}

bool isReducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}
bool isRooted(CollKind k) {
  return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Gather ||
         k == CollKind::Scatter;
}

void appendEscaped(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

// The job part of a dump's file name: the launcher's job id where there is one.
std::string jobName() {
  if (auto j = envString("JOB_ID")) return *j;
  for (const char* v : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE"})
    if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return s;
  return "nojob";
}

// Keeps file names to [A-Za-z0-9._-].
std::string safeName(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return s.substr(0, 64);
}

std::mutex registryMu;
std::vector<std::weak_ptr<FlightRecorder>>& registry() {
  static auto* v = new std::vector<std::weak_ptr<FlightRecorder>>();
  return *v;
}

int signalPipe[2] = {-1, -1};

void onSignal(int) {
  const int saved = errno;
  const char byte = 'd';
  if (signalPipe[1] >= 0) (void)!write(signalPipe[1], &byte, 1);
  errno = saved;
}

void dumperMain() {
  for (;;) {
    char byte = 0;
    const ssize_t n = read(signalPipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    flightDumpAll(nullptr, "signal");
  }
}

}  // namespace

size_t flightCapacityFromEnv() {
  return static_cast<size_t>(std::clamp<int64_t>(envInt("FLIGHT_RECORDS", 256), 0, 1 << 20));
}

FlightRecorder::FlightRecorder(size_t capacity, uint64_t commId, std::string name, int rank,
                               int nranks)
    : enabled_(capacity > 0),
      ring_(std::max<size_t>(capacity, 1)),
      p2pRing_(std::max<size_t>(capacity / 4, 1)),
      commId_(commId),
      name_(std::move(name)),
      rank_(rank),
      nranks_(nranks) {}

namespace {

// Readies a reused entry without rebuilding it (no string or array churn on
// the hot path).
void reset(FlightEntry& e) {
  e.p2p = false;
  e.algo = "";
  e.state = FlightState::Posted;
  e.nWaiting = 0;
  e.startUs = e.endUs = 0;
  if (!e.error.empty()) e.error.clear();
}

}  // namespace

FlightEntry* FlightRecorder::find(uint64_t seq, bool p2p) {
  if (seq == 0) return nullptr;
  FlightEntry& e = p2p ? p2pRing_[seq % p2pRing_.size()] : ring_[seq % ring_.size()];
  return e.seq == seq && e.p2p == p2p ? &e : nullptr;
}

uint64_t FlightRecorder::post(const CollArgs& args, int rawOp) {
  std::lock_guard<SpinLock> lock(mu_);
  const uint64_t seq = ++nextSeq_;
  FlightEntry& e = ring_[seq % ring_.size()];
  reset(e);
  e.seq = seq;
  e.kind = args.kind;
  e.count = args.count;
  e.dtype = args.dtype;
  e.op = isReducing(args.kind) ? rawOp : -1;
  e.root = isRooted(args.kind) ? args.root : -1;
  e.postedUs = wallUs();
  return seq;
}

uint64_t FlightRecorder::postP2P(uint64_t bytes, int nops) {
  std::lock_guard<SpinLock> lock(mu_);
  const uint64_t seq = ++nextP2P_;
  FlightEntry& e = p2pRing_[seq % p2pRing_.size()];
  reset(e);
  e.seq = seq;
  e.p2p = true;
  e.kind = CollKind::Send;
  e.count = bytes;
  e.root = nops;  // shown as "ops"
  e.postedUs = wallUs();
  return seq;
}

void FlightRecorder::start(uint64_t seq, bool p2p, const char* algo) {
  std::lock_guard<SpinLock> lock(mu_);
  running_ = seq;
  runningP2P_ = p2p;
  if (FlightEntry* e = find(seq, p2p)) {
    e->algo = algo;
    e->state = FlightState::InProgress;
    e->startUs = wallUs();
  }
}

void FlightRecorder::finish(uint64_t seq, bool p2p, const Status& st) {
  std::lock_guard<SpinLock> lock(mu_);
  if (running_ == seq && runningP2P_ == p2p) running_ = 0;
  if (FlightEntry* e = find(seq, p2p)) {
    e->state = st.isOk() ? FlightState::Done : FlightState::Failed;
    e->endUs = wallUs();
    if (!st.isOk()) e->error = st.message();
    if (st.isOk()) e->nWaiting = 0;
  }
}

void FlightRecorder::setWaiting(const int32_t* peers, int n) {
  std::lock_guard<SpinLock> lock(mu_);
  if (FlightEntry* e = find(running_, runningP2P_)) {
    e->nWaiting = n;
    std::copy(peers, peers + std::min(n, FlightEntry::kMaxWaiting), e->waiting);
  }
}

std::string FlightRecorder::toJson(const char* reason) const {
  std::vector<FlightEntry> entries;
  uint64_t lastSeq, lastP2P;
  {
    std::lock_guard<SpinLock> lock(mu_);
    for (const auto* ring : {&ring_, &p2pRing_})
      for (const FlightEntry& e : *ring)
        if (e.seq != 0) entries.push_back(e);
    lastSeq = nextSeq_;
    lastP2P = nextP2P_;
  }
  std::sort(entries.begin(), entries.end(), [](const FlightEntry& a, const FlightEntry& b) {
    return a.postedUs != b.postedUs ? a.postedUs < b.postedUs : a.seq < b.seq;
  });
  char buf[512];
  std::string out = "{\n";
  std::snprintf(buf, sizeof buf,
                "  \"version\": 1,\n  \"comm\": \"%016" PRIx64
                "\",\n  \"rank\": %d,\n  \"nranks\": %d,\n  \"pid\": %d,\n  \"lastSeq\": %" PRIu64
                ",\n  \"lastP2PSeq\": %" PRIu64 ",\n  \"dumpUs\": %" PRId64 ",\n",
                commId_, rank_, nranks_, static_cast<int>(getpid()), lastSeq, lastP2P, wallUs());
  out += buf;
  out += "  \"job\": ";
  appendEscaped(out, jobName());
  out += ",\n  \"commName\": ";
  appendEscaped(out, name_);
  out += ",\n  \"reason\": ";
  appendEscaped(out, reason);
  out += ",\n  \"records\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    const FlightEntry& e = entries[i];
    std::snprintf(
        buf, sizeof buf,
        "%s\n    {\"seq\": %" PRIu64 ", \"p2p\": %s, \"kind\": \"%s\", \"count\": %" PRIu64
        ", \"dtype\": \"%s\", \"op\": %d, \"root\": %d, \"algo\": \"%s\", \"state\": "
        "\"%s\", \"postedUs\": %" PRId64 ", \"startUs\": %" PRId64 ", \"endUs\": %" PRId64
        ", \"waitingOn\": [",
        i ? "," : "", e.seq, e.p2p ? "true" : "false", e.p2p ? "SendRecv" : collName(e.kind),
        e.count, e.p2p ? "bytes" : dtypeName(static_cast<weftDataType_t>(e.dtype)), e.op, e.root,
        e.algo, stateName(e.state), e.postedUs, e.startUs, e.endUs);
    out += buf;
    for (int w = 0; w < std::min(e.nWaiting, FlightEntry::kMaxWaiting); ++w)
      out += (w ? ", " : "") + std::to_string(e.waiting[w]);
    out += "], \"error\": ";
    appendEscaped(out, e.error);
    out += "}";
  }
  out += "\n  ]\n}\n";
  return out;
}

Status FlightRecorder::dump(const char* dir, const char* reason, std::string* path) const {
  if (!enabled_)
    return Status(weftInvalidUsage, "the flight recorder is off (WEFT_FLIGHT_RECORDS=0)");
  std::string d = dir != nullptr ? dir : envString("FLIGHT_DIR").value_or("/tmp");
  char name[256];
  std::snprintf(name, sizeof name, "/weft-flight-%s-%016" PRIx64 "-r%d.json",
                safeName(jobName()).c_str(), commId_, rank_);
  const std::string file = d + name;
  const std::string tmp = file + ".tmp";
  const std::string json = toJson(reason);
  // Written next to its final name and renamed, so a reader never sees half a file.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError(weftSystemError, "cannot write the flight record %s: %s (WEFT_FLIGHT_DIR)",
                     tmp.c_str(), std::strerror(errno));
  size_t off = 0;
  while (off < json.size()) {
    const ssize_t n = ::write(fd, json.data() + off, json.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (off != json.size() || ::rename(tmp.c_str(), file.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return makeError(weftSystemError, "cannot write the flight record %s", file.c_str());
  }
  WEFT_WARN(kLogColl, "rank %d: flight record (%s) written to %s", rank_, reason, file.c_str());
  if (path != nullptr) *path = file;
  return Status::ok();
}

void flightRegister(const std::shared_ptr<FlightRecorder>& rec) {
  std::lock_guard<std::mutex> lock(registryMu);
  auto& v = registry();
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
  v.push_back(rec);
}

void flightUnregister(const FlightRecorder* rec) {
  std::lock_guard<std::mutex> lock(registryMu);
  auto& v = registry();
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const auto& w) {
                           auto p = w.lock();
                           return !p || p.get() == rec;
                         }),
          v.end());
}

int flightDumpAll(const char* dir, const char* reason) {
  std::vector<std::shared_ptr<FlightRecorder>> live;
  {
    std::lock_guard<std::mutex> lock(registryMu);
    for (const auto& w : registry())
      if (auto p = w.lock()) live.push_back(std::move(p));
  }
  int written = 0;
  for (const auto& rec : live) written += rec->dump(dir, reason).isOk() ? 1 : 0;
  return written;
}

void flightInstallSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (envInt("FLIGHT_SIGNAL", 1) == 0) return;
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
    if (pipe2(signalPipe, O_CLOEXEC) != 0) return;
    fcntl(signalPipe[1], F_SETFL, O_NONBLOCK);  // a burst of signals never blocks the handler
    std::thread(dumperMain).detach();
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

}  // namespace weft
