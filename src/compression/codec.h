// Codecs: a buffer of fp32 values (plus its error-feedback residual) in,
// wire bytes out, and back. A codec keeps no state of its own and never talks
// to peers; the residual lives in the caller's state (compressor.h) and the
// bytes travel through a CollRunner (runner.h).
//
// Chunk codecs have a fixed wire size for a chunk of a given capacity, so
// that every rank's piece of an all-to-all or all-gather has the same size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace weft::compression {

class ChunkCodec {
 public:
  virtual ~ChunkCodec() = default;
  virtual const char* name() const = 0;
  // Wire bytes of a chunk that holds up to `capacity` elements.
  virtual size_t wireBytes(size_t capacity) const = 0;
  // Elements per independently coded unit (1-bit: one scale block).
  virtual size_t granule() const = 0;

  // Encodes elements [begin, end) of a chunk into its wire image; begin is a
  // multiple of granule(); x (and residual) point at element `begin`. With a
  // residual r: encodes x + r and leaves r = (x + r) - decode(wire), the
  // error that feedback carries forward. x may alias r.
  virtual void encodeRange(const float* x, float* residual, size_t begin, size_t end,
                           size_t capacity, uint8_t* wire) const = 0;
  // out[0 .. end-begin) = (add ? out + : ) the values elements [begin, end)
  // of the wire image stand for. Combining is decoding with add.
  virtual void decodeRange(const uint8_t* wire, size_t begin, size_t end, size_t capacity,
                           float* out, bool add) const = 0;
  // Zeroes the wire image past element n, so that a short chunk's image is
  // fully defined.
  virtual void zeroUnused(uint8_t* wire, size_t n, size_t capacity) const = 0;

  // Whole-chunk forms: elements [0, n) of a chunk of `capacity`.
  void encode(const float* x, float* residual, size_t n, size_t capacity, uint8_t* wire) const {
    encodeRange(x, residual, 0, n, capacity, wire);
    zeroUnused(wire, n, capacity);
  }
  void decode(const uint8_t* wire, size_t n, size_t capacity, float* out) const {
    decodeRange(wire, 0, n, capacity, out, false);
  }
  void decodeAdd(const uint8_t* wire, size_t n, size_t capacity, float* acc) const {
    decodeRange(wire, 0, n, capacity, acc, true);
  }
};

// fp16 / bf16 cast, round to nearest even: 2 bytes per element. Error per
// element at most half a unit in the last place (2^-11 / 2^-8 relative) for
// values in the normal range.
std::unique_ptr<ChunkCodec> makeHalfCodec();
std::unique_ptr<ChunkCodec> makeBf16Codec();

// 1-bit: one sign bit per element (8 per byte) and one fp32 scale per block
// of `block` elements, the block's mean absolute value (the scale that
// minimises the squared error of scale*sign). Decoded |error| per element is
// at most max(|x|) of its block; squared error per block is
// sum(x^2) - block*scale^2 <= sum(x^2).
std::unique_ptr<ChunkCodec> makeOneBitCodec(size_t block);

}  // namespace weft::compression
