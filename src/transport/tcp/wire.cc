#include "transport/tcp/wire.h"

#include <cstring>

namespace weft::tcp {

uint64_t connectionToken(uint64_t secret) {
  // splitmix64 over the secret mixed with a domain constant: not the secret,
  // and not the bootstrap's use of it.
  uint64_t z = secret ^ 0x7463702d746f6b6eull;  // "tcp-tokn"
  for (int i = 0; i < 3; ++i) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
  }
  return z;
}

Status parseHello(const void* data, size_t len, const HelloExpect& expect, Hello* out) {
  if (len != sizeof(Hello))
    return makeError(weftRemoteError, "connection hello is %zu bytes, not %zu", len, sizeof(Hello));
  Hello h;
  std::memcpy(&h, data, sizeof h);
  if (h.magic != kHelloMagic) return Status(weftRemoteError, "connection hello has a bad magic");
  if (h.version != kWireVersion)
    return makeError(weftRemoteError, "connection hello has wire version %u, this rank speaks %u",
                     h.version, kWireVersion);
  if (h.token != expect.token)
    return Status(weftRemoteError,
                  "connection hello presents a wrong token (another job, or not weft)");
  if (h.toRank != expect.selfRank)
    return makeError(weftRemoteError, "connection hello is meant for rank %d, this is rank %d",
                     h.toRank, expect.selfRank);
  if (h.fromRank < 0 || h.fromRank >= expect.nranks || h.fromRank == expect.selfRank)
    return makeError(weftRemoteError, "connection hello comes from invalid rank %d", h.fromRank);
  if (h.kind == static_cast<uint16_t>(ConnKind::kData)) {
    if (h.nsocks != expect.nsocks)
      return makeError(weftInvalidUsage,
                       "rank %d uses %u sockets per peer, this rank %u: set the same "
                       "WEFT_NSOCKS_PERTHREAD and WEFT_SOCKET_NTHREADS on every rank",
                       h.fromRank, h.nsocks, expect.nsocks);
    if (h.socketIndex >= expect.nsocks)
      return makeError(weftRemoteError, "connection hello names socket %u of %u", h.socketIndex,
                       expect.nsocks);
  } else if (h.kind != static_cast<uint16_t>(ConnKind::kControl)) {
    return makeError(weftRemoteError, "connection hello has unknown kind %u", h.kind);
  }
  *out = h;
  return Status::ok();
}

namespace {
Status parseCommon(const void* data, size_t len, FrameHeader* h) {
  if (len != sizeof(FrameHeader))
    return makeError(weftRemoteError, "frame header is %zu bytes, not %zu", len,
                     sizeof(FrameHeader));
  std::memcpy(h, data, sizeof *h);
  if (h->magic != kFrameMagic) return Status(weftRemoteError, "frame header has a bad magic");
  if (h->version != kWireVersion)
    return makeError(weftRemoteError, "frame header has wire version %u", h->version);
  for (uint8_t b : h->reserved)
    if (b != 0) return Status(weftRemoteError, "frame header has reserved bytes that are not zero");
  return Status::ok();
}
}  // namespace

Status parseDataHeader(const void* data, size_t len, uint64_t minSeq, size_t maxBytes,
                       FrameHeader* out) {
  FrameHeader h;
  WEFT_RETURN_IF_ERROR(parseCommon(data, len, &h));
  if (h.type != static_cast<uint16_t>(FrameType::kData))
    return makeError(weftRemoteError, "unexpected frame type %u on a data socket", h.type);
  if (h.seq < minSeq || h.seq == UINT64_MAX)
    return makeError(
        weftRemoteError, "data frame has sequence number %llu where at least %llu was due",
        static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(minSeq));
  if (h.bytes > maxBytes)
    return makeError(weftRemoteError, "data frame claims %llu bytes; slots hold %zu",
                     static_cast<unsigned long long>(h.bytes), maxBytes);
  *out = h;
  return Status::ok();
}

Status parseControlHeader(const void* data, size_t len, int nranks, FrameHeader* out) {
  FrameHeader h;
  WEFT_RETURN_IF_ERROR(parseCommon(data, len, &h));
  if (h.bytes != 0)
    return makeError(weftRemoteError, "control frame claims a %llu-byte payload",
                     static_cast<unsigned long long>(h.bytes));
  if (h.type == static_cast<uint16_t>(FrameType::kAbort)) {
    // Low 32 bits: 1 + the rank; high 32 bits: why (a weftResult_t).
    const uint64_t by = h.seq & 0xffffffffu, why = h.seq >> 32;
    if (by == 0 || by > static_cast<uint64_t>(nranks))
      return makeError(weftRemoteError, "abort frame names rank %lld",
                       static_cast<long long>(by) - 1);
    if (why == weftSuccess || why >= weftNumResults)
      return makeError(weftRemoteError, "abort frame gives reason %llu",
                       static_cast<unsigned long long>(why));
  } else if (h.type != static_cast<uint16_t>(FrameType::kClose)) {
    return makeError(weftRemoteError, "unexpected frame type %u on a control socket", h.type);
  }
  *out = h;
  return Status::ok();
}

}  // namespace weft::tcp
