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
  // Encodes x[0..n) into wire (wireBytes(capacity) bytes, n <= capacity; the
  // unused tail is zeroed). With a residual r: encodes x + r and leaves
  // r = (x + r) - decode(wire), the error that feedback carries forward.
  // x may alias r.
  virtual void encode(const float* x, float* residual, size_t n, size_t capacity,
                      uint8_t* wire) const = 0;
  // out[0..n) = the values wire stands for.
  virtual void decode(const uint8_t* wire, size_t n, size_t capacity, float* out) const = 0;
  // Combine: acc[0..n) += the values wire stands for.
  virtual void decodeAdd(const uint8_t* wire, size_t n, size_t capacity, float* acc) const = 0;
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
