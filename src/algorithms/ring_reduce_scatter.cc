// Ring reduce-scatter around the communicator's ring (ring_order.h),
// pipelined one chunk (the tuner's, at most a channel slot) at a time, with
// several chunks in flight (ring_schedule.h). Rank r ends with block r
// (recvcount elements) of the reduction.
//
// Step 0 sends the block of the rank one position back; step s receives the
// block of the rank 1+s positions back reduced by s ranks, folds in this
// rank's part and passes it on, writing straight into the next rank's slot.
// The last step receives block r itself and finishes it in the output. In place when recv == send +
// r*recvcount: block r of the input is read only by that last step, which writes the same elements.
//
// Cost, n ranks, N = n*recvcount bytes in total: n-1 steps; each rank sends
// and receives (n-1)/n * N bytes and reduces (n-1)/n * N bytes.
// Deadlock-free with >= 2 slots per channel.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/ring_schedule.h"
#include "base/dtype.h"

namespace weft {

Status ringReduceScatter(CollContext& ctx, const CollArgs& a) {
  const int n = ctx.nranks();
  const int r = ctx.rank();
  const size_t es = dtypeSize(a.dtype);
  const size_t count = a.count;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (n == 1) {
    contribute(out, in, count, a);
    finish(out, count, a, 1);
    return Status::ok();
  }

  const int pos = ctx.ringPos(r);
  SendChannel& next = ctx.sendTo(ctx.ringRank(algo::mod(pos + 1, n)));
  RecvChannel& prev = ctx.recvFrom(ctx.ringRank(algo::mod(pos - 1, n)));
  Progress progress(ctx.health());
  const size_t chunkElems = algo::chunkBytes(ctx, a, es) / es;

  const size_t passes = (count + chunkElems - 1) / chunkElems;
  const size_t messages = static_cast<size_t>(n - 1);
  const size_t stride = algo::ringStride(messages, ctx.slotsPerChannel());

  // Step j of a pass works on the block of the rank 1+j positions back.
  return algo::forEachRingStep(passes, messages, stride, [&](size_t p, size_t j) -> Status {
    const size_t off = p * chunkElems;
    const size_t c = std::min(chunkElems, count - off);
    const int b = ctx.ringRank(algo::mod(pos - 1 - static_cast<int>(j), n));
    const char* mine = in + (static_cast<size_t>(b) * count + off) * es;
    void* slot;
    if (j == 0) {
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      if (a.op.preMul) {
        contribute(slot, mine, c, a);
        next.commit(c * es);
      } else {
        next.commitFrom(slot, mine, c * es);
      }
      return Status::ok();
    }
    const void* incoming;
    WEFT_RETURN_IF_ERROR(peekSlot(prev, progress, c * es, &incoming));
    if (j < messages) {
      WEFT_RETURN_IF_ERROR(acquireSlot(next, progress, &slot));
      combine(slot, mine, incoming, c, a);
      prev.release();
      next.commit(c * es);
    } else {
      char* dst = out + off * es;  // b == r
      combine(dst, mine, incoming, c, a);
      finish(dst, c, a, n);
      prev.release();
    }
    return Status::ok();
  });
}

}  // namespace weft
