// all_reduce_perf on GPU memory through libnccl.so.2: nccl-tests' table and
// "# Avg bus bandwidth" line for ncclAllReduce on cudaMalloc'd buffers, with
// the ranks forked here (all on GPU rank % devices, so 4 ranks may share one
// GPU, which real NCCL refuses).
//
//   gpu_all_reduce_perf [-n ranks] [-b minbytes] [-e maxbytes] [-f factor] [-w warmup] [-i iters]
//
// Prints "SKIP: no GPU" and exits 0 without one. Exit status 1 if a result
// is wrong or a call fails.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options {
  int nranks = 4;
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  size_t factor = 2;
  int warmup = 5;
  int iters = 20;
};

bool gpuInChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#define OK(call)                                                                             \
  do {                                                                                       \
    if ((call) != 0) {                                                                       \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, ncclGetLastError(comm)); \
      _exit(2);                                                                              \
    }                                                                                        \
  } while (0)

int rankMain(int rank, const Options& o, std::vector<std::array<int, 2>>& pipes) {
  ncclComm_t comm = nullptr;
  int ndev = 1;
  OK(cudaGetDeviceCount(&ndev));
  OK(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) {
    OK(ncclGetUniqueId(&id));
    for (int r = 1; r < o.nranks; ++r)
      if (write(pipes[r][1], &id, sizeof id) != sizeof id) _exit(3);
  } else if (read(pipes[rank][0], &id, sizeof id) != sizeof id) {
    _exit(3);
  }
  OK(ncclCommInitRank(&comm, o.nranks, id, rank));
  cudaStream_t stream;
  OK(cudaStreamCreate(&stream));
  float *send = nullptr, *recv = nullptr;
  OK(cudaMalloc(&send, o.maxBytes));
  OK(cudaMalloc(&recv, o.maxBytes));
  std::vector<float> host(o.maxBytes / sizeof(float));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((rank + i) % 4);
  OK(cudaMemcpy(send, host.data(), o.maxBytes, cudaMemcpyHostToDevice));

  if (rank == 0)
    std::printf(
        "# gpu_all_reduce_perf: %d ranks on %d GPU(s), weft libnccl.so.2\n"
        "#%12s %12s %8s %6s %10s %8s %8s %6s\n",
        o.nranks, ndev, "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong");
  double busSum = 0;
  int sizes = 0, wrongTotal = 0;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.factor) {
    const size_t count = bytes / sizeof(float);
    if (count == 0) continue;
    for (int i = 0; i < o.warmup; ++i)
      OK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    OK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i)
      OK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    OK(cudaStreamSynchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        o.iters;
    // Check: element i is the sum over ranks of (r + i) % 4.
    OK(cudaMemcpy(host.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < o.nranks; ++r) want += static_cast<float>((r + i) % 4);
      if (host[i] != want) ++wrong;
    }
    wrongTotal += wrong;
    const double algbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    const double busbw = algbw * 2.0 * (o.nranks - 1) / o.nranks;
    busSum += busbw;
    ++sizes;
    if (rank == 0)
      std::printf(" %12zu %12zu %8s %6s %10.1f %8.2f %8.2f %6d\n", bytes, count, "float", "sum", us,
                  algbw, busbw, wrong);
  }
  if (rank == 0) std::printf("# Avg bus bandwidth    : %g\n", sizes ? busSum / sizes : 0.0);
  std::fflush(stdout);
  OK(ncclCommDestroy(comm));
  return wrongTotal == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const unsigned long long v = std::strtoull(argv[i + 1], nullptr, 0);
    if (f == "-n")
      o.nranks = static_cast<int>(v);
    else if (f == "-b")
      o.minBytes = v;
    else if (f == "-e")
      o.maxBytes = v;
    else if (f == "-f")
      o.factor = v;
    else if (f == "-w")
      o.warmup = static_cast<int>(v);
    else if (f == "-i")
      o.iters = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (o.nranks < 1 || o.factor < 2 || o.iters < 1) return 2;
  if (!gpuInChild()) {
    std::printf("SKIP: no GPU\n");
    return 0;
  }
  std::vector<std::array<int, 2>> pipes(o.nranks);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) return 2;
  for (int r = 0; r < o.nranks; ++r)
    if (fork() == 0) _exit(rankMain(r, o, pipes));
  int failed = 0, status = 0;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  return failed ? 1 : 0;
}
