#include "bootstrap/wire.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace weft::wire {

static_assert(sizeof(UniqueIdLayout) <= WEFT_UNIQUE_ID_BYTES);
static_assert(sizeof(sockaddr_in6) <= sizeof(PeerInfo::addr));

bool sameSecret(uint64_t a, uint64_t b) {
  volatile uint64_t diff = a ^ b;
  return diff == 0;
}

bool validAddress(const uint8_t* addr, uint32_t len) {
  if (len < sizeof(sa_family_t) || len > sizeof(PeerInfo::addr)) return false;
  sa_family_t family;
  std::memcpy(&family, addr, sizeof family);
  if (family == AF_INET) return len == sizeof(sockaddr_in);
  if (family == AF_INET6) return len == sizeof(sockaddr_in6);
  return false;
}

Status decodeHello(const void* bytes, size_t n, uint64_t secret, Hello* out) {
  if (n != sizeof(Hello))
    return makeError(weftRemoteError, "hello of %zu bytes, expected %zu", n, sizeof(Hello));
  Hello h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kHelloMagic) return Status(weftRemoteError, "not a weft hello (bad magic)");
  if (!sameSecret(h.secret, secret))
    return Status(weftRemoteError, "wrong secret (not a rank of this job)");
  if (h.nranks <= 0 || h.nranks > kMaxRanks || h.rank < 0 || h.rank >= h.nranks)
    return makeError(weftRemoteError, "rank %d of %d is out of range", h.rank, h.nranks);
  if (h.info.rank != h.rank || !validAddress(h.info.addr, h.info.addrLen))
    return Status(weftRemoteError, "hello carries a bad rank entry or address");
  *out = h;
  return Status::ok();
}

Status decodeStarHello(const void* bytes, size_t n, uint64_t secret, int nranks, StarHello* out) {
  if (n != sizeof(StarHello))
    return makeError(weftRemoteError, "star hello of %zu bytes, expected %zu", n,
                     sizeof(StarHello));
  StarHello h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kStarMagic) return Status(weftRemoteError, "not a weft star hello (bad magic)");
  if (!sameSecret(h.secret, secret))
    return Status(weftRemoteError, "wrong secret (not a rank of this job)");
  if (h.rank <= 0 || h.rank >= nranks)
    return makeError(weftRemoteError, "rank %d is out of range 1..%d", h.rank, nranks - 1);
  *out = h;
  return Status::ok();
}

Status decodeGatherHeader(const void* bytes, size_t n, uint64_t expectBytes) {
  if (n != sizeof(GatherHeader)) return makeError(weftRemoteError, "gather header of %zu bytes", n);
  GatherHeader h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kGatherMagic || h.bytes != expectBytes)
    return makeError(weftInvalidUsage,
                     "sent %llu bytes where %llu were expected (ranks are setting up different "
                     "things)",
                     static_cast<unsigned long long>(h.bytes),
                     static_cast<unsigned long long>(expectBytes));
  return Status::ok();
}

Status decodePeerTable(const void* bytes, size_t n, int nranks, std::vector<PeerInfo>* out) {
  if (nranks <= 0 || nranks > kMaxRanks || n != static_cast<size_t>(nranks) * sizeof(PeerInfo))
    return makeError(weftRemoteError, "rank table of %zu bytes for %d ranks", n, nranks);
  std::vector<PeerInfo> table(nranks);
  std::memcpy(table.data(), bytes, n);
  for (int r = 0; r < nranks; ++r)
    if (table[r].rank != r || !validAddress(table[r].addr, table[r].addrLen))
      return makeError(weftRemoteError, "rank table entry %d is malformed", r);
  *out = std::move(table);
  return Status::ok();
}

}  // namespace weft::wire
