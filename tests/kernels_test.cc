// Host kernels (src/kernels) and dtype conversions (src/base/dtype.cc)
// against independent scalar references.
//
// The kernel tests run once per ISA the CPU supports (generic, avx2, avx512)
// and compare bit for bit (NaN only as NaN). The conversion references decode
// with ldexp from the format's definition and round by searching the sorted
// list of every representable value, so they share no code with dtype.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "base/page_buffer.h"
#include "kernels/dispatch.h"
#include "kernels/reduce.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft {
namespace {

using kernels::Isa;
using kernels::ReduceKind;

constexpr ReduceKind kOps[] = {ReduceKind::Sum, ReduceKind::Prod, ReduceKind::Max, ReduceKind::Min};
constexpr size_t kSizes[] = {0, 1, 7, 33, 1000003};

const char* opName(ReduceKind op) {
  switch (op) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Prod:
      return "prod";
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
  }
  return "?";
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> out;
  for (int i = 0; i < kernels::kNumIsas; ++i) {
    if (kernels::isaSupported(static_cast<Isa>(i))) out.push_back(static_cast<Isa>(i));
  }
  return out;
}

// Runs `body` once per supported ISA, then restores the original choice.
template <class F>
void forEachIsa(F&& body) {
  const Isa saved = kernels::activeIsa();
  for (Isa isa : supportedIsas()) {
    ASSERT_TRUE(kernels::setIsa(isa));
    SCOPED_TRACE(std::string("isa=") + kernels::isaName(isa));
    body(isa);
  }
  ASSERT_TRUE(kernels::setIsa(saved));
}

// ---- per-dtype scalar reference ---------------------------------------------

template <class T>
T scalarOp(T a, T b, ReduceKind op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceKind::Sum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceKind::Prod:
        // Widen to uint64 first so uint8 does not promote to (signed) int.
        return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) *
                              static_cast<uint64_t>(static_cast<U>(b)));
      default:
        break;
    }
  } else {
    switch (op) {
      case ReduceKind::Sum:
        return a + b;
      case ReduceKind::Prod:
        return a * b;
      default:
        break;
    }
  }
  // The documented NaN rule: NaN in b propagates, NaN in a does not.
  if (op == ReduceKind::Max) return a > b ? a : b;
  return a < b ? a : b;
}

// Storage S, accumulated in Acc, converted with the dtype.cc functions.
template <class S_, class Acc_, Acc_ (*kWiden)(S_), S_ (*kNarrow)(Acc_)>
struct Traits {
  using S = S_;
  using Acc = Acc_;
  static Acc widen(S s) { return kWiden(s); }
  static S narrow(Acc a) { return kNarrow(a); }
};

template <class T>
T identity(T x) {
  return x;
}

template <class T>
using NativeTraits = Traits<T, T, &identity<T>, &identity<T>>;
using HalfTraits = Traits<uint16_t, float, &halfToFloat, &floatToHalf>;
using Bf16Traits = Traits<uint16_t, float, &bf16ToFloat, &floatToBf16>;
using E4m3Traits = Traits<uint8_t, float, &fp8e4m3ToFloat, &floatToFp8e4m3>;
using E5m2Traits = Traits<uint8_t, float, &fp8e5m2ToFloat, &floatToFp8e5m2>;

template <class F>
void withTraits(weftDataType_t dt, F&& f) {
  switch (dt) {
    case weftInt8:
      return f(NativeTraits<int8_t>{});
    case weftUint8:
      return f(NativeTraits<uint8_t>{});
    case weftInt32:
      return f(NativeTraits<int32_t>{});
    case weftUint32:
      return f(NativeTraits<uint32_t>{});
    case weftInt64:
      return f(NativeTraits<int64_t>{});
    case weftUint64:
      return f(NativeTraits<uint64_t>{});
    case weftFloat16:
      return f(HalfTraits{});
    case weftFloat32:
      return f(NativeTraits<float>{});
    case weftFloat64:
      return f(NativeTraits<double>{});
    case weftBfloat16:
      return f(Bf16Traits{});
    case weftFloat8e4m3:
      return f(E4m3Traits{});
    case weftFloat8e5m2:
      return f(E5m2Traits{});
    default:
      FAIL() << "bad dtype " << dt;
  }
}

std::vector<weftDataType_t> allTypes() {
  std::vector<weftDataType_t> v;
  for (int i = 0; i < weftNumTypes; ++i) v.push_back(static_cast<weftDataType_t>(i));
  return v;
}

// Element access through memcpy: buffers are deliberately misaligned.
template <class S>
S get(const unsigned char* p, size_t i) {
  S s;
  std::memcpy(&s, p + i * sizeof(S), sizeof s);
  return s;
}
template <class S>
void put(unsigned char* p, size_t i, S s) {
  std::memcpy(p + i * sizeof(S), &s, sizeof s);
}

template <class Tr>
bool sameValue(typename Tr::S x, typename Tr::S y) {
  if (std::memcmp(&x, &y, sizeof x) == 0) return true;
  if constexpr (!std::is_integral_v<typename Tr::Acc>) {
    const auto fx = Tr::widen(x), fy = Tr::widen(y);
    return std::isnan(fx) && std::isnan(fy);
  }
  return false;
}

// Mixed inputs: raw bit patterns (NaN, inf, subnormals, extremes) and
// moderate values, so that products and sums stay in range often enough.
template <class Tr>
typename Tr::S randomValue(std::mt19937_64& rng) {
  using S = typename Tr::S;
  using Acc = typename Tr::Acc;
  const uint64_t bits = rng();
  S s;
  if constexpr (std::is_integral_v<Acc>) {
    std::memcpy(&s, &bits, sizeof s);
    if (bits & (1ull << 63)) s = static_cast<S>(static_cast<int>(bits % 11) - 5);
  } else {
    if (bits & (1ull << 63)) {
      std::memcpy(&s, &bits, sizeof s);
    } else {
      const double v = static_cast<double>(static_cast<int64_t>(bits % 2001) - 1000) / 64.0;
      s = Tr::narrow(static_cast<Acc>(v));
    }
  }
  return s;
}

// A buffer with canary bytes around the element range at a chosen misalignment.
struct Buf {
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kCanary = 0xA5;
  std::vector<unsigned char> mem;
  size_t offset;
  size_t bytes;
  Buf(size_t nbytes, size_t misalign) : mem(nbytes + 3 * kGuard, kCanary), bytes(nbytes) {
    const auto base = reinterpret_cast<uintptr_t>(mem.data());
    offset = ((kGuard - base % kGuard) % kGuard) + kGuard + misalign;
  }
  unsigned char* data() { return mem.data() + offset; }
  bool guardsIntact() const {
    for (size_t i = 0; i < mem.size(); ++i) {
      if ((i < offset || i >= offset + bytes) && mem[i] != kCanary) return false;
    }
    return true;
  }
};

template <class Tr>
void fillRandom(Buf& b, size_t n, std::mt19937_64& rng) {
  for (size_t i = 0; i < n; ++i) put(b.data(), i, randomValue<Tr>(rng));
}

// Compares n elements; reports the first few mismatches.
template <class Tr>
::testing::AssertionResult sameArrays(const unsigned char* want, const unsigned char* got,
                                      size_t n) {
  using S = typename Tr::S;
  size_t bad = 0;
  std::string msg;
  for (size_t i = 0; i < n; ++i) {
    const S w = get<S>(want, i), g = get<S>(got, i);
    if (!sameValue<Tr>(w, g)) {
      if (++bad <= 5) {
        msg += " [" + std::to_string(i) + "] want " + std::to_string(+w) + " got " +
               std::to_string(+g) + ";";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " differ:" << msg;
}

enum class Alias { None, DstIsA, DstIsB };

// ---- reduce -------------------------------------------------------------------

template <class Tr>
void checkReduce(weftDataType_t dt, ReduceKind op, size_t n, Alias alias, size_t misalign,
                 std::mt19937_64& rng) {
  using S = typename Tr::S;
  const size_t bytes = n * sizeof(S);
  Buf a(bytes, misalign), b(bytes, (misalign * 3) % 64), d(bytes, misalign + 1), want(bytes, 0);
  fillRandom<Tr>(a, n, rng);
  fillRandom<Tr>(b, n, rng);
  for (size_t i = 0; i < n; ++i) {
    const auto r = scalarOp(Tr::widen(get<S>(a.data(), i)), Tr::widen(get<S>(b.data(), i)), op);
    put(want.data(), i, Tr::narrow(r));
  }
  unsigned char* dst = alias == Alias::DstIsA   ? a.data()
                       : alias == Alias::DstIsB ? b.data()
                                                : d.data();
  kernels::reduce(dst, a.data(), b.data(), n, dt, op);
  EXPECT_TRUE(sameArrays<Tr>(want.data(), dst, n));
  EXPECT_TRUE(a.guardsIntact() && b.guardsIntact() && d.guardsIntact());
}

TEST(Kernels, ReduceEveryTypeAndOp) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(1);
    for (weftDataType_t dt : allTypes()) {
      for (ReduceKind op : kOps) {
        int k = 0;
        for (size_t n : kSizes) {
          for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB}) {
            // The big size runs once per op, rotating the aliasing mode.
            if (n > 100000 && static_cast<int>(alias) != static_cast<int>(op) % 3) continue;
            const size_t misalign = (++k * 7) % 64;
            SCOPED_TRACE(std::string(dtypeName(dt)) + " " + opName(op) + " n=" + std::to_string(n) +
                         " alias=" + std::to_string(static_cast<int>(alias)) +
                         " misalign=" + std::to_string(misalign));
            withTraits(
                dt, [&](auto tr) { checkReduce<decltype(tr)>(dt, op, n, alias, misalign, rng); });
          }
        }
      }
    }
  });
}

// Sizes around the vector and block boundaries of every target.
TEST(Kernels, ReduceBoundarySizes) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(2);
    for (weftDataType_t dt : allTypes()) {
      for (size_t n : {2, 3, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1029}) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " n=" + std::to_string(n));
        withTraits(dt, [&](auto tr) {
          checkReduce<decltype(tr)>(dt, ReduceKind::Sum, n, Alias::None, n % 5, rng);
        });
      }
    }
  });
}

// 8-bit floats: every pair of codes, every op. 16-bit floats: every code
// against random partners (covers every widen/narrow path in the kernels).
TEST(Kernels, SmallFloatsExhaustive) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(3);
    auto run = [&](weftDataType_t dt, auto tr) {
      using Tr = decltype(tr);
      using S = typename Tr::S;
      const size_t codes = size_t{1} << (8 * sizeof(S));
      const size_t n = sizeof(S) == 1 ? codes * codes : codes * 4;
      std::vector<S> a(n), b(n), d(n), want(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = static_cast<S>(i % codes);
        b[i] = sizeof(S) == 1 ? static_cast<S>(i / codes) : static_cast<S>(rng());
      }
      for (ReduceKind op : kOps) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " " + opName(op));
        for (size_t i = 0; i < n; ++i) {
          want[i] = Tr::narrow(scalarOp(Tr::widen(a[i]), Tr::widen(b[i]), op));
        }
        kernels::reduce(d.data(), a.data(), b.data(), n, dt, op);
        EXPECT_TRUE(sameArrays<Tr>(reinterpret_cast<const unsigned char*>(want.data()),
                                   reinterpret_cast<const unsigned char*>(d.data()), n));
      }
    };
    run(weftFloat16, HalfTraits{});
    run(weftBfloat16, Bf16Traits{});
    run(weftFloat8e4m3, E4m3Traits{});
    run(weftFloat8e5m2, E5m2Traits{});
  });
}

// ---- reduceMany -----------------------------------------------------------------

template <class Tr>
void checkMany(weftDataType_t dt, ReduceKind op, size_t n, int nsrc, int aliasSrc,
               std::mt19937_64& rng) {
  using S = typename Tr::S;
  const size_t bytes = n * sizeof(S);
  std::vector<Buf> src;
  for (int k = 0; k < nsrc; ++k) src.emplace_back(bytes, (k * 5) % 64);
  Buf d(bytes, 3), want(bytes, 0);
  std::vector<const void*> ptrs;
  for (auto& s : src) {
    fillRandom<Tr>(s, n, rng);
    ptrs.push_back(s.data());
  }
  // Left to right in Acc (fp32 for the narrow floats), rounded once.
  for (size_t i = 0; i < n; ++i) {
    auto acc = Tr::widen(get<S>(src[0].data(), i));
    for (int k = 1; k < nsrc; ++k) acc = scalarOp(acc, Tr::widen(get<S>(src[k].data(), i)), op);
    put(want.data(), i, Tr::narrow(acc));
  }
  unsigned char* dst = aliasSrc >= 0 ? src[aliasSrc].data() : d.data();
  kernels::reduceMany(dst, ptrs.data(), nsrc, n, dt, op);
  EXPECT_TRUE(sameArrays<Tr>(want.data(), dst, n));
  for (auto& s : src) EXPECT_TRUE(s.guardsIntact());
  EXPECT_TRUE(d.guardsIntact());
}

TEST(Kernels, ReduceManyEveryTypeAndOp) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(4);
    for (weftDataType_t dt : allTypes()) {
      for (ReduceKind op : kOps) {
        for (int nsrc = 1; nsrc <= 8; ++nsrc) {
          for (size_t n : kSizes) {
            if (n > 100000 && nsrc != 3) continue;
            // No alias, dst = first source, dst = last source.
            const int aliasSrc = (nsrc + static_cast<int>(n)) % 3 == 0   ? -1
                                 : (nsrc + static_cast<int>(n)) % 3 == 1 ? 0
                                                                         : nsrc - 1;
            SCOPED_TRACE(std::string(dtypeName(dt)) + " " + opName(op) +
                         " nsrc=" + std::to_string(nsrc) + " n=" + std::to_string(n) +
                         " alias=" + std::to_string(aliasSrc));
            withTraits(dt,
                       [&](auto tr) { checkMany<decltype(tr)>(dt, op, n, nsrc, aliasSrc, rng); });
          }
        }
      }
    }
  });
}

// Rounding once matters: three halves whose fp32 sum differs from the
// pairwise-rounded one.
TEST(Kernels, ReduceManyRoundsHalfOnce) {
  const uint16_t one = floatToHalf(1.0f);
  const uint16_t eps = floatToHalf(std::ldexp(1.0f, -11));  // half an ulp of 1.0
  std::vector<uint16_t> a(9, one), b(9, eps), c(9, eps), d(9);
  const void* srcs[] = {a.data(), b.data(), c.data()};
  forEachIsa([&](Isa) {
    kernels::reduceMany(d.data(), srcs, 3, d.size(), weftFloat16, ReduceKind::Sum);
    // Pairwise: (1 + eps) ties to 1, then 1 again. Once: 1 + 2 eps = next half.
    for (uint16_t v : d) EXPECT_EQ(v, static_cast<uint16_t>(one + 1));
  });
}

// ---- preMulSum and divide -------------------------------------------------------

template <class Tr>
void checkPreMulSum(weftDataType_t dt, size_t n, Alias alias, bool withB, std::mt19937_64& rng) {
  using S = typename Tr::S;
  using Acc = typename Tr::Acc;
  const size_t bytes = n * sizeof(S);
  Buf a(bytes, 1 * sizeof(S)), b(bytes, 5), d(bytes, 2), want(bytes, 0);
  fillRandom<Tr>(a, n, rng);
  fillRandom<Tr>(b, n, rng);
  const S scalar = randomValue<Tr>(rng);
  const Acc s = Tr::widen(scalar);
  for (size_t i = 0; i < n; ++i) {
    Acc v = scalarOp(s, Tr::widen(get<S>(a.data(), i)), ReduceKind::Prod);
    if (withB) v = scalarOp(v, Tr::widen(get<S>(b.data(), i)), ReduceKind::Sum);
    put(want.data(), i, Tr::narrow(v));
  }
  unsigned char* dst = alias == Alias::DstIsA   ? a.data()
                       : alias == Alias::DstIsB ? b.data()
                                                : d.data();
  kernels::preMulSum(dst, a.data(), &scalar, withB ? b.data() : nullptr, n, dt);
  EXPECT_TRUE(sameArrays<Tr>(want.data(), dst, n));
  EXPECT_TRUE(a.guardsIntact() && b.guardsIntact() && d.guardsIntact());
}

TEST(Kernels, PreMulSum) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(5);
    for (weftDataType_t dt : allTypes()) {
      for (size_t n : kSizes) {
        for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB}) {
          for (bool withB : {true, false}) {
            if (!withB && alias == Alias::DstIsB) continue;
            if (n > 100000 && (alias != Alias::DstIsA || !withB)) continue;
            SCOPED_TRACE(std::string(dtypeName(dt)) + " n=" + std::to_string(n) + " alias=" +
                         std::to_string(static_cast<int>(alias)) + " b=" + std::to_string(withB));
            withTraits(dt,
                       [&](auto tr) { checkPreMulSum<decltype(tr)>(dt, n, alias, withB, rng); });
          }
        }
      }
    }
  });
}

// Reference division: truncation toward zero for integers (x / -1 wraps),
// fp32 for the narrow floats, the type itself for float and double.
template <class Tr>
typename Tr::S refDivide(typename Tr::S x, int divisor) {
  using Acc = typename Tr::Acc;
  if constexpr (std::is_integral_v<Acc>) {
    if constexpr (std::is_signed_v<Acc>) {
      if (divisor == -1) return static_cast<Acc>(-static_cast<std::make_unsigned_t<Acc>>(x));
      return static_cast<Acc>(static_cast<int64_t>(x) / divisor);
    } else {
      return static_cast<Acc>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
    }
  } else {
    return Tr::narrow(Tr::widen(x) / static_cast<Acc>(divisor));
  }
}

TEST(Kernels, Divide) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(6);
    for (weftDataType_t dt : allTypes()) {
      const bool isSigned =
          dt == weftInt8 || dt == weftInt32 || dt == weftInt64 || dtypeIsFloat(dt);
      for (int divisor : {1, 2, 3, 7, 8, 1000, -1, -3}) {
        if (divisor < 0 && !isSigned) continue;
        for (size_t n : kSizes) {
          for (bool inPlace : {false, true}) {
            if (n > 100000 && (inPlace != (divisor < 0) || (divisor != 3 && divisor != -1)))
              continue;
            SCOPED_TRACE(std::string(dtypeName(dt)) + " /" + std::to_string(divisor) +
                         " n=" + std::to_string(n) + " inplace=" + std::to_string(inPlace));
            withTraits(dt, [&](auto tr) {
              using Tr = decltype(tr);
              using S = typename Tr::S;
              Buf a(n * sizeof(S), 3), d(n * sizeof(S), 1), want(n * sizeof(S), 0);
              fillRandom<Tr>(a, n, rng);
              // Extremes: most negative values, -1, 0, +-(divisor-1).
              const S specials[] = {std::numeric_limits<S>::min(),
                                    std::numeric_limits<S>::max(),
                                    static_cast<S>(-1),
                                    static_cast<S>(0),
                                    static_cast<S>(divisor - 1),
                                    static_cast<S>(1 - divisor)};
              if constexpr (std::is_integral_v<typename Tr::Acc>) {
                for (size_t i = 0; i < n && i < std::size(specials); ++i)
                  put(a.data(), i, specials[i]);
              }
              for (size_t i = 0; i < n; ++i)
                put(want.data(), i, refDivide<Tr>(get<S>(a.data(), i), divisor));
              unsigned char* dst = inPlace ? a.data() : d.data();
              kernels::divide(dst, a.data(), n, dt, divisor);
              EXPECT_TRUE(sameArrays<Tr>(want.data(), dst, n));
              EXPECT_TRUE(a.guardsIntact() && d.guardsIntact());
            });
          }
        }
      }
    }
  });
}

TEST(Kernels, DivideIntegersTruncateTowardZero) {
  const int32_t in[] = {7, -7, 6, -6, 1, -1, 0, std::numeric_limits<int32_t>::min()};
  int32_t out[std::size(in)];
  forEachIsa([&](Isa) {
    kernels::divide(out, in, std::size(in), weftInt32, 2);
    for (size_t i = 0; i < std::size(in); ++i) {
      // Independent of C++'s operator/: |x| / 2 with the sign put back.
      const int64_t mag = std::llabs(static_cast<int64_t>(in[i])) / 2;
      EXPECT_EQ(out[i], in[i] < 0 ? -mag : mag) << in[i];
    }
  });
}

// ---- copy -----------------------------------------------------------------------

void checkCopy(void (*fn)(void*, const void*, size_t), size_t bytes, size_t srcOff, size_t dstOff,
               std::mt19937_64& rng) {
  Buf s(bytes, srcOff), d(bytes, dstOff);
  for (size_t i = 0; i < bytes; ++i) s.data()[i] = static_cast<unsigned char>(rng());
  fn(d.data(), s.data(), bytes);
  EXPECT_EQ(std::memcmp(d.data(), s.data(), bytes), 0);
  EXPECT_TRUE(d.guardsIntact());
}

TEST(Kernels, CopyBelowAndAboveStreamingThreshold) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(7);
    const size_t mib = size_t{1} << 20;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4097},
                         mib - 1, mib, mib + 1, 3 * mib + 17}) {
      for (size_t off : {0, 1, 13}) {
        SCOPED_TRACE("bytes=" + std::to_string(bytes) + " off=" + std::to_string(off));
        checkCopy(&kernels::copy, bytes, off, (off * 5) % 64, rng);
      }
    }
  });
}

// copyCached takes another path where the destination runs 1-63 bytes ahead
// of the source modulo 4 KiB: every copy there and around it lands whole,
// and nothing outside the destination is written.
TEST(Kernels, CopyCachedAtEveryNearOffsetModuloAPage) {
  std::mt19937_64 rng(9);
  constexpr size_t kMost = 100003, kRoom = 8192;
  PageBuffer src = allocatePages(kMost + kRoom), dst = allocatePages(kMost + kRoom);
  ASSERT_TRUE(src && dst);
  for (size_t i = 0; i < kMost + kRoom; ++i) src[i] = static_cast<char>(rng());
  for (size_t ahead : {0, 1, 8, 16, 31, 32, 63, 64, 100, 4095}) {
    for (size_t bytes : {size_t{1023}, size_t{1024}, size_t{4096 + 13}, kMost}) {
      for (auto fn : {&kernels::copyCached, &kernels::copy}) {
        SCOPED_TRACE("ahead=" + std::to_string(ahead) + " bytes=" + std::to_string(bytes));
        std::memset(dst.get(), 0x5A, kMost + kRoom);
        const char* from = src.get() + 128;
        char* to = dst.get() + 128 + ahead;
        fn(to, from, bytes);
        EXPECT_EQ(std::memcmp(to, from, bytes), 0);
        for (char* p = dst.get(); p < to; ++p) ASSERT_EQ(*p, 0x5A);
        for (char* p = to + bytes; p < dst.get() + kMost + kRoom; ++p) ASSERT_EQ(*p, 0x5A);
      }
    }
  }
}

// The streaming path itself, at every head/tail split.
TEST(Kernels, StreamCopyAllAlignments) {
  forEachIsa([](Isa) {
    std::mt19937_64 rng(8);
    const auto fn = kernels::activeTable().streamCopy;
    for (size_t bytes = 0; bytes < 600; bytes += 7) {
      for (size_t off = 0; off < 64; off += 9) {
        SCOPED_TRACE("bytes=" + std::to_string(bytes) + " off=" + std::to_string(off));
        checkCopy(fn, bytes, (off * 3) % 64, off, rng);
      }
    }
  });
}

// ---- dtype basics ------------------------------------------------------------------

TEST(Dtype, NamesAndSizes) {
  const struct {
    weftDataType_t dt;
    const char* name;
    size_t size;
    bool isFloat;
  } want[] = {
      {weftInt8, "int8", 1, false},        {weftUint8, "uint8", 1, false},
      {weftInt32, "int32", 4, false},      {weftUint32, "uint32", 4, false},
      {weftInt64, "int64", 8, false},      {weftUint64, "uint64", 8, false},
      {weftFloat16, "half", 2, true},      {weftFloat32, "float", 4, true},
      {weftFloat64, "double", 8, true},    {weftBfloat16, "bfloat16", 2, true},
      {weftFloat8e4m3, "f8e4m3", 1, true}, {weftFloat8e5m2, "f8e5m2", 1, true},
  };
  for (const auto& w : want) {
    EXPECT_STREQ(dtypeName(w.dt), w.name);
    EXPECT_EQ(dtypeSize(w.dt), w.size) << w.name;
    EXPECT_EQ(dtypeIsFloat(w.dt), w.isFloat) << w.name;
    EXPECT_TRUE(dtypeValid(w.dt));
  }
  EXPECT_FALSE(dtypeValid(-1));
  EXPECT_FALSE(dtypeValid(weftNumTypes));
}

// ---- conversions against the format definitions --------------------------------

struct Format {
  const char* name;
  int e, m;
  bool ieee;  // top exponent is inf/NaN; else only the all-ones magnitude is NaN
  float (*widen)(uint32_t);
  uint32_t (*narrow)(float);
  int bits() const { return 1 + e + m; }
  int bias() const { return (1 << (e - 1)) - 1; }
  uint32_t magMask() const { return (1u << (e + m)) - 1; }
  bool isNanCode(uint32_t c) const {
    const uint32_t mag = c & magMask();
    if (!ieee) return mag == magMask();
    return (mag >> m) == (1u << e) - 1 && (mag & ((1u << m) - 1)) != 0;
  }
  bool isInfCode(uint32_t c) const { return ieee && (c & magMask()) == ((1u << e) - 1) << m; }
  // The value a code stands for, from the definition.
  double value(uint32_t c) const {
    const bool neg = (c >> (e + m)) & 1;
    const uint32_t exp = (c >> m) & ((1u << e) - 1);
    const uint32_t man = c & ((1u << m) - 1);
    double v;
    if (isNanCode(c)) {
      v = std::numeric_limits<double>::quiet_NaN();
    } else if (isInfCode(c)) {
      v = std::numeric_limits<double>::infinity();
    } else if (exp == 0) {
      v = std::ldexp(static_cast<double>(man), 1 - bias() - m);
    } else {
      v = std::ldexp(static_cast<double>((1u << m) | man), static_cast<int>(exp) - bias() - m);
    }
    return neg ? -v : v;
  }
  uint32_t maxFiniteCode() const {
    return ieee ? (((1u << e) - 2) << m) | ((1u << m) - 1) : magMask() - 1;
  }
};

uint32_t halfNarrow(float f) {
  return floatToHalf(f);
}
float halfWiden(uint32_t c) {
  return halfToFloat(static_cast<uint16_t>(c));
}
uint32_t bf16Narrow(float f) {
  return floatToBf16(f);
}
float bf16Widen(uint32_t c) {
  return bf16ToFloat(static_cast<uint16_t>(c));
}
uint32_t e4m3Narrow(float f) {
  return floatToFp8e4m3(f);
}
float e4m3Widen(uint32_t c) {
  return fp8e4m3ToFloat(static_cast<uint8_t>(c));
}
uint32_t e5m2Narrow(float f) {
  return floatToFp8e5m2(f);
}
float e5m2Widen(uint32_t c) {
  return fp8e5m2ToFloat(static_cast<uint8_t>(c));
}

const Format kFormats[] = {
    {"half", 5, 10, true, &halfWiden, &halfNarrow},
    {"bfloat16", 8, 7, true, &bf16Widen, &bf16Narrow},
    {"f8e4m3", 4, 3, false, &e4m3Widen, &e4m3Narrow},
    {"f8e5m2", 5, 2, true, &e5m2Widen, &e5m2Narrow},
};

// Round-to-nearest-even into the format by search over all finite values.
uint32_t referenceNarrow(const Format& f, float x) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.e + f.m) : 0;
  const double a = std::fabs(static_cast<double>(x));
  const uint32_t maxCode = f.maxFiniteCode();
  const double maxVal = f.value(maxCode);
  if (f.ieee) {
    const double ulp = maxVal - f.value(maxCode - 1);
    if (a >= maxVal + ulp / 2) return sign | (((1u << f.e) - 1) << f.m);  // inf
  } else if (a >= maxVal) {
    return sign | maxCode;  // saturate
  }
  // Codes 0..maxCode are increasing in value: binary search.
  uint32_t lo = 0, hi = maxCode;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (f.value(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == maxCode) return sign | lo;
  const double dlo = a - f.value(lo), dhi = f.value(lo + 1) - a;  // exact (Sterbenz)
  uint32_t r = lo;
  if (dhi < dlo || (dhi == dlo && (lo & 1))) r = lo + 1;
  return sign | r;
}

TEST(Conversions, WidenEveryCode) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (uint32_t c = 0; c < (1u << f.bits()); ++c) {
      const float got = f.widen(c);
      const double want = f.value(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << c;
        EXPECT_EQ(std::signbit(got), (c >> (f.e + f.m)) & 1) << c;
      }
    }
  }
}

TEST(Conversions, RoundTripEveryCode) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (uint32_t c = 0; c < (1u << f.bits()); ++c) {
      const uint32_t back = f.narrow(f.widen(c));
      if (f.isNanCode(c)) {
        EXPECT_TRUE(f.isNanCode(back)) << c << " -> " << back;
        EXPECT_EQ(back >> (f.e + f.m), c >> (f.e + f.m)) << "NaN sign " << c;
      } else {
        EXPECT_EQ(back, c);
      }
    }
  }
}

// Every tie between neighbours, and the floats just either side of it.
TEST(Conversions, TiesToEvenBetweenEveryNeighbour) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (uint32_t c = 0; c < f.maxFiniteCode(); ++c) {
      for (uint32_t sign : {0u, 1u << (f.e + f.m)}) {
        const double lo = f.value(c), hi = f.value(c + 1);
        const float mid = static_cast<float>((lo + hi) / 2);
        ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint not exact";
        const float s = sign ? -1.0f : 1.0f;
        const uint32_t even = (c & 1) ? c + 1 : c;
        EXPECT_EQ(f.narrow(s * mid), sign | even) << c;
        EXPECT_EQ(f.narrow(s * std::nextafter(mid, 0.0f)), sign | c) << c;
        EXPECT_EQ(f.narrow(s * std::nextafter(mid, INFINITY)), sign | (c + 1)) << c;
        EXPECT_EQ(referenceNarrow(f, s * mid), sign | even) << "reference " << c;
      }
    }
  }
}

TEST(Conversions, RandomFloatsMatchReference) {
  std::mt19937_64 rng(9);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    // Exponents from below the smallest subnormal to above the largest value.
    const int lowExp = std::max(0, 127 + (1 - f.bias()) - f.m - 3);
    const int highExp = std::min(254, 127 + ((1 << f.e) - 1 - f.bias()) + 2);
    for (int i = 0; i < 400000; ++i) {
      const uint64_t r = rng();
      const uint32_t exp =
          static_cast<uint32_t>(lowExp + static_cast<int>(r % (highExp - lowExp + 1)));
      const uint32_t bits = (static_cast<uint32_t>(r >> 32) & 0x807fffffu) | (exp << 23);
      float x;
      std::memcpy(&x, &bits, sizeof x);
      ASSERT_EQ(f.narrow(x), referenceNarrow(f, x)) << std::hexfloat << x;
    }
    // Whole fp32 range, subnormals included.
    for (int i = 0; i < 200000; ++i) {
      const uint32_t bits = static_cast<uint32_t>(rng());
      float x;
      std::memcpy(&x, &bits, sizeof x);
      if (std::isnan(x)) continue;
      ASSERT_EQ(f.narrow(x), referenceNarrow(f, x)) << std::hexfloat << x;
    }
  }
}

TEST(Conversions, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(floatToHalf(inf), 0x7c00);
  EXPECT_EQ(floatToHalf(-inf), 0xfc00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // the tie above the max rounds to inf
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(nan))));
  EXPECT_EQ(floatToBf16(inf), 0x7f80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(-nan))));
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(1e9f), 0x7e);  // saturates
  EXPECT_EQ(floatToFp8e4m3(inf), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-inf), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(nan) & 0x7f, 0x7f);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7c);  // tie above max -> inf
  EXPECT_EQ(floatToFp8e5m2(-inf), 0xfc);
  EXPECT_TRUE(std::isinf(fp8e5m2ToFloat(0x7c)));
  EXPECT_EQ(fp8e5m2ToFloat(0x01), std::ldexp(1.0f, -16));
}

#if defined(__x86_64__)
// Cross-check against the CPU's own converter where there is one.
__attribute__((target("f16c"))) uint16_t hardwareHalf(float f) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hardwareWiden(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

TEST(Conversions, HalfMatchesF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  std::mt19937_64 rng(10);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, sizeof x);
    ASSERT_EQ(floatToHalf(x), hardwareHalf(x)) << std::hex << bits;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = hardwareWiden(static_cast<uint16_t>(h)),
                got = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << h;
    }
  }
}
#endif

TEST(Kernels, IsaSelection) {
  EXPECT_TRUE(kernels::isaSupported(Isa::Generic));
  EXPECT_TRUE(kernels::isaSupported(kernels::activeIsa()));
  // The default choice is the widest supported one (unless WEFT_KERNEL_ISA caps it).
  if (std::getenv("WEFT_KERNEL_ISA") == nullptr) {
    EXPECT_EQ(kernels::activeIsa(), supportedIsas().back());
  }
}

}  // namespace
}  // namespace weft
