// The device path of a WEFT_CUDA build: collectives on GPU memory, ordered on
// the caller's stream by staging through pinned host buffers (device_path.h
// says why). On the stream, per call (or per group):
//
//   D2H copies of the device inputs -> host function: the weft collective on
//   the pinned copies -> H2D copies of the outputs -> host function: the
//   staging buffers go back to the pool.
//
// Capturable in a CUDA graph (copies and host nodes); a captured call keeps
// its staging buffers for the life of the process.
//
// The host function blocks the stream's progress (by design: later work on
// the stream needs the result) on the CUDA driver's callback thread. Each
// process has its own, so ranks in separate processes, also several on one
// GPU, never wait on each other's callback threads. A group of device calls
// runs as one weft group inside one host function, so grouped sends and
// receives cannot deadlock; the group's other streams are joined to the
// first with events. A group must not mix host and device buffers.
//
// Inputs and outputs are staged separately, so in-place calls run
// out-of-place on the host (weft computes the same result).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/dtype.h"
#include "nccl/cuda_probe.h"
#include "nccl/device_ipc.h"
#include "nccl/device_path.h"
#include "nccl/shim.h"

namespace weft::nccl {
namespace {

// One in-flight call: its host copies of the inputs and outputs.
struct Stage {
  void* send = nullptr;
  size_t sendCap = 0;
  void* recv = nullptr;
  size_t recvCap = 0;
};

// The pinned buffers of a communicator, reused across calls.
struct Pool {
  std::mutex mu;
  std::vector<Stage> free;
};

struct Call {
  CollDesc desc;  // with the caller's (device or host) pointers
  CollDesc host;  // the same call on staged host pointers
  weftComm_t inner;
  Pool* pool;
  Stage stage;
  CollBytes bytes;
  bool sendOnDevice, recvOnDevice;
};

struct Job {
  std::vector<Call> calls;
  std::atomic<int>* asyncError;
};

struct CommState {
  Pool pool;
  std::atomic<int> asyncError{weftSuccess};
  bool ipcPrepared = false;  // device_ipc.cc set up (WEFT_CUDA_IPC=1)
};

std::mutex statesMu;
std::unordered_map<const ncclComm*, CommState*>& states() {
  static auto* m = new std::unordered_map<const ncclComm*, CommState*>();
  return *m;
}

CommState* stateOf(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(statesMu);
  CommState*& s = states()[comm];
  if (s == nullptr) s = new CommState();
  return s;
}

std::mutex allocMu;
std::unordered_set<void*>& deviceAllocs() {
  static auto* s = new std::unordered_set<void*>();
  return *s;
}

struct Queued {
  Call call;
  cudaStream_t stream;
  std::atomic<int>* asyncError;
};
thread_local std::vector<Queued> groupQueue;

ncclResult_t cudaFail(const char* what, cudaError_t e) {
  return fail(ncclUnhandledCudaError, "%s: %s", what, cudaGetErrorString(e));
}

// Takes staging buffers of at least the call's sizes from the pool.
ncclResult_t takeStage(Call& c) {
  {
    std::lock_guard<std::mutex> lock(c.pool->mu);
    if (!c.pool->free.empty()) {
      c.stage = c.pool->free.back();
      c.pool->free.pop_back();
    }
  }
  auto grow = [](void** p, size_t* cap, size_t need) -> cudaError_t {
    if (need <= *cap) return cudaSuccess;
    if (*p != nullptr) (void)cudaFreeHost(*p);
    *p = nullptr;
    *cap = 0;
    const size_t rounded = (need + 4095) & ~static_cast<size_t>(4095);
    const cudaError_t e = cudaMallocHost(p, rounded);
    if (e == cudaSuccess) *cap = rounded;
    return e;
  };
  if (c.sendOnDevice)
    if (cudaError_t e = grow(&c.stage.send, &c.stage.sendCap, c.bytes.send); e != cudaSuccess)
      return cudaFail("cudaMallocHost (staging)", e);
  if (c.recvOnDevice)
    if (cudaError_t e = grow(&c.stage.recv, &c.stage.recvCap, c.bytes.recv); e != cudaSuccess)
      return cudaFail("cudaMallocHost (staging)", e);
  c.host = c.desc;
  if (c.sendOnDevice) c.host.send = c.stage.send;
  if (c.recvOnDevice) c.host.recv = c.stage.recv;
  return ncclSuccess;
}

// Host function: the weft calls of the job, as one group when there are
// several. Runs on CUDA's callback thread, so it makes no CUDA calls.
void CUDART_CB runJob(void* arg) {
  auto* job = static_cast<Job*>(arg);
  weftResult_t r = weftSuccess;
  if (job->calls.size() == 1) {
    r = issueHost(job->calls[0].host, job->calls[0].inner, nullptr);
  } else {
    (void)weftGroupStart();
    for (const Call& c : job->calls) {
      const weftResult_t ri = issueHost(c.host, c.inner, nullptr);
      if (ri != weftSuccess && r == weftSuccess) r = ri;
    }
    const weftResult_t re = weftGroupEnd();
    if (r == weftSuccess) r = re;
  }
  int expected = weftSuccess;
  if (r != weftSuccess) job->asyncError->compare_exchange_strong(expected, r);
}

void CUDART_CB releaseJob(void* arg) {
  auto* job = static_cast<Job*>(arg);
  for (Call& c : job->calls) {
    std::lock_guard<std::mutex> lock(c.pool->mu);
    c.pool->free.push_back(c.stage);
  }
  delete job;
}

// Enqueues a job on `stream`: inputs down, the collective, outputs up.
ncclResult_t enqueue(Job* job, cudaStream_t stream) {
  for (const Call& c : job->calls)
    if (c.sendOnDevice && c.bytes.send > 0)
      if (cudaError_t e = cudaMemcpyAsync(c.stage.send, c.desc.send, c.bytes.send,
                                          cudaMemcpyDeviceToHost, stream);
          e != cudaSuccess)
        return cudaFail("cudaMemcpyAsync (inputs to the host)", e);
  if (cudaError_t e = cudaLaunchHostFunc(stream, runJob, job); e != cudaSuccess)
    return cudaFail("cudaLaunchHostFunc", e);
  for (const Call& c : job->calls)
    if (c.recvOnDevice && c.bytes.recv > 0)
      if (cudaError_t e = cudaMemcpyAsync(c.desc.recv, c.stage.recv, c.bytes.recv,
                                          cudaMemcpyHostToDevice, stream);
          e != cudaSuccess)
        return cudaFail("cudaMemcpyAsync (outputs to the device)", e);
  // Under CUDA-graph capture the nodes above run at every replay, so the
  // job and its staging buffers belong to the graph from now on: they are
  // not recycled (kept for the life of the process).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess)
    return cudaFail("cudaStreamIsCapturing", e);
  if (capture == cudaStreamCaptureStatusActive) return ncclSuccess;
  if (cudaError_t e = cudaLaunchHostFunc(stream, releaseJob, job); e != cudaSuccess)
    return cudaFail("cudaLaunchHostFunc", e);
  return ncclSuccess;
}

ncclResult_t makeCall(const CollDesc& d, ncclComm_t comm, weftComm_t inner, Call* out) {
  if (!dtypeValid(d.dtype)) return fail(ncclInvalidArgument, "invalid data type %d", d.dtype);
  int rank = 0, nranks = 0;
  if (weftResult_t r = weftCommUserRank(inner, &rank); r != weftSuccess) return fromWeft(r);
  if (weftResult_t r = weftCommCount(inner, &nranks); r != weftSuccess) return fromWeft(r);
  CommState* st = stateOf(comm);
  out->desc = d;
  out->inner = inner;
  out->pool = &st->pool;
  out->bytes = collBytes(d, dtypeSize(static_cast<weftDataType_t>(d.dtype)), rank, nranks);
  out->sendOnDevice = d.send != nullptr && classify(d.send) == MemKind::Device;
  out->recvOnDevice = d.recv != nullptr && classify(d.recv) == MemKind::Device;
  return takeStage(*out);
}

}  // namespace

bool devicePathBuilt() {
  return true;
}

ncclResult_t deviceIssue(const CollDesc& d, ncclComm_t comm, weftComm_t inner,
                         cudaStream_t stream) {
  CommState* state = stateOf(comm);
  if (ipcEnabled()) {
    if (!state->ipcPrepared) {
      ipcPrepare(comm, inner);
      state->ipcPrepared = true;
    }
    ncclResult_t r = ncclSuccess;
    if (groupDepth() == 0 && ipcAllReduce(d, comm, inner, stream, &r)) return r;
  }
  Call c;
  if (ncclResult_t r = makeCall(d, comm, inner, &c); r != ncclSuccess) return r;
  std::atomic<int>* err = &state->asyncError;
  if (groupDepth() > 0) {
    groupQueue.push_back({c, stream, err});
    return ncclSuccess;
  }
  auto* job = new Job{{c}, err};
  return enqueue(job, stream);
}

ncclResult_t deviceGroupEnd() {
  std::vector<Queued> queued;
  queued.swap(groupQueue);
  if (queued.empty()) return ncclSuccess;
  const cudaStream_t first = queued[0].stream;
  std::vector<cudaStream_t> others;
  for (const Queued& q : queued)
    if (q.stream != first && std::find(others.begin(), others.end(), q.stream) == others.end())
      others.push_back(q.stream);
  // The other streams' earlier work comes first; their later work waits for the group.
  std::vector<cudaEvent_t> events;
  auto join = [&](cudaStream_t from, cudaStream_t to) -> ncclResult_t {
    cudaEvent_t ev;
    if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
      return cudaFail("cudaEventCreate", e);
    events.push_back(ev);
    if (cudaError_t e = cudaEventRecord(ev, from); e != cudaSuccess)
      return cudaFail("cudaEventRecord", e);
    if (cudaError_t e = cudaStreamWaitEvent(to, ev, 0); e != cudaSuccess)
      return cudaFail("cudaStreamWaitEvent", e);
    return ncclSuccess;
  };
  ncclResult_t result = ncclSuccess;
  for (cudaStream_t s : others)
    if (result == ncclSuccess) result = join(s, first);
  if (result == ncclSuccess) {
    auto* job = new Job{{}, queued[0].asyncError};
    for (Queued& q : queued) job->calls.push_back(q.call);
    result = enqueue(job, first);
  }
  for (cudaStream_t s : others)
    if (result == ncclSuccess) result = join(first, s);
  for (cudaEvent_t ev : events) (void)cudaEventDestroy(ev);  // freed once complete
  return result;
}

ncclResult_t deviceAlloc(void** ptr, size_t size) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return ncclInvalidUsage;  // no GPU: the caller gives host memory
  }
  if (cudaError_t e = cudaMalloc(ptr, size); e != cudaSuccess) return cudaFail("cudaMalloc", e);
  probeCuda();
  std::lock_guard<std::mutex> lock(allocMu);
  deviceAllocs().insert(*ptr);
  return ncclSuccess;
}

ncclResult_t deviceFree(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(allocMu);
    if (deviceAllocs().erase(ptr) == 0)
      return fail(ncclInvalidArgument,
                  "ncclMemFree: the pointer was not allocated by ncclMemAlloc");
  }
  if (cudaError_t e = cudaFree(ptr); e != cudaSuccess) return cudaFail("cudaFree", e);
  return ncclSuccess;
}

int deviceAsyncError(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(statesMu);
  auto it = states().find(comm);
  return it == states().end() ? weftSuccess : it->second->asyncError.load();
}

}  // namespace weft::nccl
