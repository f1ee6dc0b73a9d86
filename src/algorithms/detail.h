// Helpers shared by the algorithm files; not part of the algorithm API.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/coll.h"

namespace weft::algo {

// x modulo n, in [0, n) for negative x too.
inline int mod(int x, int n) {
  return ((x % n) + n) % n;
}

// Bytes per pipelined step: the tuner's chunk (CollArgs::chunkBytes) capped
// at the slot, a whole number of elements and at least one.
inline size_t chunkBytes(const CollContext& ctx, const CollArgs& a, size_t elemSize) {
  size_t c = ctx.chunkBytes();
  if (a.chunkBytes > 0 && a.chunkBytes < c) c = a.chunkBytes;
  c = c / elemSize * elemSize;
  return c > 0 ? c : elemSize;
}

// Single copy from this per-peer size, unless WEFT_PROTO ruled it out.
inline size_t directMinBytes(const CollContext& ctx, const CollArgs& a) {
  return a.singleCopy ? ctx.directMinBytes() : SIZE_MAX;
}

// The error for a received slot that does not hold the expected byte count.
Status sizeMismatch(size_t got, size_t expected);

// Waits until no channel to a peer still reads a commitFrom() source, so
// that the caller may write or free those buffers. An algorithm that returns
// to the user needs no such wait (the end of the collective flushes every
// channel); one that writes a buffer it sent from, or a caller that runs an
// algorithm as one stage of its own, does.
Status waitSourcesRead(CollContext& ctx, Progress& progress);

}  // namespace weft::algo
