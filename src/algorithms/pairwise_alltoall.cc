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
#include "algorithms/exchange.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

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
  const size_t chunk = ctx.chunkBytes();
  // Sends block bytes from src to `to` while receiving as many from `from`
  // into dst; gated, chunk k is received only after chunk k went out.
  auto swap = [&](int to, const char* src, int from, char* dst, bool gate) {
    auto place = [&](size_t off, const void* data, size_t c) {
      if (data != dst + off) kernels::copyOut(dst + off, data, c, blockBytes * n);
    };
    return algo::exchange(ctx, progress, chunk, to, src, blockBytes, from, blockBytes, gate, place,
                          gate ? nullptr : dst);
  };

  if (in == out) {
    for (int s = 0; s < n; ++s) {
      const int p = algo::mod(s - r, n);
      if (p == r) continue;
      WEFT_RETURN_IF_ERROR(swap(p, inAt(p), p, outAt(p), true));
    }
    return Status::ok();
  }

  kernels::copyOut(outAt(r), inAt(r), blockBytes, blockBytes * static_cast<size_t>(n));
  for (int s = 1; s < n; ++s) {
    const int to = algo::mod(r + s, n);
    const int from = algo::mod(r - s, n);
    WEFT_RETURN_IF_ERROR(swap(to, inAt(to), from, outAt(from), false));
  }
  return Status::ok();
}

}  // namespace weft
