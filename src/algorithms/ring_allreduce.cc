// Ring allreduce: a reduce-scatter then an all-gather around the
// communicator's ring (ring_order.h), pipelined one chunk (the tuner's, at
// most a channel slot) at a time. Blocks are numbered by ring position: the
// rank at position q finishes block q+1.
//
// The buffer is cut into n blocks; each pass moves one chunk-sized slice of
// every block all the way round in 2(n-1) messages, and several passes are
// in flight at once (ring_schedule.h), so sends, reductions and receives of
// different slices overlap across ranks and within one.
//
// Cost, n ranks, N bytes: 2(n-1) steps; each rank sends and receives
// 2(n-1)/n * N bytes and reduces (n-1)/n * N bytes. Receive-reduce-send is
// fused: the reduction writes straight into the next rank's slot.
// Deadlock-free with >= 2 slots per channel.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/ring_schedule.h"
#include "base/dtype.h"
#include "kernels/reduce.h"

namespace weft {

Status ringAllReduce(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int pos = ctx.ringPos(ctx.rank());  // blocks follow ring positions
  const size_t es = dtypeSize(a.dtype);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (n == 1) {
    contribute(out, in, a.count, a);
    finish(out, a.count, a, 1);
    return Status::ok();
  }

  const size_t perBlock = (a.count + n - 1) / n;
  auto blockStart = [&](int b) { return std::min(a.count, perBlock * b); };
  auto blockLen = [&](int b) { return std::min(a.count, perBlock * (b + 1)) - blockStart(b); };
  auto mod = [n](int x) { return algo::mod(x, n); };
  const size_t chunkElems = algo::chunkBytes(ctx, a, es) / es;
  const size_t passes = (perBlock + chunkElems - 1) / chunkElems;
  // Messages per pass: n-1 of the reduce-scatter, n-1 of the all-gather.
  const size_t messages = 2 * static_cast<size_t>(n - 1);
  const size_t stride = algo::ringStride(messages, ctx.slotsPerChannel());

  // Step j of a pass works on block blockAt(j): j < n (the reduce-scatter)
  // sends block pos-j, having received and added it for j > 0; j >= n (the
  // all-gather) receives finished block pos+n-j and forwards it. The block a
  // step receives is the one its sender sent.
  auto blockAt = [&](size_t j) {
    return j < static_cast<size_t>(n) ? mod(pos - int(j)) : mod(pos + n - int(j));
  };
  auto lenAt = [&](size_t p, int b) -> size_t {
    const size_t off = p * chunkElems, bl = blockLen(b);
    return off >= bl ? 0 : std::min(chunkElems, bl - off);
  };
  auto inAt = [&](size_t p, int b) { return in + (blockStart(b) + p * chunkElems) * es; };
  auto outAt = [&](size_t p, int b) { return out + (blockStart(b) + p * chunkElems) * es; };

  SendChannel& next = ctx.sendTo(ctx.ringRank(mod(pos + 1)));
  RecvChannel& prev = ctx.recvFrom(ctx.ringRank(mod(pos - 1)));
  Progress progress(ctx.health());

  // Over TCP the all-gather's blocks are read from the socket straight into
  // place: every slot this call receives is named in the order it comes,
  // those of the reduce-scatter (added into a slot) with no address.
  if (prev.canLand()) {
    (void)algo::forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) {
      const int b = blockAt(j);
      const size_t c = lenAt(p, b);
      if (j == 0 || c == 0) return Status::ok();
      if (j < static_cast<size_t>(n)) {
        prev.land(nullptr, 0);
      } else {
        prev.land(outAt(p, b), c * es);
      }
      return Status::ok();
    });
  }

  return algo::forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) -> Status {
    const int b = blockAt(j);
    const size_t c = lenAt(p, b);
    if (c == 0) return Status::ok();
    void* slot;
    if (j == 0) {
      // This rank's own block starts the reduce-scatter.
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      if (a.op.preMul) {
        contribute(slot, inAt(p, b), c, a);
        next.commit(c * es);
      } else {
        next.commitFrom(slot, inAt(p, b), c * es);
      }
      return Status::ok();
    }
    const void* incoming;
    WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, c * es, &incoming));
    if (j < static_cast<size_t>(n) - 1) {
      // Block b reduced by j ranks: add ours and pass it on.
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      combine(slot, inAt(p, b), incoming, c, a);
      prev.release();
      next.commit(c * es);
    } else if (j == static_cast<size_t>(n) - 1) {
      // Block pos+1, now complete, goes into place and on from there (over
      // TCP the socket reads it from the output: no copy into the slot).
      // Out of place, summing into the slot instead, sending that and
      // streaming it into the output (non-temporal stores: the output's
      // lines not read first) measured slower: 2 ranks in two network
      // namespaces, 64 MiB, 6 alternating rounds, busbw 2.21 against 2.53
      // GB/s, the slot then held until its bytes left.
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      combine(outAt(p, b), inAt(p, b), incoming, c, a);
      finish(outAt(p, b), c, a, n);
      prev.release();
      next.commitFrom(slot, outAt(p, b), c * es);
    } else {
      // A finished block; forwarded from its place in the output, which
      // nothing writes again, except by the last step, whose block the next
      // rank finished itself.
      if (incoming != outAt(p, b)) kernels::copyOut(outAt(p, b), incoming, c * es, a.count * es);
      prev.release();
      if (j < messages) {
        WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
        next.commitFrom(slot, outAt(p, b), c * es);
      }
    }
    return Status::ok();
  });
}

}  // namespace weft
