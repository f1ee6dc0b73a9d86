// Fuzzes the bootstrap's wire decoders (src/bootstrap/wire.h): the first
// byte picks the message, the rest is what a stranger or a rank sent.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0];
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  const uint64_t secret = 0x0123456789abcdefull;
  switch (which % 4) {
    case 0: {
      weft::wire::Hello h;
      if (weft::wire::decodeHello(body, n, secret, &h).isOk()) {
        // What the root does with an accepted hello: index its table by rank.
        std::vector<weft::PeerInfo> table(static_cast<size_t>(h.nranks) > 4096 ? 1 : h.nranks);
        if (h.rank < static_cast<int32_t>(table.size())) table[h.rank] = h.info;
      }
      break;
    }
    case 1: {
      weft::wire::StarHello h;
      const int nranks = n > 0 ? body[0] + 1 : 1;
      (void)weft::wire::decodeStarHello(body, n, secret, nranks, &h);
      break;
    }
    case 2:
      (void)weft::wire::decodeGatherHeader(body, n, 64);
      break;
    case 3: {
      std::vector<weft::PeerInfo> table;
      const int nranks =
          n >= sizeof(weft::PeerInfo) ? static_cast<int>(n / sizeof(weft::PeerInfo)) : 1;
      (void)weft::wire::decodePeerTable(body, n, nranks, &table);
      break;
    }
  }
  return 0;
}
