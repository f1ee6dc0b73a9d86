#include "core/validate.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "core/comm.h"

namespace weft {
namespace {

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

bool isRooted(CollKind k) {
  return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Gather ||
         k == CollKind::Scatter;
}

bool isReducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}

}  // namespace

Status validateCall(weftComm* comm, const char* api, const CollCall& call) {
  const CollArgs& a = call.args;
  const int n = comm->nranks;
  const int me = comm->rank;
  // Read the dtype as an int: a C caller may pass any value, and loading an
  // out-of-range enum is undefined behaviour.
  int rawDtype = 0;
  static_assert(sizeof rawDtype == sizeof a.dtype);
  std::memcpy(&rawDtype, &a.dtype, sizeof rawDtype);
  if (!dtypeValid(rawDtype))
    return makeError(weftInvalidArgument, "%s: invalid dtype %d (valid values are 0 to %d)", api,
                     rawDtype, weftNumTypes - 1);
  if (isReducing(a.kind)) {
    RedOp unused;
    Status st = resolveOp(comm, call.rawOp, a.dtype, &unused);
    if (!st.isOk()) return Status(st.code(), std::string(api) + ": " + st.message());
  }
  if (isRooted(a.kind) && (a.root < 0 || a.root >= n))
    return makeError(weftInvalidArgument, "%s: root %d is out of range for %d ranks", api, a.root,
                     n);
  if ((a.kind == CollKind::Send || a.kind == CollKind::Recv) && (a.peer < 0 || a.peer >= n))
    return makeError(weftInvalidArgument, "%s: peer %d is out of range for %d ranks", api, a.peer,
                     n);

  const size_t es = dtypeSize(a.dtype);
  const bool perRank = a.kind == CollKind::AllGather || a.kind == CollKind::ReduceScatter ||
                       a.kind == CollKind::AllToAll || a.kind == CollKind::Gather ||
                       a.kind == CollKind::Scatter;
  const size_t factor = perRank ? static_cast<size_t>(n) : 1;
  if (a.count > SIZE_MAX / es / factor)
    return makeError(weftInvalidArgument,
                     "%s: count %zu of %zu-byte elements overflows the address space", api, a.count,
                     es);
  if (a.count == 0) return Status::ok();
  const size_t bytes = a.count * es;
  const size_t total = bytes * factor;

  // Which buffers this rank touches, and how big each is.
  const bool root = me == a.root;
  size_t sendBytes = 0, recvBytes = 0;
  switch (a.kind) {
    case CollKind::AllReduce:
      sendBytes = recvBytes = bytes;
      break;
    case CollKind::Broadcast:
      sendBytes = root ? bytes : 0;
      recvBytes = bytes;
      break;
    case CollKind::Reduce:
      sendBytes = bytes;
      recvBytes = root ? bytes : 0;
      break;
    case CollKind::AllGather:
      sendBytes = bytes;
      recvBytes = total;
      break;
    case CollKind::ReduceScatter:
      sendBytes = total;
      recvBytes = bytes;
      break;
    case CollKind::AllToAll:
      sendBytes = recvBytes = total;
      break;
    case CollKind::Gather:
      sendBytes = bytes;
      recvBytes = root ? total : 0;
      break;
    case CollKind::Scatter:
      sendBytes = root ? total : 0;
      recvBytes = bytes;
      break;
    case CollKind::Send:
      sendBytes = bytes;
      break;
    case CollKind::Recv:
      recvBytes = bytes;
      break;
  }
  if (sendBytes > 0 && a.send == nullptr)
    return makeError(weftInvalidArgument, "%s: sendbuff is NULL but count is %zu", api, a.count);
  if (recvBytes > 0 && a.recv == nullptr)
    return makeError(weftInvalidArgument, "%s: recvbuff is NULL but count is %zu", api, a.count);
  if (sendBytes == 0 || recvBytes == 0) return Status::ok();

  // In place is allowed only as NCCL defines it.
  const char* s = static_cast<const char*>(a.send);
  const char* r = static_cast<const char*>(a.recv);
  bool inPlace = false;
  switch (a.kind) {
    case CollKind::AllReduce:
    case CollKind::Broadcast:
    case CollKind::Reduce:
      inPlace = s == r;
      break;
    case CollKind::AllGather:
      inPlace = s == r + me * bytes;
      break;
    case CollKind::ReduceScatter:
      inPlace = r == s + me * bytes;
      break;
    case CollKind::Gather:
      inPlace = s == r + a.root * bytes;
      break;
    case CollKind::Scatter:
      inPlace = r == s + a.root * bytes;
      break;
    case CollKind::AllToAll:
      inPlace = s == r;
      break;
    default:
      break;
  }
  if (!inPlace && overlaps(a.send, sendBytes, a.recv, recvBytes))
    return makeError(weftInvalidArgument,
                     "%s: sendbuff and recvbuff overlap without being the in-place alias (for "
                     "%s in place, %s)",
                     api, collName(a.kind),
                     a.kind == CollKind::AllGather       ? "sendbuff == recvbuff + rank*count"
                     : a.kind == CollKind::ReduceScatter ? "recvbuff == sendbuff + rank*count"
                     : a.kind == CollKind::Gather        ? "sendbuff == recvbuff + root*count"
                     : a.kind == CollKind::Scatter       ? "recvbuff == sendbuff + root*count"
                     : a.kind == CollKind::AllToAll      ? "sendbuff == recvbuff"
                                                         : "sendbuff == recvbuff");
  return Status::ok();
}

}  // namespace weft
