#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Status tooSmall(const std::string& name, size_t bytes, double freeMiB) {
  return makeError(weftSystemError,
                   "weft needs %.1f MiB in %s for shared-memory segment %s but only %.1f MiB are "
                   "free. Enlarge %s (docker run --shm-size=..., or mount -o remount,size=... "
                   "%s) or lower WEFT_SHM_SLOTS / WEFT_SHM_SLOT_BYTES.",
                   bytes / kMiB, shmDirectory(), name.c_str(), freeMiB, shmDirectory(),
                   shmDirectory());
}

}  // namespace

const char* shmDirectory() {
  return "/dev/shm";
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    name_ = std::move(o.name_);
    data_ = o.data_;
    size_ = o.size_;
    linked_ = o.linked_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.linked_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void ShmSegment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

Status ShmSegment::create(const std::string& name, size_t bytes, ShmSegment* out) {
  struct statvfs vfs {};
  if (statvfs(shmDirectory(), &vfs) == 0) {
    const double freeBytes = static_cast<double>(vfs.f_bavail) * vfs.f_frsize;
    if (static_cast<double>(bytes) > freeBytes) return tooSmall(name, bytes, freeBytes / kMiB);
  }
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return makeError(weftSystemError, "cannot create shared-memory segment %s in %s: %s",
                     name.c_str(), shmDirectory(), strerror(errno));
  ShmSegment seg;
  seg.name_ = name;
  seg.linked_ = true;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    return makeError(weftSystemError, "cannot size shared-memory segment %s to %zu bytes: %s",
                     name.c_str(), bytes, strerror(err));
  }
  // Reserve the pages now: tmpfs would otherwise fail later with SIGBUS.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    if (err == ENOSPC) {
      struct statvfs now {};
      statvfs(shmDirectory(), &now);
      return tooSmall(name, bytes, static_cast<double>(now.f_bavail) * now.f_frsize / kMiB);
    }
    return makeError(weftSystemError, "cannot reserve %zu bytes for %s: %s", bytes, name.c_str(),
                     strerror(err));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return makeError(weftSystemError, "cannot map %s (%zu bytes): %s", name.c_str(), bytes,
                     strerror(errno));
  seg.data_ = p;
  seg.size_ = bytes;
  *out = std::move(seg);
  return Status::ok();
}

Status ShmSegment::open(const std::string& name, ShmSegment* out) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return makeError(weftSystemError, "cannot open a peer's shared-memory segment %s: %s",
                     name.c_str(), strerror(errno));
  struct stat st {};
  fstat(fd, &st);
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return makeError(weftSystemError, "cannot map %s: %s", name.c_str(), strerror(errno));
  ShmSegment seg;
  seg.name_ = name;
  seg.data_ = p;
  seg.size_ = bytes;
  *out = std::move(seg);
  return Status::ok();
}

}  // namespace weft
