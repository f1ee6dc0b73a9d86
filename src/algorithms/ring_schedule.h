// The order in which a pipelined ring takes its steps, with several
// chunk-sized passes in flight at once.
//
// Every pass of a ring collective sends K messages along each channel
// r -> r+1. Step j (0 <= j <= K) of pass p receives message j-1 of that pass
// (when j > 0) and sends message j (when j < K); receive-reduce-send is one
// step. Taking the passes one after another leaves the ring idle between
// them: pass p+1 starts only once the last message of pass p arrived.
//
// Here step (p, j) is taken at time p*stride + j, later passes first among
// steps of the same time. The sender of message (p, j) takes step (p, j) and
// its receiver step (p, j+1), one time unit later and in the same relative
// order, so both ends of every channel see the messages in the same order,
// whatever the stride. Since all ranks take the same order, no rank waits on
// one that waits on it, provided a rank about to send finds a free slot when
// its neighbours stand where it stands; the stride is the smallest for which
// the messages then outstanding on a channel leave one slot free:
// stride 1 (every pass one step behind the previous) when slots > K, and
// stride K (only the last receive of a pass after the next pass's first
// send) with 2 slots.
#pragma once

#include <algorithm>
#include <cstddef>

#include "base/status.h"

namespace weft::algo {

// Messages on one channel sent and not yet released when every rank stands
// at step j of some pass, at the worst j: one for every pass u*stride steps
// apart with u*stride in [-j, K-j] (u = 0 only once the pass has received).
inline size_t ringOutstanding(size_t messages, size_t stride) {
  size_t worst = 0;
  for (size_t j = 0; j < messages; ++j) {
    // Multiples of stride in [-j, K-j]: those <= 0 and those > 0.
    size_t count = j / stride + (messages - j) / stride + (j > 0 ? 1 : 0);
    if (count > worst) worst = count;
  }
  return worst;
}

// The smallest stride that keeps a free slot for every send.
inline size_t ringStride(size_t messages, size_t slots) {
  if (messages == 0) return 1;
  size_t stride = slots > 1 ? messages / slots + 1 : messages + 1;
  while (stride <= messages && ringOutstanding(messages, stride) >= slots) ++stride;
  return stride;
}

// Calls step(pass, j) for passes x (messages + 1) steps in the order above;
// stops at the first error.
template <class Step>
Status forEachRingStep(size_t passes, size_t messages, size_t stride, Step&& step) {
  if (passes == 0) return Status::ok();
  const size_t horizon = (passes - 1) * stride + messages;
  for (size_t t = 0; t <= horizon; ++t) {
    size_t p = std::min(passes - 1, t / stride);
    for (;; --p) {
      const size_t j = t - p * stride;
      if (j > messages) break;
      WEFT_RETURN_IF_ERROR(step(p, j));
      if (p == 0) break;
    }
  }
  return Status::ok();
}

}  // namespace weft::algo
