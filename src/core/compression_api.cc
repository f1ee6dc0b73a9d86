// The C API of compressed allreduce: compressor handles, argument checks,
// and the runner through which the compression layer reaches the
// communicator's collectives. The C call runs inline after the queued work;
// postCompressedAllReduce (compression_api.h) queues the same as a composite
// task on the engine.
#include "core/compression_api.h"

#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "base/dtype.h"
#include "compression/compressor.h"
#include "compression/params.h"
#include "core/api_error.h"
#include "core/comm.h"
#include "core/stream.h"
#include "weft/weft.h"

struct weftCompressor {
  weftComm* comm = nullptr;
  std::unique_ptr<weft::compression::Compressor> impl;
  std::mutex mu;               // one compressed allreduce at a time on this state
  std::atomic<int> queued{0};  // posted and not yet finished (allReduceAsync)
};

namespace weft {
namespace {

std::mutex registryMu;
std::unordered_set<const weftCompressor*>& registry() {
  static auto* set = new std::unordered_set<const weftCompressor*>();
  return *set;
}

template <class Fn>
weftResult_t guarded(Fn&& fn) {
  try {
    return recordApiResult(fn());
  } catch (const std::bad_alloc&) {
    return recordApiResult(Status(weftSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return recordApiResult(Status(weftInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    return recordApiResult(Status(weftInternalError, "internal error"));
  }
}

Status checkCompressor(const weftCompressor* c) {
  if (c == nullptr) return Status(weftInvalidArgument, "compressor is NULL");
  std::lock_guard<std::mutex> lock(registryMu);
  if (registry().count(c) == 0)
    return Status(weftInvalidArgument,
                  "compressor is not one weftCompressorCreate made, or it was destroyed");
  return Status::ok();
}

// The communicator's collectives, each run as a call of its own (algorithm
// selection, timeouts and failure handling as for any collective).
class CommRunner final : public compression::CollRunner {
 public:
  explicit CommRunner(weftComm* comm, const std::atomic<int64_t>* deadline = nullptr)
      : comm_(comm), deadline_(deadline) {}
  int rank() const override { return comm_->rank; }
  int nranks() const override { return comm_->nranks; }
  Status allToAll(const void* send, void* recv, size_t bytes) override {
    return run(CollKind::AllToAll, send, recv, bytes, weftUint8);
  }
  Status allGather(const void* send, void* recv, size_t bytes) override {
    return run(CollKind::AllGather, send, recv, bytes, weftUint8);
  }
  Status allReduceSum(float* buf, size_t count) override {
    return run(CollKind::AllReduce, buf, buf, count, weftFloat32);
  }

 private:
  Status run(CollKind kind, const void* send, void* recv, size_t count, weftDataType_t dtype) {
    CollCall call;
    call.args.kind = kind;
    call.args.send = send;
    call.args.recv = recv;
    call.args.count = count;
    call.args.dtype = dtype;
    call.rawOp = weftSum;
    return commRunCall(comm_, call, deadline_);
  }
  weftComm* comm_;
  const std::atomic<int64_t>* deadline_;
};

Status checkCall(const void* sendbuff, void* recvbuff, size_t count, int rawType, int rawOp,
                 weftCompressor* compressor, weftComm* comm) {
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  WEFT_RETURN_IF_ERROR(checkCompressor(compressor));
  if (compressor->comm != comm)
    return Status(weftInvalidArgument,
                  "weftCompressedAllReduce: the compressor was created on another communicator");
  if (!dtypeValid(rawType))
    return makeError(weftInvalidArgument, "weftCompressedAllReduce: invalid dtype %d", rawType);
  if (rawOp != weftSum && rawOp != weftAvg)
    return makeError(weftInvalidArgument,
                     "weftCompressedAllReduce: op %d; compressed allreduce takes weftSum or "
                     "weftAvg",
                     rawOp);
  if (count > 0 && (sendbuff == nullptr || recvbuff == nullptr))
    return Status(weftInvalidArgument, "weftCompressedAllReduce: sendbuff or recvbuff is NULL");
  return Status::ok();
}

// The compressed allreduce itself, on the thread that runs the engine's
// queue (the lock is taken only then: the queue may hold other calls on
// this compressor, which the driving thread runs first).
Status runCompressed(const void* send, void* recv, size_t count, int rawType, int rawOp,
                     weftCompressor* compressor, weftComm* comm,
                     const std::atomic<int64_t>* deadline) {
  std::lock_guard<std::mutex> lock(compressor->mu);
  CommRunner runner(comm, deadline);
  return compressor->impl->allReduce(runner, send, recv, count,
                                     static_cast<weftDataType_t>(rawType), rawOp == weftAvg);
}

// Waits for the compressor's queued work (before reset or destroy).
void waitQueued(weftCompressor* c) {
  if (c->queued.load(std::memory_order_acquire) == 0) return;
  if (checkComm(c->comm).isOk()) (void)c->comm->engine->drain();
}

Status create(weftComm* comm, int rawKind, const weftCompressorParams_t& params,
              weftCompressor_t* out) {
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  WEFT_RETURN_IF_ERROR(compression::validateParams(rawKind, params));
  auto c = std::make_unique<weftCompressor>();
  c->comm = comm;
  WEFT_RETURN_IF_ERROR(
      compression::Compressor::create(static_cast<weftCompressKind_t>(rawKind), params, &c->impl));
  std::lock_guard<std::mutex> lock(registryMu);
  *out = c.release();
  registry().insert(*out);
  return Status::ok();
}

}  // namespace

Status postCompressedAllReduce(const void* send, void* recv, size_t count, int rawType, int rawOp,
                               weftCompressor* compressor, weftComm* comm,
                               std::shared_ptr<WorkState>* work) {
  WEFT_RETURN_IF_ERROR(checkCall(send, recv, count, rawType, rawOp, compressor, comm));
  Task task;
  task.composite = [=](const std::atomic<int64_t>* deadline) -> Status {
    struct Done {
      weftCompressor* c;
      ~Done() { c->queued.fetch_sub(1, std::memory_order_acq_rel); }
    } done{compressor};
    // Runs on the engine: nothing may escape as an exception.
    try {
      return runCompressed(send, recv, count, rawType, rawOp, compressor, comm, deadline);
    } catch (const std::bad_alloc&) {
      return Status(weftSystemError, "out of host memory");
    } catch (const std::exception& e) {
      return Status(weftInternalError, std::string("internal error: ") + e.what());
    }
  };
  compressor->queued.fetch_add(1, std::memory_order_acq_rel);
  *work = postTask(comm, std::move(task));
  return Status::ok();
}

}  // namespace weft

using namespace weft;

extern "C" {

weftResult_t weftCompressorCreate(weftComm_t comm, weftCompressKind_t kind,
                                  const weftCompressorParams_t* params,
                                  weftCompressor_t* compressor) {
  const int rawKind = static_cast<int>(kind);
  return guarded([&]() -> Status {
    if (compressor == nullptr) return Status(weftInvalidArgument, "compressor is NULL");
    *compressor = nullptr;
    return create(comm, rawKind, params ? *params : compression::defaultParams(), compressor);
  });
}

weftResult_t weftCompressorCreateFromString(weftComm_t comm, const char* spec,
                                            weftCompressor_t* compressor) {
  return guarded([&]() -> Status {
    if (compressor == nullptr) return Status(weftInvalidArgument, "compressor is NULL");
    *compressor = nullptr;
    if (spec == nullptr) return Status(weftInvalidArgument, "spec is NULL");
    weftCompressKind_t kind;
    weftCompressorParams_t params;
    WEFT_RETURN_IF_ERROR(compression::parseSpec(spec, &kind, &params));
    if (params.numTensors != 0)
      return Status(weftInvalidArgument, "tensor shape lists are given through the params struct");
    return create(comm, kind, params, compressor);
  });
}

weftResult_t weftCompressedAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     weftDataType_t datatype, weftRedOp_t op,
                                     weftCompressor_t compressor, weftComm_t comm,
                                     weftStream_t stream) {
  const int rawType = static_cast<int>(datatype);
  const int rawOp = static_cast<int>(op);
  return guarded([&]() -> Status {
    if (stream != nullptr) {
      // Queued like a plain collective on a stream: done at the stream's
      // synchronisation, in order with everything posted on comm before it.
      std::shared_ptr<WorkState> work;
      WEFT_RETURN_IF_ERROR(postCompressedAllReduce(sendbuff, recvbuff, count, rawType, rawOp,
                                                   compressor, comm, &work));
      stream->append(std::move(work));
      return Status::ok();
    }
    WEFT_RETURN_IF_ERROR(checkCall(sendbuff, recvbuff, count, rawType, rawOp, compressor, comm));
    return comm->engine->runInline([&] {
      return runCompressed(sendbuff, recvbuff, count, rawType, rawOp, compressor, comm, nullptr);
    });
  });
}

weftResult_t weftCompressorGetStats(weftCompressor_t compressor, weftCompressorStats_t* stats) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkCompressor(compressor));
    if (stats == nullptr) return Status(weftInvalidArgument, "stats is NULL");
    std::lock_guard<std::mutex> lock(compressor->mu);
    stats->wireBytes = compressor->impl->lastWireBytes();
    stats->plainBytes = compressor->impl->lastPlainBytes();
    stats->ratio = stats->wireBytes > 0 ? stats->plainBytes / stats->wireBytes : 0.0;
    return Status::ok();
  });
}

weftResult_t weftCompressorReset(weftCompressor_t compressor) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkCompressor(compressor));
    waitQueued(compressor);
    std::lock_guard<std::mutex> lock(compressor->mu);
    compressor->impl->reset();
    return Status::ok();
  });
}

weftResult_t weftCompressorDestroy(weftCompressor_t compressor) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkCompressor(compressor));
    waitQueued(compressor);
    {
      std::lock_guard<std::mutex> lock(registryMu);
      registry().erase(compressor);
    }
    delete compressor;
    return Status::ok();
  });
}

}  // extern "C"
