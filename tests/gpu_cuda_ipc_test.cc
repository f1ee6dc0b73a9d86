// CUDA IPC transport (src/transport/cuda_ipc): the path choice (runs
// everywhere) and, with a GPU, two processes on one GPU reading and reducing
// each other's buffers through exported handles.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/cuda_ipc/path.h"

#ifdef WEFT_HAVE_CUDA_IPC
#include <cuda_runtime.h>

#include "kernels/cuda_kernels.h"
#include "transport/cuda_ipc/ipc_memory.h"
#endif

namespace weft::cudaipc {
namespace {

bool noPeerAccess(int, int) {
  return false;
}
bool fullPeerAccess(int, int) {
  return true;
}

TEST(CudaIpcPath, SameGpuNeedsNoPeerAccess) {
  const std::vector<GpuRank> four = {{7, 0}, {7, 0}, {7, 0}, {7, 0}};
  EXPECT_EQ(choosePath(four, noPeerAccess, true), Path::kIpc);
}

TEST(CudaIpcPath, DistinctGpusNeedPeerAccess) {
  const std::vector<GpuRank> two = {{7, 0}, {7, 1}};
  EXPECT_EQ(choosePath(two, fullPeerAccess, true), Path::kIpc);
  EXPECT_EQ(choosePath(two, noPeerAccess, true), Path::kHostStaging);
  // One direction missing is enough to stage.
  EXPECT_EQ(choosePath(
                two, [](int from, int to) { return from == 0 && to == 1; }, true),
            Path::kHostStaging);
}

TEST(CudaIpcPath, OtherHostsOrHostBuffersStage) {
  EXPECT_EQ(choosePath({{7, 0}, {8, 0}}, fullPeerAccess, true), Path::kHostStaging);
  EXPECT_EQ(choosePath({{7, 0}, {7, -1}}, fullPeerAccess, true), Path::kHostStaging);
  EXPECT_EQ(choosePath({}, fullPeerAccess, true), Path::kHostStaging);
}

TEST(CudaIpcPath, DisabledStages) {
  EXPECT_EQ(choosePath({{7, 0}, {7, 0}}, fullPeerAccess, false), Path::kHostStaging);
}

#ifdef WEFT_HAVE_CUDA_IPC
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

// Child `me` of two: exports a buffer holding floats me+1, opens the other's,
// copies it and reduces both; exit status 0 when both results are right.
int exchange(int me, std::array<std::array<int, 2>, 2>& toPeer) {
  const int other = 1 - me;
  constexpr size_t kFloats = 1 << 18, kOffset = 4096;
  if (cudaSetDevice(0) != cudaSuccess) return 10;
  char* base = nullptr;
  if (cudaMalloc(&base, kOffset + kFloats * sizeof(float)) != cudaSuccess) return 11;
  float* mine = reinterpret_cast<float*>(base + kOffset);  // inside the allocation
  std::vector<float> host(kFloats, static_cast<float>(me + 1));
  if (cudaMemcpy(mine, host.data(), kFloats * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    return 12;
  IpcHandle h;
  std::string err;
  if (exportBuffer(mine, kFloats * sizeof(float), &h, &err) != 0) return 13;
  if (write(toPeer[other][1], &h, sizeof h) != sizeof h) return 14;
  IpcHandle theirs;
  if (read(toPeer[me][0], &theirs, sizeof theirs) != sizeof theirs) return 15;
  PeerMemory peers;
  void* peer = nullptr;
  if (peers.open(theirs, &peer, &err) != 0) return 16;
  void* again = nullptr;
  if (peers.open(theirs, &again, &err) != 0 || again != peer || peers.openCount() != 1) return 17;

  float* out = nullptr;
  if (cudaMalloc(&out, kFloats * sizeof(float)) != cudaSuccess) return 18;
  if (cuda::copy(out, peer, kFloats * sizeof(float), nullptr) != 0) return 19;
  if (cudaMemcpy(host.data(), out, kFloats * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    return 20;
  for (float v : host)
    if (v != static_cast<float>(other + 1)) return 21;
  cuda::ReduceArgs a;
  a.dst = out;
  a.srcs[0] = mine;
  a.srcs[1] = peer;
  a.nsrcs = 2;
  a.count = kFloats;
  a.dtype = weftFloat32;
  if (cuda::reduce(a, nullptr) != 0) return 22;
  if (cudaMemcpy(host.data(), out, kFloats * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    return 23;
  for (float v : host)
    if (v != 3.0f) return 24;
  // Neither frees its buffer before the other is done reading it.
  const char done = 1;
  char theirsDone = 0;
  if (write(toPeer[other][1], &done, 1) != 1 || read(toPeer[me][0], &theirsDone, 1) != 1) return 25;
  return 0;
}

TEST(CudaIpc, TwoProcessesOnOneGpu) {
  if (!gpuInChild()) GTEST_SKIP() << "no GPU";
  std::array<std::array<int, 2>, 2> pipes;
  for (auto& p : pipes) ASSERT_EQ(pipe(p.data()), 0);
  pid_t pids[2];
  for (int me = 0; me < 2; ++me) {
    pids[me] = fork();
    if (pids[me] == 0) _exit(exchange(me, pipes));
  }
  for (int me = 0; me < 2; ++me) {
    int status = 0;
    waitpid(pids[me], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << me << " status " << status << " (exit code = failing step)";
  }
}
#else
TEST(CudaIpc, RequiresCuda) {
  GTEST_SKIP() << "weft was built without CUDA (configure with -DWEFT_CUDA=ON)";
}
#endif

}  // namespace
}  // namespace weft::cudaipc
