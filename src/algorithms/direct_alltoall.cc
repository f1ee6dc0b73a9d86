// Direct (single-copy) all-to-all: every rank publishes block p of its input
// to peer p, one slot per channel, and copies block r of every peer's input
// straight from that peer's memory into its place in the output. One polling
// loop over all peers reads a few MiB per peer per pass and ends once every
// block has arrived and every peer has released what this rank published
// (which must not change until then). The own block is copied locally.
//
// In place (send == recv) a block may be overwritten before the peer it is
// meant for has read it, so the input is first copied to a private buffer
// that is published instead: one extra local copy, and the same messages on
// the wire, so ranks in place and out of place still match each other.
//
// Cost, n ranks, N = n*count bytes per rank: 1 step, one slot per peer and
// direction; each rank copies (n-1)/n * N bytes once, straight from the
// peers' buffers (pairwise copies every byte twice); + N local in place.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/direct.h"
#include "base/dtype.h"
#include "base/page_buffer.h"
#include "kernels/reduce.h"

namespace weft {

Status directAllToAll(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  if (bytes == 0) return Status::ok();
  const size_t total = bytes * static_cast<size_t>(n);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (n == 1) {
    if (in != out) kernels::copy(out, in, bytes);
    return Status::ok();
  }
  const char* rin = static_cast<const char*>(a.recv);
  if (in < rin + total && rin < in + total) {
    // In place, or overlapping the output: publish a private copy.
    thread_local std::vector<char> staging;
    char* copy = pageAlignedIn(staging, total);
    kernels::copy(copy, in, total);
    in = copy;
  }
  kernels::copyOut(out + static_cast<size_t>(r) * bytes, in + static_cast<size_t>(r) * bytes, bytes,
                   total);

  thread_local std::vector<algo::PublishedSend> sends;
  thread_local std::vector<algo::PublishedRead> reads;
  sends.assign(n, {});
  reads.assign(n, {});
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    sends[p].src = in + static_cast<size_t>(p) * bytes;
    sends[p].bytes = bytes;
    reads[p].dst = out + static_cast<size_t>(p) * bytes;
    reads[p].bytes = bytes;
  }
  return algo::exchangePublished(ctx, sends, reads);
}

}  // namespace weft
