// Fuzzes the parsers of environment values: sizes with K/M/G/T suffixes
// (WEFT_SHM_SLOT_BYTES and friends) and WEFT_ALGO's NCCL_ALGO syntax. The
// first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/select.h"
#include "base/env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 2) {
    case 0:
      if (auto v = weft::parseBytes(text)) {
        // Only digits and a suffix parse: no sign, blank or hidden NUL.
        if (text.find_first_of(std::string("- +\t\0", 5)) != std::string::npos) __builtin_trap();
        (void)*v;
      }
      break;
    case 1: {
      const auto masks = weft::parseAlgoSpec(text);
      if (masks.empty()) __builtin_trap();
      break;
    }
  }
  return 0;
}
