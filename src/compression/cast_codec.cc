// The fp16 / bf16 cast codecs: 2 bytes per element on the wire.
#include <algorithm>
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

  size_t granule() const override { return 1; }

  void encodeRange(const float* x, float* residual, size_t begin, size_t end, size_t,
                   uint8_t* wire) const override {
    uint16_t* w = reinterpret_cast<uint16_t*>(wire) + begin;
    const size_t n = end - begin;
    if (residual == nullptr) {
      narrow(x, n, w);
      return;
    }
    // x + r, rounded; r keeps what rounding dropped. In blocks, so that the
    // sum stays in cache between the passes.
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

  void decodeRange(const uint8_t* wire, size_t begin, size_t end, size_t, float* out,
                   bool add) const override {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(wire) + begin;
    const size_t n = end - begin;
    if (!add) return widen(w, n, out);
    constexpr size_t kBlock = 2048;
    float tmp[kBlock];
    for (size_t i = 0; i < n; i += kBlock) {
      const size_t m = std::min(kBlock, n - i);
      widen(w + i, m, tmp);
      for (size_t j = 0; j < m; ++j) out[i + j] += tmp[j];
    }
  }

  void zeroUnused(uint8_t* wire, size_t n, size_t capacity) const override {
    std::memset(wire + 2 * n, 0, (capacity - n) * 2);
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
