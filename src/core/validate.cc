#include "core/validate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

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

// All-to-all-v: arrays present, every block inside the address space, no
// two receive blocks overlapping, no receive block overlapping a send block.
// (Whether a sender's count matches its receiver's is checked when the data
// arrives: each transfer carries its size.)
Status validateAllToAllV(weftComm* comm, const char* api, const CollArgs& a) {
  const int n = comm->nranks;
  if (!a.sendCounts || !a.sendDispls || !a.recvCounts || !a.recvDispls)
    return makeError(weftInvalidArgument,
                     "%s: sendcounts, sdispls, recvcounts and rdispls must all be arrays of "
                     "nranks (%d) entries, not NULL",
                     api, n);
  const size_t es = dtypeSize(a.dtype);
  struct Block {
    uintptr_t lo, hi;
    int peer;
  };
  std::vector<Block> sends, recvs;
  for (int p = 0; p < n; ++p) {
    for (int dir = 0; dir < 2; ++dir) {
      const size_t count = dir == 0 ? a.sendCounts[p] : a.recvCounts[p];
      const size_t displ = dir == 0 ? a.sendDispls[p] : a.recvDispls[p];
      const char* what = dir == 0 ? "send" : "recv";
      if (count == 0) continue;
      if (count > SIZE_MAX / es || displ > SIZE_MAX / es || displ * es > SIZE_MAX - count * es)
        return makeError(weftInvalidArgument,
                         "%s: %scounts[%d] = %zu at displacement %zu overflows the address space",
                         api, what, p, count, displ);
      const void* base = dir == 0 ? a.send : a.recv;
      if (base == nullptr)
        return makeError(weftInvalidArgument, "%s: %sbuff is NULL but %scounts[%d] is %zu", api,
                         what, what, p, count);
      const uintptr_t lo = reinterpret_cast<uintptr_t>(base) + displ * es;
      if (lo < reinterpret_cast<uintptr_t>(base) || lo > UINTPTR_MAX - count * es)
        return makeError(weftInvalidArgument, "%s: %s block for rank %d wraps the address space",
                         api, what, p);
      (dir == 0 ? sends : recvs).push_back({lo, lo + count * es, p});
    }
  }
  auto byStart = [](const Block& x, const Block& y) { return x.lo < y.lo; };
  std::sort(recvs.begin(), recvs.end(), byStart);
  for (size_t i = 1; i < recvs.size(); ++i) {
    if (recvs[i].lo < recvs[i - 1].hi)
      return makeError(weftInvalidArgument,
                       "%s: the receive blocks for ranks %d and %d overlap (check rdispls and "
                       "recvcounts)",
                       api, recvs[i - 1].peer, recvs[i].peer);
  }
  for (const Block& b : sends) {
    // The receive block with the last start below b.hi is the only candidate
    // besides none (they are disjoint and sorted).
    auto it = std::lower_bound(recvs.begin(), recvs.end(), b.hi,
                               [](const Block& x, uintptr_t v) { return x.lo < v; });
    if (it != recvs.begin() && std::prev(it)->hi > b.lo)
      return makeError(weftInvalidArgument,
                       "%s: the send block for rank %d overlaps the receive block for rank %d "
                       "(all-to-all-v has no in-place form: use separate buffers)",
                       api, b.peer, std::prev(it)->peer);
  }
  return Status::ok();
}

}  // namespace

Status keepVCounts(weftComm* comm, CollCall& call, const size_t* sendcounts, const size_t* sdispls,
                   const size_t* recvcounts, const size_t* rdispls) {
  CollArgs& a = call.args;
  a.sendCounts = sendcounts;
  a.sendDispls = sdispls;
  a.recvCounts = recvcounts;
  a.recvDispls = rdispls;
  if (!checkComm(comm).isOk() || !sendcounts || !sdispls || !recvcounts || !rdispls)
    return Status::ok();
  const size_t n = static_cast<size_t>(comm->nranks);
  auto v = std::make_shared<std::vector<size_t>>(4 * n);
  std::copy(sendcounts, sendcounts + n, v->begin());
  std::copy(sdispls, sdispls + n, v->begin() + n);
  std::copy(recvcounts, recvcounts + n, v->begin() + 2 * n);
  std::copy(rdispls, rdispls + n, v->begin() + 3 * n);
  a.sendCounts = v->data();
  a.sendDispls = v->data() + n;
  a.recvCounts = v->data() + 2 * n;
  a.recvDispls = v->data() + 3 * n;
  call.vcounts = std::move(v);
  return Status::ok();
}

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
  if (a.kind == CollKind::AllToAllV) return validateAllToAllV(comm, api, a);
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
    case CollKind::AllToAllV:  // validateAllToAllV
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
