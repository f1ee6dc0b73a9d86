// Pairwise all-to-all-v (variable counts, the MoE case): step s = 1..n-1
// sends this rank's block for r+s while receiving the block from r-s, both
// progressed in one polling loop one chunk (slot) at a time; the self block
// is copied. Counts and displacements are per peer, in elements.
//
// Every transfer, even an empty one, starts with a message whose first 8
// bytes carry the sender's byte count, so a receiver whose recvcounts entry
// disagrees with the sender's sendcounts entry fails with a clear error
// instead of reading the wrong bytes (or the next collective's).
//
// Cost, n ranks, S bytes sent and R received in all by this rank: n-1
// steps; sends S and receives R, plus n-1 header messages each way.
// Deadlock-free with any slot count: in each step a rank's partners are in
// that same step, and both directions are progressed together.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

constexpr size_t kHeader = sizeof(uint64_t);

Status countMismatch(int from, uint64_t got, size_t expected) {
  return makeError(weftInvalidUsage,
                   "all-to-all-v: rank %d sends %llu bytes to this rank, which expects %zu: "
                   "sendcounts on the sender and recvcounts on the receiver must agree",
                   from, static_cast<unsigned long long>(got), expected);
}

Status exchangeV(CollContext& ctx, Progress& progress, int to, const char* src, size_t sendBytes,
                 int from, char* dst, size_t recvBytes) {
  SendChannel& tx = ctx.sendTo(to);
  RecvChannel& rx = ctx.recvFrom(from);
  const size_t chunk = ctx.chunkBytes();
  // Offsets count the header: the stream is header + data.
  const size_t sendTotal = kHeader + sendBytes, recvTotal = kHeader + recvBytes;
  size_t sent = 0, got = 0;
  while (sent < sendTotal || got < recvTotal) {
    bool moved = false;
    while (sent < sendTotal) {
      char* slot = static_cast<char*>(tx.tryAcquire());
      if (!slot) break;
      const size_t c = std::min(chunk, sendTotal - sent);
      if (sent == 0) {
        const uint64_t header = sendBytes;
        std::memcpy(slot, &header, kHeader);
        kernels::copyCached(slot + kHeader, src, c - kHeader);
      } else {
        kernels::copyCached(slot, src + sent - kHeader, c);
      }
      tx.commit(c);
      sent += c;
      moved = true;
    }
    while (got < recvTotal) {
      size_t have = 0;
      const char* data = static_cast<const char*>(rx.tryPeek(&have));
      if (!data) break;
      if (rx.peekedPublished()) return algo::sizeMismatch(have, std::min(chunk, recvTotal - got));
      size_t skip = 0;
      if (got == 0) {
        if (have < kHeader) return algo::sizeMismatch(have, std::min(chunk, recvTotal));
        uint64_t header;
        std::memcpy(&header, data, kHeader);
        if (header != recvBytes) return countMismatch(from, header, recvBytes);
        skip = kHeader;
      }
      const size_t c = std::min(chunk, recvTotal - got);
      if (have != c) return algo::sizeMismatch(have, c);
      kernels::copyCached(dst + got + skip - kHeader, data + skip, c - skip);
      rx.release();
      got += c;
      moved = true;
    }
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
  return Status::ok();
}

}  // namespace

Status pairwiseAllToAllV(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (a.sendCounts[r] != a.recvCounts[r])
    return makeError(weftInvalidUsage,
                     "all-to-all-v: sendcounts[%d] = %zu but recvcounts[%d] = %zu on rank %d: "
                     "a rank's block to itself must have one size",
                     r, a.sendCounts[r], r, a.recvCounts[r], r);
  if (a.sendCounts[r] > 0)
    kernels::copy(out + a.recvDispls[r] * es, in + a.sendDispls[r] * es, a.sendCounts[r] * es);
  if (ctx.chunkBytes() <= kHeader)
    return Status(weftInternalError, "all-to-all-v needs channel slots over 8 bytes");
  Progress progress(ctx.health());
  for (int s = 1; s < n; ++s) {
    const int to = algo::mod(r + s, n);
    const int from = algo::mod(r - s, n);
    WEFT_RETURN_IF_ERROR(exchangeV(ctx, progress, to, in + a.sendDispls[to] * es,
                                   a.sendCounts[to] * es, from, out + a.recvDispls[from] * es,
                                   a.recvCounts[from] * es));
  }
  return Status::ok();
}

}  // namespace weft
