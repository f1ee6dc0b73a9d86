#include "compression/convert.h"

#include <immintrin.h>

#include <cstring>

#include "base/dtype.h"
#include "kernels/dispatch.h"

namespace weft::compression {
namespace {

// F16C converts 8 floats per instruction; every x86-64 CPU of the last decade
// has it, the scalar loop is the fallback.
__attribute__((target("avx2,f16c"))) void toHalfF16c(const float* src, size_t n, uint16_t* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = floatToHalf(src[i]);
}

__attribute__((target("avx2,f16c"))) void fromHalfF16c(const uint16_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = halfToFloat(src[i]);
}

bool hasF16c() {
  // The kernels' AVX2 level includes F16C (probed with CPUID, which every
  // compiler here supports).
  static const bool has = kernels::isaSupported(kernels::Isa::Avx2);
  return has;
}

}  // namespace

bool compressibleDtype(weftDataType_t dtype) {
  return dtype == weftFloat32 || dtype == weftFloat16 || dtype == weftBfloat16;
}

void floatsToHalf(const float* src, size_t n, uint16_t* dst) {
  if (hasF16c()) return toHalfF16c(src, n, dst);
  for (size_t i = 0; i < n; ++i) dst[i] = floatToHalf(src[i]);
}

void halfToFloats(const uint16_t* src, size_t n, float* dst) {
  if (hasF16c()) return fromHalfF16c(src, n, dst);
  for (size_t i = 0; i < n; ++i) dst[i] = halfToFloat(src[i]);
}

// Branch-free so that the compiler vectorises it: round to nearest even on
// the upper 16 bits; a NaN stays a (quiet) NaN.
void floatsToBf16(const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    dst[i] = static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

void bf16ToFloats(const uint16_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &u, 4);
  }
}

void toFloat(const void* src, weftDataType_t dtype, size_t n, float* dst) {
  switch (dtype) {
    case weftFloat16:
      return halfToFloats(static_cast<const uint16_t*>(src), n, dst);
    case weftBfloat16:
      return bf16ToFloats(static_cast<const uint16_t*>(src), n, dst);
    default:
      if (src != dst) std::memcpy(dst, src, n * sizeof(float));
  }
}

void fromFloat(const float* src, weftDataType_t dtype, size_t n, void* dst) {
  switch (dtype) {
    case weftFloat16:
      return floatsToHalf(src, n, static_cast<uint16_t*>(dst));
    case weftBfloat16:
      return floatsToBf16(src, n, static_cast<uint16_t*>(dst));
    default:
      if (src != dst) std::memcpy(dst, src, n * sizeof(float));
  }
}

}  // namespace weft::compression
