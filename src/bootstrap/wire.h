// The bootstrap's wire messages and their checks, as pure functions over
// bytes so that they can be fuzzed (tests/fuzz/) and reasoned about apart
// from the sockets. Every message from outside goes through one of these
// before anything in it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"

namespace weft::wire {

constexpr uint32_t kIdMagic = 0x57454654;  // "WEFT"
constexpr uint64_t kHelloMagic = 0x7765667468656c6full;
constexpr uint64_t kTableMagic = 0x7765667474626c65ull;
constexpr uint64_t kStarMagic = 0x7765667473746172ull;
constexpr uint64_t kGatherMagic = 0x7765667467617468ull;
constexpr int32_t kMaxRanks = 1 << 20;

struct UniqueIdLayout {
  uint32_t magic;
  uint32_t addrLen;
  uint64_t secret;
  uint8_t addr[28];
};

// A rank's first message to the rendezvous root.
struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  PeerInfo info;
};

// A rank's first message to rank 0 on the bootstrap star.
struct StarHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t pad;
};

struct GatherHeader {
  uint64_t magic;
  uint64_t bytes;
};

// Compares secrets without an early exit (no timing hint for a guesser).
bool sameSecret(uint64_t a, uint64_t b);
// An address as carried in ids and peer tables: a known family and a length
// that fits. The root reaches every rank through these, so they are checked.
bool validAddress(const uint8_t* addr, uint32_t len);

// Each returns an error saying what is wrong, or fills *out.
Status decodeHello(const void* bytes, size_t n, uint64_t secret, Hello* out);
Status decodeStarHello(const void* bytes, size_t n, uint64_t secret, int nranks, StarHello* out);
Status decodeGatherHeader(const void* bytes, size_t n, uint64_t expectBytes);
// The root's table: nranks PeerInfo, entry r describing rank r.
Status decodePeerTable(const void* bytes, size_t n, int nranks, std::vector<PeerInfo>* out);

}  // namespace weft::wire
