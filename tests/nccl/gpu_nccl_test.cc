// libnccl.so.2 on GPU memory: every collective x dtype x op through the
// toolkit's nccl.h, 2 and 4 ranks on one GPU (forked processes, each with its
// own stream, as PyTorch ranks sharing a device), checked against a host
// reference. NCCL itself refuses several ranks on one GPU; weft takes them.
//
// Skips where there is no GPU. The parent process never touches CUDA (a
// forked child of a CUDA process cannot use CUDA): it asks a child whether a
// GPU is there.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace {

constexpr size_t kCount = 1031;  // odd: vector paths and tails

bool gpuPresentInChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                 ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                 ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

// 1 or 2: every type holds them, and their sums (<= 8), products (powers of
// two), maxima, minima and averages over 4 ranks exactly.
double input(int rank, size_t i) {
  return 1.0 + static_cast<double>((static_cast<size_t>(rank) + i) % 2);
}

void encode(double v, ncclDataType_t t, unsigned char* p) {
  const auto wt = static_cast<weftDataType_t>(t);
  switch (t) {
    case ncclInt8:
      *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v);
      break;
    case ncclUint8:
      *p = static_cast<uint8_t>(v);
      break;
    case ncclInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclFloat16: {
      uint16_t x = weft::floatToHalf(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclBfloat16: {
      uint16_t x = weft::floatToBf16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclFloat8e4m3:
      *p = weft::floatToFp8e4m3(static_cast<float>(v));
      break;
    case ncclFloat8e5m2:
      *p = weft::floatToFp8e5m2(static_cast<float>(v));
      break;
    case ncclFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclFloat64:
      std::memcpy(p, &v, 8);
      break;
    default:
      (void)wt;
      break;
  }
}

bool isInt(ncclDataType_t t) {
  return !weft::dtypeIsFloat(static_cast<weftDataType_t>(t));
}

double reduceRef(ncclRedOp_t op, ncclDataType_t t, int n, size_t i) {
  double acc = input(0, i);
  for (int r = 1; r < n; ++r) {
    const double x = input(r, i);
    switch (op) {
      case ncclProd:
        acc *= x;
        break;
      case ncclMax:
        acc = std::max(acc, x);
        break;
      case ncclMin:
        acc = std::min(acc, x);
        break;
      default:
        acc += x;
    }
  }
  if (op == ncclAvg) acc = isInt(t) ? std::trunc(acc / n) : acc / n;
  return acc;
}

struct Rank {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t stream;
  int failures = 0;

  std::vector<unsigned char> host(ncclDataType_t t, size_t count, double (*f)(int, size_t, int),
                                  int arg) const {
    const size_t sz = weft::dtypeSize(static_cast<weftDataType_t>(t));
    std::vector<unsigned char> v(count * sz);
    for (size_t i = 0; i < count; ++i) encode(f(rank, i, arg), t, v.data() + i * sz);
    return v;
  }

  void* device(const std::vector<unsigned char>& h, size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes + 16) != cudaSuccess) die("cudaMalloc");
    if (!h.empty() && cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      die("cudaMemcpy");
    return p;
  }

  std::vector<unsigned char> fetch(void* p, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    if (cudaStreamSynchronize(stream) != cudaSuccess) die("cudaStreamSynchronize");
    if (cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) die("cudaMemcpy");
    return h;
  }

  void check(const char* what, ncclDataType_t t, int op, const std::vector<unsigned char>& got,
             const std::vector<unsigned char>& want) {
    if (got == want) return;
    ++failures;
    size_t i = 0;
    while (i < got.size() && got[i] == want[i]) ++i;
    std::fprintf(stderr, "rank %d/%d: %s dtype %d op %d: first difference at byte %zu\n", rank, n,
                 what, static_cast<int>(t), op, i);
  }

  [[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, ncclGetLastError(comm));
    ncclCommAbort(comm);
    _exit(2);
  }

  void ok(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) die(what);
  }
};

double fromInput(int rank, size_t i, int) {
  return input(rank, i);
}

void runAll(Rank& R) {
  const int n = R.n, me = R.rank;
  for (ncclDataType_t t : kTypes) {
    const size_t sz = weft::dtypeSize(static_cast<weftDataType_t>(t));
    const size_t one = kCount * sz, all = one * n;
    auto mine = R.host(t, kCount, fromInput, 0);
    // All-reduce, reduce and reduce-scatter: every op.
    for (ncclRedOp_t op : kOps) {
      std::vector<unsigned char> want(one);
      for (size_t i = 0; i < kCount; ++i) encode(reduceRef(op, t, n, i), t, want.data() + i * sz);
      void* s = R.device(mine, one);
      void* r = R.device({}, one);
      R.ok(ncclAllReduce(s, r, kCount, t, op, R.comm, R.stream), "ncclAllReduce");
      R.check("allreduce", t, op, R.fetch(r, one), want);
      R.ok(ncclAllReduce(s, s, kCount, t, op, R.comm, R.stream), "ncclAllReduce in place");
      R.check("allreduce in place", t, op, R.fetch(s, one), want);
      cudaMemcpy(s, mine.data(), one, cudaMemcpyHostToDevice);
      R.ok(ncclReduce(s, r, kCount, t, op, n - 1, R.comm, R.stream), "ncclReduce");
      if (me == n - 1) R.check("reduce", t, op, R.fetch(r, one), want);
      cudaFree(s);
      cudaFree(r);

      // Reduce-scatter: rank k gets block k of the reduction over n*kCount.
      std::vector<unsigned char> big(all), wantRs(one);
      for (size_t j = 0; j < kCount * n; ++j) encode(input(me, j), t, big.data() + j * sz);
      for (size_t i = 0; i < kCount; ++i)
        encode(reduceRef(op, t, n, static_cast<size_t>(me) * kCount + i), t,
               wantRs.data() + i * sz);
      void* bs = R.device(big, all);
      void* rr = R.device({}, one);
      R.ok(ncclReduceScatter(bs, rr, kCount, t, op, R.comm, R.stream), "ncclReduceScatter");
      R.check("reducescatter", t, op, R.fetch(rr, one), wantRs);
      cudaFree(bs);
      cudaFree(rr);
    }
    // Data movement: broadcast, all-gather, all-to-all, gather, scatter, send/recv.
    {
      std::vector<unsigned char> gathered(all), rootData;
      for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < kCount; ++i)
          encode(input(k, i), t, gathered.data() + (k * kCount + i) * sz);
      void* s = R.device(mine, one);
      void* r = R.device({}, all);
      const int root = 1 % n;
      R.ok(ncclBroadcast(s, r, kCount, t, root, R.comm, R.stream), "ncclBroadcast");
      R.check("broadcast", t, -1, R.fetch(r, one),
              std::vector<unsigned char>(gathered.begin() + root * one,
                                         gathered.begin() + (root + 1) * one));
      R.ok(ncclAllGather(s, r, kCount, t, R.comm, R.stream), "ncclAllGather");
      R.check("allgather", t, -1, R.fetch(r, all), gathered);
      R.ok(ncclGather(s, r, kCount, t, 0, R.comm, R.stream), "ncclGather");
      if (me == 0) R.check("gather", t, -1, R.fetch(r, all), gathered);
      // All-to-all with block k of every rank's input = input(k, i).
      void* a = R.device(gathered, all);
      R.ok(ncclAlltoAll(a, r, kCount, t, R.comm, R.stream), "ncclAlltoAll");
      std::vector<unsigned char> wantA2a(all);
      for (int k = 0; k < n; ++k) std::memcpy(wantA2a.data() + k * one, mine.data(), one);
      R.check("alltoall", t, -1, R.fetch(r, all), wantA2a);
      // Scatter from the last rank: block k of the gathered data to rank k.
      R.ok(ncclScatter(a, r, kCount, t, n - 1, R.comm, R.stream), "ncclScatter");
      R.check("scatter", t, -1, R.fetch(r, one),
              std::vector<unsigned char>(gathered.begin() + me * one,
                                         gathered.begin() + (me + 1) * one));
      // A ring of sends and receives in one group.
      const int to = (me + 1) % n, from = (me + n - 1) % n;
      R.ok(ncclGroupStart(), "ncclGroupStart");
      R.ok(ncclSend(s, kCount, t, to, R.comm, R.stream), "ncclSend");
      R.ok(ncclRecv(r, kCount, t, from, R.comm, R.stream), "ncclRecv");
      R.ok(ncclGroupEnd(), "ncclGroupEnd");
      R.check("sendrecv", t, -1, R.fetch(r, one),
              std::vector<unsigned char>(gathered.begin() + from * one,
                                         gathered.begin() + (from + 1) * one));
      cudaFree(s);
      cudaFree(r);
      cudaFree(a);
    }
  }
  ncclResult_t async = ncclSuccess;
  R.ok(ncclCommGetAsyncError(R.comm, &async), "ncclCommGetAsyncError");
  if (async != ncclSuccess) {
    ++R.failures;
    std::fprintf(stderr, "rank %d: async error %d: %s\n", me, static_cast<int>(async),
                 ncclGetLastError(R.comm));
  }
}

// Forks n ranks on GPU 0; true when all pass.
bool runRanks(int n) {
  std::vector<std::array<int, 2>> pipes(n);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) return false;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      Rank R{r, n, nullptr, nullptr};
      if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&R.stream) != cudaSuccess) _exit(3);
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
        for (int k = 1; k < n; ++k)
          if (write(pipes[k][1], &id, sizeof id) != sizeof id) _exit(3);
      } else if (read(pipes[r][0], &id, sizeof id) != sizeof id) {
        _exit(3);
      }
      R.ok(ncclCommInitRank(&R.comm, n, id, r), "ncclCommInitRank");
      runAll(R);
      R.ok(ncclCommDestroy(R.comm), "ncclCommDestroy");
      std::fflush(stderr);
      _exit(R.failures == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  bool pass = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    pass = pass && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return pass;
}

TEST(GpuNccl, TwoRanksOnOneGpu) {
  if (!gpuPresentInChild()) GTEST_SKIP() << "no GPU";
  EXPECT_TRUE(runRanks(2));
}

TEST(GpuNccl, FourRanksOnOneGpu) {
  if (!gpuPresentInChild()) GTEST_SKIP() << "no GPU";
  EXPECT_TRUE(runRanks(4));
}

}  // namespace
