// Pairwise all-to-all. Out of place, step s = 1..n-1 sends block r+s to rank
// r+s while receiving block r-s from rank r-s, both progressed together in one
// polling loop one chunk (channel slot) at a time; the self block is copied.
//
// In place (send == recv) a block may only be overwritten once it has been
// sent, so step s = 0..n-1 instead exchanges block p with the partner
// p = s-r (mod n), whose partner in that step is r: chunk k of block p is
// received only after chunk k of it went out. The step where p == r is a no-op.
//
// Cost, n ranks, N = n*count bytes per rank: n-1 steps (n in place, one of
// them local); each rank sends and receives (n-1)/n * N bytes.
// Deadlock-free with any slot count: in each step a rank's sends and receives
// go to ranks in that same step, and both directions are progressed together.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

namespace {

// Sends `bytes` from src to `to` while receiving `bytes` from `from` into dst.
// With `gate`, chunk k is received only after chunk k was sent.
Status exchange(CollContext& ctx, Progress& progress, int to, const char* src, int from, char* dst,
                size_t bytes, bool gate) {
  SendChannel& tx = ctx.sendTo(to);
  RecvChannel& rx = ctx.recvFrom(from);
  const size_t chunk = ctx.chunkBytes();
  // Gated, the receive overwrites what is sent: each chunk is copied into
  // the slot. Otherwise chunks go from and come into place (TCP).
  if (!gate && rx.canLand()) {
    for (size_t off = 0; off < bytes; off += chunk)
      rx.land(dst + off, std::min(chunk, bytes - off));
  }
  size_t sent = 0, got = 0;
  while (sent < bytes || got < bytes) {
    bool moved = false;
    while (sent < bytes) {
      void* slot = tx.tryAcquire();
      if (!slot) break;
      const size_t c = std::min(chunk, bytes - sent);
      if (gate) {
        std::memcpy(slot, src + sent, c);
        tx.commit(c);
      } else {
        tx.commitFrom(slot, src + sent, c);
      }
      sent += c;
      moved = true;
    }
    while (got < bytes && (!gate || got < sent)) {
      size_t have = 0;
      const void* data = rx.tryPeek(&have);
      if (!data) break;
      const size_t c = std::min(chunk, bytes - got);
      if (have != c || rx.peekedPublished()) return algo::sizeMismatch(have, c);
      if (data != dst + got) kernels::copyOut(dst + got, data, c, bytes * ctx.nranks());
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

Status pairwiseAllToAll(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t blockBytes = a.count * dtypeSize(a.dtype);
  if (blockBytes == 0) return Status::ok();
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  auto inAt = [&](int b) { return in + static_cast<size_t>(b) * blockBytes; };
  auto outAt = [&](int b) { return out + static_cast<size_t>(b) * blockBytes; };
  Progress progress(ctx.health());

  if (in == out) {
    for (int s = 0; s < n; ++s) {
      const int p = algo::mod(s - r, n);
      if (p == r) continue;
      WEFT_RETURN_IF_ERROR(exchange(ctx, progress, p, inAt(p), p, outAt(p), blockBytes, true));
    }
    return Status::ok();
  }

  kernels::copy(outAt(r), inAt(r), blockBytes);
  for (int s = 1; s < n; ++s) {
    const int to = algo::mod(r + s, n);
    const int from = algo::mod(r - s, n);
    WEFT_RETURN_IF_ERROR(
        exchange(ctx, progress, to, inAt(to), from, outAt(from), blockBytes, false));
  }
  return Status::ok();
}

}  // namespace weft
