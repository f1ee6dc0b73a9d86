// A named shared-memory segment in /dev/shm. The creator checks that
// /dev/shm can hold it and reserves the pages up front, so a full /dev/shm is
// a clear error at setup rather than a SIGBUS in the middle of a collective.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace weft {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();  // unmaps; unlinks too if still linked and we created it

  static Status create(const std::string& name, size_t bytes, ShmSegment* out);
  static Status open(const std::string& name, ShmSegment* out);
  // Removes the name; the mapping stays valid until every process unmaps.
  void unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // we created it and have not unlinked it yet
};

// The directory shared-memory segments live in (for messages and checks).
const char* shmDirectory();

}  // namespace weft
