// compression_bench: per-core speed of each codec, and the link rate it can
// keep busy, on 1..N threads.
//
//   compression_bench [--bytes 64M] [--reps 5] [--threads N] [--codecs onebit,powersgd:rank=4,...]
//
// For each compressor and each thread count T in 1, 2, 4, ..., N (and N),
// on an fp32 buffer of --bytes, with a compression worker pool of T threads
// (what WEFT_COMPRESS_THREADS=T gives a rank):
//   encode  GB/s of fp32 input turned into wire bytes (with error feedback),
//   decode  GB/s of fp32 output produced from wire bytes,
//   step    GB/s of a whole compressed allreduce on one rank (encode, the
//           owner's decode-reduce-encode, decode; PowerSGD's three products
//           and orthogonalisation), no communication,
//   ratio   fp32 bytes / wire bytes of a 2-rank allreduce,
//   feeds   the link rate (Gbit/s of wire bytes) T cores can keep busy:
//           min(encode, decode) / ratio * 8 for the chunk codecs and
//           step / ratio * 8 for the rest; equivalently the rate of an
//           uncompressed link it replaces is ratio times that.
// Best of --reps runs. Take figures on an idle machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compression/codec.h"
#include "compression/compressor.h"
#include "compression/local_group.h"
#include "compression/params.h"
#include "compression/workers.h"

using namespace weft::compression;

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class Fn>
double best(int reps, Fn&& fn) {
  double b = 1e300;
  for (int i = 0; i < reps; ++i) {
    const double t0 = seconds();
    fn();
    b = std::min(b, seconds() - t0);
  }
  return b;
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

// The chunk codec's sweeps over a whole buffer as the two-phase compressor
// splits them: granule-aligned pieces, one per thread of `pool`.
void encodeOn(WorkerPool& pool, const ChunkCodec& codec, const float* x, float* residual,
              size_t count, uint8_t* wire) {
  const size_t parts = static_cast<size_t>(pool.threads());
  const size_t align = std::lcm(codec.granule(), size_t{64});
  pool.run(parts, [&](size_t k) {
    size_t b, e;
    splitRange(count, align, parts, k, &b, &e);
    if (b < e) codec.encodeRange(x + b, residual ? residual + b : nullptr, b, e, count, wire);
  });
  codec.zeroUnused(wire, count, count);
}
void decodeOn(WorkerPool& pool, const ChunkCodec& codec, const uint8_t* wire, size_t count,
              float* out) {
  const size_t parts = static_cast<size_t>(pool.threads());
  const size_t align = std::lcm(codec.granule(), size_t{64});
  pool.run(parts, [&](size_t k) {
    size_t b, e;
    splitRange(count, align, parts, k, &b, &e);
    if (b < e) codec.decodeRange(wire, b, e, count, out + b, false);
  });
}

// A 2-rank compressed allreduce's wire bytes per rank, from the model.
double ratioOf(const std::string& spec, size_t count) {
  double ratio = 0;
  (void)runLocalGroup(2, [&](CollRunner& runner) -> weft::Status {
    weftCompressKind_t kind;
    weftCompressorParams_t p;
    WEFT_RETURN_IF_ERROR(parseSpec(spec, &kind, &p));
    std::unique_ptr<Compressor> c;
    WEFT_RETURN_IF_ERROR(Compressor::create(kind, p, &c));
    std::vector<float> x(count, 1.0f);
    WEFT_RETURN_IF_ERROR(c->allReduce(runner, x.data(), x.data(), count, weftFloat32, true));
    if (runner.rank() == 0) ratio = c->lastPlainBytes() / c->lastWireBytes();
    return weft::Status::ok();
  });
  return ratio;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 64u << 20;
  int reps = 5;
  int maxThreads = 1;
  std::string codecs = "onebit,powersgd:rank=4,topk:ratio=0.01,topk:ratio=0.01,random=1,fp16,bf16";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--bytes") {
      bytes = parseBytes(argv[i + 1]);
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--codecs") {
      codecs = argv[i + 1];
    } else if (a == "--threads") {
      maxThreads = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: %s [--bytes 64M] [--reps 5] [--threads N] [--codecs a,b,...]\n",
                   argv[0]);
      return 1;
    }
  }
  const size_t count = bytes / 4;
  std::vector<float> x(count), y(count), residual(count, 0.0f);
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : x) v = d(gen);

  std::vector<int> threadCounts;
  for (int t = 1; t < maxThreads; t *= 2) threadCounts.push_back(t);
  threadCounts.push_back(maxThreads);

  std::printf("# compression_bench: %zu fp32 elements (%.1f MiB), 1..%d threads, best of %d\n",
              count, bytes / 1048576.0, maxThreads, reps);
  std::printf("# %-28s %7s %8s %8s %8s %8s %12s\n", "codec", "threads", "encode", "decode", "step",
              "ratio", "feeds");
  std::printf("# %-28s %7s %8s %8s %8s %8s %12s\n", "", "", "(GB/s)", "(GB/s)", "(GB/s)", "",
              "(Gbit/s)");

  // Split "topk:ratio=0.01,random=1" correctly: a new codec starts at a name.
  std::vector<std::string> specs;
  size_t pos = 0;
  while (pos < codecs.size()) {
    size_t next = codecs.find(',', pos);
    std::string item =
        codecs.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (!specs.empty() && item.find('=') != std::string::npos &&
        item.find(':') == std::string::npos)
      specs.back() += "," + item;
    else
      specs.push_back(item);
    pos = next == std::string::npos ? codecs.size() : next + 1;
  }

  for (const std::string& spec : specs) {
    weftCompressKind_t kind;
    weftCompressorParams_t p;
    weft::Status st = parseSpec(spec, &kind, &p);
    if (!st.isOk()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
    const double ratio = ratioOf(spec, count);
    for (int threads : threadCounts) {
      WorkerPool pool(threads);
      double enc = 0, dec = 0;
      std::unique_ptr<ChunkCodec> codec;
      if (kind == weftCompressOneBit) codec = makeOneBitCodec(p.blockSize);
      if (kind == weftCompressFp16) codec = makeHalfCodec();
      if (kind == weftCompressBf16) codec = makeBf16Codec();
      if (codec) {
        std::vector<uint8_t> wire(codec->wireBytes(count));
        float* res = kind == weftCompressOneBit ? residual.data() : nullptr;
        enc = bytes /
              best(reps, [&] { encodeOn(pool, *codec, x.data(), res, count, wire.data()); }) / 1e9;
        dec =
            bytes / best(reps, [&] { decodeOn(pool, *codec, wire.data(), count, y.data()); }) / 1e9;
      }
      std::unique_ptr<Compressor> c;
      (void)Compressor::create(kind, p, &c);
      c->setWorkers(&pool);
      double step = 0;
      (void)runLocalGroup(1, [&](CollRunner& runner) -> weft::Status {
        WEFT_RETURN_IF_ERROR(c->allReduce(runner, x.data(), y.data(), count, weftFloat32, true));
        step = bytes /
               best(reps,
                    [&] {
                      (void)c->allReduce(runner, x.data(), y.data(), count, weftFloat32, true);
                    }) /
               1e9;
        return weft::Status::ok();
      });
      const double rate = codec ? std::min(enc, dec) : step;
      char e[16] = "-", dd[16] = "-";
      if (codec) {
        std::snprintf(e, sizeof(e), "%.2f", enc);
        std::snprintf(dd, sizeof(dd), "%.2f", dec);
      }
      std::printf("  %-28s %7d %8s %8s %8.2f %8.1f %12.2f\n", spec.c_str(), threads, e, dd, step,
                  ratio, ratio > 0 ? rate / ratio * 8 : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
