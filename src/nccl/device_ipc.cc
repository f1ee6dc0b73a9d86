// All-reduce on GPU memory straight between GPUs (opt-in: WEFT_CUDA_IPC=1):
// ranks on one host whose GPUs reach each other (or share one GPU) read each
// other's buffers through CUDA IPC, and the GPU kernels reduce; nothing goes
// through host memory. Everything else stays on the staging path.
//
// Direct all-reduce over n <= 8 ranks, on the caller's stream:
//   copy the input into this rank's exported `in` buffer
//   barrier (host function: a 4-byte weft all-reduce on host memory)
//   reduce slice `rank` of every rank's `in` into this rank's `out` (kernel)
//   barrier
//   copy slice k of rank k's `out` into recv, for every k
//   barrier (no rank overwrites its buffers while a peer still reads them)
// Cost: 2(n-1)/n of the message read from peers per rank, 3 barriers.
//
// Status: compiled in CI, not yet run on a GPU (tools/gpu-check.sh runs the
// GPU tests with and without it). Off unless WEFT_CUDA_IPC=1.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/env.h"
#include "kernels/cuda_kernels.h"
#include "nccl/device_ipc.h"
#include "nccl/shim.h"
#include "transport/cuda_ipc/ipc_memory.h"
#include "transport/cuda_ipc/path.h"

namespace weft::nccl {
namespace {

struct RankInfo {
  uint64_t hostHash;
  int32_t device;
  int32_t ok;  // this rank could allocate and export
  cudaipc::IpcHandle in, out;
};

struct IpcState {
  bool usable = false;
  size_t capacity = 0;
  int rank = 0, nranks = 0;
  void* in = nullptr;  // this rank's exported buffers
  void* out = nullptr;
  std::vector<void*> peerIn, peerOut;  // every rank's, opened here (own ones direct)
  cudaipc::PeerMemory peers;
  weftComm_t inner = nullptr;
};

std::mutex statesMu;
std::unordered_map<const ncclComm*, std::unique_ptr<IpcState>>& states() {
  static auto* m = new std::unordered_map<const ncclComm*, std::unique_ptr<IpcState>>();
  return *m;
}

uint64_t hostHash() {
  char name[256] = {};
  (void)gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

// Collective over the communicator (every rank reaches it at the same call):
// allocate, export, exchange, decide, open.
std::unique_ptr<IpcState> setUp(weftComm_t inner) {
  auto st = std::make_unique<IpcState>();
  st->inner = inner;
  (void)weftCommUserRank(inner, &st->rank);
  (void)weftCommCount(inner, &st->nranks);
  st->capacity = envBytes("CUDA_IPC_BYTES", 32u << 20);
  std::vector<RankInfo> all(st->nranks);
  RankInfo& me = all[st->rank];
  me.hostHash = hostHash();
  std::string err;
  me.ok = cudaGetDevice(&me.device) == cudaSuccess &&
          cudaMalloc(&st->in, st->capacity) == cudaSuccess &&
          cudaMalloc(&st->out, st->capacity) == cudaSuccess &&
          cudaipc::exportBuffer(st->in, st->capacity, &me.in, &err) == 0 &&
          cudaipc::exportBuffer(st->out, st->capacity, &me.out, &err) == 0;
  (void)cudaGetLastError();
  RankInfo mine = me;
  if (weftAllGather(&mine, all.data(), sizeof(RankInfo), weftUint8, inner, nullptr) != weftSuccess)
    return st;
  std::vector<cudaipc::GpuRank> gpus;
  bool allOk = st->nranks <= cuda::kMaxSources;
  for (const RankInfo& r : all) {
    gpus.push_back({r.hostHash, r.ok ? r.device : -1});
    allOk = allOk && r.ok;
  }
  if (!allOk || cudaipc::choosePath(gpus, cudaipc::canAccessPeer, true) != cudaipc::Path::kIpc)
    return st;
  // Open every peer's buffers; all ranks must succeed or all stage.
  int opened = 1;
  st->peerIn.assign(st->nranks, nullptr);
  st->peerOut.assign(st->nranks, nullptr);
  for (int k = 0; k < st->nranks; ++k) {
    if (k == st->rank) {
      st->peerIn[k] = st->in;
      st->peerOut[k] = st->out;
      continue;
    }
    if (st->peers.open(all[k].in, &st->peerIn[k], &err) != 0 ||
        st->peers.open(all[k].out, &st->peerOut[k], &err) != 0)
      opened = 0;
  }
  int everywhere = opened;
  if (weftAllReduce(&opened, &everywhere, 1, weftInt32, weftMin, inner, nullptr) != weftSuccess)
    return st;
  st->usable = everywhere == 1;
  return st;
}

// Host function: all ranks have reached this point of their streams.
void CUDART_CB barrier(void* arg) {
  auto* st = static_cast<IpcState*>(arg);
  int one = 1;
  (void)weftAllReduce(&one, &one, 1, weftInt32, weftSum, st->inner, nullptr);
}

}  // namespace

bool ipcEnabled() {
  static const bool on = envInt("CUDA_IPC", 0) != 0;
  return on;
}

void ipcPrepare(ncclComm_t comm, weftComm_t inner) {
  std::lock_guard<std::mutex> lock(statesMu);
  auto& slot = states()[comm];
  if (!slot) slot = setUp(inner);
}

bool ipcAllReduce(const CollDesc& d, ncclComm_t comm, weftComm_t inner, cudaStream_t stream,
                  ncclResult_t* result) {
  if (d.op != CollOp::AllReduce || d.redop < 0 || d.redop > weftAvg || !dtypeValid(d.dtype))
    return false;
  IpcState* st;
  {
    std::lock_guard<std::mutex> lock(statesMu);
    auto it = states().find(comm);
    if (it == states().end()) return false;
    st = it->second.get();
  }
  const auto type = static_cast<weftDataType_t>(d.dtype);
  const size_t sz = dtypeSize(type), bytes = d.count * sz;
  if (!st->usable || bytes > st->capacity || d.count == 0) return false;

  const int n = st->nranks, me = st->rank;
  auto sliceStart = [&](int k) { return d.count * static_cast<size_t>(k) / n; };
  auto check = [&](int err, const char* what) {
    if (err != 0 && *result == ncclSuccess)
      *result = fail(ncclUnhandledCudaError, "%s: %s", what, cuda::errorName(err));
    return err == 0;
  };
  *result = ncclSuccess;
  if (!check(cudaMemcpyAsync(st->in, d.send, bytes, cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpyAsync (input)") ||
      !check(cudaLaunchHostFunc(stream, barrier, st), "cudaLaunchHostFunc"))
    return true;
  cuda::ReduceArgs a;
  const size_t lo = sliceStart(me), hi = sliceStart(me + 1);
  a.dst = static_cast<char*>(st->out) + lo * sz;
  for (int k = 0; k < n; ++k) a.srcs[k] = static_cast<const char*>(st->peerIn[k]) + lo * sz;
  a.nsrcs = n;
  a.count = hi - lo;
  a.dtype = type;
  switch (d.redop) {
    case weftProd:
      a.op = cuda::Op::Prod;
      break;
    case weftMax:
      a.op = cuda::Op::Max;
      break;
    case weftMin:
      a.op = cuda::Op::Min;
      break;
    case weftAvg:
      a.divisor = n;
      break;
    default:
      break;
  }
  if (!check(cuda::reduce(a, stream), "reduce kernel") ||
      !check(cudaLaunchHostFunc(stream, barrier, st), "cudaLaunchHostFunc"))
    return true;
  for (int k = 0; k < n; ++k) {
    const size_t klo = sliceStart(k), khi = sliceStart(k + 1);
    if (!check(cuda::copy(static_cast<char*>(d.recv) + klo * sz,
                          static_cast<const char*>(st->peerOut[k]) + klo * sz, (khi - klo) * sz,
                          stream),
               "copy kernel"))
      return true;
  }
  check(cudaLaunchHostFunc(stream, barrier, st), "cudaLaunchHostFunc");
  return true;
}

}  // namespace weft::nccl
