// gloo_coll_perf: the Gloo peer of weft's nccl-tests-style perf binaries.
//
// Times Gloo's allreduce (ring), allgather, reduce-scatter (halving-doubling),
// alltoall or broadcast (float, sum) over Gloo's TCP transport and prints the
// nccl-tests table, so that perf/compare reads weft, MPI and Gloo output with
// one parser.
//
//   weftrun -n 2 gloo_coll_perf -c allreduce -b 8 -e 64M -f 2 -n 20 -w 5
//
// Rank and size come from WEFT_RANK/WEFT_WORLD_SIZE (weftrun) or
// RANK/WORLD_SIZE; the ranks rendezvous through a Gloo FileStore in
// GLOO_STORE_DIR (default /tmp/gloo-store-<WEFT_SECRET or MASTER_PORT>), which
// works across network namespaces because they share the file system. Each
// rank listens on GLOO_HOSTNAME (default 127.0.0.1), so a rank in a network
// namespace names its own veth address there.
//
// Sizes follow nccl-tests: "size" is the whole buffer (per-rank blocks are
// size / nranks). time is the mean over ranks of the mean time per
// iteration; busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather,
// reducescatter and alltoall, 1 for broadcast.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

enum class Coll { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast };

struct Options {
  Coll coll = Coll::AllReduce;
  const char* collName = "allreduce";
  size_t minBytes = 32u << 20, maxBytes = 32u << 20, stepBytes = 0;
  double stepFactor = 2;
  int iters = 20, warmup = 5;
  bool check = true;
};

int envInt(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b}) {
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  }
  return fallback;
}

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: gloo_coll_perf [options]\n"
               "  -c NAME   allreduce | allgather | reducescatter | alltoall | broadcast\n"
               "  -b SIZE   smallest size (default 32M); suffixes K, M, G\n"
               "  -e SIZE   largest size (default 32M)\n"
               "  -f F      multiply the size by F each step (default 2)\n"
               "  -i SIZE   add SIZE each step instead (when -f is 1)\n"
               "  -n N      timed iterations per size (default 20)\n"
               "  -w N      untimed iterations per size (default 5)\n"
               "  -k 0|1    verify the result once per size (default 1)\n"
               "Env: WEFT_RANK/RANK, WEFT_WORLD_SIZE/WORLD_SIZE, GLOO_STORE_DIR, "
               "GLOO_HOSTNAME.\n");
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "-c") {
      const std::string n = v;
      o->collName = v;
      if (n == "allreduce")
        o->coll = Coll::AllReduce;
      else if (n == "allgather")
        o->coll = Coll::AllGather;
      else if (n == "reducescatter")
        o->coll = Coll::ReduceScatter;
      else if (n == "alltoall")
        o->coll = Coll::AllToAll;
      else if (n == "broadcast")
        o->coll = Coll::Broadcast;
      else
        return false;
    } else if (a == "-b") {
      if (!parseSize(v, &o->minBytes)) return false;
    } else if (a == "-e") {
      if (!parseSize(v, &o->maxBytes)) return false;
    } else if (a == "-i") {
      if (!parseSize(v, &o->stepBytes)) return false;
    } else if (a == "-f") {
      o->stepFactor = std::atof(v);
    } else if (a == "-n") {
      o->iters = std::atoi(v);
    } else if (a == "-w") {
      o->warmup = std::atoi(v);
    } else if (a == "-k") {
      o->check = std::atoi(v) != 0;
    } else {
      return false;
    }
  }
  return o->iters > 0 && o->warmup >= 0 && o->minBytes <= o->maxBytes;
}

class Bench {
 public:
  Bench(std::shared_ptr<gloo::Context> ctx, const Options& o)
      : ctx_(std::move(ctx)), o_(o), rank_(ctx_->rank), n_(ctx_->size) {}

  // Element count of the whole buffer for `bytes` (a multiple of n blocks
  // where the collective splits it).
  size_t countFor(size_t bytes) const {
    size_t count = bytes / sizeof(float);
    if (o_.coll != Coll::AllReduce && o_.coll != Coll::Broadcast) count -= count % n_;
    return count;
  }

  // Runs one collective on `count` elements.
  void runOnce(size_t count) {
    const size_t block = count / n_;
    switch (o_.coll) {
      case Coll::AllReduce: {
        gloo::AllreduceOptions opts(ctx_);
        opts.setInput(in_.data(), count);
        opts.setOutput(out_.data(), count);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(tag_++);
        gloo::allreduce(opts);
        break;
      }
      case Coll::AllGather: {
        gloo::AllgatherOptions opts(ctx_);
        opts.setInput(in_.data(), block);
        opts.setOutput(out_.data(), count);
        opts.setTag(tag_++);
        gloo::allgather(opts);
        break;
      }
      case Coll::AllToAll: {
        gloo::AlltoallOptions opts(ctx_);
        opts.setInput(in_.data(), count);
        opts.setOutput(out_.data(), count);
        opts.setTag(tag_++);
        gloo::alltoall(opts);
        break;
      }
      case Coll::Broadcast: {
        gloo::BroadcastOptions opts(ctx_);
        if (rank_ == 0) opts.setInput(in_.data(), count);
        opts.setOutput(out_.data(), count);
        opts.setRoot(0);
        opts.setTag(tag_++);
        gloo::broadcast(opts);
        break;
      }
      case Coll::ReduceScatter: {
        // Gloo's reduce-scatter is in place on the whole buffer; each rank
        // ends with its block reduced.
        std::memcpy(out_.data(), in_.data(), count * sizeof(float));
        std::vector<int> recvElems(n_, static_cast<int>(block));
        gloo::ReduceScatterHalvingDoubling<float> rs(ctx_, {out_.data()}, static_cast<int>(count),
                                                     recvElems);
        rs.run();
        break;
      }
    }
  }

  // Fills the input for a check; returns the number of wrong elements.
  size_t check(size_t count) {
    for (size_t i = 0; i < count; ++i) in_[i] = float((rank_ + 1) * ((i % 13) + 1));
    runOnce(count);
    const size_t block = count / n_;
    const float sumRanks = float(n_ * (n_ + 1) / 2);
    size_t wrong = 0;
    auto expectAt = [&](size_t i, float want) {
      if (std::fabs(out_[i] - want) > 1e-3f * std::fabs(want)) ++wrong;
    };
    switch (o_.coll) {
      case Coll::AllReduce:
        for (size_t i = 0; i < count; ++i) expectAt(i, sumRanks * float((i % 13) + 1));
        break;
      case Coll::AllGather:
        for (size_t i = 0; i < count; ++i)
          expectAt(i, float((i / block + 1) * ((i % block % 13) + 1)));
        break;
      case Coll::AllToAll:
        for (size_t i = 0; i < count; ++i)
          expectAt(i, float((i / block + 1) * ((rank_ * block + i % block) % 13 + 1)));
        break;
      case Coll::Broadcast:
        for (size_t i = 0; i < count; ++i) expectAt(i, float((i % 13) + 1));
        break;
      case Coll::ReduceScatter:
        for (size_t i = rank_ * block; i < (rank_ + 1) * block; ++i)
          expectAt(i, sumRanks * float((i % 13) + 1));
        break;
    }
    return wrong;
  }

  double busFactor() const {
    switch (o_.coll) {
      case Coll::AllReduce:
        return 2.0 * (n_ - 1) / n_;
      case Coll::Broadcast:
        return 1.0;
      default:
        return double(n_ - 1) / n_;
    }
  }

  // Mean time per iteration in seconds, averaged over ranks.
  double time(size_t count) {
    for (int i = 0; i < o_.warmup; ++i) runOnce(count);
    barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) runOnce(count);
    const double local =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o_.iters;
    return sumOverRanks(local) / n_;
  }

  void run() {
    in_.assign(o_.maxBytes / sizeof(float) + 1, 1.0f);
    out_.assign(in_.size(), 0.0f);
    if (rank_ == 0) {
      std::printf("# gloo_coll_perf: %s, %d ranks, float sum, Gloo TCP\n", o_.collName, n_);
      std::printf("#%12s %12s %8s %6s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop",
                  "root", "time", "algbw", "busbw", "#wrong");
      std::printf("#%12s %12s %8s %6s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "",
                  "(us)", "(GB/s)", "(GB/s)", "");
    }
    double busSum = 0;
    int rows = 0;
    for (size_t bytes = o_.minBytes; bytes <= o_.maxBytes;) {
      const size_t count = countFor(bytes);
      if (count > 0) {
        const size_t wrong = o_.check ? size_t(sumOverRanks(double(check(count)))) : 0;
        const double t = time(count);
        const double size = double(count) * sizeof(float);
        const double algbw = size / t / 1e9;
        busSum += algbw * busFactor();
        ++rows;
        if (rank_ == 0)
          std::printf(" %12zu %12zu %8s %6s %6d %10.2f %8.2f %8.2f %6zu\n", count * sizeof(float),
                      count, "float", "sum", o_.coll == Coll::Broadcast ? 0 : -1, t * 1e6, algbw,
                      algbw * busFactor(), wrong);
      }
      const size_t next = (o_.stepFactor > 1) ? size_t(double(bytes) * o_.stepFactor)
                                              : bytes + (o_.stepBytes ? o_.stepBytes : bytes);
      if (next <= bytes) break;
      bytes = next;
    }
    if (rank_ == 0) std::printf("# Avg bus bandwidth    : %g\n", rows ? busSum / rows : 0.0);
  }

 private:
  void barrier() {
    float token = 0;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&token, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  }
  double sumOverRanks(double v) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
    return v;
  }

  std::shared_ptr<gloo::Context> ctx_;
  const Options& o_;
  int rank_, n_;
  uint32_t tag_ = 1;
  std::vector<float> in_, out_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  const int rank = envInt("WEFT_RANK", "RANK", -1);
  const int size = envInt("WEFT_WORLD_SIZE", "WORLD_SIZE", -1);
  if (rank < 0 || size <= 0 || rank >= size) {
    std::fprintf(stderr, "gloo_coll_perf: set WEFT_RANK/WEFT_WORLD_SIZE (run under weftrun)\n");
    return 2;
  }
  std::string storeDir;
  if (const char* d = std::getenv("GLOO_STORE_DIR"); d && *d) {
    storeDir = d;
  } else {
    const char* tag = std::getenv("WEFT_SECRET");
    if (!tag) tag = std::getenv("MASTER_PORT");
    storeDir = std::string("/tmp/gloo-store-") + (tag ? tag : "default");
  }
  ::mkdir(storeDir.c_str(), 0700);
  const char* host = std::getenv("GLOO_HOSTNAME");
  try {
    gloo::transport::tcp::attr attr(host && *host ? host : "127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, device);
    Bench bench(ctx, o);
    bench.run();
    // Every rank has connected by now: the store's files are no longer read.
    if (rank == 0) std::filesystem::remove_all(storeDir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_coll_perf rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
