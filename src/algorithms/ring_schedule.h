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

// The smallest stride that keeps a free slot for every send. When every
// rank stands at step j of some pass, the messages on a channel sent and not
// yet released are one per pass u*stride steps away with u*stride in
// [-j, K-j] (u = 0 only once the step has received): floor(j/stride) +
// floor((K-j)/stride) + [j > 0]. Its worst over j < K is floor(K/stride) + 1
// for a stride below K and 1 for stride K, so the stride must exceed
// K / (slots - 1), or be K.
inline size_t ringStride(size_t messages, size_t slots) {
  if (messages == 0) return 1;
  if (slots < 2) return messages + 1;
  return std::min(messages, messages / (slots - 1) + 1);
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
