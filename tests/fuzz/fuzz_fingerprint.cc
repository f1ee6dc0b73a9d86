// Fuzzes WEFT_CHECK's comparison of call fingerprints, which arrive from
// peers: any table of fingerprints must give a message or "" without
// reading out of bounds (kinds, dtypes and ops may be any value).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t n = size / sizeof(weft::CallFingerprint);
  if (n == 0 || n > 64) return 0;
  std::vector<weft::CallFingerprint> all(n);
  std::memcpy(all.data(), data, n * sizeof(weft::CallFingerprint));
  (void)weft::compareFingerprints(all);
  return 0;
}
