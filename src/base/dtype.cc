// Element types and the scalar 16- and 8-bit float conversions.
//
// The narrowing conversions work on the bits of the fp32 value and round to
// nearest, ties to even. The layouts, for a format with E exponent and M
// mantissa bits (bias 2^(E-1)-1):
//
//   float16  E5 M10  IEEE: inf, NaN, subnormals.
//   bfloat16 E8 M7   the top half of an fp32.
//   e5m2     E5 M2   IEEE-like (the top byte of a float16): inf, NaN.
//   e4m3     E4 M3   OCP "FN": no inf; 0x7f/0xff are NaN; max 448.
//
// NaN conventions (the SIMD kernels follow the same ones): widening keeps the
// sign and payload bits; narrowing keeps the sign and the top payload bits and
// sets the quiet bit (F16C's behaviour), and gives 0x7f|sign for e4m3.
#include "base/dtype.h"

#include <cstring>

namespace weft {
namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Shifts `m` right by `shift` bits, rounding to nearest, ties to even.
uint32_t shiftRoundEven(uint32_t m, int shift) {
  if (shift <= 0) return m;
  if (shift >= 32) return 0;  // m < 2^24 < half of 2^shift
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1))) ? q + 1 : q;
}

// Magnitude bits (no sign) of a finite, non-negative fp32 `a` rounded into a
// format with E exponent and M mantissa bits, without any overflow handling:
// the result may exceed the largest finite encoding.
template <int E, int M>
uint32_t roundMagnitude(uint32_t a) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  const int exp = static_cast<int>(a >> 23) - 127;
  if ((a >> 23) == 0) return 0;  // fp32 subnormals are far below any target's subnormals
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // 24 significant bits
  if (exp >= kEmin) {
    // Normal: round the mantissa to M bits; a carry moves into the exponent.
    const uint32_t r = shiftRoundEven(mant, 23 - M);  // 1.xxx with M fraction bits
    return (static_cast<uint32_t>(exp + kBias) << M) + (r - (1u << M));
  }
  // Subnormal: count units of 2^(emin-M). Rounding up to 1<<M gives the
  // smallest normal encoding, which is right.
  const int shift = (kEmin - M) - (exp - 23);
  return shiftRoundEven(mant, shift);
}

// Widens a value of a small float format to fp32. kIeee: the top exponent is
// inf/NaN; otherwise (e4m3 FN) only the all-ones magnitude is NaN.
template <int E, int M, bool kIeee>
float widen(uint32_t v) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr uint32_t kSign = 1u << (E + M);
  constexpr uint32_t kExpMax = (1u << E) - 1;
  const uint32_t sign = (v & kSign) ? 0x80000000u : 0u;
  const uint32_t mag = v & (kSign - 1);
  const uint32_t exp = mag >> M;
  const uint32_t mant = mag & ((1u << M) - 1);
  uint32_t out;
  if (!kIeee && mag == kSign - 1) {
    out = 0x7fc00000u;
  } else if (kIeee && exp == kExpMax) {
    out = 0x7f800000u | (mant << (23 - M));
  } else if (exp == 0) {
    if (mant == 0) {
      out = 0;
    } else {
      // Normalise: the value is mant * 2^(1-bias-M).
      int e = 1 - kBias;
      uint32_t m = mant;
      while (!(m & (1u << M))) {
        m <<= 1;
        --e;
      }
      out = (static_cast<uint32_t>(e + 127) << 23) | ((m & ((1u << M) - 1)) << (23 - M));
    }
  } else {
    out = ((exp - kBias + 127) << 23) | (mant << (23 - M));
  }
  return bitsFloat(out | sign);
}

}  // namespace

bool dtypeValid(int dtype) {
  return dtype >= 0 && dtype < weftNumTypes;
}

size_t dtypeSize(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8:
    case weftUint8:
    case weftFloat8e4m3:
    case weftFloat8e5m2:
      return 1;
    case weftFloat16:
    case weftBfloat16:
      return 2;
    case weftInt32:
    case weftUint32:
    case weftFloat32:
      return 4;
    case weftInt64:
    case weftUint64:
    case weftFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* dtypeName(weftDataType_t dtype) {
  switch (dtype) {
    case weftInt8:
      return "int8";
    case weftUint8:
      return "uint8";
    case weftInt32:
      return "int32";
    case weftUint32:
      return "uint32";
    case weftInt64:
      return "int64";
    case weftUint64:
      return "uint64";
    case weftFloat16:
      return "half";
    case weftFloat32:
      return "float";
    case weftFloat64:
      return "double";
    case weftBfloat16:
      return "bfloat16";
    case weftFloat8e4m3:
      return "f8e4m3";
    case weftFloat8e5m2:
      return "f8e5m2";
    default:
      return "unknown";
  }
}

bool dtypeIsFloat(weftDataType_t dtype) {
  switch (dtype) {
    case weftFloat16:
    case weftFloat32:
    case weftFloat64:
    case weftBfloat16:
    case weftFloat8e4m3:
    case weftFloat8e5m2:
      return true;
    default:
      return false;
  }
}

float halfToFloat(uint16_t h) {
  return widen<5, 10, true>(h);
}

uint16_t floatToHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  const uint32_t r = a >= 0x7f800000u ? 0x7c00u : roundMagnitude<5, 10>(a);
  return static_cast<uint16_t>(sign | (r >= 0x7c00u ? 0x7c00u : r));
}

float bf16ToFloat(uint16_t b) {
  return bitsFloat(static_cast<uint32_t>(b) << 16);
}

uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  // Ties to even at bit 16; a carry out of the largest finite value gives inf.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float fp8e4m3ToFloat(uint8_t v) {
  return widen<4, 3, false>(v);
}

uint8_t floatToFp8e4m3(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  // Saturating (OCP "satfinite"): anything at or beyond 448, inf included,
  // becomes +-448 (0x7e); 0x7f would be NaN.
  const uint32_t r = roundMagnitude<4, 3>(a);
  return static_cast<uint8_t>(sign | (r > 0x7eu ? 0x7eu : r));
}

float fp8e5m2ToFloat(uint8_t v) {
  return widen<5, 2, true>(v);
}

uint8_t floatToFp8e5m2(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu | ((a >> 21) & 0x3u));
  const uint32_t r = a >= 0x7f800000u ? 0x7cu : roundMagnitude<5, 2>(a);
  return static_cast<uint8_t>(sign | (r >= 0x7cu ? 0x7cu : r));
}

}  // namespace weft
