// What travels on weft's TCP connections, and the pure functions that check
// it. Everything here parses bytes that arrive from outside the job, so it
// never trusts a length or an index: the fuzz target tests/fuzz/
// fuzz_tcp_header.cc feeds it arbitrary bytes.
//
// A connection starts with a Hello from the connecting rank (for data
// sockets the lower rank of the pair; for control sockets the sender):
// magic, version, the kind of connection (data socket k, or control), the
// two ranks, and a token derived from the communicator's secret. After it:
//  - a data socket carries frames { FrameHeader, payload } in each direction,
//    the two directions independent; a frame's sequence number is its slot
//    number in the channel, which may travel on any of the pair's sockets,
//    each socket's numbers rising;
//  - the control socket carries payload-less frames: kAbort (the sender
//    poisoned the communicator) and kClose (it leaves normally).
// All integers are little-endian (every supported host is).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace weft::tcp {

constexpr uint32_t kHelloMagic = 0x6c6c6568;  // "hell"
constexpr uint32_t kFrameMagic = 0x6d617266;  // "fram"
// 4: 64-byte frame headers; 3: any socket carries any slot; 2: both directions
constexpr uint16_t kWireVersion = 4;

enum class ConnKind : uint16_t { kData = 1, kControl = 2 };
enum class FrameType : uint16_t { kData = 1, kAbort = 2, kClose = 3 };

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;  // ConnKind
  int32_t fromRank;
  int32_t toRank;
  uint32_t socketIndex;  // data: which of the peer's nsocks sockets
  uint32_t nsocks;       // data sockets per direction the sender uses
  uint64_t token;
};
static_assert(sizeof(Hello) == 32);

// 64 bytes, of which 40 reserved (zero), for where it puts the payload. A
// frame goes out in one sendmsg, header first, and the kernel copies both
// into its buffer back to back, so the payload lands `sizeof(FrameHeader)`
// bytes past where the header did, which here was a page boundary. A copy
// whose destination runs a few bytes (1-31) ahead of its source modulo
// 4 KiB stalls: each load waits on the store just before it, which the CPU
// takes for the same address (4K aliasing). With a 24-byte header every
// page-aligned buffer and every one glibc's mmap hands out (16 bytes into a
// page) fell in that window: sending a page-aligned 256 KiB frame took 96 us
// in the kernel against 39 from a buffer elsewhere (strace -c, 2 ranks over
// TCP loopback), and rhd reduce-scatter of 512 KiB and direct allreduce of
// 256 KiB ran 2.2-2.3x faster from a source shifted by 24 bytes. With 64 bytes the
// window is a source 33-63 bytes into a page, which no common allocator's
// large buffers start at.
struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;  // FrameType
  uint64_t
      seq;  // data: the channel's slot number; abort: 1 + the rank that poisoned, | reason << 32
  uint64_t bytes;
  uint8_t reserved[40] = {};
};
static_assert(sizeof(FrameHeader) == 64);

// The token a connection presents: a keyed hash of the communicator's secret,
// so the secret itself never travels on the transport's sockets.
uint64_t connectionToken(uint64_t secret);

// What the accepting rank expects of a Hello.
struct HelloExpect {
  int32_t selfRank;
  int32_t nranks;
  uint32_t nsocks;
  uint64_t token;
};

// Checks a received Hello (exactly `len` bytes at `data`). On success *out
// holds it; any mismatch (short, magic, version, token, ranks out of range,
// socket index) is an error that names the field.
Status parseHello(const void* data, size_t len, const HelloExpect& expect, Hello* out);

// Checks a data frame header on a data socket: its slot number must be at
// least `minSeq` (one past the last on this socket), and its payload at most
// maxBytes (the slot size). Where the receiver's window stands is its own check.
Status parseDataHeader(const void* data, size_t len, uint64_t minSeq, size_t maxBytes,
                       FrameHeader* out);

// Checks a control frame header; abort frames carry 1 + a rank < nranks in
// seq's low 32 bits and the reason (a weftResult_t) in its high 32 bits.
Status parseControlHeader(const void* data, size_t len, int nranks, FrameHeader* out);

}  // namespace weft::tcp
