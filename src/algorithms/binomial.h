// The binomial tree rooted anywhere; shared by binomial broadcast and reduce.
#pragma once

#include "algorithms/detail.h"
#include "algorithms/tree.h"

namespace weft::algo {

// Relative rank v = r - root: v's parent clears v's lowest set bit, its
// children set each lower bit (largest subtree first).
inline TreeSpec binomialTree(int r, int root, int n, size_t count) {
  TreeSpec t;
  t.count = count;
  const int v = mod(r - root, n);
  t.parent = v == 0 ? -1 : mod((v & (v - 1)) + root, n);
  int limit = v == 0 ? 1 : (v & -v);
  if (v == 0) {
    while (limit < n) limit *= 2;
  }
  for (int bit = limit / 2; bit >= 1; bit /= 2) {
    if (v + bit < n) t.children.push_back(mod(v + bit + root, n));
  }
  return t;
}

}  // namespace weft::algo
