// libnccl.so.2: every function of the CUDA toolkit's nccl.h (2.28.9), mapped
// onto weft's C API. Functions NCCL 2.29/2.30 added are in nccl_api_new.cc.
//
// Each function is defined as pncclX, and ncclX is a weak alias of it, as in
// NCCL: a profiler may interpose ncclX and call pncclX.
//
// The build also compiles this file against the toolkit's nccl.h
// (WEFT_NCCL_USE_TOOLKIT_HEADER, target weft_nccl_signature_check): a
// definition whose signature differs from the toolkit's declaration is then a
// compile error.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/env.h"
#include "nccl/abi_version.h"
#include "nccl/api_macro.h"
#include "nccl/coll_desc.h"
#include "nccl/cuda_probe.h"
#include "nccl/device_path.h"
#include "nccl/shim.h"
#include "nccl/shim_group.h"

using namespace weft::nccl;

// NCCL's values are weft's: the mapping below casts between them.
static_assert(sizeof(ncclUniqueId) == sizeof(weftUniqueId), "unique id size");
static_assert(ncclSuccess == 0 && ncclInProgress == static_cast<int>(weftInProgress) &&
                  ncclRemoteError == static_cast<int>(weftRemoteError) &&
                  ncclInvalidUsage == static_cast<int>(weftInvalidUsage),
              "result codes");
static_assert(ncclFloat8e5m2 == static_cast<int>(weftFloat8e5m2) &&
                  ncclBfloat16 == static_cast<int>(weftBfloat16) &&
                  ncclNumTypes == static_cast<int>(weftNumTypes),
              "data types");
static_assert(ncclAvg == static_cast<int>(weftAvg) && ncclNumOps == static_cast<int>(weftNumOps),
              "reduction ops");
static_assert(ncclScalarHostImmediate == static_cast<int>(weftScalarHostImmediate), "residence");

namespace {

// NCCL_* environment names work beside WEFT_* from the first call on.
__attribute__((constructor)) void enableAliases() {
  weft::enableNcclEnvAliases();
}

constexpr unsigned kConfigMagic = 0xcafebeefu;

// The config fields the shim honours, read only where the caller's struct
// (of its `size`) has them.
struct ConfigView {
  int blocking = 1;
  int splitShare = WEFT_CONFIG_UNDEF_INT;
  std::string commName;
};

int configInt(const ncclConfig_t* c, size_t offset) {
  if (offset + sizeof(int) > c->size) return INT_MIN;
  int v;
  std::memcpy(&v, reinterpret_cast<const char*>(c) + offset, sizeof v);
  return v;
}

ncclResult_t readConfig(const char* api, const ncclConfig_t* config, const ncclComm* parent,
                        ConfigView* out) {
  *out = ConfigView{};
  const int64_t envBlocking = weft::envInt("COMM_BLOCKING", INT_MIN);
  if (parent != nullptr) out->blocking = parent->blocking;
  if (envBlocking != INT_MIN) out->blocking = envBlocking != 0;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking) + 4 ||
      config->size > (1u << 16))
    return fail(ncclInvalidArgument,
                "%s: the config was not initialised; declare it as ncclConfig_t config = "
                "NCCL_CONFIG_INITIALIZER; and then set fields",
                api);
  const int blocking = configInt(config, offsetof(ncclConfig_t, blocking));
  if (blocking != INT_MIN) out->blocking = blocking != 0;
  out->splitShare = configInt(config, offsetof(ncclConfig_t, splitShare));
  if (offsetof(ncclConfig_t, commName) + sizeof(char*) <= config->size &&
      config->commName != nullptr)
    out->commName = config->commName;
  return ncclSuccess;
}

weftConfig_t toWeft(const ConfigView& v) {
  weftConfig_t c = WEFT_CONFIG_INITIALIZER;
  c.blocking = 1;  // the shim runs init on its own thread where it must not block
  c.splitShare = v.splitShare;
  c.commName = v.commName.empty() ? nullptr : v.commName.c_str();
  return c;
}

// Every handle ever made: they are never freed (a stale one must stay
// readable), and this keeps them reachable for leak checkers.
std::mutex handlesMu;
std::vector<ncclComm*>& handles() {
  static auto* v = new std::vector<ncclComm*>();
  return *v;
}

ncclComm* newHandle(const ConfigView& v) {
  probeCuda();
  auto* c = new ncclComm();
  {
    std::lock_guard<std::mutex> lock(handlesMu);
    handles().push_back(c);
  }
  c->blocking = v.blocking != 0;
  c->cudaDev = currentCudaDevice();
  return c;
}

inline ncclResult_t collective(const char* api, const CollDesc& d, ncclComm_t comm,
                               cudaStream_t stream) {
  weftComm_t inner;
  const ncclResult_t r = ready(comm, api, &inner);
  if (r != ncclSuccess) return r;
  if (classify(d.send) == MemKind::Device || classify(d.recv) == MemKind::Device)
    return deviceIssue(d, comm, inner, stream);
  // Host memory: weft's NULL stream, so the call has completed on return and
  // the caller's stream has nothing to wait for.
  return fromWeft(issueHost(d, inner, nullptr));
}

// ncclMemAlloc's host allocations (builds or machines without a GPU).
std::mutex hostAllocMu;
std::unordered_set<void*>& hostAllocs() {
  static auto* s = new std::unordered_set<void*>();
  return *s;
}

struct Registration {
  static constexpr uint64_t kMagic = 0x7265676973746572ull;
  uint64_t magic = kMagic;
  void* buff;
  size_t size;
};

}  // namespace

// Registered windows: the collectives take any buffer, so a window only
// remembers its range (ncclWinGetUserPtr).
struct ncclWindow_vidmem {
  static constexpr uint64_t kMagic = 0x77696e646f772121ull;
  uint64_t magic = kMagic;
  void* buff;
  size_t size;
};

// ---- versions and errors ----

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = WEFT_NCCL_ABI_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  const int raw = static_cast<int>(result);
  if (raw < 0 || raw > static_cast<int>(weftTimeout)) return "unknown result code";
  return weftGetErrorString(static_cast<weftResult_t>(raw));
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  return lastError(comm);
}

NCCL_API(void, ncclResetDebugInit) {
  // weft reads WEFT_DEBUG / NCCL_DEBUG when a communicator starts; nothing is cached here.
}

// ---- memory ----

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  probeCuda();
  if (devicePathBuilt() && deviceAlloc(ptr, size) == ncclSuccess) return ncclSuccess;
  // No GPU: page-aligned host memory, which every weft collective takes.
  const size_t rounded = (size + 4095) & ~static_cast<size_t>(4095);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr)
    return fail(ncclSystemError, "ncclMemAlloc: out of host memory (%zu bytes)", size);
  std::lock_guard<std::mutex> lock(hostAllocMu);
  hostAllocs().insert(p);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(hostAllocMu);
    if (hostAllocs().erase(ptr) == 1) {
      std::free(ptr);
      return ncclSuccess;
    }
  }
  return deviceFree(ptr);
}

// ---- communicators ----

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  return fromWeft(weftGetUniqueId(reinterpret_cast<weftUniqueId*>(uniqueId)));
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t* config) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
  *comm = nullptr;
  ConfigView v;
  if (ncclResult_t r = readConfig("ncclCommInitRankConfig", config, nullptr, &v); r != ncclSuccess)
    return r;
  ncclComm* c = newHandle(v);
  *comm = c;
  weftUniqueId id;
  std::memcpy(&id, &commId, sizeof id);
  return startInit(c, [=](weftComm_t* out) {
    weftConfig_t wc = toWeft(v);
    return weftCommInitRankConfig(out, nranks, id, rank, &wc);
  });
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank) {
  return pncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
         int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId is %d and commIds %s", nId,
                commIds == nullptr ? "NULL" : "set");
  // One rendezvous is enough for weft: every rank meets at the first id.
  return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1)
    return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL or ndev (%d) < 1", ndev);
  // ndev ranks in this process, initialised together as in a group. On host
  // memory devlist names no devices and is not used.
  ncclUniqueId id;
  if (ncclResult_t r = pncclGetUniqueId(&id); r != ncclSuccess) return r;
  groupEnter();
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < ndev; ++i) {
    const ncclResult_t r = pncclCommInitRank(&comms[i], ndev, id, i);
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  const ncclResult_t r = groupLeave();
  return first != ncclSuccess ? first : r;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  weftComm_t parent;
  if (ncclResult_t r = ready(comm, "ncclCommSplit", &parent); r != ncclSuccess) return r;
  ConfigView v;
  if (ncclResult_t r = readConfig("ncclCommSplit", config, comm, &v); r != ncclSuccess) return r;
  // A rank without a colour still takes part in the split (it is collective
  // over the parent) but gets NCCL_COMM_NULL: its handle stays internal.
  ncclComm* c = newHandle(v);
  if (color != WEFT_SPLIT_NOCOLOR) *newcomm = c;
  const ncclResult_t r = startInit(c, [=](weftComm_t* out) {
    weftConfig_t wc = toWeft(v);
    return weftCommSplit(parent, color, key, out, &wc);
  });
  if (color == WEFT_SPLIT_NOCOLOR && r == ncclInProgress) return ncclSuccess;
  return r;
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList,
         int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return fail(ncclInvalidUsage,
              "ncclCommShrink is not supported by weft: excluded ranks do not take part, and "
              "weft's split needs every rank of the parent; create a new communicator with "
              "ncclGetUniqueId/ncclCommInitRank among the surviving ranks");
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return fail(ncclInvalidUsage,
              "ncclCommRevoke is not supported by weft; use ncclCommAbort, which stops every "
              "operation in flight on all ranks");
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclCommFinalize", &inner); r != ncclSuccess) return r;
  // Done before returning, also for a non-blocking communicator (allowed:
  // the state is then already ncclSuccess when polled).
  return fromWeft(weftCommFinalize(inner));
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (comm->magic.load() != ncclComm::kLive)
    return fail(ncclInvalidUsage, "ncclCommDestroy: the communicator was destroyed already");
  (void)waitInit(comm);
  comm->magic.store(ncclComm::kDead);
  if (comm->inner == nullptr) return ncclSuccess;
  return fromWeft(weftCommDestroy(comm->inner));
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (comm->magic.load() != ncclComm::kLive)
    return fail(ncclInvalidUsage, "ncclCommAbort: the communicator was destroyed already");
  weftComm_t inner = nullptr;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->magic.store(ncclComm::kDead);
    // Still initialising: the init thread aborts what it makes.
    if (comm->state.load() == ncclInProgress) {
      comm->abortRequested = true;
      return ncclSuccess;
    }
    inner = comm->inner;
  }
  return inner == nullptr ? ncclSuccess : fromWeft(weftCommAbort(inner));
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is NULL");
  if (comm->magic.load() != ncclComm::kLive)
    return fail(ncclInvalidUsage, "ncclCommGetAsyncError: the communicator was destroyed");
  const int st = comm->state.load(std::memory_order_acquire);
  if (st != ncclSuccess) {
    *asyncError = static_cast<ncclResult_t>(st);
    return ncclSuccess;
  }
  weftResult_t w = weftSuccess;
  if (weftResult_t r = weftCommGetAsyncError(comm->inner, &w); r != weftSuccess) return fromWeft(r);
  if (w == weftSuccess) w = static_cast<weftResult_t>(deviceAsyncError(comm));
  *asyncError = static_cast<ncclResult_t>(w);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclCommCount", &inner); r != ncclSuccess) return r;
  return fromWeft(weftCommCount(inner, count));
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclCommUserRank", &inner); r != ncclSuccess) return r;
  return fromWeft(weftCommUserRank(inner, rank));
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  weftComm_t inner;
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  if (ncclResult_t r = ready(comm, "ncclCommCuDevice", &inner); r != ncclSuccess) return r;
  *device = comm->cudaDev;  // -1: a host-memory communicator without a CUDA context
  return ncclSuccess;
}

// ---- registration ----

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size,
         void** handle) {
  weftComm_t inner;
  if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (ncclResult_t r = ready(comm, "ncclCommRegister", &inner); r != ncclSuccess) return r;
  probeCuda();  // a registered buffer is about to be used: CUDA may be loaded by now
  // weft needs no registration (it takes any buffer); the handle only
  // remembers the range so that deregistration can be checked.
  *handle = new (std::nothrow) Registration{Registration::kMagic, buff, size};
  return *handle != nullptr ? ncclSuccess
                            : fail(ncclSystemError, "ncclCommRegister: out of memory");
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclCommDeregister", &inner); r != ncclSuccess) return r;
  auto* reg = static_cast<Registration*>(handle);
  if (reg == nullptr || reg->magic != Registration::kMagic)
    return fail(ncclInvalidArgument, "ncclCommDeregister: not a handle from ncclCommRegister");
  reg->magic = 0;
  delete reg;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
         ncclWindow_t* win, int winFlags) {
  weftComm_t inner;
  if (win == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  if (ncclResult_t r = ready(comm, "ncclCommWindowRegister", &inner); r != ncclSuccess) return r;
  *win = new (std::nothrow) ncclWindow_vidmem{ncclWindow_vidmem::kMagic, buff, size};
  return *win != nullptr ? ncclSuccess
                         : fail(ncclSystemError, "ncclCommWindowRegister: out of memory");
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclCommWindowDeregister", &inner); r != ncclSuccess) return r;
  if (win == nullptr || win->magic != ncclWindow_vidmem::kMagic)
    return fail(ncclInvalidArgument,
                "ncclCommWindowDeregister: not a window from ncclCommWindowRegister");
  win->magic = 0;
  delete win;
  return ncclSuccess;
}

// NCCL 2.29; here because it needs the window's layout.
NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  weftComm_t inner;
  if (outUserPtr == nullptr)
    return fail(ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
  if (ncclResult_t r = ready(comm, "ncclWinGetUserPtr", &inner); r != ncclSuccess) return r;
  if (win == nullptr || win->magic != ncclWindow_vidmem::kMagic)
    return fail(ncclInvalidArgument, "ncclWinGetUserPtr: not a window from ncclCommWindowRegister");
  *outUserPtr = win->buff;
  return ncclSuccess;
}

// ---- reduction ops ----

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclRedOpCreatePreMulSum", &inner); r != ncclSuccess) return r;
  if (residence == ncclScalarDevice && classify(scalar) == MemKind::Device)
    return fail(ncclInvalidUsage,
                "ncclRedOpCreatePreMulSum: a scalar in GPU memory is not supported; pass it "
                "with ncclScalarHostImmediate");
  return fromWeft(weftRedOpCreatePreMulSum(reinterpret_cast<weftRedOp_t*>(op), scalar,
                                           static_cast<weftDataType_t>(datatype),
                                           static_cast<weftScalarResidence_t>(residence), inner));
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  weftComm_t inner;
  if (ncclResult_t r = ready(comm, "ncclRedOpDestroy", &inner); r != ncclSuccess) return r;
  return fromWeft(weftRedOpDestroy(static_cast<weftRedOp_t>(op), inner));
}

// ---- collectives ----

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAllReduce",
                    {CollOp::AllReduce, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclBroadcast",
                    {CollOp::Broadcast, sendbuff, recvbuff, count, datatype, 0, root}, comm,
                    stream);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclBcast", {CollOp::Broadcast, buff, buff, count, datatype, 0, root}, comm,
                    stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduce", {CollOp::Reduce, sendbuff, recvbuff, count, datatype, op, root},
                    comm, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAllGather",
                    {CollOp::AllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0}, comm,
                    stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduceScatter",
                    {CollOp::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm,
                    stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAlltoAll", {CollOp::AlltoAll, sendbuff, recvbuff, count, datatype, 0, 0},
                    comm, stream);
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclGather", {CollOp::Gather, sendbuff, recvbuff, count, datatype, 0, root},
                    comm, stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclScatter", {CollOp::Scatter, sendbuff, recvbuff, count, datatype, 0, root},
                    comm, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclSend", {CollOp::Send, sendbuff, nullptr, count, datatype, 0, peer}, comm,
                    stream);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclRecv", {CollOp::Recv, nullptr, recvbuff, count, datatype, 0, peer}, comm,
                    stream);
}

// ---- groups ----

NCCL_API(ncclResult_t, ncclGroupStart) {
  groupEnter();
  return fromWeft(weftGroupStart());
}

NCCL_API(ncclResult_t, ncclGroupEnd) {
  if (groupDepth() == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  const bool outermost = groupDepth() == 1;
  ncclResult_t result = fromWeft(weftGroupEnd());
  if (outermost) {
    const ncclResult_t r = deviceGroupEnd();
    if (result == ncclSuccess) result = r;
  }
  const ncclResult_t r = groupLeave();
  return result != ncclSuccess ? result : r;
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return fail(ncclInvalidUsage,
              "ncclGroupSimulateEnd is not supported by weft (it has no performance model to "
              "simulate with); the group is still open: end it with ncclGroupEnd");
}
