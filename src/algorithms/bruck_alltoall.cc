// Bruck all-to-all, for small messages: after a local rotation (block i is
// the one for rank r+i), step k sends every block whose index has bit k set
// to rank r+2^k and receives the same positions from rank r-2^k; after
// ceil(log2 n) steps position i holds rank r-i's block for r, and a final
// reordering puts it in place. Blocks are packed per step into one message
// stream.
//
// Cost, n ranks, N = n*count bytes per rank: ceil(log2 n) steps; each rank
// sends and receives about N/2 * log2 n bytes, plus three local copies of N.
// Latency log n (pairwise's is n-1), more bytes: for small blocks only.
// Pairwise exchanges progressed in both directions: any slot count works.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "kernels/reduce.h"

namespace weft {

Status bruckAllToAll(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bb = a.count * dtypeSize(a.dtype);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (bb == 0) return Status::ok();
  if (n == 1) {
    if (in != out) kernels::copy(out, in, bb);
    return Status::ok();
  }
  thread_local std::vector<char> tmpVec, packedVec, incomingVec;
  algo::Scratch tmp(tmpVec, n * bb), packed(packedVec, (n / 2 + 1) * bb),
      incoming(incomingVec, (n / 2 + 1) * bb);
  for (int i = 0; i < n; ++i) kernels::copy(tmp.data() + i * bb, in + algo::mod(r + i, n) * bb, bb);

  Progress progress(ctx.health());
  const size_t chunk = algo::chunkFor(ctx, 1);
  for (int bit = 1; bit < n; bit *= 2) {
    size_t m = 0;
    for (int i = 0; i < n; ++i) {
      if (i & bit) kernels::copyCached(packed.data() + m++ * bb, tmp.data() + i * bb, bb);
    }
    const int to = algo::mod(r + bit, n), from = algo::mod(r - bit, n);
    WEFT_RETURN_IF_ERROR(algo::exchange(ctx, progress, chunk, to, packed.data(), m * bb, from,
                                        m * bb, false,
                                        [&](size_t off, const void* data, size_t len) {
                                          kernels::copyCached(incoming.data() + off, data, len);
                                        }));
    m = 0;
    for (int i = 0; i < n; ++i) {
      if (i & bit) kernels::copyCached(tmp.data() + i * bb, incoming.data() + m++ * bb, bb);
    }
  }
  for (int i = 0; i < n; ++i)
    kernels::copy(out + algo::mod(r - i, n) * bb, tmp.data() + i * bb, bb);
  return Status::ok();
}

}  // namespace weft
