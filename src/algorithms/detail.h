// Helpers shared by the algorithm files; not part of the algorithm API.
#pragma once

#include <cstddef>

#include "algorithms/coll.h"

namespace weft::algo {

// x modulo n, in [0, n) for negative x too.
inline int mod(int x, int n) {
  return ((x % n) + n) % n;
}

// The error for a received slot that does not hold the expected byte count.
Status sizeMismatch(size_t got, size_t expected);

}  // namespace weft::algo
