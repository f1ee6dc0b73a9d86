// Direct (single-copy) all-gather: every rank publishes its block to every
// peer, one slot per channel, and copies each peer's published block straight
// from that peer's memory into its place in the output. One polling loop over
// all peers reads a few MiB per peer per pass, so all transfers progress
// together, and ends once every block has arrived and every peer has released
// this rank's block (which must not change until then). The own block is
// copied locally unless in place (send == recv + r*count).
//
// Cost, n ranks, N = count bytes per rank: 1 step, one slot per peer and
// direction; each rank copies (n-1) * N bytes once, straight from the peers'
// buffers (the FIFO algorithms copy every byte twice).
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/direct.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status directAllGather(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  if (bytes == 0) return Status::ok();
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  char* own = out + static_cast<size_t>(r) * bytes;
  if (in != own) kernels::copyOut(own, in, bytes, bytes * static_cast<size_t>(n));
  if (n == 1) return Status::ok();

  thread_local std::vector<algo::PublishedSend> sends;
  thread_local std::vector<algo::PublishedRead> reads;
  sends.assign(n, {});
  reads.assign(n, {});
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    sends[p].src = in;
    sends[p].bytes = bytes;
    reads[p].dst = out + static_cast<size_t>(p) * bytes;
    reads[p].bytes = bytes;
  }
  return algo::exchangePublished(ctx, sends, reads);
}

}  // namespace weft
