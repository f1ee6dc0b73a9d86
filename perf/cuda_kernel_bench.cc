// GPU kernel bandwidth (src/kernels/reduce.cu): the reduction of 2 sources
// (and of 4, as in a 4-rank direct all-reduce) and the copy kernel, per type
// and size, in GB/s of memory traffic (every source read once, the output
// written once) and as a fraction of the GPU's peak memory bandwidth.
//
//   cuda_kernel_bench [-b minbytes] [-e maxbytes] [-i iters] [--peak GB/s]
//
// The peak comes from the device (memory clock x bus width x 2, DDR) unless
// --peak gives it. Prints "SKIP: no GPU" and exits 0 without one.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/cuda_kernels.h"

namespace {

#define CHECK_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

double peakGBs(int dev) {
  int clockKHz = 0, busBits = 0;
  if (cudaDeviceGetAttribute(&clockKHz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess)
    return 0;
  return 2.0 * clockKHz * 1e3 * (busBits / 8.0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 1 << 20, maxBytes = 256u << 20;
  int iters = 20;
  double peak = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "-b")
      minBytes = std::strtoull(argv[i + 1], nullptr, 0);
    else if (f == "-e")
      maxBytes = std::strtoull(argv[i + 1], nullptr, 0);
    else if (f == "-i")
      iters = std::atoi(argv[i + 1]);
    else if (f == "--peak")
      peak = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no GPU\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (peak <= 0) peak = peakGBs(0);
  std::printf("# %s, peak memory bandwidth %.0f GB/s\n", prop.name, peak);
  std::printf("# %-10s %-8s %4s %12s %10s %10s %8s\n", "kernel", "type", "srcs", "bytes", "us",
              "GB/s", "of peak");

  std::vector<void*> bufs(5);
  for (void*& b : bufs) {
    CHECK_CUDA(cudaMalloc(&b, maxBytes));
    CHECK_CUDA(cudaMemset(b, 0, maxBytes));  // zeros: valid in every type
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));

  auto report = [&](const char* kernel, const char* type, int srcs, size_t bytes, float ms,
                    double traffic) {
    const double us = ms * 1e3 / iters;
    const double gbs = traffic / (us * 1e-6) / 1e9;
    std::printf("  %-10s %-8s %4d %12zu %10.1f %10.1f %7.1f%%\n", kernel, type, srcs, bytes, us,
                gbs, peak > 0 ? 100 * gbs / peak : 0.0);
  };

  const weftDataType_t types[] = {weftFloat32, weftBfloat16, weftFloat16, weftFloat8e4m3};
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    for (weftDataType_t t : types)
      for (int srcs : {2, 4}) {
        weft::cuda::ReduceArgs a;
        a.dst = bufs[0];
        for (int j = 0; j < srcs; ++j) a.srcs[j] = bufs[1 + j];
        a.nsrcs = srcs;
        a.count = bytes / weft::dtypeSize(t);
        a.dtype = t;
        if (weft::cuda::reduce(a, stream) != 0) return 1;  // warm-up
        CHECK_CUDA(cudaEventRecord(t0, stream));
        for (int i = 0; i < iters; ++i)
          if (weft::cuda::reduce(a, stream) != 0) return 1;
        CHECK_CUDA(cudaEventRecord(t1, stream));
        CHECK_CUDA(cudaEventSynchronize(t1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
        report("reduce", weft::dtypeName(t), srcs, bytes, ms,
               static_cast<double>(bytes) * (srcs + 1));
      }
    if (weft::cuda::copy(bufs[0], bufs[1], bytes, stream) != 0) return 1;
    CHECK_CUDA(cudaEventRecord(t0, stream));
    for (int i = 0; i < iters; ++i)
      if (weft::cuda::copy(bufs[0], bufs[1], bytes, stream) != 0) return 1;
    CHECK_CUDA(cudaEventRecord(t1, stream));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    report("copy", "bytes", 1, bytes, ms, 2.0 * static_cast<double>(bytes));
  }
  for (void* b : bufs) cudaFree(b);
  return 0;
}
