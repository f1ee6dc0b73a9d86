// The interface every transport gives the algorithm layer: one-directional,
// ordered FIFOs of fixed-size slots between two ranks.
//
// Slots let an algorithm write straight into the transport's buffer (a
// fused receive-reduce-send writes its result into the next peer's slot) and
// read straight out of it, so no extra copy sits between algorithm and wire.
// The calls never block: an algorithm that finds no slot or no data calls
// Progress::idle() (algorithms/progress.h), which backs off and checks for
// abort, timeout and dead peers.
#pragma once

#include <cstddef>
#include <cstring>

#include "base/status.h"
#include "kernels/reduce.h"

namespace weft {

class SendChannel {
 public:
  virtual ~SendChannel() = default;
  // A writable slot of slotBytes() bytes, or nullptr while the FIFO is full.
  // Calling it again before commit() returns the same slot.
  virtual void* tryAcquire() = 0;
  // Publishes the acquired slot holding `bytes` (<= slotBytes()) bytes.
  virtual void commit(size_t bytes) = 0;
  virtual size_t slotBytes() const = 0;

  // Commits the acquired `slot` with `bytes` taken from `src`. A transport
  // that can send straight from the caller's memory (TCP: the socket reads
  // `src`) skips the copy into the slot; `src` must then stay unchanged until
  // drained() or the end of the collective (Transports::flush). Use it only
  // where the collective never writes `src` before then.
  virtual void commitFrom(void* slot, const void* src, size_t bytes) {
    if (bytes > 0 && slot != src) kernels::copyCached(slot, src, bytes);
    commit(bytes);
  }
  // True while some commitFrom() source may still be read (moves what it
  // can first); false once the caller may write those sources again.
  virtual bool sourcesInUse() { return false; }
  // True when commitFrom() reads `src` after it returns (it does not copy).
  virtual bool readsSourceLater() const { return false; }
  // Where it does: whether a committed chunk the wire has not taken yet
  // still reads any of [p, p + bytes) (moves what it can first).
  virtual bool readsFrom(const void* p, size_t bytes) { return false; }
  // Chunks not yet taken whose source lies within [from, from + bytes) read
  // the same bytes at `to` from now on (the caller copied them there and
  // will overwrite `from`).
  virtual void moveSources(const void* from, size_t bytes, const void* to) {}

  // Single copy. Where the transport can let the receiver read this
  // process's memory (cross-memory attach), publish() puts a reference to
  // `bytes` at `src` in the acquired slot instead of data, and the receiver
  // copies straight from `src` to its destination. `src` must stay unchanged
  // until drained() is true.
  virtual bool canPublish() const { return false; }
  virtual void publish(const void* src, size_t bytes) {}
  // True once the receiver has released every slot committed so far.
  virtual bool drained() = 0;

  // True when the last tryAcquire()/drained() found the receiver behind: the
  // flight recorder's "waiting on" (read on the slow path only). A transport
  // that does not set it just reports no peers.
  bool stalled() const { return stalled_; }
  void clearStalled() { stalled_ = false; }

 protected:
  bool stalled_ = false;
};

class RecvChannel {
 public:
  virtual ~RecvChannel() = default;
  // The oldest unread slot and its byte count, or nullptr while none arrived.
  // Calling it again before release() returns the same slot.
  virtual const void* tryPeek(size_t* bytes) = 0;
  // Hands the slot returned by tryPeek back to the sender.
  virtual void release() = 0;

  // True when the slot tryPeek returned holds a published reference (then
  // tryPeek's byte count is the published size) rather than data.
  virtual bool peekedPublished() const { return false; }
  // Copies `bytes` from `offset` into the published buffer of the peeked
  // slot straight into dst.
  virtual Status readPublished(void* dst, size_t offset, size_t bytes) {
    return Status(weftInternalError, "this channel has no single-copy path");
  }

  // Landing. A transport that reads from a socket can put a coming slot's
  // payload straight where the algorithm wants it, and tryPeek() then returns
  // that address (compare it with the destination to skip the copy). Each
  // land() names the next slot not yet named, counting from the oldest
  // unreleased one; dst == nullptr keeps that slot in the channel's buffer.
  // A payload larger than `capacity`, or one already received, stays in the
  // buffer. clearLandings() forgets every name (end of a collective): no
  // byte is written to a named address after it.
  virtual bool canLand() const { return false; }
  virtual void land(void* dst, size_t capacity) {}
  virtual void clearLandings() {}

  // True when the last tryPeek() found nothing (see SendChannel::stalled).
  bool stalled() const { return stalled_; }
  void clearStalled() { stalled_ = false; }

 protected:
  bool stalled_ = false;
};

}  // namespace weft
