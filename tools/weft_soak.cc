// weft-soak: a long random mix of collectives, every result checked, with
// the process's memory and file descriptors watched for growth.
//
//   weftrun -n 4 build/bin/weft-soak --seconds 1800 --seed 42
//   (scripts/soak.sh wraps this)
//
// Every rank draws the same sequence from the seed: kind (all eight
// collectives and a send/recv ring), count (log-uniform up to --max-count),
// dtype (all twelve), op (sum, prod, max, min, avg, PreMulSum made and freed
// each time), root, in place or not. Inputs are integer-valued so that every
// reduction is exact (tests/harness/data.h) and each output is compared with
// a serial reference. The seed is printed; --seed S --iters N replays a run
// exactly. Rank 0 decides when the time is up and tells the others with a
// broadcast every 16 collectives, so all ranks stop at the same point.
//
// RSS (/proc/self/statm) and the count of open descriptors (/proc/self/fd)
// are sampled once a second; after the warm-up (--warmup, default a fifth of
// the run) RSS must not grow by more than --rss-slack-kib and the fd count
// must not grow at all. Exit status 0 only if every result was right and
// nothing grew.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "harness/data.h"
#include "weft/weft.h"

namespace {

using Clock = std::chrono::steady_clock;
using weft::test::OpKind;

struct Options {
  double seconds = 60;
  double warmup = -1;  // default: seconds / 5
  uint64_t seed = 0;
  bool seedGiven = false;
  uint64_t iters = 0;  // 0: run for `seconds`
  size_t maxCount = 1 << 18;
  long rssSlackKib = 16 << 10;
};

enum class Kind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  SendRecv,
  kCount
};
const char* kindName(Kind k) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                "AllToAll",  "Gather",    "Scatter", "SendRecv"};
  return names[static_cast<int>(k)];
}

long rssKib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n - 1;  // the directory stream itself
}

struct Call {
  Kind kind;
  weftDataType_t dtype;
  OpKind op;
  size_t count;
  int root;
  bool inPlace;
  uint64_t salt;
};

std::string describe(const Call& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s count %zu %s op %s root %d %s", kindName(c.kind), c.count,
                weft::test::dtypeStr(c.dtype).c_str(), weft::test::opStr(c.op).c_str(), c.root,
                c.inPlace ? "in-place" : "out-of-place");
  return buf;
}

Call draw(std::mt19937_64& rng, int nranks, const Options& o, uint64_t iter) {
  Call c;
  c.kind = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
  const auto& dts = weft::test::allDtypes();
  c.dtype = dts[rng() % dts.size()];
  static const OpKind ops[] = {OpKind::kSum, OpKind::kProd, OpKind::kMax,
                               OpKind::kMin, OpKind::kAvg,  OpKind::kPreMulImmediate};
  c.op = ops[rng() % 6];
  // Log-uniform count in [0, maxCount], with 0 and 1 now and then.
  const int bits = static_cast<int>(rng() % 64 == 0 ? 0 : 1 + rng() % 64);
  const double frac = std::min(1.0, bits / 64.0);
  c.count = static_cast<size_t>(std::pow(static_cast<double>(o.maxCount), frac)) - (bits ? 0 : 1);
  c.count = std::min(c.count, o.maxCount);
  c.root = static_cast<int>(rng() % nranks);
  c.inPlace = (rng() & 1) != 0;
  c.salt = iter;
  return c;
}

bool reducing(Kind k) {
  return k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter;
}

// Runs one call and checks this rank's output. Returns false (with a
// message printed) on an error or a wrong element.
bool runOne(weftComm_t comm, int rank, int n, const Call& c, std::vector<char>& sendBuf,
            std::vector<char>& recvBuf) {
  using namespace weft::test;
  const weftDataType_t dt = c.dtype;
  const size_t es = elemBytes(dt);
  const OpKind dataOp = reducing(c.kind) ? c.op : OpKind::kSum;
  const size_t cnt = c.count;
  char* s = sendBuf.data();
  char* r = recvBuf.data();
  weftRedOp_t op = weftSum;
  bool premul = false;
  switch (c.op) {
    case OpKind::kSum:
      op = weftSum;
      break;
    case OpKind::kProd:
      op = weftProd;
      break;
    case OpKind::kMax:
      op = weftMax;
      break;
    case OpKind::kMin:
      op = weftMin;
      break;
    case OpKind::kAvg:
      op = weftAvg;
      break;
    default:
      premul = reducing(c.kind);
      break;
  }
  if (premul) {
    alignas(8) unsigned char scalar[8] = {};
    storeElem(dt, scalar, 0, kPreMulScalar);
    if (weftRedOpCreatePreMulSum(&op, scalar, dt, weftScalarHostImmediate, comm) != weftSuccess) {
      std::fprintf(stderr, "rank %d: weftRedOpCreatePreMulSum failed: %s\n", rank,
                   weftGetLastError(comm));
      return false;
    }
  }
  weftResult_t res = weftSuccess;
  // Where this rank's input goes, where its output is read, and the expected
  // value of output element i.
  const void* in = s;
  void* out = r;
  size_t outCount = cnt;
  std::function<double(size_t)> expect;
  switch (c.kind) {
    case Kind::AllReduce:
    case Kind::Reduce:
      fillInput(dt, dataOp, rank, s, cnt, 0, c.salt);
      if (c.inPlace) out = s;
      expect = [&](size_t i) { return reference(dt, dataOp, n, i, c.salt); };
      if (c.kind == Kind::AllReduce)
        res = weftAllReduce(in, out, cnt, dt, op, comm, nullptr);
      else
        res = weftReduce(in, out, cnt, dt, op, c.root, comm, nullptr);
      if (c.kind == Kind::Reduce && rank != c.root) outCount = 0;
      break;
    case Kind::ReduceScatter:
      fillInput(dt, dataOp, rank, s, cnt * n, 0, c.salt);
      if (c.inPlace) out = s + rank * cnt * es;
      expect = [&](size_t i) { return reference(dt, dataOp, n, rank * cnt + i, c.salt); };
      res = weftReduceScatter(in, out, cnt, dt, op, comm, nullptr);
      break;
    case Kind::Broadcast:
      fillInput(dt, dataOp, rank, s, cnt, 0, c.salt);
      if (c.inPlace) out = s;
      expect = [&](size_t i) { return inputValue(dt, dataOp, c.root, i, c.salt); };
      res = weftBroadcast(in, out, cnt, dt, c.root, comm, nullptr);
      break;
    case Kind::AllGather:
      if (c.inPlace) {
        in = r + rank * cnt * es;
        fillInput(dt, dataOp, rank, r + rank * cnt * es, cnt, 0, c.salt);
      } else {
        fillInput(dt, dataOp, rank, s, cnt, 0, c.salt);
      }
      outCount = cnt * n;
      expect = [&](size_t i) {
        return inputValue(dt, dataOp, int(i / std::max<size_t>(cnt, 1)),
                          i % std::max<size_t>(cnt, 1), c.salt);
      };
      res = weftAllGather(in, out, cnt, dt, comm, nullptr);
      break;
    case Kind::AllToAll:
      fillInput(dt, dataOp, rank, s, cnt * n, 0, c.salt);
      outCount = cnt * n;
      expect = [&](size_t i) {
        const size_t q = i / std::max<size_t>(cnt, 1);
        return inputValue(dt, dataOp, int(q), rank * cnt + i % std::max<size_t>(cnt, 1), c.salt);
      };
      res = weftAlltoAll(in, out, cnt, dt, comm, nullptr);
      break;
    case Kind::Gather:
      fillInput(dt, dataOp, rank, s, cnt, 0, c.salt);
      outCount = rank == c.root ? cnt * n : 0;
      expect = [&](size_t i) {
        return inputValue(dt, dataOp, int(i / std::max<size_t>(cnt, 1)),
                          i % std::max<size_t>(cnt, 1), c.salt);
      };
      res = weftGather(in, out, cnt, dt, c.root, comm, nullptr);
      break;
    case Kind::Scatter:
      fillInput(dt, dataOp, rank, s, cnt * n, 0, c.salt);
      expect = [&](size_t i) { return inputValue(dt, dataOp, c.root, rank * cnt + i, c.salt); };
      res = weftScatter(in, out, cnt, dt, c.root, comm, nullptr);
      break;
    case Kind::SendRecv: {
      fillInput(dt, dataOp, rank, s, cnt, 0, c.salt);
      const int from = (rank + n - 1) % n;
      expect = [&](size_t i) { return inputValue(dt, dataOp, from, i, c.salt); };
      weftGroupStart();
      weftSend(s, cnt, dt, (rank + 1) % n, comm, nullptr);
      weftRecv(r, cnt, dt, from, comm, nullptr);
      res = weftGroupEnd();
      break;
    }
    case Kind::kCount:
      break;
  }
  if (premul) (void)weftRedOpDestroy(op, comm);
  if (res != weftSuccess) {
    std::fprintf(stderr, "rank %d: %s returned %d: %s\n", rank, describe(c).c_str(), int(res),
                 weftGetLastError(comm));
    return false;
  }
  for (size_t i = 0; i < outCount; ++i) {
    const double got = loadElem(dt, out, i);
    const double want = expect(i);
    if (!closeEnough(dt, dataOp, got, want)) {
      std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank,
                   describe(c).c_str(), i, got, want);
      return false;
    }
  }
  return true;
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--seconds" && (v = next())) {
      o->seconds = std::atof(v);
    } else if (a == "--warmup" && (v = next())) {
      o->warmup = std::atof(v);
    } else if (a == "--seed" && (v = next())) {
      o->seed = std::strtoull(v, nullptr, 0);
      o->seedGiven = true;
    } else if (a == "--iters" && (v = next())) {
      o->iters = std::strtoull(v, nullptr, 0);
    } else if (a == "--max-count" && (v = next())) {
      o->maxCount = std::strtoull(v, nullptr, 0);
    } else if (a == "--rss-slack-kib" && (v = next())) {
      o->rssSlackKib = std::atol(v);
    } else {
      std::fprintf(stderr,
                   "usage: weft-soak [--seconds S] [--warmup S] [--seed N] [--iters N] "
                   "[--max-count N] [--rss-slack-kib N]\n");
      return false;
    }
  }
  if (o->warmup < 0) o->warmup = o->seconds / 5;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) return 2;
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm, nullptr) != weftSuccess) {
    std::fprintf(stderr, "weft-soak: init failed: %s\n", weftGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  weftCommUserRank(comm, &rank);
  weftCommCount(comm, &n);
  // Every rank must use the same seed: rank 0's, broadcast.
  uint64_t seed = o.seedGiven ? o.seed : std::random_device{}() ^ uint64_t(time(nullptr));
  weftBroadcast(&seed, &seed, 1, weftUint64, 0, comm, nullptr);
  if (rank == 0)
    std::printf("weft-soak: %d ranks, seed %" PRIu64 " (replay: --seed %" PRIu64 "), %s\n", n, seed,
                seed,
                o.iters ? (std::to_string(o.iters) + " collectives").c_str()
                        : (std::to_string(o.seconds) + " s").c_str());
  std::fflush(stdout);

  // Buffers at their largest once, so the allocator adds no noise to RSS.
  const size_t maxBytes = o.maxCount * n * 8 + 64;
  std::vector<char> sendBuf(maxBytes), recvBuf(maxBytes);
  std::mt19937_64 rng(seed);
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  struct Sample {
    double t;
    long rss;
    int fds;
  };
  std::vector<Sample> samples;
  double nextSample = 0;
  uint64_t done = 0;
  bool ok = true;
  for (uint64_t iter = 0;; ++iter) {
    if (iter % 16 == 0) {
      int stop = 0;
      if (rank == 0) stop = o.iters ? iter >= o.iters : elapsed() >= o.seconds;
      if (weftBroadcast(&stop, &stop, 1, weftInt32, 0, comm, nullptr) != weftSuccess) {
        ok = false;
        break;
      }
      if (stop) break;
    }
    if (o.iters && iter >= o.iters) continue;  // wait for rank 0's stop at the next 16
    const Call c = draw(rng, n, o, iter);
    if (!runOne(comm, rank, n, c, sendBuf, recvBuf)) {
      std::fprintf(stderr, "rank %d: collective #%" PRIu64 " failed (seed %" PRIu64 ")\n", rank,
                   iter, seed);
      ok = false;
      break;
    }
    ++done;
    if (elapsed() >= nextSample) {
      samples.push_back({elapsed(), rssKib(), openFds()});
      nextSample = elapsed() + 1.0;
    }
  }
  samples.push_back({elapsed(), rssKib(), openFds()});

  // Growth after warm-up: the first sample after it against the largest of the last three.
  std::vector<Sample> after;
  for (const Sample& s : samples)
    if (s.t >= o.warmup) after.push_back(s);
  bool grew = false;
  long rss0 = 0, rss1 = 0;
  int fd0 = 0, fd1 = 0;
  if (after.size() >= 2) {
    rss0 = after.front().rss;
    fd0 = after.front().fds;
    for (size_t i = after.size() >= 3 ? after.size() - 3 : 0; i < after.size(); ++i) {
      rss1 = std::max(rss1, after[i].rss);
      fd1 = std::max(fd1, after[i].fds);
    }
    grew = rss1 - rss0 > o.rssSlackKib || fd1 > fd0;
  }
  std::printf("rank %d: %" PRIu64
              " collectives, %s; RSS %ld -> %ld KiB, fds %d -> %d after %.0f s "
              "warm-up (%zu samples)%s\n",
              rank, done, ok ? "0 errors" : "FAILED", rss0, rss1, fd0, fd1, o.warmup, after.size(),
              grew ? " GREW" : "");
  std::fflush(stdout);
  if (ok) {
    if (weftCommFinalize(comm) != weftSuccess) ok = false;
    weftCommDestroy(comm);
  } else {
    weftCommAbort(comm);
  }
  return ok && !grew ? 0 : 1;
}
