// Direct allreduce: the one-hop latency path for small messages. Every rank
// sends its whole contribution to every peer in one slot, receives all n-1
// others and reduces the n contributions in rank order 0..n-1 with one
// reduceMany, so every rank computes a bit-identical result.
//
// Needs N <= chunkBytes (the selector picks it only then; a larger call is
// handed to the ring). Sends and receives are progressed in one polling loop,
// so no peer order can deadlock and one free slot per channel suffices.
//
// Cost, n ranks, N bytes: 1 step; each rank sends and receives (n-1) * N
// bytes and reduces (n-1) * N bytes (every rank does the whole reduction).
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status directAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  if (bytes > ctx.chunkBytes()) return ringAllReduce(ctx, a);
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    contribute(out, a.send, a.count, a);
    finish(out, a.count, a, n);
    return Status::ok();
  }

  // The local contribution: the input itself, or (PreMulSum) its scaled copy
  // made in the output buffer, which is what the peers are sent too.
  const void* local = a.send;
  if (a.op.preMul) {
    contribute(out, a.send, a.count, a);
    local = out;
  }

  // Reused per thread: no allocation once a thread has seen this n.
  thread_local std::vector<const void*> srcs;
  thread_local std::vector<unsigned char> sent;
  srcs.assign(n, nullptr);
  sent.assign(n, 0);
  srcs[r] = local;
  int toSend = n - 1, toRecv = n - 1;
  Progress progress(ctx.health());
  while (toSend + toRecv > 0) {
    bool moved = false;
    for (int s = 1; s < n; ++s) {
      const int to = algo::mod(r + s, n);
      if (!sent[to]) {
        SendChannel& ch = ctx.sendTo(to);
        if (void* slot = ch.tryAcquire()) {
          ch.commitFrom(slot, local, bytes);
          sent[to] = 1;
          --toSend;
          moved = true;
        }
      }
      const int from = algo::mod(r - s, n);
      if (!srcs[from]) {
        size_t got = 0;
        if (const void* data = ctx.recvFrom(from).tryPeek(&got)) {
          if (got != bytes) return algo::sizeMismatch(got, bytes);
          srcs[from] = data;
          --toRecv;
          moved = true;
        }
      }
    }
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }

  // A transport that sends from `local` itself (TCP) may still be reading
  // it: the output may be that very buffer (in place), and the caller may
  // reuse it after we return. Usually the kernel took the bytes long ago.
  WEFT_RETURN_IF_ERROR(algo::waitSourcesRead(ctx, progress));

  const kernels::ReduceKind kind = a.op.preMul ? kernels::ReduceKind::Sum : a.op.kind;
  kernels::reduceMany(out, srcs.data(), n, a.count, a.dtype, kind);
  for (int s = 1; s < n; ++s) ctx.recvFrom(algo::mod(r - s, n)).release();
  finish(out, a.count, a, n);
  return Status::ok();
}

}  // namespace weft
