// The harness behind every perf binary: see common.h.
//
// Data that checks exactly. Every input element is a small non-negative
// integer chosen from (rank, index). Its range is picked per dtype and rank
// count so that every partial sum (even after the PreMulSum scalar 2) stays an
// exactly representable integer, whatever order the library reduces in: the
// "exact limit" below is half of the largest integer up to which the dtype
// holds every integer (int8 127, half 2048, bfloat16 256, e4m3 16, e5m2 8...).
// Products use 1 everywhere except a 2 from one rank. Only avg on floating
// types is compared with a tolerance (sum/n is rounded by the library).
//
// -Z <compressor> (all_reduce_perf): the compressed allreduce. Lossy results
// are checked against the same compressor's in-process model on the same
// inputs (compress_check.h): bit for bit where the codec's collectives only
// move bytes, within 1e-3 of the largest value where fp32 sums are involved.
// The check runs on a reset compressor, so that residuals of the timed
// iterations do not enter it. Two more columns: the bytes this rank put on
// the wire per call and the ratio to a plain ring allreduce's.
#include "common.h"

#include "compress_check.h"

#include <getopt.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace weftperf {
namespace {

// ---------------------------------------------------------------------------
// Data types
// ---------------------------------------------------------------------------

// A narrow float format: exponent and mantissa bits, bias; `fn` formats
// (e4m3) have no infinities and use only the all-ones pattern for NaN.
struct Fmt {
  int ebits;
  int mbits;
  int bias;
  bool fn;
};
constexpr Fmt kHalfFmt{5, 10, 15, false};
constexpr Fmt kBf16Fmt{8, 7, 127, false};
constexpr Fmt kE4m3Fmt{4, 3, 7, true};
constexpr Fmt kE5m2Fmt{5, 2, 15, false};

enum class Kind { kSigned, kUnsigned, kFloat, kDouble, kNarrow };

struct TypeInfo {
  const char* name;
  weftDataType_t type;
  size_t size;
  Kind kind;
  int64_t exactLimit;  // half the largest n such that all integers <= n are exact
  const Fmt* fmt;      // kNarrow only
  int mbits;           // floating kinds: mantissa bits
  int emin;            // floating kinds: smallest normal exponent
};

// nccl-tests' order for -d all.
const TypeInfo kTypes[] = {
    {"int8", weftInt8, 1, Kind::kSigned, 63, nullptr, 0, 0},
    {"uint8", weftUint8, 1, Kind::kUnsigned, 127, nullptr, 0, 0},
    {"int32", weftInt32, 4, Kind::kSigned, int64_t{1} << 30, nullptr, 0, 0},
    {"uint32", weftUint32, 4, Kind::kUnsigned, int64_t{1} << 31, nullptr, 0, 0},
    {"int64", weftInt64, 8, Kind::kSigned, int64_t{1} << 52, nullptr, 0, 0},
    {"uint64", weftUint64, 8, Kind::kUnsigned, int64_t{1} << 52, nullptr, 0, 0},
    {"half", weftHalf, 2, Kind::kNarrow, 1024, &kHalfFmt, 10, -14},
    {"float", weftFloat, 4, Kind::kFloat, int64_t{1} << 23, nullptr, 23, -126},
    {"double", weftDouble, 8, Kind::kDouble, int64_t{1} << 52, nullptr, 52, -1022},
    {"bfloat16", weftBfloat16, 2, Kind::kNarrow, 128, &kBf16Fmt, 7, -126},
    {"f8e4m3", weftFloat8e4m3, 1, Kind::kNarrow, 8, &kE4m3Fmt, 3, -6},
    {"f8e5m2", weftFloat8e5m2, 1, Kind::kNarrow, 4, &kE5m2Fmt, 2, -14},
};
constexpr int kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

double decodeNarrow(uint32_t bits, const Fmt& f) {
  const int total = 1 + f.ebits + f.mbits;
  const bool neg = (bits >> (total - 1)) & 1;
  const uint32_t emask = (1u << f.ebits) - 1, mmask = (1u << f.mbits) - 1;
  const uint32_t e = (bits >> f.mbits) & emask, m = bits & mmask;
  double v;
  if (f.fn && e == emask && m == mmask) {
    v = NAN;
  } else if (!f.fn && e == emask) {
    v = m ? NAN : INFINITY;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mbits)),
                   static_cast<int>(e) - f.bias - f.mbits);
  }
  return neg ? -v : v;
}

// Encodes a small non-negative integer that the format holds exactly.
uint32_t encodeNarrowExact(int64_t v, const Fmt& f) {
  if (v == 0) return 0;
  const int e = std::ilogb(static_cast<double>(v));
  const double frac = std::ldexp(static_cast<double>(v), f.mbits - e);  // in [2^m, 2^(m+1))
  const uint32_t m = static_cast<uint32_t>(frac) & ((1u << f.mbits) - 1);
  return (static_cast<uint32_t>(e + f.bias) << f.mbits) | m;
}

// Per-type tables: bit patterns of small integers and, for narrow floats, the
// value of every bit pattern.
constexpr int kEncMax = 256;
struct TypeTables {
  uint64_t enc[kEncMax + 1];
  std::vector<double> dec;
};
TypeTables gTables[kNumTypes];

void buildTables() {
  for (int t = 0; t < kNumTypes; ++t) {
    const TypeInfo& ti = kTypes[t];
    for (int v = 0; v <= kEncMax; ++v) {
      uint64_t bits = 0;
      switch (ti.kind) {
        case Kind::kSigned:
        case Kind::kUnsigned:
          bits = static_cast<uint64_t>(v);
          break;
        case Kind::kFloat: {
          float f = static_cast<float>(v);
          uint32_t u;
          std::memcpy(&u, &f, 4);
          bits = u;
          break;
        }
        case Kind::kDouble: {
          double d = v;
          std::memcpy(&bits, &d, 8);
          break;
        }
        case Kind::kNarrow:
          bits = encodeNarrowExact(v, *ti.fmt);
          break;
      }
      gTables[t].enc[v] = bits;
    }
    if (ti.kind == Kind::kNarrow) {
      const size_t n = size_t{1} << (8 * ti.size);
      gTables[t].dec.resize(n);
      for (size_t b = 0; b < n; ++b) gTables[t].dec[b] = decodeNarrow(b, *ti.fmt);
    }
  }
}

inline void storeElt(char* p, size_t size, uint64_t bits) {
  switch (size) {
    case 1: {
      uint8_t v = static_cast<uint8_t>(bits);
      std::memcpy(p, &v, 1);
      break;
    }
    case 2: {
      uint16_t v = static_cast<uint16_t>(bits);
      std::memcpy(p, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = static_cast<uint32_t>(bits);
      std::memcpy(p, &v, 4);
      break;
    }
    default:
      std::memcpy(p, &bits, 8);
      break;
  }
}

inline double loadElt(const char* p, int t) {
  const TypeInfo& ti = kTypes[t];
  switch (ti.type) {
    case weftInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case weftUint8: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case weftInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case weftUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case weftInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case weftUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case weftFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case weftFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case weftFloat16:
    case weftBfloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return gTables[t].dec[v];
    }
    default: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return gTables[t].dec[v];
    }
  }
}

// ---------------------------------------------------------------------------
// Reduction ops
// ---------------------------------------------------------------------------

enum OpKind { kOpSum, kOpProd, kOpMax, kOpMin, kOpAvg, kOpPreMulSum, kNumOpKinds, kOpNone = -1 };
// nccl-tests' names and order for -o all.
const char* const kOpNames[kNumOpKinds] = {"sum", "prod", "max", "min", "avg", "mulsum"};
constexpr int kPreMulScalar = 2;

// ---------------------------------------------------------------------------
// Input data
// ---------------------------------------------------------------------------

struct DataGen {
  int nranks = 1;
  bool prod = false;
  bool spread = true;  // values in [0, maxv]; else the 0/1 "count" pattern
  int64_t maxv = 1;
  int64_t k = 1;

  DataGen(int t, int n, int op) : nranks(n), prod(op == kOpProd) {
    const int64_t limit = kTypes[t].exactLimit;
    maxv = std::min<int64_t>(limit / n, 100);
    spread = maxv >= 1;
    k = limit;  // used when n > limit: at most `limit` ranks hold a 1
  }

  int64_t operator()(int r, size_t i) const {
    const size_t n = static_cast<size_t>(nranks);
    if (prod) return (static_cast<size_t>(r) == i % n && ((i / n) & 1) == 0) ? 2 : 1;
    if (spread) {
      uint64_t h = i * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r + 1) * 0xC2B2AE3D27D4EB4Full;
      h ^= h >> 29;
      h *= 0x94D049BB133111EBull;
      h ^= h >> 32;
      return static_cast<int64_t>(h % static_cast<uint64_t>(maxv + 1));
    }
    // Element i is 1 on c = i % (k+1) consecutive ranks starting at i % n.
    const size_t c = i % static_cast<size_t>(k + 1);
    const size_t d = (static_cast<size_t>(r) + n - i % n) % n;
    return d < c ? 1 : 0;
  }
};

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

struct Options {
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  double stepFactor = 1;
  int iters = 20;
  int warmup = 5;
  // Untimed calls at every size before its timed ones (a weft extension):
  // online tuning (src/algorithms/online.h) spends up to 9 calls of a new
  // size trying algorithms, which nccl-tests' warm-up, at the largest and
  // smallest size only, leaves in the timed loop. -1: 10 unless
  // WEFT_TUNER_ONLINE=0, then 0.
  int sizeWarmup = -1;
  int agg = 1;
  int check = 1;
  int average = 1;
  int blocking = 0;
  int cputime = 0;
  int root = 0;
  std::vector<int> types{7};  // float
  std::vector<int> ops{kOpSum};
  std::string opArg = "sum", typeArg = "float";
  std::string json;
  std::string compress;  // -Z
};

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (end == s || errno || v < 0) return false;
  double mult = 1;
  if (*end) {
    switch (*end) {
      case 'K':
      case 'k':
        mult = 1024.0;
        break;
      case 'M':
      case 'm':
        mult = 1024.0 * 1024;
        break;
      case 'G':
      case 'g':
        mult = 1024.0 * 1024 * 1024;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end) return false;
  }
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 0);
  if (end == s || *end || errno || v < INT32_MIN || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

// Before the communicator exists: whether this process is rank 0 by the
// launcher's environment, so that option errors print once.
bool envRankZero() {
  for (const char* v : {"WEFT_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    const char* s = std::getenv(v);
    if (s && *s) return std::atoi(s) == 0;
  }
  return true;
}

void usage(const char* prog) {
  if (!envRankZero()) return;
  std::printf(
      "USAGE: %s\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]\n"
      "\t[-e,--maxbytes <max size in bytes>]\n"
      "\t[-i,--stepbytes <increment size>]\n"
      "\t[-f,--stepfactor <increment factor>]\n"
      "\t[-n,--iters <iteration count>]\n"
      "\t[-m,--agg_iters <aggregated iteration count>]\n"
      "\t[-w,--warmup_iters <warmup iteration count>]\n"
      "\t[-W,--size_warmup <untimed calls at every size, and more while online tuning "
      "tries algorithms; default 10, 0 with WEFT_TUNER_ONLINE=0>]\n"
      "\t[-c,--check <0/1>]\n"
      "\t[-o,--op <sum/prod/min/max/avg/premulsum/all>]\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>]\n"
      "\t[-r,--root <root rank, -1 for all roots>]\n"
      "\t[-z,--blocking <0/1>: 0 issues on a weft stream, 1 on the NULL stream]\n"
      "\t[-a,--average <0/1/2/3> report time of rank 0/average/minimum/maximum]\n"
      "\t[-C,--report_cputime <0/1>]\n"
      "\t[-J,--output_file <JSON file>]\n"
      "\t[-Z,--compress <onebit|powersgd:rank=4|topk:ratio=0.01|fp16|bf16>] (all_reduce_perf)\n"
      "\t[-t,--nthreads <1>] [-g,--ngpus <1>] (accepted for compatibility)\n"
      "\t[-h,--help]\n",
      prog);
}

// Returns 0 to run, 1 to exit 0 (help), -1 on a bad option.
int parseArgs(int argc, char** argv, Options* o) {
  static const option longOpts[] = {{"minbytes", required_argument, nullptr, 'b'},
                                    {"maxbytes", required_argument, nullptr, 'e'},
                                    {"stepbytes", required_argument, nullptr, 'i'},
                                    {"stepfactor", required_argument, nullptr, 'f'},
                                    {"iters", required_argument, nullptr, 'n'},
                                    {"agg_iters", required_argument, nullptr, 'm'},
                                    {"warmup_iters", required_argument, nullptr, 'w'},
                                    {"check", required_argument, nullptr, 'c'},
                                    {"op", required_argument, nullptr, 'o'},
                                    {"datatype", required_argument, nullptr, 'd'},
                                    {"root", required_argument, nullptr, 'r'},
                                    {"blocking", required_argument, nullptr, 'z'},
                                    {"average", required_argument, nullptr, 'a'},
                                    {"report_cputime", required_argument, nullptr, 'C'},
                                    {"output_file", required_argument, nullptr, 'J'},
                                    {"compress", required_argument, nullptr, 'Z'},
                                    {"size_warmup", required_argument, nullptr, 'W'},
                                    {"nthreads", required_argument, nullptr, 't'},
                                    {"ngpus", required_argument, nullptr, 'g'},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:m:w:W:c:o:d:r:z:a:C:J:Z:t:g:h", longOpts,
                          nullptr)) != -1) {
    bool ok = true;
    int v = 0;
    switch (c) {
      case 'b':
        ok = parseSize(optarg, &o->minBytes);
        break;
      case 'e':
        ok = parseSize(optarg, &o->maxBytes);
        break;
      case 'i':
        ok = parseSize(optarg, &o->stepBytes);
        break;
      case 'f': {
        char* end = nullptr;
        o->stepFactor = std::strtod(optarg, &end);
        ok = end != optarg && !*end && o->stepFactor >= 1;
        break;
      }
      case 'n':
        ok = parseInt(optarg, &o->iters) && o->iters >= 1;
        break;
      case 'm':
        ok = parseInt(optarg, &o->agg) && o->agg >= 1;
        break;
      case 'w':
        ok = parseInt(optarg, &o->warmup) && o->warmup >= 0;
        break;
      case 'W':
        ok = parseInt(optarg, &o->sizeWarmup) && o->sizeWarmup >= 0;
        break;
      case 'c':
        ok = parseInt(optarg, &o->check);
        break;
      case 'z':
        ok = parseInt(optarg, &o->blocking);
        break;
      case 'a':
        ok = parseInt(optarg, &o->average) && o->average >= 0 && o->average <= 3;
        break;
      case 'C':
        ok = parseInt(optarg, &o->cputime);
        break;
      case 'r':
        ok = parseInt(optarg, &o->root) && o->root >= -1;
        break;
      case 't':
      case 'g':
        ok = parseInt(optarg, &v) && v == 1;
        if (!ok) std::fprintf(stderr, "weft-tests: one process is one rank; -%c must be 1\n", c);
        break;
      case 'J':
        o->json = optarg;
        break;
      case 'Z':
        o->compress = optarg;
        ok = !o->compress.empty();
        break;
      case 'o': {
        o->opArg = optarg;
        o->ops.clear();
        if (o->opArg == "all") {
          for (int k = 0; k < kNumOpKinds; ++k) o->ops.push_back(k);
        } else if (o->opArg == "premulsum") {
          o->ops.push_back(kOpPreMulSum);
        } else {
          for (int k = 0; k < kNumOpKinds; ++k)
            if (o->opArg == kOpNames[k]) o->ops.push_back(k);
        }
        ok = !o->ops.empty();
        break;
      }
      case 'd': {
        o->typeArg = optarg;
        o->types.clear();
        for (int k = 0; k < kNumTypes; ++k) {
          const std::string n = kTypes[k].name;
          if (o->typeArg == "all" || o->typeArg == n || (o->typeArg == "fp16" && n == "half") ||
              (o->typeArg == "bf16" && n == "bfloat16") || (o->typeArg == "fp32" && n == "float") ||
              (o->typeArg == "fp64" && n == "double") || (o->typeArg == "char" && n == "int8") ||
              (o->typeArg == "int" && n == "int32"))
            o->types.push_back(k);
        }
        ok = !o->types.empty();
        break;
      }
      case 'h':
        usage(argv[0]);
        return 1;
      default:
        usage(argv[0]);
        return -1;
    }
    if (!ok) {
      if (envRankZero())
        std::fprintf(stderr, "weft-tests: invalid value '%s' for -%c\n", optarg ? optarg : "", c);
      return -1;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "weft-tests: unexpected argument '%s'\n", argv[optind]);
    usage(argv[0]);
    return -1;
  }
  if (o->maxBytes < o->minBytes) {
    std::fprintf(stderr, "weft-tests: maxbytes (%zu) is smaller than minbytes (%zu)\n", o->maxBytes,
                 o->minBytes);
    return -1;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->maxBytes > o->minBytes) {
    std::fprintf(stderr, "weft-tests: -i 0 with -f 1 never reaches maxbytes\n");
    return -1;
  }
  if (o->sizeWarmup < 0) {
    const char* online = std::getenv("WEFT_TUNER_ONLINE");
    o->sizeWarmup = online != nullptr && std::string(online) == "0" ? 0 : 10;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

struct Result {
  double timeUs = 0, algbw = 0, busbw = 0;
  long long wrong = -1;  // -1: not checked
};

struct Row {
  size_t bytes = 0, count = 0;
  const char* type = "";
  const char* op = "";
  int root = -1;
  Result res[2];
  double wireBytes = -1, ratio = 0;  // -Z only
};

class Bench {
 public:
  Bench(const Coll& coll, const Options& opt) : coll_(coll), opt_(opt) {}
  int run(const char* prog);

 private:
  [[noreturn]] void fail(const char* what, weftResult_t r);
  void check(weftResult_t r, const char* what) {
    if (r != weftSuccess) fail(what, r);
  }
  double now() const {
    timespec ts;
    clock_gettime(opt_.cputime ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  void barrier();
  bool tuningPending() {
    int pending = 0;
    check(weftCommTuningPending(comm_, &pending), "weftCommTuningPending");
    return pending != 0;
  }
  // Above what online tuning can take for one size: 3 candidates x 3 passes
  // x at most 34 calls (WEFT_TUNER_ONLINE_ROUNDS=100: 99 timed calls and an
  // untimed one per pass).
  static constexpr int kMostTrialCalls = 400;
  double aggregateTime(double sec);
  long long sumAll(long long v);
  void printHeader(const char* prog);
  void timeTest(int t, int op, int root);
  void setup(size_t bytes, int t);
  Result bench(int t, int op, int root, bool inplace);
  void issue(int t, weftRedOp_t op, int root, bool inplace);
  void fillForRun(int t, int op, bool inplace);
  long long checkRun(int t, int op, int root, bool inplace);
  void writeJson(double avgBus, long long oob);

  const Coll& coll_;
  const Options& opt_;
  weftComm_t comm_ = nullptr;
  weftStream_t stream_ = nullptr;
  int rank_ = 0, nranks_ = 1;
  char* sendbuf_ = nullptr;
  char* recvbuf_ = nullptr;
  size_t bufBytes_ = 0;
  Counts counts_;
  weftRedOp_t redop_ = weftSum;
  std::vector<Row> rows_;
  double busSum_ = 0;
  int busCount_ = 0;
  long long wrongTotal_ = 0;
  weftCompressor_t comp_ = nullptr;  // -Z: the compressor of the current size
  long long checkCompressed(int t, int op, bool inplace);
  void newCompressor();
};

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kPoison = 0xFF;  // NaN or a value no check expects, in every dtype
constexpr uint8_t kGuard = 0xA5;

void Bench::fail(const char* what, weftResult_t r) {
  std::fprintf(stderr, "weft-tests: rank %d: %s failed: %s (%s)\n", rank_, what,
               weftGetErrorString(r), weftGetLastError(comm_));
  std::fflush(stderr);
  if (comm_) weftCommAbort(comm_);
  std::exit(2);
}

void Bench::barrier() {
  int v = 0, out = 0;
  check(weftAllReduce(&v, &out, 1, weftInt32, weftSum, comm_, nullptr), "barrier allreduce");
}

double Bench::aggregateTime(double sec) {
  double out = sec;
  switch (opt_.average) {
    case 0:
      check(weftBroadcast(&sec, &out, 1, weftFloat64, 0, comm_, nullptr), "time broadcast");
      break;
    case 1:
      check(weftAllReduce(&sec, &out, 1, weftFloat64, weftSum, comm_, nullptr), "time allreduce");
      out /= nranks_;
      break;
    case 2:
      check(weftAllReduce(&sec, &out, 1, weftFloat64, weftMin, comm_, nullptr), "time allreduce");
      break;
    default:
      check(weftAllReduce(&sec, &out, 1, weftFloat64, weftMax, comm_, nullptr), "time allreduce");
      break;
  }
  return out;
}

long long Bench::sumAll(long long v) {
  int64_t in = v, out = 0;
  check(weftAllReduce(&in, &out, 1, weftInt64, weftSum, comm_, nullptr), "error-count allreduce");
  return out;
}

void Bench::printHeader(const char* prog) {
  struct Info {
    int rank;
    int pid;
    char host[120];
  };
  Info mine{};
  mine.rank = rank_;
  mine.pid = static_cast<int>(getpid());
  gethostname(mine.host, sizeof(mine.host) - 1);
  std::vector<Info> all(nranks_);
  check(weftAllGather(&mine, all.data(), sizeof(Info), weftUint8, comm_, nullptr),
        "device-list allgather");
  if (rank_ != 0) return;
  int version = 0;
  weftGetVersion(&version);
  const char* base = std::strrchr(prog, '/');
  std::printf("# weft-tests: version %d.%d.%d (%s) weft-library %d.%d.%d\n", WEFT_MAJOR, WEFT_MINOR,
              WEFT_PATCH, base ? base + 1 : prog, version / 10000, (version / 100) % 100,
              version % 100);
  std::printf(
      "# nRanks %d nThread 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d blocking: %d\n",
      nranks_, opt_.minBytes, opt_.maxBytes,
      opt_.stepFactor > 1 ? static_cast<size_t>(opt_.stepFactor) : opt_.stepBytes,
      opt_.stepFactor > 1 ? "factor" : "bytes", opt_.warmup, opt_.iters, opt_.agg, opt_.check,
      opt_.blocking);
  std::printf("#\n# Using devices\n");
  for (const Info& i : all) {
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device host memory\n", i.rank, i.pid, i.host);
  }
  std::printf("#\n");
  const bool z = !opt_.compress.empty();
  if (z)
    std::printf("# Compressed allreduce: %s (wire: bytes sent per rank per call)\n#\n",
                opt_.compress.c_str());
  std::printf(
      "#%62s%s%23s%s\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong"
      "     time   algbw   busbw #wrong%s\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
      "     (us)  (GB/s)  (GB/s)       %s\n",
      "", "out-of-place", "", "in-place", z ? "         wire    ratio" : "",
      z ? "          (B)         " : "");
  std::fflush(stdout);
}

void Bench::setup(size_t bytes, int t) {
  counts_ = coll_.counts(bytes / kTypes[t].size, nranks_);
}

void Bench::issue(int t, weftRedOp_t op, int root, bool inplace) {
  const size_t ws = kTypes[t].size;
  CallArgs a{};
  if (inplace) {
    a.send = recvbuf_ + counts_.sendInplaceOffset * rank_ * ws;
    a.recv = recvbuf_ + counts_.recvInplaceOffset * rank_ * ws;
  } else {
    a.send = sendbuf_;
    a.recv = recvbuf_;
  }
  a.count = counts_.param;
  a.type = kTypes[t].type;
  a.op = op;
  a.root = root;
  a.rank = rank_;
  a.nranks = nranks_;
  a.comm = comm_;
  a.stream = opt_.blocking ? nullptr : stream_;
  weftResult_t r = comp_ ? weftCompressedAllReduce(a.send, a.recv, a.count, a.type, a.op, comp_,
                                                   a.comm, a.stream)
                         : coll_.issue(a);
  if (r != weftSuccess) fail(comp_ ? "weftCompressedAllReduce" : coll_.name, r);
}

// Poisons the receive side, writes this rank's input into the send region
// and puts guard bytes after everything the call may touch.
void Bench::fillForRun(int t, int op, bool inplace) {
  const size_t ws = kTypes[t].size;
  const size_t recvOff = inplace ? counts_.recvInplaceOffset * rank_ * ws : 0;
  const size_t sendOff = inplace ? counts_.sendInplaceOffset * rank_ * ws : 0;
  size_t end = recvOff + counts_.recv * ws;
  if (inplace) end = std::max(end, sendOff + counts_.send * ws);
  std::memset(recvbuf_, kPoison, end);
  std::memset(recvbuf_ + end, kGuard, kGuardBytes);
  char* send = inplace ? recvbuf_ + sendOff : sendbuf_;
  const DataGen gen(t, nranks_, op);
  const uint64_t* enc = gTables[t].enc;
  for (size_t i = 0; i < counts_.send; ++i) storeElt(send + i * ws, ws, enc[gen(rank_, i)]);
}

long long Bench::checkRun(int t, int op, int root, bool inplace) {
  if (comp_) return checkCompressed(t, op, inplace);
  fillForRun(t, op, inplace);
  barrier();
  issue(t, redop_, root, inplace);
  if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");

  const TypeInfo& ti = kTypes[t];
  const size_t ws = ti.size;
  const size_t recvOff = inplace ? counts_.recvInplaceOffset * rank_ * ws : 0;
  const size_t sendOff = inplace ? counts_.sendInplaceOffset * rank_ * ws : 0;
  size_t end = recvOff + counts_.recv * ws;
  if (inplace) end = std::max(end, sendOff + counts_.send * ws);

  long long wrong = 0;
  for (size_t g = 0; g < kGuardBytes; ++g)
    if (static_cast<uint8_t>(recvbuf_[end + g]) != kGuard) ++wrong;

  if (coll_.receives(rank_, root)) {
    const DataGen gen(t, nranks_, op);
    const bool isFloat =
        ti.kind == Kind::kFloat || ti.kind == Kind::kDouble || ti.kind == Kind::kNarrow;
    const char* recv = recvbuf_ + recvOff;
    for (size_t j = 0; j < counts_.recv; ++j) {
      const Source s = coll_.source(rank_, nranks_, root, j, counts_.param);
      double expect = 0;
      double tol = 0;
      if (s.kind == Source::kNone) continue;
      if (s.kind == Source::kCopy) {
        expect = static_cast<double>(gen(s.rank, s.idx));
      } else {
        double acc = static_cast<double>(gen(0, s.idx));
        if (op == kOpPreMulSum) acc *= kPreMulScalar;
        for (int k = 1; k < nranks_; ++k) {
          const double v = static_cast<double>(gen(k, s.idx));
          switch (op) {
            case kOpProd:
              acc *= v;
              break;
            case kOpMax:
              acc = std::max(acc, v);
              break;
            case kOpMin:
              acc = std::min(acc, v);
              break;
            case kOpPreMulSum:
              acc += kPreMulScalar * v;
              break;
            default:
              acc += v;
              break;
          }
        }
        if (op == kOpAvg) {
          if (isFloat) {
            acc /= nranks_;
            // The library rounds sum/n (or sums pre-divided values): allow two
            // units in the last place of the dtype.
            const int e = acc > 0 ? std::max(std::ilogb(acc), ti.emin) : ti.emin;
            tol = 2 * std::ldexp(1.0, e - ti.mbits);
          } else {
            acc = std::floor(acc / nranks_);
          }
        }
        expect = acc;
      }
      const double got = loadElt(recv + j * ws, t);
      const bool ok = tol == 0 ? got == expect : std::fabs(got - expect) <= tol;
      if (!ok) ++wrong;
    }
  }
  return wrong;
}

// -Z: the result of a reset compressor against the in-process model of the
// same compressor on the same inputs (rank 0 computes it and broadcasts it).
long long Bench::checkCompressed(int t, int op, bool inplace) {
  check(weftCompressorReset(comp_), "weftCompressorReset");
  fillForRun(t, op, inplace);
  barrier();
  issue(t, redop_, -1, inplace);
  if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");

  const TypeInfo& ti = kTypes[t];
  const size_t ws = ti.size;
  const size_t count = counts_.param;
  const size_t recvOff = inplace ? counts_.recvInplaceOffset * rank_ * ws : 0;
  long long wrong = 0;
  for (size_t g = 0; g < kGuardBytes; ++g)
    if (static_cast<uint8_t>(recvbuf_[recvOff + count * ws + g]) != kGuard) ++wrong;

  std::vector<char> model(count * ws);
  int modelOk = 1;
  if (rank_ == 0) {
    const DataGen gen(t, nranks_, op);
    const uint64_t* enc = gTables[t].enc;
    std::string err;
    auto fill = [&](int r, void* buf) {
      for (size_t i = 0; i < count; ++i)
        storeElt(static_cast<char*>(buf) + i * ws, ws, enc[gen(r, i)]);
    };
    if (!compressModel(opt_.compress, nranks_, ti.type, op == kOpAvg, count, fill, &model, &err)) {
      std::fprintf(stderr, "weft-tests: the compression model failed: %s\n", err.c_str());
      modelOk = 0;
    }
  }
  check(weftBroadcast(&modelOk, &modelOk, 1, weftInt32, 0, comm_, nullptr), "model broadcast");
  if (!modelOk) return static_cast<long long>(count);
  check(weftBroadcast(model.data(), model.data(), count * ws, weftUint8, 0, comm_, nullptr),
        "model broadcast");

  const bool exact = compressExact(opt_.compress);
  double maxAbs = 0;
  for (size_t j = 0; j < count; ++j)
    maxAbs = std::max(maxAbs, std::fabs(loadElt(&model[j * ws], t)));
  const char* recv = recvbuf_ + recvOff;
  for (size_t j = 0; j < count; ++j) {
    const double want = loadElt(&model[j * ws], t);
    const double got = loadElt(recv + j * ws, t);
    const double tol = 1e-3 * maxAbs + std::ldexp(std::fabs(want), -ti.mbits + 1);
    if (exact ? !(got == want) : !(std::fabs(got - want) <= tol)) ++wrong;
  }
  return wrong;
}

void Bench::newCompressor() {
  if (comp_) check(weftCompressorDestroy(comp_), "weftCompressorDestroy");
  comp_ = nullptr;
  if (!opt_.compress.empty())
    check(weftCompressorCreateFromString(comm_, opt_.compress.c_str(), &comp_),
          "weftCompressorCreateFromString");
}

Result Bench::bench(int t, int op, int root, bool inplace) {
  fillForRun(t, op, inplace);
  auto iteration = [&] {
    if (opt_.agg > 1) check(weftGroupStart(), "weftGroupStart");
    for (int a = 0; a < opt_.agg; ++a) issue(t, redop_, root, inplace);
    if (opt_.agg > 1) check(weftGroupEnd(), "weftGroupEnd");
  };
  // One untimed iteration first, as nccl-tests does at each size: the first
  // call of a size also picks its algorithm (and logs the pick under
  // WEFT_DEBUG_SUBSYS=TUNING), which 30 iterations of 3 us would otherwise
  // carry (1.2-1.5x at 4 ranks on 2 CPUs).
  iteration();
  if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
  barrier();
  const double start = now();
  for (int it = 0; it < opt_.iters; ++it) iteration();
  if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
  const double sec = aggregateTime((now() - start) / (static_cast<double>(opt_.iters) * opt_.agg));

  Result r;
  r.timeUs = sec * 1e6;
  const double bytes = static_cast<double>(counts_.param) * kTypes[t].size;
  r.algbw = sec > 0 ? bytes * coll_.algFactor(nranks_) / 1e9 / sec : 0;
  r.busbw = r.algbw * coll_.busFactor(nranks_);
  if (opt_.check) r.wrong = sumAll(checkRun(t, op, root, inplace));
  return r;
}

void Bench::timeTest(int t, int op, int root) {
  const TypeInfo& ti = kTypes[t];
  redop_ = weftSum;
  bool created = false;
  if (op >= 0) {
    if (op == kOpPreMulSum) {
      uint64_t scalar = gTables[t].enc[kPreMulScalar];
      check(weftRedOpCreatePreMulSum(&redop_, &scalar, ti.type, weftScalarHostImmediate, comm_),
            "weftRedOpCreatePreMulSum");
      created = true;
    } else {
      redop_ = static_cast<weftRedOp_t>(op);
    }
  }

  barrier();
  // Warm up at the largest and then the smallest size, as nccl-tests does.
  for (size_t bytes : {opt_.maxBytes, opt_.minBytes}) {
    setup(bytes, t);
    newCompressor();
    for (int w = 0; w < opt_.warmup; ++w) issue(t, redop_, root, false);
    if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
  }

  for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
    setup(bytes, t);
    newCompressor();
    // A compressor's first call binds it to the buffer: it allocates and
    // faults in its residuals (64 MiB of them for a 64 MiB gradient), once
    // per training run. That one call is warm-up, not a step.
    if (comp_) {
      issue(t, redop_, root, false);
      if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
    }
    // Online tuning's trials of this size, out of the timed loop: -W calls,
    // then more while the tuner still tries algorithms (every rank answers
    // alike after the same calls). The bound only guards against a tuner
    // that never decides.
    for (int w = 0; w < opt_.sizeWarmup; ++w) issue(t, redop_, root, false);
    if (opt_.sizeWarmup > 0) {
      if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
      for (int more = 0; more < kMostTrialCalls && tuningPending(); ++more) {
        issue(t, redop_, root, false);
        if (!opt_.blocking) check(weftStreamSynchronize(stream_), "weftStreamSynchronize");
      }
    }
    Row row;
    row.bytes = std::max(counts_.send, counts_.recv) * ti.size;
    row.count = counts_.param;
    row.type = ti.name;
    row.op = op >= 0 ? kOpNames[op] : "none";
    row.root = coll_.usesRoot ? root : -1;
    if (rank_ == 0) {
      std::printf("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type, row.op, row.root);
      std::fflush(stdout);
    }
    for (int inplace = 0; inplace < 2; ++inplace) {
      if (inplace && !coll_.inplace) {
        row.res[1].timeUs = -1;
        if (rank_ == 0) std::printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
        continue;
      }
      Result r = bench(t, op, root, inplace != 0);
      row.res[inplace] = r;
      busSum_ += r.busbw;
      ++busCount_;
      if (r.wrong > 0) wrongTotal_ += r.wrong;
      if (rank_ == 0) {
        char timeStr[32], wrongStr[32];
        if (r.timeUs >= 10000.0) {
          std::snprintf(timeStr, sizeof(timeStr), "%7.0f", r.timeUs);
        } else if (r.timeUs >= 100.0) {
          std::snprintf(timeStr, sizeof(timeStr), "%7.1f", r.timeUs);
        } else {
          std::snprintf(timeStr, sizeof(timeStr), "%7.2f", r.timeUs);
        }
        if (r.wrong < 0) {
          std::snprintf(wrongStr, sizeof(wrongStr), "N/A");
        } else {
          std::snprintf(wrongStr, sizeof(wrongStr), "%lld", r.wrong);
        }
        std::printf("  %7s  %6.2f  %6.2f  %5s", timeStr, r.algbw, r.busbw, wrongStr);
        std::fflush(stdout);
      }
    }
    if (comp_) {
      weftCompressorStats_t st{};
      check(weftCompressorGetStats(comp_, &st), "weftCompressorGetStats");
      row.wireBytes = st.wireBytes;
      row.ratio = st.ratio;
      if (rank_ == 0) std::printf("  %11.0f  %7.2f", st.wireBytes, st.ratio);
    }
    if (rank_ == 0) std::printf("\n");
    rows_.push_back(row);

    size_t next =
        opt_.stepFactor > 1 ? static_cast<size_t>(bytes * opt_.stepFactor) : bytes + opt_.stepBytes;
    if (next <= bytes) next = bytes + 1;  // -f close to 1 on tiny sizes
    if (opt_.stepFactor <= 1 && opt_.stepBytes == 0) break;
    bytes = next;
  }

  if (created) check(weftRedOpDestroy(redop_, comm_), "weftRedOpDestroy");
  if (comp_) check(weftCompressorDestroy(comp_), "weftCompressorDestroy");
  comp_ = nullptr;
}

void Bench::writeJson(double avgBus, long long oob) {
  FILE* f = std::fopen(opt_.json.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "weft-tests: cannot write %s: %s\n", opt_.json.c_str(),
                 std::strerror(errno));
    return;
  }
  std::fprintf(f, "{\n  \"tool\": \"weft-tests\",\n  \"version\": \"%d.%d.%d\",\n", WEFT_MAJOR,
               WEFT_MINOR, WEFT_PATCH);
  std::fprintf(f, "  \"collective\": \"%s\",\n  \"nranks\": %d,\n", coll_.name, nranks_);
  std::fprintf(f,
               "  \"parameters\": {\"minbytes\": %zu, \"maxbytes\": %zu, \"stepbytes\": %zu, "
               "\"stepfactor\": %g, \"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, "
               "\"check\": %d, \"op\": \"%s\", \"datatype\": \"%s\", \"root\": %d, "
               "\"average\": %d, \"blocking\": %d, \"report_cputime\": %d},\n",
               opt_.minBytes, opt_.maxBytes, opt_.stepBytes, opt_.stepFactor, opt_.iters,
               opt_.warmup, opt_.agg, opt_.check, opt_.opArg.c_str(), opt_.typeArg.c_str(),
               opt_.root, opt_.average, opt_.blocking, opt_.cputime);
  std::fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::fprintf(f,
                 "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                 "\"root\": %d",
                 i ? "," : "", r.bytes, r.count, r.type, r.op, r.root);
    for (int k = 0; k < 2; ++k) {
      const Result& x = r.res[k];
      if (x.timeUs < 0) {
        std::fprintf(f, ", \"%s\": null", k ? "in_place" : "out_of_place");
        continue;
      }
      std::fprintf(f, ", \"%s\": {\"time_us\": %.6g, \"algbw\": %.6g, \"busbw\": %.6g, ",
                   k ? "in_place" : "out_of_place", x.timeUs, x.algbw, x.busbw);
      if (x.wrong < 0) {
        std::fprintf(f, "\"wrong\": null}");
      } else {
        std::fprintf(f, "\"wrong\": %lld}", x.wrong);
      }
    }
    if (r.wireBytes >= 0)
      std::fprintf(f, ", \"wire_bytes\": %.0f, \"compression_ratio\": %.6g", r.wireBytes, r.ratio);
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ],\n  \"out_of_bounds\": %lld,\n  \"avg_busbw\": %.6g\n}\n", oob, avgBus);
  std::fclose(f);
}

int Bench::run(const char* prog) {
  buildTables();
  check(weftCommInitFromEnv(&comm_, nullptr), "weftCommInitFromEnv");
  check(weftCommCount(comm_, &nranks_), "weftCommCount");
  check(weftCommUserRank(comm_, &rank_), "weftCommUserRank");
  if (!opt_.blocking) check(weftStreamCreate(&stream_), "weftStreamCreate");
  if (!opt_.compress.empty()) {
    const char* bad = nullptr;
    if (!coll_.compressible) bad = "-Z applies to all_reduce_perf only";
    for (int t : opt_.types)
      if (kTypes[t].type != weftFloat && kTypes[t].type != weftHalf &&
          kTypes[t].type != weftBfloat16)
        bad = "-Z takes -d float, half or bfloat16";
    for (int op : opt_.ops)
      if (op != kOpSum && op != kOpAvg) bad = "-Z takes -o sum or avg";
    if (bad) {
      if (rank_ == 0) std::fprintf(stderr, "weft-tests: %s\n", bad);
      weftCommDestroy(comm_);
      return 1;
    }
  }
  if (coll_.usesRoot && opt_.root >= nranks_) {
    if (rank_ == 0)
      std::fprintf(stderr, "weft-tests: root %d is not a rank (%d ranks)\n", opt_.root, nranks_);
    weftCommDestroy(comm_);
    return 1;
  }

  bufBytes_ = (opt_.maxBytes + kGuardBytes + 4095) / 4096 * 4096;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bufBytes_)) {
    std::fprintf(stderr, "weft-tests: rank %d: cannot allocate %zu bytes\n", rank_, bufBytes_);
    return 2;
  }
  sendbuf_ = static_cast<char*>(p);
  if (posix_memalign(&p, 4096, bufBytes_)) {
    std::fprintf(stderr, "weft-tests: rank %d: cannot allocate %zu bytes\n", rank_, bufBytes_);
    return 2;
  }
  recvbuf_ = static_cast<char*>(p);
  std::memset(sendbuf_, 0, bufBytes_);
  std::memset(recvbuf_, 0, bufBytes_);

  printHeader(prog);

  const int rootBegin = opt_.root == -1 ? 0 : opt_.root;
  const int rootEnd = opt_.root == -1 ? nranks_ - 1 : opt_.root;
  for (int t : opt_.types) {
    if (coll_.usesOp) {
      for (int op : opt_.ops) {
        if (coll_.usesRoot) {
          for (int root = rootBegin; root <= rootEnd; ++root) timeTest(t, op, root);
        } else {
          timeTest(t, op, -1);
        }
      }
    } else if (coll_.usesRoot) {
      for (int root = rootBegin; root <= rootEnd; ++root) timeTest(t, kOpNone, root);
    } else {
      timeTest(t, kOpNone, -1);
    }
  }

  const double avgBus = busCount_ ? busSum_ / busCount_ : 0;
  if (rank_ == 0) {
    std::printf("# Out of bounds values : %lld %s\n", wrongTotal_, wrongTotal_ ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n", avgBus);
    std::printf("#\n\n");
    std::fflush(stdout);
    if (!opt_.json.empty()) writeJson(avgBus, wrongTotal_);
  }

  if (stream_) check(weftStreamDestroy(stream_), "weftStreamDestroy");
  check(weftCommFinalize(comm_), "weftCommFinalize");
  check(weftCommDestroy(comm_), "weftCommDestroy");
  comm_ = nullptr;
  std::free(sendbuf_);
  std::free(recvbuf_);
  return wrongTotal_ ? 1 : 0;
}

}  // namespace

int perfMain(int argc, char** argv, const Coll& coll) {
  Options opt;
  const int p = parseArgs(argc, argv, &opt);
  if (p > 0) return 0;
  if (p < 0) return 1;
  Bench bench(coll, opt);
  return bench.run(argv[0]);
}

}  // namespace weftperf
