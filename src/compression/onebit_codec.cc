// The 1-bit codec. Wire layout of a chunk of capacity C with blocks of B
// elements: ceil(C/B) fp32 scales, then ceil(C/8) bytes of sign bits
// (element j is bit j%8 of byte j/8; 1 means >= 0). Blocks past the end of
// the data have scale 0.
#include <cmath>
#include <cstring>

#include "compression/codec.h"

namespace weft::compression {
namespace {

class OneBitCodec final : public ChunkCodec {
 public:
  explicit OneBitCodec(size_t block) : block_(block) {}
  const char* name() const override { return "onebit"; }
  size_t wireBytes(size_t capacity) const override {
    return numBlocks(capacity) * sizeof(float) + (capacity + 7) / 8;
  }

  void encode(const float* x, float* residual, size_t n, size_t capacity,
              uint8_t* wire) const override {
    float* scales = reinterpret_cast<float*>(wire);
    uint8_t* signs = wire + numBlocks(capacity) * sizeof(float);
    std::memset(wire, 0, wireBytes(capacity));
    for (size_t b = 0, start = 0; start < n; ++b, start += block_) {
      const size_t m = std::min(block_, n - start);
      const float* a = x + start;
      if (residual != nullptr) {
        float* r = residual + start;
        for (size_t j = 0; j < m; ++j) r[j] += a[j];
        a = r;
      }
      float absSum = 0;
      for (size_t j = 0; j < m; ++j) absSum += std::fabs(a[j]);
      const float s = absSum / static_cast<float>(m);
      std::memcpy(scales + b, &s, sizeof(float));
      uint8_t* out = signs + start / 8;
      for (size_t j = 0; j < m; j += 8) {
        const size_t k = std::min<size_t>(8, m - j);
        unsigned byte = 0;
        for (size_t t = 0; t < k; ++t) byte |= static_cast<unsigned>(a[j + t] >= 0.0f) << t;
        out[j / 8] = static_cast<uint8_t>(byte);
      }
      if (residual != nullptr) {
        float* r = residual + start;
        for (size_t j = 0; j < m; ++j) r[j] -= r[j] >= 0.0f ? s : -s;
      }
    }
  }

  void decode(const uint8_t* wire, size_t n, size_t capacity, float* out) const override {
    run<false>(wire, n, capacity, out);
  }
  void decodeAdd(const uint8_t* wire, size_t n, size_t capacity, float* acc) const override {
    run<true>(wire, n, capacity, acc);
  }

 private:
  size_t numBlocks(size_t n) const { return (n + block_ - 1) / block_; }

  template <bool kAdd>
  void run(const uint8_t* wire, size_t n, size_t capacity, float* out) const {
    const float* scales = reinterpret_cast<const float*>(wire);
    const uint8_t* signs = wire + numBlocks(capacity) * sizeof(float);
    for (size_t b = 0, start = 0; start < n; ++b, start += block_) {
      const size_t m = std::min(block_, n - start);
      float s;
      std::memcpy(&s, scales + b, sizeof(float));
      const uint8_t* in = signs + start / 8;
      float* o = out + start;
      for (size_t j = 0; j < m; ++j) {
        const float v = ((in[j / 8] >> (j % 8)) & 1u) ? s : -s;
        if constexpr (kAdd)
          o[j] += v;
        else
          o[j] = v;
      }
    }
  }

  size_t block_;
};

}  // namespace

std::unique_ptr<ChunkCodec> makeOneBitCodec(size_t block) {
  return std::make_unique<OneBitCodec>(block);
}

}  // namespace weft::compression
