#include "transport/shm/shm_transport.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {
constexpr uint64_t kSegmentMagic = 0x7765667473686d31ull;  // "weftshm1"
constexpr size_t kPage = 4096;
constexpr uint32_t kMaxSlots = 64;

constexpr uint64_t kPublishedFlag = 1ull << 63;
constexpr uint64_t kDescriptorMagic = 0x7765667470756231ull;  // "weftpub1"

// What a published slot holds instead of data.
struct PublishedRef {
  uint64_t magic;
  uint64_t address;
  uint64_t bytes;
};

// A word every process can read in its peers to test cross-memory attach.
// Atomic: communicators initialised on several threads of one process (as
// ncclCommInitAll does) all store it.
std::atomic<uint64_t> crossMemoryProbe{0};
static_assert(sizeof(crossMemoryProbe) == sizeof(uint64_t), "peers read it as a plain word");

// The abort word: 0, or (reason << 24) | (1 + the rank that poisoned).
constexpr uint32_t kAbortRankMask = (1u << 24) - 1;
constexpr int kAbortCodeShift = 24;

struct SegmentHeader {
  uint64_t magic;
  std::atomic<uint32_t> abortedBy;  // the abort word
  std::atomic<uint32_t> closed;     // the owner destroyed its communicator normally
};
}  // namespace

struct ShmFifo {
  alignas(64) std::atomic<uint64_t> head;  // written by the sender
  alignas(64) std::atomic<uint64_t> tail;  // written by the receiver
  alignas(64) uint64_t bytes[kMaxSlots];   // payload size per slot, written by the sender
};
static_assert(sizeof(ShmFifo) <= kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

namespace {

size_t roundUp(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

size_t fifoBytes(const ShmOptions& o) {
  return kPage + o.slots * o.slotBytes;
}

// Where the FIFO carrying peer -> owner traffic sits in owner's segment.
size_t fifoOffset(int owner, int peer, const ShmOptions& o) {
  const int index = peer < owner ? peer : peer - 1;
  return kPage + static_cast<size_t>(index) * fifoBytes(o);
}

// Maps a FIFO's pages into this process now. posix_fallocate reserved them
// (segment.cc), but each page was still mapped at its first touch, and a
// slot is first touched as deep as a message reaches: a collective that
// first sends 32 KiB over a pair of ranks paid the faults within its call
// (4 ranks on 2 CPUs, recursive-doubling allreduce at 32 KiB after ring
// calls at 16 MiB: 21.8 us; 14.3 with these FIFOs mapped, median of 7).
// Only the FIFOs this rank uses, not the peers' whole segments, which hold
// the FIFOs of every pair. Best effort: a kernel without
// MADV_POPULATE_WRITE (before 5.14) maps them at first touch as before.
void mapNow(char* fifo, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(fifo) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(fifo) + bytes;
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)fifo;
  (void)bytes;
#endif
}

std::string segmentName(uint64_t commTag, int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "/weft-%016" PRIx64 "-%d", commTag, rank);
  return name;
}

}  // namespace

ShmOptions ShmOptions::fromEnv() {
  ShmOptions o;
  o.slots = static_cast<uint32_t>(
      std::clamp<int64_t>(envInt("SHM_SLOTS", o.slots), 2, static_cast<int64_t>(kMaxSlots)));
  o.slotBytes = roundUp(std::max<uint64_t>(envBytes("SHM_SLOT_BYTES", o.slotBytes), 4096), 64);
  o.direct = envInt("SHM_DIRECT", 1) != 0;
  o.directMinBytes = envBytes("SHM_DIRECT_MIN", o.directMinBytes);
  return o;
}

ShmSendChannel::ShmSendChannel(ShmFifo* fifo, char* slots, uint32_t nslots, size_t slotBytes,
                               bool direct)
    : direct_(direct), fifo_(fifo), slots_(slots), nslots_(nslots), slotBytes_(slotBytes) {
  head_ = fifo_->head.load(std::memory_order_relaxed);
  tailSeen_ = fifo_->tail.load(std::memory_order_acquire);
}

void* ShmSendChannel::tryAcquire() {
  if (head_ - tailSeen_ >= nslots_) {
    tailSeen_ = fifo_->tail.load(std::memory_order_acquire);
    stalled_ = head_ - tailSeen_ >= nslots_;
    if (stalled_) return nullptr;
  }
  return slots_ + (head_ % nslots_) * slotBytes_;
}

void ShmSendChannel::commit(size_t bytes) {
  fifo_->bytes[head_ % nslots_] = bytes;
  ++head_;
  fifo_->head.store(head_, std::memory_order_release);
}

ShmRecvChannel::ShmRecvChannel(ShmFifo* fifo, char* slots, uint32_t nslots, size_t slotBytes,
                               int peerPid)
    : peerPid_(peerPid), fifo_(fifo), slots_(slots), nslots_(nslots), slotBytes_(slotBytes) {
  tail_ = fifo_->tail.load(std::memory_order_relaxed);
  headSeen_ = fifo_->head.load(std::memory_order_acquire);
}

void ShmSendChannel::publish(const void* src, size_t bytes) {
  auto* ref = reinterpret_cast<PublishedRef*>(slots_ + (head_ % nslots_) * slotBytes_);
  ref->magic = kDescriptorMagic;
  ref->address = reinterpret_cast<uint64_t>(src);
  ref->bytes = bytes;
  fifo_->bytes[head_ % nslots_] = bytes | kPublishedFlag;
  ++head_;
  fifo_->head.store(head_, std::memory_order_release);
}

bool ShmSendChannel::drained() {
  tailSeen_ = fifo_->tail.load(std::memory_order_acquire);
  stalled_ = tailSeen_ != head_;
  return !stalled_;
}

const void* ShmRecvChannel::tryPeek(size_t* bytes) {
  if (tail_ == headSeen_) {
    headSeen_ = fifo_->head.load(std::memory_order_acquire);
    stalled_ = tail_ == headSeen_;
    if (stalled_) return nullptr;
  }
  const uint64_t raw = fifo_->bytes[tail_ % nslots_];
  peekedPublished_ = (raw & kPublishedFlag) != 0;
  *bytes = raw & ~kPublishedFlag;
  return slots_ + (tail_ % nslots_) * slotBytes_;
}

Status ShmRecvChannel::readPublished(void* dst, size_t offset, size_t bytes) {
  const auto* ref = reinterpret_cast<const PublishedRef*>(slots_ + (tail_ % nslots_) * slotBytes_);
  if (!peekedPublished_ || ref->magic != kDescriptorMagic || offset > ref->bytes ||
      bytes > ref->bytes - offset)
    return makeError(weftInternalError,
                     "bad single-copy reference from a peer (offset %zu, %zu bytes)", offset,
                     bytes);
  char* out = static_cast<char*>(dst);
  uint64_t from = ref->address + offset;
  while (bytes > 0) {
    iovec local{out, bytes};
    iovec remote{reinterpret_cast<void*>(from), bytes};
    const ssize_t n = process_vm_readv(peerPid_, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      // ESRCH: the peer is gone. EFAULT: its buffer is, most often because
      // the peer is being killed and its memory was torn down before its
      // pid went; either way the peer side failed, as it did for n == 0.
      const int err = n < 0 ? errno : 0;
      const bool peerSide = err == 0 || err == ESRCH || err == EFAULT;
      return makeError(peerSide ? weftRemoteError : weftSystemError,
                       "single-copy read from pid %d failed: %s%s", peerPid_,
                       err ? strerror(err) : "nothing read",
                       peerSide ? " (the peer died or its buffer went away)" : "");
    }
    out += n;
    from += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return Status::ok();
}

void ShmRecvChannel::release() {
  ++tail_;
  fifo_->tail.store(tail_, std::memory_order_release);
}

Status ShmTransport::create(Bootstrap& bootstrap, const ShmOptions& options,
                            const std::vector<bool>& onShm, std::unique_ptr<ShmTransport>* out) {
  const int rank = bootstrap.rank();
  const int nranks = bootstrap.nranks();
  for (int p = 0; p < nranks; ++p)
    if (onShm[p] && bootstrap.peers()[p].hostHash != bootstrap.peers()[rank].hostHash)
      return makeError(weftInternalError, "rank %d is on another host than rank %d", p, rank);

  std::unique_ptr<ShmTransport> t(new ShmTransport());
  t->rank_ = rank;
  t->nranks_ = nranks;
  t->options_ = options;
  t->segments_.resize(nranks);

  const size_t perFifo = fifoBytes(options);
  const size_t bytes = kPage + static_cast<size_t>(std::max(nranks - 1, 0)) * perFifo;
  if (options.slotBytes > (SIZE_MAX / 2) / options.slots / std::max(nranks, 1))
    return makeError(weftInvalidArgument, "WEFT_SHM_SLOT_BYTES x WEFT_SHM_SLOTS is too large");

  // Segment names must be unique to this communicator: two jobs can share a
  // secret (one derived from the same WEFT_ADDR) and a host. Rank 0 draws a
  // random name for all.
  std::vector<uint64_t> draws(nranks);
  draws[rank] = rank == 0 ? randomU64() : 0;
  WEFT_RETURN_IF_ERROR(bootstrap.allGather(draws.data(), sizeof(uint64_t)));
  const uint64_t commTag = draws[0];

  // Step 1: every rank makes the segment for its incoming FIFOs.
  Status made = ShmSegment::create(segmentName(commTag, rank), bytes, &t->segments_[rank]);
  if (made.isOk()) {
    auto* header = new (t->segments_[rank].data()) SegmentHeader();
    header->magic = kSegmentMagic;
    for (int peer = 0; peer < nranks; ++peer) {
      if (peer == rank) continue;
      new (static_cast<char*>(t->segments_[rank].data()) + fifoOffset(rank, peer, options))
          ShmFifo();
    }
  }
  WEFT_RETURN_IF_ERROR(bootstrap.agree(made, "create its shared-memory segment"));

  // Step 2: map every peer's segment.
  Status opened;
  for (int peer = 0; peer < nranks && opened.isOk(); ++peer) {
    if (peer == rank || !onShm[peer]) continue;
    opened = ShmSegment::open(segmentName(commTag, peer), &t->segments_[peer]);
    if (opened.isOk() && t->segments_[peer].size() != bytes)
      opened = makeError(weftInvalidUsage,
                         "rank %d's shared-memory segment has another size: do all ranks use the "
                         "same WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES?",
                         peer);
  }
  WEFT_RETURN_IF_ERROR(bootstrap.agree(opened, "map its peers' shared-memory segments"));

  // Step 3: everyone has everything mapped; the names can go.
  t->segments_[rank].unlink();

  // Single copy needs every rank to read every peer (same user, ptrace
  // policy, no seccomp filter): test it and agree.
  if (t->options_.direct && nranks > 1) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    crossMemoryProbe.store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
    struct Probe {
      uint64_t address;
      int32_t pid;
      int32_t ok;
    };
    std::vector<Probe> probes(nranks);
    probes[rank] = {reinterpret_cast<uint64_t>(&crossMemoryProbe), getpid(), 1};
    WEFT_RETURN_IF_ERROR(bootstrap.allGather(probes.data(), sizeof(Probe)));
    int32_t ok = 1;
    for (int peer = 0; peer < nranks; ++peer) {
      if (peer == rank || !onShm[peer]) continue;
      uint64_t got = 0;
      iovec local{&got, sizeof got};
      iovec remote{reinterpret_cast<void*>(probes[peer].address), sizeof got};
      if (process_vm_readv(probes[peer].pid, &local, 1, &remote, 1, 0) != sizeof got ||
          got != static_cast<uint64_t>(probes[peer].pid))
        ok = 0;
    }
    std::vector<int32_t> oks(nranks);
    oks[rank] = ok;
    WEFT_RETURN_IF_ERROR(bootstrap.allGather(oks.data(), sizeof(int32_t)));
    for (int32_t v : oks) t->options_.direct = t->options_.direct && v != 0;
    if (!t->options_.direct)
      WEFT_INFO(kLogShm, "single-copy (cross-memory attach) unavailable; using the FIFOs only");
  }

  t->send_.resize(nranks);
  t->recv_.resize(nranks);
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer == rank || !onShm[peer]) continue;
    char* theirs = static_cast<char*>(t->segments_[peer].data()) + fifoOffset(peer, rank, options);
    char* mine = static_cast<char*>(t->segments_[rank].data()) + fifoOffset(rank, peer, options);
    mapNow(theirs, fifoBytes(options));
    mapNow(mine, fifoBytes(options));
    t->send_[peer] =
        std::make_unique<ShmSendChannel>(reinterpret_cast<ShmFifo*>(theirs), theirs + kPage,
                                         options.slots, options.slotBytes, t->options_.direct);
    t->recv_[peer] = std::make_unique<ShmRecvChannel>(
        reinterpret_cast<ShmFifo*>(mine), mine + kPage, options.slots, options.slotBytes,
        bootstrap.peers()[peer].pid);
  }
  WEFT_INFO(kLogShm,
            "shm transport: %d ranks, %u slots of %zu KiB per peer, %.1f MiB segment, single "
            "copy %s",
            nranks, options.slots, options.slotBytes >> 10, bytes / 1048576.0,
            t->options_.direct ? "on" : "off");
  *out = std::move(t);
  return Status::ok();
}

ShmTransport::~ShmTransport() = default;

int ShmTransport::abortedBy() const {
  const auto* header = static_cast<const SegmentHeader*>(segments_[rank_].data());
  return static_cast<int>(header->abortedBy.load(std::memory_order_acquire) & kAbortRankMask);
}

weftResult_t ShmTransport::abortCode() const {
  const auto* header = static_cast<const SegmentHeader*>(segments_[rank_].data());
  const uint32_t word = header->abortedBy.load(std::memory_order_acquire);
  return word == 0 ? weftSuccess : static_cast<weftResult_t>(word >> kAbortCodeShift);
}

void ShmTransport::markClosed() {
  static_cast<SegmentHeader*>(segments_[rank_].data())->closed.store(1, std::memory_order_release);
}

bool ShmTransport::peerClosed(int peer) const {
  const auto* header = static_cast<const SegmentHeader*>(segments_[peer].data());
  return header != nullptr && header->closed.load(std::memory_order_acquire) != 0;
}

void ShmTransport::poison(int byRank, weftResult_t why) {
  // One word holds both, so a reader never sees a rank without its reason.
  const uint32_t word = (static_cast<uint32_t>(why) << kAbortCodeShift) |
                        (static_cast<uint32_t>(byRank + 1) & kAbortRankMask);
  for (auto& seg : segments_) {
    if (seg.data() == nullptr) continue;
    auto* header = static_cast<SegmentHeader*>(seg.data());
    uint32_t expected = 0;
    header->abortedBy.compare_exchange_strong(expected, word);
  }
}

}  // namespace weft
