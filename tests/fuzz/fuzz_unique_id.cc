// Fuzzes decoding a unique id (weftCommInitRank's argument, often passed
// between processes by the user's own channel): any 128 bytes must give a
// clean error or an address that round-trips.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/bootstrap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weftUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::memcpy(id.internal, data, size < sizeof id ? size : sizeof id);
  weft::net::SockAddr root;
  uint64_t secret = 0;
  if (!weft::decodeUniqueId(id, &root, &secret).isOk()) return 0;
  (void)root.toString();
  weftUniqueId again;
  if (!weft::encodeUniqueId(root, secret, &again).isOk()) __builtin_trap();
  weft::net::SockAddr root2;
  uint64_t secret2 = 0;
  if (!weft::decodeUniqueId(again, &root2, &secret2).isOk() || secret2 != secret ||
      root2.len != root.len || std::memcmp(&root2.storage, &root.storage, root.len) != 0)
    __builtin_trap();
  return 0;
}
