// libFuzzer target for the TCP transport's parsers of outside bytes
// (transport/tcp/wire.h) and WEFT_SOCKET_IFNAME / WEFT_SOCKET_FAMILY values
// (bootstrap/ifname.h). The first input byte picks the parser; the rest is
// the input. Build by hand if the fuzz CMake is not there:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
//     tests/fuzz/fuzz_tcp_header.cc src/transport/tcp/wire.cc src/bootstrap/ifname.cc \
//     src/bootstrap/socket.cc src/base/*.cc -o fuzz_tcp_header
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "bootstrap/ifname.h"
#include "transport/tcp/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  if (size == 0) return 0;
  const uint8_t which = data[0] % 5;
  ++data;
  --size;
  switch (which) {
    case 0: {
      tcp::Hello out;
      const tcp::HelloExpect expect{0, 8, 2, tcp::connectionToken(1)};
      (void)tcp::parseHello(data, size, expect, &out);
      break;
    }
    case 1: {
      tcp::FrameHeader out;
      uint64_t seq = 0;
      if (size >= 8) std::memcpy(&seq, data + size - 8, 8);
      const size_t header = sizeof(tcp::FrameHeader);
      (void)tcp::parseDataHeader(data, size < header ? size : header, seq, 256 << 10, &out);
      break;
    }
    case 2: {
      tcp::FrameHeader out;
      (void)tcp::parseControlHeader(data, size, 8, &out);
      break;
    }
    case 3: {
      net::IfaceFilter f;
      const std::string_view spec(reinterpret_cast<const char*>(data), size);
      if (net::parseIfaceFilter(spec, &f).isOk()) (void)f.matches("eth0");
      break;
    }
    default: {
      int family = 0;
      (void)net::parseFamily(std::string_view(reinterpret_cast<const char*>(data), size), &family);
      break;
    }
  }
  return 0;
}
