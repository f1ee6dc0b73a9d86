// A zeroed float array for state that is streamed through every step (the
// PowerSGD residual): large ones sit in 2 MiB-aligned memory that the kernel
// is asked to back with transparent huge pages, so that a sweep takes a TLB
// miss per 2 MiB instead of per 4 KiB.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace weft::compression {

class BigBuffer {
 public:
  BigBuffer() = default;
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;
  ~BigBuffer() { clear(); }

  // n zeroed elements; throws std::bad_alloc.
  void assign(size_t n) {
    clear();
    if (n == 0) return;
    const size_t bytes = n * sizeof(float);
    const size_t align = bytes >= kHuge ? kHuge : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr) throw std::bad_alloc();
    // Before the first touch, so that the pages are huge from the start.
    if (align == kHuge) (void)madvise(p, rounded, MADV_HUGEPAGE);
    std::memset(p, 0, rounded);
    data_ = static_cast<float*>(p);
    size_ = n;
  }
  void clear() {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
  }
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace weft::compression
