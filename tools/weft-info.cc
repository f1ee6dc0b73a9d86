// weft-info: what the algorithm layer holds and what the tuner would pick,
// without a running job.
//
//   weft-info                      every algorithm: collective, name,
//                                  protocols, description, cost
//   weft-info --plan -n 8 --hosts 2 [--coll allreduce] [--dtype float]
//             [--min 8] [--max 1G] [--all] [--cpus-per-host C]
//             [--round-robin]
//                                  per size (nccl-tests' size column: the
//                                  whole buffer), the tuner's algorithm,
//                                  protocol, chunk (xK: hier allreduce's
//                                  K pipeline segments) and predicted time;
//                                  --cpus-per-host below the ranks per host
//                                  plans for an oversubscribed host (a job
//                                  finds it from its ranks' affinity; 0, the
//                                  default: as many CPUs as ranks, or
//                                  WEFT_TUNER_HOST_CPUS where set);
//                                  --round-robin: ranks dealt to hosts in
//                                  turn (mpirun --map-by node), not in
//                                  blocks of consecutive ranks
//   weft-info --params             the model parameters in use
//   weft-info --dump PID...        asks running ranks for their flight
//                                  records (SIGUSR1); merge the files with
//                                  tools/weft-hang DIR
//
// Parameters: the defaults, or WEFT_TUNER_FILE when it holds a valid file,
// then the WEFT_TUNER_* overrides; WEFT_ALGO and WEFT_PROTO restrict the
// choice as in a job. The shared-memory settings (WEFT_SHM_SLOT_BYTES,
// WEFT_SHM_DIRECT, WEFT_SHM_DIRECT_MIN) shape the one-host case.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/spec.h"
#include "algorithms/tuner.h"
#include "base/dtype.h"
#include "base/env.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace {

using namespace weft;

// Every collective the algorithm layer knows (CollKind runs up to Recv).
std::vector<CollKind> allKinds() {
  std::vector<CollKind> kinds;
  for (int k = 0; k <= static_cast<int>(CollKind::Recv); ++k) {
    kinds.push_back(static_cast<CollKind>(k));
  }
  return kinds;
}

int usage(const char* why) {
  if (why) std::fprintf(stderr, "weft-info: %s\n", why);
  std::fprintf(stderr,
               "usage: weft-info [--list]\n"
               "       weft-info --plan -n RANKS [--hosts H] [--coll NAME] [--dtype T]\n"
               "                 [--min BYTES] [--max BYTES] [--all] [--cpus-per-host C]\n"
               "                 [--round-robin]\n"
               "       weft-info --params\n"
               "       weft-info --dump PID...\n");
  return 2;
}

std::string protoList(uint8_t protos) {
  std::string s;
  if (protos & kProtoSimple) s = "simple";
  if (protos & kProtoCma) s += s.empty() ? "cma" : ",cma";
  return s;
}

void list() {
  std::printf("%-14s %-12s %-11s %s\n", "collective", "algorithm", "protocols", "description");
  for (const Algorithm& a : allAlgorithms()) {
    std::printf("%-14s %-12s %-11s %s\n", collName(a.kind), a.name,
                protoList(algorithmProtos(a.kind, a.name)).c_str(), a.description);
    std::printf("%-14s %-12s %-11s cost: %s\n", "", "", "", a.cost);
  }
}

std::string gSource = "built-in defaults";

TunerParams params() {
  TunerParams p = defaultTunerParams();
  if (const auto file = envString("TUNER_FILE")) {
    std::ifstream in(*file, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      std::string why;
      if (auto parsed = parseTunerFile(text.str(), p, &why)) {
        p = *parsed;
        gSource = "WEFT_TUNER_FILE " + *file;
      } else {
        std::fprintf(stderr, "weft-info: ignoring WEFT_TUNER_FILE %s: %s\n", file->c_str(),
                     why.c_str());
      }
    }
  }
  applyTunerEnv(&p);
  return p;
}

bool parseKind(const std::string& name, CollKind* out) {
  for (CollKind k : allKinds()) {
    if (normalizeName(name) == normalizeName(collName(k))) {
      *out = k;
      return true;
    }
  }
  return false;
}

bool parseDtype(const std::string& name, weftDataType_t* out) {
  static const std::pair<const char*, weftDataType_t> kNames[] = {
      {"float", weftFloat32},   {"float32", weftFloat32},   {"half", weftFloat16},
      {"float16", weftFloat16}, {"bfloat16", weftBfloat16}, {"double", weftFloat64},
      {"float64", weftFloat64}, {"int8", weftInt8},         {"uint8", weftUint8},
      {"int32", weftInt32},     {"int", weftInt32},         {"int64", weftInt64}};
  for (const auto& [n, t] : kNames) {
    if (name == n) {
      *out = t;
      return true;
    }
  }
  return false;
}

// CollArgs' bytes (count x dtype size) for an nccl-tests size: the whole
// buffer for allreduce, broadcast and reduce; one rank's block for the rest.
size_t argBytes(CollKind kind, size_t size, int n, size_t es) {
  switch (kind) {
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::Gather:
    case CollKind::Scatter:
      return size / es / n * es;
    default:
      return size / es * es;
  }
}

std::string human(size_t b) {
  char buf[32];
  if (b >= (1u << 30) && b % (1u << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%zuG", b >> 30);
  } else if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%zuM", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%zuK", b >> 10);
  } else {
    std::snprintf(buf, sizeof(buf), "%zu", b);
  }
  return buf;
}

void plan(const TunerShape& shape, const TunerParams& p, const std::vector<CollKind>& kinds,
          weftDataType_t dtype, size_t minBytes, size_t maxBytes, bool all) {
  const Restrictions& r = envRestrictions();
  const size_t es = dtypeSize(dtype);
  char cpus[128] = "";
  if (shape.hostCpus > 0)
    std::snprintf(cpus, sizeof(cpus), " on %d CPUs%s", shape.hostCpus,
                  oversubscribed(shape) && p.schedUs > 0 ? " (oversubscribed model)" : "");
  std::printf(
      "# %d ranks on %d host(s), %d per host%s%s; slot %s, single copy %s; dtype %s\n",
      shape.nranks, shape.nhosts, shape.ranksPerHost, cpus,
      shape.nhosts > 1 && !shape.hostsAreRankRuns ? ", not in blocks of consecutive ranks" : "",
      human(shape.slotBytes).c_str(),
      shape.canPublish ? ("from " + human(shape.directMinBytes)).c_str() : "off", dtypeName(dtype));
  std::printf(
      "# parameters: %s (and WEFT_TUNER_* overrides); a job calibrates unless "
      "WEFT_TUNER_CALIBRATE=0 or WEFT_TUNER_FILE is valid\n",
      gSource.c_str());
  if (oversubscribed(shape) && p.schedUs > 0)
    std::printf("# oversubscribed: each awaited peer costs %.1f us x (1 - %d/%d) more per step\n",
                p.schedUs, shape.hostCpus, shape.ranksPerHost);
  for (CollKind kind : kinds) {
    std::printf("\n# %s\n%12s %12s  %-12s %-7s %8s %12s", collName(kind), "size", "count",
                "algorithm", "proto", "chunk", "time(us)");
    std::vector<const Algorithm*> algs;
    for (const Algorithm& a : allAlgorithms()) {
      if (a.kind == kind) algs.push_back(&a);
    }
    if (all) {
      for (const Algorithm* a : algs) std::printf(" %12s", a->name);
    }
    std::printf("\n");
    for (size_t size = minBytes; size <= maxBytes && size > 0; size *= 2) {
      const size_t bytes = argBytes(kind, size, shape.nranks, es);
      const Choice c = chooseFor(kind, bytes, shape, p, allAlgorithms(), r);
      // Hier allreduce's pipeline: the chunk, x the segments.
      std::string chunk = human(c.chunkBytes);
      if (c.segments > 0) chunk += "x" + std::to_string(c.segments);
      std::printf("%12zu %12zu  %-12s %-7s %8s %12.2f", size, bytes / es, c.alg ? c.alg->name : "?",
                  protoName(c.proto), chunk.c_str(), c.predictedUs);
      if (all) {
        for (const Algorithm* a : algs) {
          const auto cost = predictCost(kind, a->name, bytes, shape, p, r.hierSegments);
          std::printf(" %12.2f", cost ? cost->us : std::nan(""));
        }
      }
      std::printf("\n");
      if (size > (SIZE_MAX >> 1)) break;
    }
  }
}

}  // namespace

// Each rank's SIGUSR1 handler (core/flight_recorder.cc) writes its records
// to its own WEFT_FLIGHT_DIR; this only asks.
int dump(int argc, char** argv, int first) {
  if (first >= argc) return usage("--dump needs the pids of the ranks");
  int failed = 0;
  for (int i = first; i < argc; ++i) {
    char* end = nullptr;
    const long pid = std::strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || pid <= 0) {
      std::fprintf(stderr, "weft-info: '%s' is not a pid\n", argv[i]);
      ++failed;
    } else if (::kill(static_cast<pid_t>(pid), SIGUSR1) != 0) {
      std::fprintf(stderr, "weft-info: cannot signal pid %ld: %s\n", pid, std::strerror(errno));
      ++failed;
    } else {
      std::printf("asked pid %ld for its flight records\n", pid);
    }
  }
  std::printf(
      "the ranks write weft-flight-*.json to their WEFT_FLIGHT_DIR (default /tmp); "
      "merge them with tools/weft-hang DIR\n");
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  bool doPlan = false, doParams = false, all = false, roundRobin = false;
  int n = 0, hosts = 1;
  int cpusPerHost = static_cast<int>(std::clamp<int64_t>(envInt("TUNER_HOST_CPUS", 0), 0, 1 << 20));
  std::vector<CollKind> kinds;
  weftDataType_t dtype = weftFloat32;
  size_t minBytes = 8, maxBytes = size_t{1} << 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage((arg + " needs a value").c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto bytesValue = [&]() -> size_t {
      const std::string v = value();
      const auto b = parseBytes(v);
      if (!b || *b == 0) {
        usage((arg + ": '" + v + "' is not a byte size such as 8, 64K, 1G").c_str());
        std::exit(2);
      }
      return *b;
    };
    if (arg == "--list") {
    } else if (arg == "--dump") {
      return dump(argc, argv, i + 1);
    } else if (arg == "--plan") {
      doPlan = true;
    } else if (arg == "--params") {
      doParams = true;
    } else if (arg == "--all") {
      all = true;
    } else if (arg == "--round-robin") {
      roundRobin = true;
    } else if (arg == "-n" || arg == "--nranks") {
      n = std::atoi(value().c_str());
    } else if (arg == "--hosts") {
      hosts = std::atoi(value().c_str());
    } else if (arg == "--cpus-per-host") {
      const std::string v = value();
      char* end = nullptr;
      const long c = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || c < 0 || c > (1 << 20))
        return usage(
            ("--cpus-per-host: '" + v + "' is not a CPU count (0: as many as ranks)").c_str());
      cpusPerHost = static_cast<int>(c);
    } else if (arg == "--coll") {
      CollKind k;
      const std::string v = value();
      if (!parseKind(v, &k)) return usage(("unknown collective '" + v + "'").c_str());
      kinds.push_back(k);
    } else if (arg == "--dtype") {
      const std::string v = value();
      if (!parseDtype(v, &dtype)) return usage(("unknown dtype '" + v + "'").c_str());
    } else if (arg == "--min") {
      minBytes = bytesValue();
    } else if (arg == "--max") {
      maxBytes = bytesValue();
    } else if (arg == "-h" || arg == "--help") {
      usage(nullptr);
      return 0;
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  const TunerParams p = params();
  if (doParams) {
    std::fputs(formatTunerFile(p).c_str(), stdout);
    return 0;
  }
  if (!doPlan) {
    list();
    return 0;
  }
  if (n < 1) return usage("--plan needs -n RANKS (at least 1)");
  if (hosts < 1 || hosts > n) return usage("--hosts must be between 1 and the rank count");
  // WEFT_SHM_DISABLE: a job puts every pair on TCP and models every rank as
  // a host of its own (comm.cc); the plan does the same.
  if (envInt("SHM_DISABLE", 0) != 0) hosts = n;
  TunerShape shape;
  shape.nranks = n;
  shape.nhosts = hosts;
  shape.ranksPerHost = (n + hosts - 1) / hosts;
  // Round robin with 2+ ranks per host, or uneven hosts: no host's blocks
  // lie side by side.
  shape.hostsAreRankRuns = n % hosts == 0 && (!roundRobin || hosts == 1 || hosts == n);
  shape.hostCpus = cpusPerHost;
  // The chunk: TCP's own when every pair is on TCP (transport.cc).
  shape.slotBytes = hosts == n && n > 1 ? tcpOnlySlotBytes() : ShmOptions::fromEnv().slotBytes;
  // Single copy needs every peer on this host, and the shm transport's consent.
  shape.canPublish = hosts == 1 && n > 1 && envInt("SHM_DIRECT", 1) != 0;
  shape.directMinBytes = envBytes("SHM_DIRECT_MIN", 64 << 10);
  if (kinds.empty()) {
    for (CollKind k : allKinds()) {
      if (k != CollKind::Send && k != CollKind::Recv) kinds.push_back(k);
    }
  }
  plan(shape, p, kinds, dtype, minBytes, maxBytes, all);
  return 0;
}
