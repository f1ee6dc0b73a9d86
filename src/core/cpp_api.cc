// The C++ API: every collective is posted to the engine and returns a Work.
#include "core/comm.h"
#include "core/validate.h"
#include "weft/weft.hpp"

namespace weft {
namespace {

[[noreturn]] void raise(const Status& st) {
  throw Error(st.code(), st.message());
}

void throwIfError(const Status& st) {
  if (!st.isOk()) raise(st);
}

void throwIfError(weftResult_t code) {
  if (code != weftSuccess) raise(Status(code, weftGetLastError(nullptr)));
}

Work post(weftComm* comm, const char* api, CollCall call) {
  throwIfError(checkComm(comm));
  throwIfError(validateCall(comm, api, call));
  Task task;
  addToTask(task, call);
  return Work(postTask(comm, std::move(task)));
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

}  // namespace

bool Work::test() {
  if (!state_) return true;
  if (!state_->done.load(std::memory_order_acquire)) return false;
  throwIfError(state_->result);
  return true;
}

void Work::wait() {
  if (!state_) return;
  throwIfError(state_->comm->engine->wait(*state_, std::nullopt));
}

bool Work::wait(std::chrono::milliseconds timeout) {
  if (!state_) return true;
  Status st = state_->comm->engine->wait(*state_, std::chrono::steady_clock::now() + timeout);
  if (st.code() == weftInProgress) return false;
  throwIfError(st);
  return true;
}

void Work::setTimeout(std::chrono::milliseconds timeout) {
  if (!state_) return;
  const auto at = std::chrono::steady_clock::now() + timeout;
  state_->deadlineNs.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count(),
      std::memory_order_relaxed);
}

weftResult_t Work::status() const {
  if (!state_) return weftSuccess;
  if (!state_->done.load(std::memory_order_acquire)) return weftInProgress;
  return state_->result.code();
}

weftUniqueId Comm::uniqueId() {
  weftUniqueId id;
  throwIfError(weftGetUniqueId(&id));
  return id;
}

Comm Comm::initRank(int nranks, const weftUniqueId& id, int rank, weftConfig_t* config) {
  weftComm_t c = nullptr;
  throwIfError(weftCommInitRankConfig(&c, nranks, id, rank, config));
  return Comm(c);
}

Comm Comm::fromEnv(weftConfig_t* config) {
  weftComm_t c = nullptr;
  throwIfError(weftCommInitFromEnv(&c, config));
  return Comm(c);
}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    if (comm_ != nullptr) weftCommDestroy(comm_);
    comm_ = other.comm_;
    other.comm_ = nullptr;
  }
  return *this;
}

Comm::~Comm() {
  if (comm_ != nullptr) weftCommDestroy(comm_);
}

int Comm::rank() const {
  int r = 0;
  throwIfError(weftCommUserRank(comm_, &r));
  return r;
}

int Comm::size() const {
  int n = 0;
  throwIfError(weftCommCount(comm_, &n));
  return n;
}

Comm Comm::split(int color, int key, weftConfig_t* config) {
  weftComm_t c = nullptr;
  throwIfError(weftCommSplit(comm_, color, key, &c, config));
  return Comm(c);
}

void Comm::finalize() {
  throwIfError(weftCommFinalize(comm_));
}

void Comm::abort() {
  if (comm_ == nullptr) return;
  weftCommAbort(comm_);
}

void Comm::checkSameSize(size_t a, size_t b) {
  if (a != b) raise(makeError(weftInvalidArgument, "send has %zu elements but recv has %zu", a, b));
}

Work Comm::allReduce(const void* send, void* recv, size_t count, weftDataType_t dtype,
                     weftRedOp_t op) {
  CollCall c = makeCall(CollKind::AllReduce, send, recv, count, dtype);
  c.rawOp = op;
  return post(comm_, "allReduce", c);
}

Work Comm::broadcast(const void* send, void* recv, size_t count, weftDataType_t dtype, int root) {
  CollCall c = makeCall(CollKind::Broadcast, send, recv, count, dtype);
  c.args.root = root;
  return post(comm_, "broadcast", c);
}

Work Comm::reduce(const void* send, void* recv, size_t count, weftDataType_t dtype, weftRedOp_t op,
                  int root) {
  CollCall c = makeCall(CollKind::Reduce, send, recv, count, dtype);
  c.rawOp = op;
  c.args.root = root;
  return post(comm_, "reduce", c);
}

Work Comm::allGather(const void* send, void* recv, size_t sendcount, weftDataType_t dtype) {
  return post(comm_, "allGather", makeCall(CollKind::AllGather, send, recv, sendcount, dtype));
}

Work Comm::reduceScatter(const void* send, void* recv, size_t recvcount, weftDataType_t dtype,
                         weftRedOp_t op) {
  CollCall c = makeCall(CollKind::ReduceScatter, send, recv, recvcount, dtype);
  c.rawOp = op;
  return post(comm_, "reduceScatter", c);
}

Work Comm::allToAll(const void* send, void* recv, size_t count, weftDataType_t dtype) {
  return post(comm_, "allToAll", makeCall(CollKind::AllToAll, send, recv, count, dtype));
}

Work Comm::allToAllv(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                     const size_t* recvcounts, const size_t* rdispls, weftDataType_t dtype) {
  CollCall c = makeCall(CollKind::AllToAllV, send, recv, 0, dtype);
  throwIfError(keepVCounts(comm_, c, sendcounts, sdispls, recvcounts, rdispls));
  return post(comm_, "allToAllv", c);
}

Work Comm::gather(const void* send, void* recv, size_t count, weftDataType_t dtype, int root) {
  CollCall c = makeCall(CollKind::Gather, send, recv, count, dtype);
  c.args.root = root;
  return post(comm_, "gather", c);
}

Work Comm::scatter(const void* send, void* recv, size_t count, weftDataType_t dtype, int root) {
  CollCall c = makeCall(CollKind::Scatter, send, recv, count, dtype);
  c.args.root = root;
  return post(comm_, "scatter", c);
}

Work Comm::send(const void* buf, size_t count, weftDataType_t dtype, int peer) {
  CollCall c = makeCall(CollKind::Send, buf, nullptr, count, dtype);
  c.args.peer = peer;
  return post(comm_, "send", c);
}

Work Comm::recv(void* buf, size_t count, weftDataType_t dtype, int peer) {
  CollCall c = makeCall(CollKind::Recv, nullptr, buf, count, dtype);
  c.args.peer = peer;
  return post(comm_, "recv", c);
}

}  // namespace weft
