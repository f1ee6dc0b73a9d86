// Page-aligned heap buffers for weft's own staging and scratch memory.
//
// Why aligned: glibc's memcpy of a large buffer runs 16-18x slower on this
// project's AMD hosts when the destination sits 1-31 bytes past the source
// modulo 4 KiB (a 256 KiB copy: 117-121 us against 6.5-9). `new char[]` and
// std::vector put a large block 16 bytes into a page, so a copy from a
// page-aligned user buffer into it was always in that window (TCP staging
// slots: a chain reduce of 128 KiB-2 MiB ran 2.2-2.4x faster from a user
// buffer shifted by 24 bytes). A page-aligned one meets a page-aligned user
// buffer at the same offset, where the copy runs at full speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace weft {

constexpr size_t kPageBytes = 4096;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using PageBuffer = std::unique_ptr<char[], FreeDeleter>;

// `bytes` (rounded up to whole pages) at a page boundary; null when out of
// memory or bytes is 0.
inline PageBuffer allocatePages(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  return PageBuffer(static_cast<char*>(std::aligned_alloc(kPageBytes, rounded)));
}

// The first page boundary in a vector grown to hold `bytes` after it: for
// per-thread scratch kept in a std::vector between calls.
inline char* pageAlignedIn(std::vector<char>& v, size_t bytes) {
  v.resize(bytes + kPageBytes - 1);
  const auto at = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((kPageBytes - at % kPageBytes) % kPageBytes);
}

}  // namespace weft
