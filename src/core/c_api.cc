// The C API: argument checks, groups, host streams, and the mapping onto the
// communicator. Every entry point returns weftResult_t; no exception leaves.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "bootstrap/bootstrap.h"
#include "core/api_error.h"
#include "core/comm.h"
#include "core/stream.h"
#include "core/validate.h"
#include "weft/weft.h"

namespace weft {
namespace {

thread_local std::string lastError;

weftResult_t record(const Status& st) {
  if (!st.isOk()) lastError = st.message();
  return st.code();
}

template <class Fn>
weftResult_t guarded(Fn&& fn) {
  try {
    return record(fn());
  } catch (const std::bad_alloc&) {
    return record(Status(weftSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return record(Status(weftInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    return record(Status(weftInternalError, "internal error"));
  }
}

struct PendingCall {
  weftComm* comm;
  CollCall call;
  weftStream* stream;
};

struct GroupState {
  int depth = 0;
  std::vector<PendingCall> calls;
};
thread_local GroupState group;

Status submit(weftComm* comm, CollCall& call, weftStream* stream) {
  if (stream == nullptr) {
    if (call.args.kind == CollKind::Send || call.args.kind == CollKind::Recv) {
      Task task;
      addToTask(task, call);
      return comm->engine->runInline([&] { return commRunTask(comm, task); });
    }
    return comm->engine->runInline([&] { return commRunCall(comm, call); });
  }
  Task task;
  addToTask(task, call);
  stream->append(postTask(comm, std::move(task)));
  return Status::ok();
}

weftResult_t issue(const char* api, weftComm* comm, CollCall call, weftStream* stream) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    WEFT_RETURN_IF_ERROR(validateCall(comm, api, call));
    if (group.depth > 0) {
      group.calls.push_back({comm, call, stream});
      return Status::ok();
    }
    return submit(comm, call, stream);
  });
}

CollCall makeCall(CollKind kind, const void* send, void* recv, size_t count, weftDataType_t dtype) {
  CollCall c;
  c.args.kind = kind;
  c.args.send = send;
  c.args.recv = recv;
  c.args.count = count;
  c.args.dtype = dtype;
  return c;
}

Status endGroup() {
  std::vector<PendingCall> calls = std::move(group.calls);
  group.calls.clear();
  // One task per communicator, in the order the communicators first appear.
  std::vector<weftComm*> comms;
  std::vector<Task> tasks;
  std::vector<weftStream*> streams;
  for (PendingCall& pc : calls) {
    size_t i = 0;
    while (i < comms.size() && comms[i] != pc.comm) ++i;
    if (i == comms.size()) {
      comms.push_back(pc.comm);
      tasks.emplace_back();
      streams.push_back(pc.stream);
    }
    addToTask(tasks[i], pc.call);
  }
  if (comms.size() == 1 && streams[0] == nullptr)
    return comms[0]->engine->runInline([&] { return commRunTask(comms[0], tasks[0]); });

  // Several communicators progress at once, each on its own engine.
  std::vector<std::shared_ptr<WorkState>> waitFor;
  for (size_t i = 0; i < comms.size(); ++i) {
    auto work = postTask(comms[i], std::move(tasks[i]));
    if (streams[i] == nullptr) {
      waitFor.push_back(work);
    } else {
      streams[i]->append(work);
    }
  }
  Status first;
  for (auto& w : waitFor) {
    Status st = w->comm->engine->wait(*w, std::nullopt);
    if (first.isOk() && !st.isOk()) first = st;
  }
  return first;
}

}  // namespace

weftResult_t recordApiResult(const Status& st) {
  return record(st);
}

}  // namespace weft

using namespace weft;

extern "C" {

weftResult_t weftGetVersion(int* version) {
  if (version == nullptr) return record(Status(weftInvalidArgument, "version is NULL"));
  *version = WEFT_VERSION;
  return weftSuccess;
}

const char* weftGetErrorString(weftResult_t result) {
  switch (result) {
    case weftSuccess:
      return "no error";
    case weftUnhandledCudaError:
      return "unhandled cuda error";
    case weftSystemError:
      return "unhandled system error (out of memory, /dev/shm, sockets...)";
    case weftInternalError:
      return "internal error - please report this issue to the weft developers";
    case weftInvalidArgument:
      return "invalid argument";
    case weftInvalidUsage:
      return "invalid usage";
    case weftRemoteError:
      return "remote process exited or there was a network error";
    case weftInProgress:
      return "operation in progress";
    case weftTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

const char* weftGetLastError(weftComm_t comm) {
  if (lastError.empty() && comm != nullptr && checkComm(comm).isOk() &&
      comm->asyncError.load() != weftSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMu);
    lastError = comm->errorMessage;
  }
  return lastError.c_str();
}

weftResult_t weftGetUniqueId(weftUniqueId* uniqueId) {
  return guarded([&]() -> Status {
    if (uniqueId == nullptr) return Status(weftInvalidArgument, "uniqueId is NULL");
    const uint64_t secret = randomU64();
    net::SockAddr bound;
    WEFT_RETURN_IF_ERROR(startBootstrapRoot(net::defaultLocalAddress(), secret, &bound));
    return encodeUniqueId(bound, secret, uniqueId);
  });
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank) {
  return weftCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId, int rank,
                                    weftConfig_t* config) {
  return guarded([&]() -> Status {
    if (comm == nullptr) return Status(weftInvalidArgument, "comm is NULL");
    return commInit(nranks, commId, rank, config, comm);
  });
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm, weftConfig_t* config) {
  return guarded([&]() -> Status {
    if (comm == nullptr) return Status(weftInvalidArgument, "comm is NULL");
    return commInitFromEnv(config, comm);
  });
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                           weftConfig_t* config) {
  return guarded([&]() -> Status {
    if (newcomm == nullptr) return Status(weftInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    return commSplit(comm, color, key, config, newcomm);
  });
}

weftResult_t weftCommFinalize(weftComm_t comm) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    return commFinalize(comm);
  });
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    commDestroy(comm);
    return Status::ok();
  });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    commAbort(comm);
    return Status::ok();
  });
}

weftResult_t weftCommShrink(weftComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            weftComm_t* newcomm, weftConfig_t* config, int shrinkFlags) {
  return guarded([&]() -> Status {
    if (newcomm == nullptr) return Status(weftInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    return commShrink(comm, excludeRanksList, excludeRanksCount, config, shrinkFlags, newcomm);
  });
}

weftResult_t weftCommDumpFlightRecord(weftComm_t comm, const char* dir) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    return comm->flight->dump(dir, "api");
  });
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError) {
  return guarded([&]() -> Status {
    if (asyncError == nullptr) return Status(weftInvalidArgument, "asyncError is NULL");
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    *asyncError = static_cast<weftResult_t>(comm->asyncError.load());
    return Status::ok();
  });
}

weftResult_t weftCommCount(const weftComm_t comm, int* count) {
  return guarded([&]() -> Status {
    if (count == nullptr) return Status(weftInvalidArgument, "count is NULL");
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    *count = comm->nranks;
    return Status::ok();
  });
}

weftResult_t weftCommUserRank(const weftComm_t comm, int* rank) {
  return guarded([&]() -> Status {
    if (rank == nullptr) return Status(weftInvalidArgument, "rank is NULL");
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    *rank = comm->rank;
    return Status::ok();
  });
}

weftResult_t weftCommTuningPending(const weftComm_t comm, int* pending) {
  return guarded([&]() -> Status {
    if (pending == nullptr) return Status(weftInvalidArgument, "pending is NULL");
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    *pending = comm->online && comm->online->pending() ? 1 : 0;
    return Status::ok();
  });
}

weftResult_t weftStreamCreate(weftStream_t* stream) {
  return guarded([&]() -> Status {
    if (stream == nullptr) return Status(weftInvalidArgument, "stream is NULL");
    *stream = new weftStream();
    return Status::ok();
  });
}

weftResult_t weftStreamSynchronize(weftStream_t stream) {
  return guarded([&]() -> Status {
    if (stream == nullptr) return Status::ok();  // the NULL stream is always complete
    std::vector<std::shared_ptr<WorkState>> pending;
    {
      std::lock_guard<std::mutex> lock(stream->mu);
      pending.swap(stream->pending);
    }
    // Work on one communicator finishes in order: waiting for the newest
    // item of each communicator waits for all of them, with one wake-up.
    for (size_t i = pending.size(); i-- > 0;) {
      WorkState& w = *pending[i];
      if (!w.done.load(std::memory_order_acquire)) (void)w.comm->engine->wait(w, std::nullopt);
    }
    for (auto& w : pending)
      if (!w->result.isOk()) return w->result;
    return Status::ok();
  });
}

weftResult_t weftStreamQuery(weftStream_t stream) {
  return guarded([&]() -> Status {
    if (stream == nullptr) return Status::ok();
    std::lock_guard<std::mutex> lock(stream->mu);
    for (auto& w : stream->pending) {
      if (!w->done.load(std::memory_order_acquire)) return Status(weftInProgress, "");
      if (!w->result.isOk()) return w->result;
    }
    return Status::ok();
  });
}

weftResult_t weftStreamDestroy(weftStream_t stream) {
  return guarded([&]() -> Status {
    if (stream == nullptr) return Status(weftInvalidArgument, "stream is NULL");
    Status st = Status(weftStreamSynchronize(stream), lastError);
    delete stream;
    return st;
  });
}

// Enum arguments are taken as ints before any check: a C caller may pass any
// value, and loading an out-of-range enum is undefined behaviour.
weftResult_t weftRedOpCreatePreMulSum(weftRedOp_t* op, void* scalar, weftDataType_t datatype,
                                      weftScalarResidence_t residence, weftComm_t comm) {
  const int rawType = static_cast<int>(datatype);
  const int rawResidence = static_cast<int>(residence);
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    if (op == nullptr || scalar == nullptr)
      return Status(weftInvalidArgument, "weftRedOpCreatePreMulSum: op or scalar is NULL");
    if (!dtypeValid(rawType))
      return makeError(weftInvalidArgument, "weftRedOpCreatePreMulSum: invalid dtype %d", rawType);
    if (rawResidence != weftScalarDevice && rawResidence != weftScalarHostImmediate)
      return makeError(weftInvalidArgument, "weftRedOpCreatePreMulSum: invalid residence %d",
                       rawResidence);
    PreMulSumOp entry;
    entry.inUse = true;
    entry.dtype = static_cast<weftDataType_t>(rawType);
    entry.residence = static_cast<weftScalarResidence_t>(rawResidence);
    entry.pointer = scalar;
    std::memcpy(entry.immediate, scalar, dtypeSize(entry.dtype));
    std::lock_guard<std::mutex> lock(comm->opsMu);
    size_t i = 0;
    while (i < comm->preMulOps.size() && comm->preMulOps[i].inUse) ++i;
    if (i == comm->preMulOps.size()) comm->preMulOps.emplace_back();
    comm->preMulOps[i] = entry;
    *op = static_cast<weftRedOp_t>(weftNumOps + static_cast<int>(i));
    return Status::ok();
  });
}

weftResult_t weftRedOpDestroy(weftRedOp_t op, weftComm_t comm) {
  const int rawOp = static_cast<int>(op);
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    const long i = static_cast<long>(rawOp) - weftNumOps;
    std::lock_guard<std::mutex> lock(comm->opsMu);
    if (i < 0 || i >= static_cast<long>(comm->preMulOps.size()) || !comm->preMulOps[i].inUse)
      return makeError(weftInvalidArgument,
                       "weftRedOpDestroy: op %d was not made by weftRedOpCreatePreMulSum on this "
                       "communicator",
                       rawOp);
    comm->preMulOps[i].inUse = false;
    return Status::ok();
  });
}

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                           weftStream_t stream) {
  CollCall c = makeCall(CollKind::AllReduce, sendbuff, recvbuff, count, datatype);
  c.rawOp = op;
  return issue("weftAllReduce", comm, c, stream);
}

weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm,
                           weftStream_t stream) {
  CollCall c = makeCall(CollKind::Broadcast, sendbuff, recvbuff, count, datatype);
  c.args.root = root;
  return issue("weftBroadcast", comm, c, stream);
}

weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        weftRedOp_t op, int root, weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::Reduce, sendbuff, recvbuff, count, datatype);
  c.rawOp = op;
  c.args.root = root;
  return issue("weftReduce", comm, c, stream);
}

weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream) {
  return issue("weftAllGather", comm,
               makeCall(CollKind::AllGather, sendbuff, recvbuff, sendcount, datatype), stream);
}

weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                               weftStream_t stream) {
  CollCall c = makeCall(CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype);
  c.rawOp = op;
  return issue("weftReduceScatter", comm, c, stream);
}

weftResult_t weftAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm, weftStream_t stream) {
  return issue("weftAlltoAll", comm,
               makeCall(CollKind::AllToAll, sendbuff, recvbuff, count, datatype), stream);
}

weftResult_t weftAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::AllToAllV, sendbuff, recvbuff, 0, datatype);
  const weftResult_t kept =
      guarded([&] { return keepVCounts(comm, c, sendcounts, sdispls, recvcounts, rdispls); });
  if (kept != weftSuccess) return kept;
  return issue("weftAllToAllv", comm, c, stream);
}

weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        int root, weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::Gather, sendbuff, recvbuff, count, datatype);
  c.args.root = root;
  return issue("weftGather", comm, c, stream);
}

weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t count,
                         weftDataType_t datatype, int root, weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::Scatter, sendbuff, recvbuff, count, datatype);
  c.args.root = root;
  return issue("weftScatter", comm, c, stream);
}

weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::Send, sendbuff, nullptr, count, datatype);
  c.args.peer = peer;
  return issue("weftSend", comm, c, stream);
}

weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream) {
  CollCall c = makeCall(CollKind::Recv, nullptr, recvbuff, count, datatype);
  c.args.peer = peer;
  return issue("weftRecv", comm, c, stream);
}

weftResult_t weftGroupStart(void) {
  ++group.depth;
  return weftSuccess;
}

weftResult_t weftGroupEnd(void) {
  if (group.depth == 0)
    return record(Status(weftInvalidUsage, "weftGroupEnd without a matching weftGroupStart"));
  if (--group.depth > 0) return weftSuccess;
  return guarded([&] { return endGroup(); });
}

}  // extern "C"
