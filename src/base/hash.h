// FNV-1a over bytes: cheap and the same in every process, build and host,
// for values that ranks derive alike without talking (ports, secrets, host
// identities, settings to compare). Not for inputs an adversary chooses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

// The basis weft's bootstrap has always hashed from (FNV's offset basis
// with its last digit dropped); changing it changes every derived port and
// secret, so ranks of different builds would no longer agree.
inline constexpr uint64_t kBootstrapHashBasis = 1469598103934665603ull;
// FNV's own 64-bit offset basis.
inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;

inline uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(std::string_view text, uint64_t h = kBootstrapHashBasis) {
  return fnv1a(h, text.data(), text.size());
}

}  // namespace weft
