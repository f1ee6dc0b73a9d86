// Built with -ffp-contract=off (CMakeLists.txt): the compiler must not fuse
// a multiply and an add on one path and not on the other, or M^ would
// differ between AVX2 and scalar ranks.
#include "compression/powersgd_kernels.h"

#include <array>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft::compression {
namespace {

// ---- scalar ----

// p Qt at column j: p0*q0, then fma in k order (the AVX2 path does the same).
template <int R>
inline float expandAt(const float* p, const float* qt, size_t ld, size_t j) {
  float v = p[0] * qt[j];
  for (int k = 1; k < R; ++k) v = std::fma(p[k], qt[k * ld + j], v);
  return v;
}

template <int R, bool kRes, bool kSub>
inline float formAt(const float* in, float* res, const float* pOld, const float* qt, size_t ld,
                    size_t j) {
  if constexpr (!kRes) {
    return in[j];
  } else {
    float m = res[j];
    if constexpr (kSub) m = m - expandAt<R>(pOld, qt, ld, j);
    m = m + in[j];
    res[j] = m;
    return m;
  }
}

template <int R, bool kRes, bool kSub>
void projectScalar(size_t ld, size_t width, const float* in, float* res, const float* pOld,
                   const float* qt, float* p) {
  float acc[R] = {};
  for (size_t j = 0; j < width; ++j) {
    const float m = formAt<R, kRes, kSub>(in, res, pOld, qt, ld, j);
    for (int k = 0; k < R; ++k) acc[k] = std::fma(m, qt[k * ld + j], acc[k]);
  }
  for (int k = 0; k < R; ++k) p[k] = acc[k];
}

template <int R>
void backScalar(size_t ld, size_t width, const float* m0, const float* p0, const float* m1,
                const float* p1, float* qt) {
  for (int k = 0; k < R; ++k) {
    float* q = qt + k * ld;
    for (size_t j = 0; j < width; ++j) {
      float v = std::fma(p0[k], m0[j], q[j]);
      if (m1 != nullptr) v = std::fma(p1[k], m1[j], v);
      q[j] = v;
    }
  }
}

template <int R>
void expandScalar(size_t ld, size_t width, const float* p, const float* qt, float* out, bool) {
  for (size_t j = 0; j < width; ++j) out[j] = expandAt<R>(p, qt, ld, j);
}

// ---- AVX2 + FMA ----
#if defined(__x86_64__)

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <int R, bool kRes, bool kSub>
__attribute__((target("avx2,fma"))) void projectAvx2(size_t ld, size_t width, const float* in,
                                                     float* res, const float* pOld, const float* qt,
                                                     float* p) {
  __m256 acc[R];
  __m256 po[R];
  for (int k = 0; k < R; ++k) {
    acc[k] = _mm256_setzero_ps();
    po[k] = _mm256_set1_ps(kSub ? pOld[k] : 0.0f);
  }
  size_t j = 0;
  for (; j + 8 <= width; j += 8) {
    __m256 q[R];
    for (int k = 0; k < R; ++k) q[k] = _mm256_loadu_ps(qt + k * ld + j);
    __m256 m;
    if constexpr (kRes) {
      m = _mm256_loadu_ps(res + j);
      if constexpr (kSub) {
        __m256 mh = _mm256_mul_ps(po[0], q[0]);
        for (int k = 1; k < R; ++k) mh = _mm256_fmadd_ps(po[k], q[k], mh);
        m = _mm256_sub_ps(m, mh);
      }
      m = _mm256_add_ps(m, _mm256_loadu_ps(in + j));
      _mm256_storeu_ps(res + j, m);
    } else {
      m = _mm256_loadu_ps(in + j);
    }
    for (int k = 0; k < R; ++k) acc[k] = _mm256_fmadd_ps(m, q[k], acc[k]);
  }
  float tail[R] = {};
  for (; j < width; ++j) {
    const float m = formAt<R, kRes, kSub>(in, res, pOld, qt, ld, j);
    for (int k = 0; k < R; ++k) tail[k] = std::fma(m, qt[k * ld + j], tail[k]);
  }
  for (int k = 0; k < R; ++k) p[k] = hsum(acc[k]) + tail[k];
}

template <int R>
__attribute__((target("avx2,fma"))) void backAvx2(size_t ld, size_t width, const float* m0,
                                                  const float* p0, const float* m1, const float* p1,
                                                  float* qt) {
  __m256 a[R], b[R];
  for (int k = 0; k < R; ++k) {
    a[k] = _mm256_set1_ps(p0[k]);
    b[k] = _mm256_set1_ps(m1 != nullptr ? p1[k] : 0.0f);
  }
  size_t j = 0;
  if (m1 != nullptr) {
    for (; j + 8 <= width; j += 8) {
      const __m256 x0 = _mm256_loadu_ps(m0 + j), x1 = _mm256_loadu_ps(m1 + j);
      for (int k = 0; k < R; ++k) {
        float* q = qt + k * ld + j;
        __m256 v = _mm256_fmadd_ps(a[k], x0, _mm256_loadu_ps(q));
        _mm256_storeu_ps(q, _mm256_fmadd_ps(b[k], x1, v));
      }
    }
  } else {
    for (; j + 8 <= width; j += 8) {
      const __m256 x0 = _mm256_loadu_ps(m0 + j);
      for (int k = 0; k < R; ++k) {
        float* q = qt + k * ld + j;
        _mm256_storeu_ps(q, _mm256_fmadd_ps(a[k], x0, _mm256_loadu_ps(q)));
      }
    }
  }
  for (; j < width; ++j)
    for (int k = 0; k < R; ++k) {
      float v = std::fma(p0[k], m0[j], qt[k * ld + j]);
      if (m1 != nullptr) v = std::fma(p1[k], m1[j], v);
      qt[k * ld + j] = v;
    }
}

template <int R>
__attribute__((target("avx2,fma"))) inline __m256 expandAt8(const __m256* pk, const float* qt,
                                                            size_t ld, size_t j) {
  __m256 v = _mm256_mul_ps(pk[0], _mm256_loadu_ps(qt + j));
  for (int k = 1; k < R; ++k) v = _mm256_fmadd_ps(pk[k], _mm256_loadu_ps(qt + k * ld + j), v);
  return v;
}

template <int R>
__attribute__((target("avx2,fma"))) void expandAvx2(size_t ld, size_t width, const float* p,
                                                    const float* qt, float* out, bool stream) {
  __m256 pk[R];
  for (int k = 0; k < R; ++k) pk[k] = _mm256_set1_ps(p[k]);
  size_t j = 0;
  if (stream) {
    for (; j < width && (reinterpret_cast<uintptr_t>(out + j) & 31) != 0; ++j)
      out[j] = expandAt<R>(p, qt, ld, j);
    for (; j + 8 <= width; j += 8) _mm256_stream_ps(out + j, expandAt8<R>(pk, qt, ld, j));
  } else {
    for (; j + 8 <= width; j += 8) _mm256_storeu_ps(out + j, expandAt8<R>(pk, qt, ld, j));
  }
  for (; j < width; ++j) out[j] = expandAt<R>(p, qt, ld, j);
}

bool haveAvx2Fma() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return have;
}

#endif  // __x86_64__

using ProjectFn = void (*)(size_t, size_t, const float*, float*, const float*, const float*,
                           float*);
using BackFn = void (*)(size_t, size_t, const float*, const float*, const float*, const float*,
                        float*);
using ExpandFn = void (*)(size_t, size_t, const float*, const float*, float*, bool);

struct Kernels {
  ProjectFn project[3];  // [0] no residual, [1] residual, [2] residual minus last M^
  BackFn back;
  ExpandFn expand;
};

template <int R>
Kernels kernelsFor() {
#if defined(__x86_64__)
  if (haveAvx2Fma())
    return {{projectAvx2<R, false, false>, projectAvx2<R, true, false>, projectAvx2<R, true, true>},
            backAvx2<R>,
            expandAvx2<R>};
#endif
  return {
      {projectScalar<R, false, false>, projectScalar<R, true, false>, projectScalar<R, true, true>},
      backScalar<R>,
      expandScalar<R>};
}

const Kernels& kernels(size_t r) {
  static const std::array<Kernels, kMaxFusedRank> table = {
      kernelsFor<1>(), kernelsFor<2>(), kernelsFor<3>(), kernelsFor<4>(),
      kernelsFor<5>(), kernelsFor<6>(), kernelsFor<7>(), kernelsFor<8>()};
  return table[r - 1];
}

}  // namespace

void psgdProjectRow(size_t r, size_t ld, size_t width, const float* in, float* res,
                    const float* pOld, const float* qt, float* p) {
  const int mode = res == nullptr ? 0 : (pOld == nullptr ? 1 : 2);
  kernels(r).project[mode](ld, width, in, res, pOld, qt, p);
}

void psgdBackProjectRows(size_t r, size_t ld, size_t width, const float* m0, const float* p0,
                         const float* m1, const float* p1, float* qt) {
  kernels(r).back(ld, width, m0, p0, m1, p1, qt);
}

void psgdExpandRow(size_t r, size_t ld, size_t width, const float* p, const float* qt, float* out,
                   bool stream) {
  kernels(r).expand(ld, width, p, qt, out, stream);
}

void psgdStreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace weft::compression
