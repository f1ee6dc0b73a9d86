// Built with -ffp-contract=off (CMakeLists.txt): the compiler must not fuse
// a multiply and an add on one path and not on the other, or M^ would
// differ between AVX2 and scalar ranks.
#include "compression/powersgd_kernels.h"

#include <array>
#include <atomic>
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
void backScalar(size_t ld, size_t width, size_t nrows, const float* m, const float* p, float* qt) {
  for (size_t i = 0; i < nrows; ++i)
    for (int k = 0; k < R; ++k) {
      float* q = qt + k * ld;
      const float* mi = m + i * ld;
      const float pk = p[i * R + k];
      for (size_t j = 0; j < width; ++j) q[j] = std::fma(pk, mi[j], q[j]);
    }
}

template <int R>
void expandScalar(size_t ld, size_t width, size_t nrows, const float* p, const float* qt,
                  float* out, bool) {
  for (size_t i = 0; i < nrows; ++i)
    for (size_t j = 0; j < width; ++j) out[i * ld + j] = expandAt<R>(p + i * R, qt, ld, j);
}

// ---- AVX2 + FMA ----
#if defined(__x86_64__)

// Software prefetch this many elements ahead of the streams: one core's
// hardware prefetcher alone leaves memory bandwidth unused (measured: sweep
// 1 about 20% faster at 4 KiB ahead). Past the end of a row it fetches the
// next row, which is the next thing read anyway; prefetches never fault.
constexpr size_t kPrefetchAhead = 1024;

inline void prefetch(const float* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

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
    if ((j & 15) == 0) {
      if constexpr (kRes) prefetch(res + j + kPrefetchAhead);
      prefetch(in + j + kPrefetchAhead);
    }
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

// Rows per step of backProject: each Qt vector loaded and stored (in L2: Qt
// is r x cols, 64 KiB at r = 4, cols = 4096) serves this many rows
// (measured: the sweep about 30% faster than with 2 rows).
constexpr size_t kRowsPerStep = 4;
#ifndef KEXP
#define KEXP 4
#endif
constexpr size_t kExpandRows = KEXP;

template <int R, int NR>
__attribute__((target("avx2,fma"))) void backAvx2(size_t ld, size_t width, const float* m,
                                                  const float* p, float* qt) {
  __m256 pb[NR][R];
  for (int i = 0; i < NR; ++i)
    for (int k = 0; k < R; ++k) pb[i][k] = _mm256_set1_ps(p[i * R + k]);
  size_t j = 0;
  for (; j + 8 <= width; j += 8) {
    __m256 x[NR];
    for (int i = 0; i < NR; ++i) {
      if ((j & 15) == 0) prefetch(m + i * ld + j + kPrefetchAhead);
      x[i] = _mm256_loadu_ps(m + i * ld + j);
    }
    for (int k = 0; k < R; ++k) {
      float* q = qt + k * ld + j;
      __m256 v = _mm256_loadu_ps(q);
      for (int i = 0; i < NR; ++i) v = _mm256_fmadd_ps(pb[i][k], x[i], v);
      _mm256_storeu_ps(q, v);
    }
  }
  for (; j < width; ++j)
    for (int k = 0; k < R; ++k) {
      float v = qt[k * ld + j];
      for (int i = 0; i < NR; ++i) v = std::fma(p[i * R + k], m[i * ld + j], v);
      qt[k * ld + j] = v;
    }
}

template <int R>
__attribute__((target("avx2,fma"))) void backRowsAvx2(size_t ld, size_t width, size_t nrows,
                                                      const float* m, const float* p, float* qt) {
  size_t i = 0;
  for (; i + kRowsPerStep <= nrows; i += kRowsPerStep)
    backAvx2<R, kRowsPerStep>(ld, width, m + i * ld, p + i * R, qt);
  for (; i < nrows; ++i) backAvx2<R, 1>(ld, width, m + i * ld, p + i * R, qt);
}

template <int R>
__attribute__((target("avx2,fma"))) inline __m256 expandAt8(const __m256* pk, const __m256* q) {
  __m256 v = _mm256_mul_ps(pk[0], q[0]);
  for (int k = 1; k < R; ++k) v = _mm256_fmadd_ps(pk[k], q[k], v);
  return v;
}

// One row of out, from column `head` on 32-byte aligned when streaming.
// (One row at a time, one vector per step: interleaving the non-temporal
// stores of several rows, or of two vectors per step, measured slower.)
template <int R>
__attribute__((target("avx2,fma"))) void expandAvx2(size_t ld, size_t width, size_t head,
                                                    const float* p, const float* qt, float* out,
                                                    bool stream) {
  __m256 pb[R];
  for (int k = 0; k < R; ++k) pb[k] = _mm256_set1_ps(p[k]);
  for (size_t j = 0; j < head; ++j) out[j] = expandAt<R>(p, qt, ld, j);
  size_t j = head;
  for (; j + 8 <= width; j += 8) {
    __m256 q[R];
    for (int k = 0; k < R; ++k) q[k] = _mm256_loadu_ps(qt + k * ld + j);
    const __m256 v = expandAt8<R>(pb, q);
    if (stream)
      _mm256_stream_ps(out + j, v);
    else
      _mm256_storeu_ps(out + j, v);
  }
  for (; j < width; ++j) out[j] = expandAt<R>(p, qt, ld, j);
}

template <int R>
__attribute__((target("avx2,fma"))) void expandRowsAvx2(size_t ld, size_t width, size_t nrows,
                                                        const float* p, const float* qt, float* out,
                                                        bool stream) {
  for (size_t i = 0; i < nrows; ++i) {
    float* o = out + i * ld;
    size_t head = 0;
    while (stream && head < width && (reinterpret_cast<uintptr_t>(o + head) & 31) != 0) ++head;
    expandAvx2<R>(ld, width, head, p + i * R, qt, o, stream);
  }
}

bool haveAvx2Fma() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return have;
}

#endif  // __x86_64__

using ProjectFn = void (*)(size_t, size_t, const float*, float*, const float*, const float*,
                           float*);
using BackFn = void (*)(size_t, size_t, size_t, const float*, const float*, float*);
using ExpandFn = void (*)(size_t, size_t, size_t, const float*, const float*, float*, bool);

struct Kernels {
  ProjectFn project[3];  // [0] no residual, [1] residual, [2] residual minus last M^
  BackFn back;
  ExpandFn expand;
};

template <int R>
Kernels scalarKernelsFor() {
  return {
      {projectScalar<R, false, false>, projectScalar<R, true, false>, projectScalar<R, true, true>},
      backScalar<R>,
      expandScalar<R>};
}

template <int R>
Kernels kernelsFor() {
#if defined(__x86_64__)
  if (haveAvx2Fma())
    return {{projectAvx2<R, false, false>, projectAvx2<R, true, false>, projectAvx2<R, true, true>},
            backRowsAvx2<R>,
            expandRowsAvx2<R>};
#endif
  return scalarKernelsFor<R>();
}

std::atomic<bool> forceScalar{false};

const Kernels& kernels(size_t r) {
  static const std::array<Kernels, kMaxFusedRank> best = {
      kernelsFor<1>(), kernelsFor<2>(), kernelsFor<3>(), kernelsFor<4>(),
      kernelsFor<5>(), kernelsFor<6>(), kernelsFor<7>(), kernelsFor<8>()};
  static const std::array<Kernels, kMaxFusedRank> scalar = {
      scalarKernelsFor<1>(), scalarKernelsFor<2>(), scalarKernelsFor<3>(), scalarKernelsFor<4>(),
      scalarKernelsFor<5>(), scalarKernelsFor<6>(), scalarKernelsFor<7>(), scalarKernelsFor<8>()};
  return (forceScalar.load(std::memory_order_relaxed) ? scalar : best)[r - 1];
}

}  // namespace

void psgdProjectRow(size_t r, size_t ld, size_t width, const float* in, float* res,
                    const float* pOld, const float* qt, float* p) {
  const int mode = res == nullptr ? 0 : (pOld == nullptr ? 1 : 2);
  kernels(r).project[mode](ld, width, in, res, pOld, qt, p);
}

void psgdBackProjectRows(size_t r, size_t ld, size_t width, size_t nrows, const float* m,
                         const float* p, float* qt) {
  kernels(r).back(ld, width, nrows, m, p, qt);
}

void psgdExpandRows(size_t r, size_t ld, size_t width, size_t nrows, const float* p,
                    const float* qt, float* out, bool stream) {
  kernels(r).expand(ld, width, nrows, p, qt, out, stream);
}

void psgdUseScalarKernels(bool on) {
  forceScalar.store(on, std::memory_order_relaxed);
}

void psgdStreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace weft::compression
