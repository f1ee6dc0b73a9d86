// The fp16 / bf16 cast codecs: 2 bytes per element on the wire.
#include <cstring>
#include <vector>

#include "compression/codec.h"
#include "compression/convert.h"

namespace weft::compression {
namespace {

template <bool kBf16>
class CastCodec final : public ChunkCodec {
 public:
  const char* name() const override { return kBf16 ? "bf16" : "fp16"; }
  size_t wireBytes(size_t capacity) const override { return capacity * 2; }

  void encode(const float* x, float* residual, size_t n, size_t capacity,
              uint8_t* wire) const override {
    uint16_t* w = reinterpret_cast<uint16_t*>(wire);
    if (residual == nullptr) {
      narrow(x, n, w);
    } else {
      // x + r, rounded; r keeps what rounding dropped. In blocks, so that the
      // sum stays in cache between the two passes.
      constexpr size_t kBlock = 2048;
      float sum[kBlock];
      float back[kBlock];
      for (size_t i = 0; i < n; i += kBlock) {
        const size_t m = std::min(kBlock, n - i);
        for (size_t j = 0; j < m; ++j) sum[j] = x[i + j] + residual[i + j];
        narrow(sum, m, w + i);
        widen(w + i, m, back);
        for (size_t j = 0; j < m; ++j) residual[i + j] = sum[j] - back[j];
      }
    }
    std::memset(w + n, 0, (capacity - n) * 2);
  }

  void decode(const uint8_t* wire, size_t n, size_t, float* out) const override {
    widen(reinterpret_cast<const uint16_t*>(wire), n, out);
  }

  void decodeAdd(const uint8_t* wire, size_t n, size_t, float* acc) const override {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(wire);
    constexpr size_t kBlock = 2048;
    float tmp[kBlock];
    for (size_t i = 0; i < n; i += kBlock) {
      const size_t m = std::min(kBlock, n - i);
      widen(w + i, m, tmp);
      for (size_t j = 0; j < m; ++j) acc[i + j] += tmp[j];
    }
  }

 private:
  static void narrow(const float* x, size_t n, uint16_t* w) {
    if constexpr (kBf16)
      floatsToBf16(x, n, w);
    else
      floatsToHalf(x, n, w);
  }
  static void widen(const uint16_t* w, size_t n, float* x) {
    if constexpr (kBf16)
      bf16ToFloats(w, n, x);
    else
      halfToFloats(w, n, x);
  }
};

}  // namespace

std::unique_ptr<ChunkCodec> makeHalfCodec() {
  return std::make_unique<CastCodec<false>>();
}
std::unique_ptr<ChunkCodec> makeBf16Codec() {
  return std::make_unique<CastCodec<true>>();
}

}  // namespace weft::compression
