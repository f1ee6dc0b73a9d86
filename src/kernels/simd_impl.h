// The kernel bodies, written once over GCC vector extensions and compiled
// once per target. Not a normal header: a simd_<target>.cc includes it after
// defining
//   WEFT_SIMD_NS     namespace for this copy (its code has internal linkage,
//                    so copies built with different -m flags never merge)
//   WEFT_SIMD_BYTES  vector width in bytes: 16 (SSE2), 32 (AVX2), 64 (AVX-512)
//   WEFT_SIMD_TABLE  name of the exported KernelTable accessor
//
// Shape of every kernel: a main loop over whole vectors, then the tail copied
// into zero-padded stack buffers and run through the same vector code, so the
// tail rounds exactly like the body. All loads and stores go through memcpy,
// so any alignment is fine and dst may be exactly a or b.
//
// Compute types: integers in their own width, sums and products in unsigned
// arithmetic (wraps, no UB); float16/bfloat16/fp8 widened to fp32, rounded
// once when stored. Max is `a > b ? a : b` and Min `a < b ? a : b`: a NaN in
// b propagates, a NaN in a does not (the behaviour of x86 maxps/minps).
//
// No header here may bring in an out-of-line function with external linkage
// used by the kernels (it could be merged with a copy built for a wider
// target): only <cstring>'s memcpy (a builtin), intrinsics and type traits.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WEFT_SIMD_X86 1
#endif

#include "kernels/dispatch.h"

namespace weft::kernels::WEFT_SIMD_NS {
namespace {

constexpr int kVecBytes = WEFT_SIMD_BYTES;

template <class T, int N>
struct VecOf {
  typedef T type __attribute__((vector_size(sizeof(T) * N)));
};
template <class T, int N>
using Vec = typename VecOf<T, N>::type;

// ---- fp32 bit-level conversions for the small float formats ----------------

constexpr uint32_t f32bits(float f) {
  return __builtin_bit_cast(uint32_t, f);
}
constexpr float f32(uint32_t u) {
  return __builtin_bit_cast(float, u);
}

// Widens L values of a format with E exponent and M mantissa bits (held in
// the low bits of u32 lanes) to fp32. kIeee: top exponent is inf/NaN (float16,
// e5m2); otherwise only the all-ones magnitude is NaN (e4m3 FN).
template <int E, int M, bool kIeee, int L>
inline Vec<float, L> widenSmall(Vec<uint32_t, L> v) {
  using VU = Vec<uint32_t, L>;
  using VF = Vec<float, L>;
  constexpr uint32_t kBias = (1u << (E - 1)) - 1;
  constexpr uint32_t kSign = 1u << (E + M);
  constexpr uint32_t kExpMax = (1u << E) - 1;
  const VU sign = (v & kSign) << (31 - E - M);
  const VU mag = v & (kSign - 1);
  const VU exp = mag >> M;
  const VU bits = (mag << (23 - M)) + ((127u - kBias) << 23);
  // Subnormal: put 2^emin under the mantissa, then subtract it (exact).
  const VF sub = (VF)(bits + (1u << 23)) - f32((128u - kBias) << 23);
  VU r = exp == 0u ? (VU)sub : bits;
  if constexpr (kIeee) {
    r = exp == kExpMax ? bits + ((255u - kExpMax - (127u - kBias)) << 23) : r;
  } else {
    r = mag == (kSign - 1) ? VU{} + 0x7fc00000u : r;
  }
  return (VF)(r | sign);
}

// Narrows fp32 to the small format, round to nearest even. kIeee: overflow
// gives inf, NaN keeps its top payload bits and is made quiet; otherwise (e4m3
// FN) overflow saturates to the largest finite value and NaN is 0x7f.
template <int E, int M, bool kIeee, int L>
inline Vec<uint32_t, L> narrowSmall(Vec<float, L> x) {
  using VU = Vec<uint32_t, L>;
  using VF = Vec<float, L>;
  constexpr uint32_t kBias = (1u << (E - 1)) - 1;
  constexpr int kEmin = 1 - static_cast<int>(kBias);
  constexpr int kShift = 23 - M;
  constexpr uint32_t kMantMask = (1u << M) - 1;
  constexpr uint32_t kExpMax = (1u << E) - 1;
  const VU u = (VU)x;
  const VU sign = (u >> (31 - E - M)) & (1u << (E + M));
  const VU a = u & 0x7fffffffu;
  // Normal range: round at bit kShift (ties to even), then rebias.
  const VU normal =
      ((a + ((1u << (kShift - 1)) - 1) + ((a >> kShift) & 1u)) >> kShift) - ((127u - kBias) << M);
  // Subnormal range: adding 2^(emin-M+23) makes the fp32 adder round to the
  // subnormal grid; the low bits of the sum are the result.
  constexpr uint32_t kMagic = static_cast<uint32_t>(127 + kEmin - M + 23) << 23;
  const VU sub = (VU)((VF)a + f32(kMagic)) - kMagic;
  // Magnitudes are below 2^31: signed compares (native on x86) are exact.
  const Vec<int32_t, L> ai = (Vec<int32_t, L>)a;
  VU r = ai < (static_cast<int32_t>(127 + kEmin) << 23) ? sub : normal;
  if constexpr (kIeee) {
    constexpr int kEmax = static_cast<int>(kExpMax - 1 - kBias);
    constexpr uint32_t kMaxFinite =
        (static_cast<uint32_t>(127 + kEmax) << 23) | (kMantMask << kShift);
    constexpr uint32_t kOverflow = kMaxFinite + (1u << (kShift - 1));  // halfway to 2^(emax+1)
    r = ai >= static_cast<int32_t>(kOverflow) ? VU{} + (kExpMax << M) : r;
    r = ai > 0x7f800000 ? (kExpMax << M) | (1u << (M - 1)) | ((a >> kShift) & kMantMask) : r;
  } else {
    constexpr uint32_t kMaxEnc = (kExpMax << M) | (kMantMask - 1);  // 0x7e: 448
    constexpr uint32_t kMaxFinite =
        (static_cast<uint32_t>(127 + kExpMax - kBias) << 23) | ((kMantMask - 1) << kShift);
    r = ai >= static_cast<int32_t>(kMaxFinite) ? VU{} + kMaxEnc : r;
    r = ai > 0x7f800000 ? VU{} + ((kExpMax << M) | kMantMask) : r;
  }
  return r | sign;
}

// ---- codecs: storage type <-> compute vector --------------------------------

// Storage and compute are the same type.
template <class T>
struct Plain {
  using S = T;
  using Elem = T;  // compute element
  static constexpr int L = kVecBytes / sizeof(T);
  using V = Vec<T, L>;
  static constexpr bool kInt = std::is_integral_v<T>;
  using UV =
      std::conditional_t<kInt, Vec<std::make_unsigned_t<std::conditional_t<kInt, T, int>>, L>, V>;
  static V load(const S* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(S* p, V v) { std::memcpy(p, &v, sizeof v); }
};

// Storage narrower than fp32, computed in fp32.
template <class T>
struct Widened {
  using S = T;
  using Elem = float;
  static constexpr int L = kVecBytes / 4;
  using V = Vec<float, L>;
  using UV = V;
  using VU = Vec<uint32_t, L>;
  using VI = Vec<int32_t, L>;
  using VS = Vec<T, L>;
  static constexpr bool kInt = false;
  // Zero-extends L stored values into u32 lanes, and back (values < 2^(8*sizeof(T))).
  static VU loadBits(const S* p) {
#if defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 64
    if constexpr (sizeof(T) == 2) {
      return (VU)_mm512_maskz_cvtepu16_epi32(
          0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      return (VU)_mm512_maskz_cvtepu8_epi32(0xffff,
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
#elif defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 32
    if constexpr (sizeof(T) == 2) {
      return (VU)_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      return (VU)_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    }
#elif defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 16
    const __m128i zero = _mm_setzero_si128();
    if constexpr (sizeof(T) == 2) {
      return (VU)_mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), zero);
    } else {
      int32_t w;
      std::memcpy(&w, p, sizeof w);
      return (VU)_mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(w), zero), zero);
    }
#else
    VS s;
    std::memcpy(&s, p, sizeof s);
    return __builtin_convertvector(s, VU);
#endif
  }
  static void storeBits(S* p, VU v) {
#if defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 64
    if constexpr (sizeof(T) == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                          _mm512_maskz_cvtepi32_epi16(0xffff, (__m512i)v));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                       _mm512_maskz_cvtepi32_epi8(0xffff, (__m512i)v));
    }
#elif defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 32
    // In-lane packs, then gather the two lanes' halves.
    const __m256i w = _mm256_packus_epi32((__m256i)v, (__m256i)v);
    if constexpr (sizeof(T) == 2) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                       _mm256_castsi256_si128(_mm256_permute4x64_epi64(w, 0x08)));
    } else {
      const __m256i b = _mm256_packus_epi16(w, w);
      _mm_storel_epi64(
          reinterpret_cast<__m128i*>(p),
          _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
    }
#elif defined(WEFT_SIMD_X86) && WEFT_SIMD_BYTES == 16
    if constexpr (sizeof(T) == 2) {
      // SSE2 has only a signed 32->16 pack: sign-extend the low 16 bits first.
      const __m128i x = _mm_srai_epi32(_mm_slli_epi32((__m128i)v, 16), 16);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(x, x));
    } else {
      const __m128i w = _mm_packs_epi32((__m128i)v, (__m128i)v);
      const int32_t b = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
      std::memcpy(p, &b, sizeof b);
    }
#else
    const VS s = __builtin_convertvector(v, VS);
    std::memcpy(p, &s, sizeof s);
#endif
  }
};

struct HalfCodec : Widened<uint16_t> {
  static V load(const S* p) {
#if WEFT_SIMD_BYTES == 64
    // maskz forms: the plain ones trip GCC 12's -Wmaybe-uninitialized.
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif WEFT_SIMD_BYTES == 32 && defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    return widenSmall<5, 10, true, L>(loadBits(p));
#endif
  }
  static void store(S* p, V v) {
#if WEFT_SIMD_BYTES == 64
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(p),
        _mm512_maskz_cvtps_ph(0xffff, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif WEFT_SIMD_BYTES == 32 && defined(__F16C__)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
    storeBits(p, narrowSmall<5, 10, true, L>(v));
#endif
  }
};

struct Bf16Codec : Widened<uint16_t> {
  static V load(const S* p) { return (V)(loadBits(p) << 16); }
  static void store(S* p, V v) {
    const VU u = (VU)v;
    const VU rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const VU nan = (u >> 16) | 0x40u;
    storeBits(p, (VI)(u & 0x7fffffffu) > 0x7f800000 ? nan : rounded);
  }
};

struct E4m3Codec : Widened<uint8_t> {
  static V load(const S* p) { return widenSmall<4, 3, false, L>(loadBits(p)); }
  static void store(S* p, V v) { storeBits(p, narrowSmall<4, 3, false, L>(v)); }
};

struct E5m2Codec : Widened<uint8_t> {
  static V load(const S* p) { return widenSmall<5, 2, true, L>(loadBits(p)); }
  static void store(S* p, V v) { storeBits(p, narrowSmall<5, 2, true, L>(v)); }
};

template <class C>
typename C::V broadcastOf(const void* scalar) {
  typename C::S s[C::L];
  typename C::S one;
  std::memcpy(&one, scalar, sizeof one);
  for (int i = 0; i < C::L; ++i) s[i] = one;
  return C::load(s);
}

// ---- ops --------------------------------------------------------------------

template <class C>
struct OpSum {
  static typename C::V apply(typename C::V a, typename C::V b) {
    using UV = typename C::UV;
    return (typename C::V)((UV)a + (UV)b);
  }
};
template <class C>
struct OpProd {
  static typename C::V apply(typename C::V a, typename C::V b) {
    using UV = typename C::UV;
    return (typename C::V)((UV)a * (UV)b);
  }
};
template <class C>
struct OpMax {
  static typename C::V apply(typename C::V a, typename C::V b) { return a > b ? a : b; }
};
template <class C>
struct OpMin {
  static typename C::V apply(typename C::V a, typename C::V b) { return a < b ? a : b; }
};

// ---- kernels ----------------------------------------------------------------

template <class C, template <class> class Op>
void binaryKernel(void* dstv, const void* av, const void* bv, size_t n) {
  using S = typename C::S;
  using O = Op<C>;
  constexpr size_t L = C::L;
  S* d = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto a0 = C::load(a + i), a1 = C::load(a + i + L);
    const auto b0 = C::load(b + i), b1 = C::load(b + i + L);
    C::store(d + i, O::apply(a0, b0));
    C::store(d + i + L, O::apply(a1, b1));
  }
  if (i + L <= n) {
    C::store(d + i, O::apply(C::load(a + i), C::load(b + i)));
    i += L;
  }
  if (i < n) {
    const size_t r = n - i;
    S ta[L] = {}, tb[L] = {}, td[L];
    std::memcpy(ta, a + i, r * sizeof(S));
    std::memcpy(tb, b + i, r * sizeof(S));
    C::store(td, O::apply(C::load(ta), C::load(tb)));
    std::memcpy(d + i, td, r * sizeof(S));
  }
}

// n >= 2 sources, folded left to right in registers (fp32 for the widened
// types), rounded once per element.
template <class C, template <class> class Op>
void manyKernel(void* dstv, const void* const* srcs, int n, size_t count) {
  using S = typename C::S;
  using V = typename C::V;
  using O = Op<C>;
  constexpr size_t L = C::L;
  constexpr size_t kBlock = 4;  // vectors in flight per source
  S* d = static_cast<S*>(dstv);
  auto src = [srcs](int k) { return static_cast<const S*>(srcs[k]); };
  size_t i = 0;
  for (; i + kBlock * L <= count; i += kBlock * L) {
    V acc[kBlock];
    const S* s0 = src(0) + i;
    for (size_t j = 0; j < kBlock; ++j) acc[j] = C::load(s0 + j * L);
    for (int k = 1; k < n; ++k) {
      const S* s = src(k) + i;
      for (size_t j = 0; j < kBlock; ++j) acc[j] = O::apply(acc[j], C::load(s + j * L));
    }
    for (size_t j = 0; j < kBlock; ++j) C::store(d + i + j * L, acc[j]);
  }
  for (; i + L <= count; i += L) {
    V acc = C::load(src(0) + i);
    for (int k = 1; k < n; ++k) acc = O::apply(acc, C::load(src(k) + i));
    C::store(d + i, acc);
  }
  if (i < count) {
    const size_t r = count - i;
    S t[L] = {};
    std::memcpy(t, src(0) + i, r * sizeof(S));
    V acc = C::load(t);
    for (int k = 1; k < n; ++k) {
      std::memcpy(t, src(k) + i, r * sizeof(S));
      acc = O::apply(acc, C::load(t));
    }
    C::store(t, acc);
    std::memcpy(d + i, t, r * sizeof(S));
  }
}

// dst = scalar * a + b (b may be null), multiply and add rounded separately
// (these files build with -ffp-contract=off, so every target agrees).
template <class C>
void preMulSumKernel(void* dstv, const void* av, const void* scalar, const void* bv, size_t n) {
  using S = typename C::S;
  using V = typename C::V;
  using Mul = OpProd<C>;
  using Add = OpSum<C>;
  constexpr size_t L = C::L;
  S* d = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  const V s = broadcastOf<C>(scalar);
  size_t i = 0;
  if (b) {
    for (; i + L <= n; i += L)
      C::store(d + i, Add::apply(Mul::apply(s, C::load(a + i)), C::load(b + i)));
  } else {
    for (; i + L <= n; i += L) C::store(d + i, Mul::apply(s, C::load(a + i)));
  }
  if (i < n) {
    const size_t r = n - i;
    S ta[L] = {}, tb[L] = {}, td[L];
    std::memcpy(ta, a + i, r * sizeof(S));
    V v = Mul::apply(s, C::load(ta));
    if (b) {
      std::memcpy(tb, b + i, r * sizeof(S));
      v = Add::apply(v, C::load(tb));
    }
    C::store(td, v);
    std::memcpy(d + i, td, r * sizeof(S));
  }
}

// Floats: divide in the compute type (fp32, or fp64 for double).
template <class C>
void divideFloatKernel(void* dstv, const void* srcv, size_t n, int divisor) {
  using S = typename C::S;
  using V = typename C::V;
  constexpr size_t L = C::L;
  S* d = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(srcv);
  const V div = V{} + static_cast<typename C::Elem>(divisor);
  size_t i = 0;
  for (; i + L <= n; i += L) C::store(d + i, C::load(a + i) / div);
  if (i < n) {
    const size_t r = n - i;
    S t[L] = {};
    std::memcpy(t, a + i, r * sizeof(S));
    C::store(t, C::load(t) / div);
    std::memcpy(d + i, t, r * sizeof(S));
  }
}

// Integers: truncation toward zero, element by element (hardware has no
// vector integer divide). x / -1 is a wrapping negation; a divisor of 0
// leaves dst = src.
template <class T>
void divideIntKernel(void* dstv, const void* srcv, size_t n, int divisor) {
  using U = std::make_unsigned_t<T>;
  T* d = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(srcv);
  if (divisor == 0) {
    if (d != a && n) std::memmove(d, a, n * sizeof(T));
    return;
  }
  T x;
  if (std::is_signed_v<T> && divisor == -1) {
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(&x, a + i, sizeof x);
      const T y = static_cast<T>(U(0) - static_cast<U>(x));
      std::memcpy(d + i, &y, sizeof y);
    }
    return;
  }
  using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const W w = static_cast<W>(divisor);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&x, a + i, sizeof x);
    const T y = static_cast<T>(static_cast<W>(x) / w);
    std::memcpy(d + i, &y, sizeof y);
  }
}

// Copy with non-temporal stores: head up to 64-byte dst alignment and the
// tail with memcpy, the body streamed; an sfence orders the streamed stores
// before whatever flag the caller writes next.
void streamCopyKernel(void* dstv, const void* srcv, size_t bytes) {
  char* d = static_cast<char*>(dstv);
  const char* s = static_cast<const char*>(srcv);
#if defined(WEFT_SIMD_X86)
  size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  if (head > bytes) head = bytes;
  if (head) std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 256; bytes -= 256, d += 256, s += 256) {
#if WEFT_SIMD_BYTES == 64
    for (int k = 0; k < 256; k += 64)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k),
                          _mm512_loadu_si512(reinterpret_cast<const void*>(s + k)));
#elif WEFT_SIMD_BYTES == 32
    for (int k = 0; k < 256; k += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + k),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k)));
#else
    for (int k = 0; k < 256; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k)));
#endif
  }
  for (; bytes >= 16; bytes -= 16, d += 16, s += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  if (bytes) std::memcpy(d, s, bytes);
  _mm_sfence();
#else
  if (bytes) std::memcpy(d, s, bytes);
#endif
}

// ---- the table ----------------------------------------------------------------

template <class C>
constexpr void fillOps(KernelTable& t, weftDataType_t dt) {
  t.binary[dt][0] = &binaryKernel<C, OpSum>;
  t.binary[dt][1] = &binaryKernel<C, OpProd>;
  t.binary[dt][2] = &binaryKernel<C, OpMax>;
  t.binary[dt][3] = &binaryKernel<C, OpMin>;
  t.many[dt][0] = &manyKernel<C, OpSum>;
  t.many[dt][1] = &manyKernel<C, OpProd>;
  t.many[dt][2] = &manyKernel<C, OpMax>;
  t.many[dt][3] = &manyKernel<C, OpMin>;
  t.preMulSum[dt] = &preMulSumKernel<C>;
}

constexpr KernelTable makeTable() {
  KernelTable t{};
#if WEFT_SIMD_BYTES == 64
  t.isa = Isa::Avx512;
#elif WEFT_SIMD_BYTES == 32
  t.isa = Isa::Avx2;
#else
  t.isa = Isa::Generic;
#endif
  fillOps<Plain<int8_t>>(t, weftInt8);
  fillOps<Plain<uint8_t>>(t, weftUint8);
  fillOps<Plain<int32_t>>(t, weftInt32);
  fillOps<Plain<uint32_t>>(t, weftUint32);
  fillOps<Plain<int64_t>>(t, weftInt64);
  fillOps<Plain<uint64_t>>(t, weftUint64);
  fillOps<HalfCodec>(t, weftFloat16);
  fillOps<Plain<float>>(t, weftFloat32);
  fillOps<Plain<double>>(t, weftFloat64);
  fillOps<Bf16Codec>(t, weftBfloat16);
  fillOps<E4m3Codec>(t, weftFloat8e4m3);
  fillOps<E5m2Codec>(t, weftFloat8e5m2);
  t.divide[weftInt8] = &divideIntKernel<int8_t>;
  t.divide[weftUint8] = &divideIntKernel<uint8_t>;
  t.divide[weftInt32] = &divideIntKernel<int32_t>;
  t.divide[weftUint32] = &divideIntKernel<uint32_t>;
  t.divide[weftInt64] = &divideIntKernel<int64_t>;
  t.divide[weftUint64] = &divideIntKernel<uint64_t>;
  t.divide[weftFloat16] = &divideFloatKernel<HalfCodec>;
  t.divide[weftFloat32] = &divideFloatKernel<Plain<float>>;
  t.divide[weftFloat64] = &divideFloatKernel<Plain<double>>;
  t.divide[weftBfloat16] = &divideFloatKernel<Bf16Codec>;
  t.divide[weftFloat8e4m3] = &divideFloatKernel<E4m3Codec>;
  t.divide[weftFloat8e5m2] = &divideFloatKernel<E5m2Codec>;
  t.streamCopy = &streamCopyKernel;
  return t;
}

constexpr KernelTable kTable = makeTable();

}  // namespace
}  // namespace weft::kernels::WEFT_SIMD_NS

namespace weft::kernels {
const KernelTable* WEFT_SIMD_TABLE() {
  return &WEFT_SIMD_NS::kTable;
}
}  // namespace weft::kernels
