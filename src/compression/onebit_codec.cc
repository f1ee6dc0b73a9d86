// The 1-bit codec. Wire layout of a chunk of capacity C with blocks of B
// elements: ceil(C/B) fp32 scales, then ceil(C/8) bytes of sign bits
// (element j is bit j%8 of byte j/8; 1 means >= 0). Blocks past the end of
// the data have scale 0.
//
// The per-block loops have an AVX2 form (movemask packs 8 signs at once,
// compare-and-blend expands them) and a portable one; which one runs only
// changes the rounding of a block's scale on the encoding rank, and every
// rank decodes the same transmitted scale, so results stay identical.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "compression/codec.h"

namespace weft::compression {
namespace {

// ---- portable ----------------------------------------------------------------

float absMeanScalar(const float* a, size_t m) {
  float sum = 0;
  for (size_t j = 0; j < m; ++j) sum += std::fabs(a[j]);
  return sum / static_cast<float>(m);
}

void packScalar(const float* a, size_t m, uint8_t* out) {
  for (size_t j = 0; j < m; j += 8) {
    const size_t k = std::min<size_t>(8, m - j);
    unsigned byte = 0;
    for (size_t t = 0; t < k; ++t) byte |= static_cast<unsigned>(a[j + t] >= 0.0f) << t;
    out[j / 8] = static_cast<uint8_t>(byte);
  }
}

void subtractScalar(float* r, size_t m, float s) {
  for (size_t j = 0; j < m; ++j) r[j] -= r[j] >= 0.0f ? s : -s;
}

template <bool kAdd>
void expandScalar(const uint8_t* in, size_t m, float s, float* o) {
  for (size_t j = 0; j < m; ++j) {
    const float v = ((in[j / 8] >> (j % 8)) & 1u) ? s : -s;
    if constexpr (kAdd)
      o[j] += v;
    else
      o[j] = v;
  }
}

// ---- AVX2 --------------------------------------------------------------------

// The mean |x| over m elements from the two vector accumulators of x[0, j)
// and the scalar rest: one place, so that both encoder paths round alike.
__attribute__((target("avx2"))) float meanOfLanes(__m256 acc0, __m256 acc1, const float* x,
                                                  size_t j, size_t m) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(acc0, acc1));
  float sum = 0;
  for (float v : lanes) sum += v;
  for (; j < m; ++j) sum += std::fabs(x[j]);
  return sum / static_cast<float>(m);
}

__attribute__((target("avx2"))) float absMeanAvx2(const float* a, size_t m) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= m; j += 16) {
    acc0 = _mm256_add_ps(acc0, _mm256_and_ps(absMask, _mm256_loadu_ps(a + j)));
    acc1 = _mm256_add_ps(acc1, _mm256_and_ps(absMask, _mm256_loadu_ps(a + j + 8)));
  }
  return meanOfLanes(acc0, acc1, a, j, m);
}

// r += a, then the mean |r| exactly as absMeanAvx2(r) computes it, in one
// pass: the only one of the encoder's passes that reaches memory, so it
// prefetches ahead (one core's hardware prefetcher leaves bandwidth unused).
__attribute__((target("avx2"))) float addAbsMeanAvx2(float* r, const float* a, size_t m) {
  constexpr size_t kAhead = 1024;
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= m; j += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(a + j + kAhead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r + j + kAhead), _MM_HINT_T0);
    const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(r + j), _mm256_loadu_ps(a + j));
    const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(r + j + 8), _mm256_loadu_ps(a + j + 8));
    _mm256_storeu_ps(r + j, v0);
    _mm256_storeu_ps(r + j + 8, v1);
    acc0 = _mm256_add_ps(acc0, _mm256_and_ps(absMask, v0));
    acc1 = _mm256_add_ps(acc1, _mm256_and_ps(absMask, v1));
  }
  for (size_t t = j; t < m; ++t) r[t] += a[t];
  return meanOfLanes(acc0, acc1, r, j, m);
}

__attribute__((target("avx2"))) void packAvx2(const float* a, size_t m, uint8_t* out) {
  const __m256 zero = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= m; j += 8)
    out[j / 8] = static_cast<uint8_t>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(a + j), zero, _CMP_GE_OQ)));
  if (j < m) packScalar(a + j, m - j, out + j / 8);
}

// packAvx2(r), then r -= (r >= 0 ? s : -s) as subtractScalar does, in one
// pass over the block (one compare serves both).
__attribute__((target("avx2"))) void packSubtractAvx2(float* r, size_t m, float s, uint8_t* out) {
  const __m256 zero = _mm256_setzero_ps(), pos = _mm256_set1_ps(s), neg = _mm256_set1_ps(-s);
  size_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const __m256 v = _mm256_loadu_ps(r + j);
    const __m256 ge = _mm256_cmp_ps(v, zero, _CMP_GE_OQ);
    out[j / 8] = static_cast<uint8_t>(_mm256_movemask_ps(ge));
    _mm256_storeu_ps(r + j, _mm256_sub_ps(v, _mm256_blendv_ps(neg, pos, ge)));
  }
  if (j < m) {
    packScalar(r + j, m - j, out + j / 8);
    subtractScalar(r + j, m - j, s);
  }
}

template <bool kAdd>
__attribute__((target("avx2"))) void expandAvx2(const uint8_t* in, size_t m, float s, float* o) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 pos = _mm256_set1_ps(s), neg = _mm256_set1_ps(-s);
  size_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const __m256i b = _mm256_and_si256(_mm256_set1_epi32(in[j / 8]), bits);
    const __m256 mask = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, bits));
    __m256 v = _mm256_blendv_ps(neg, pos, mask);
    if constexpr (kAdd) v = _mm256_add_ps(v, _mm256_loadu_ps(o + j));
    _mm256_storeu_ps(o + j, v);
  }
  if (j < m) expandScalar<kAdd>(in + j / 8, m - j, s, o + j);
}

bool useAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// ---- the codec -----------------------------------------------------------------

class OneBitCodec final : public ChunkCodec {
 public:
  explicit OneBitCodec(size_t block) : block_(block), avx2_(useAvx2()) {}
  const char* name() const override { return "onebit"; }
  size_t wireBytes(size_t capacity) const override {
    return numBlocks(capacity) * sizeof(float) + (capacity + 7) / 8;
  }

  size_t granule() const override { return block_; }

  void encodeRange(const float* x, float* residual, size_t begin, size_t end, size_t capacity,
                   uint8_t* wire) const override {
    uint8_t* signs = wire + numBlocks(capacity) * sizeof(float);
    for (size_t start = begin; start < end; start += block_) {
      const size_t m = std::min(block_, end - start);
      const float* a = x + (start - begin);
      float* r = residual ? residual + (start - begin) : nullptr;
      float s;
      if (r != nullptr) {
        // acc = x + r, kept in r while the block is in cache.
        if (avx2_) {
          s = addAbsMeanAvx2(r, a, m);
        } else {
          for (size_t j = 0; j < m; ++j) r[j] += a[j];
          s = absMeanScalar(r, m);
        }
        a = r;
      } else {
        s = avx2_ ? absMeanAvx2(a, m) : absMeanScalar(a, m);
      }
      std::memcpy(wire + (start / block_) * sizeof(float), &s, sizeof(float));
      if (r != nullptr && avx2_) {
        packSubtractAvx2(r, m, s, signs + start / 8);
      } else if (avx2_) {
        packAvx2(a, m, signs + start / 8);
      } else {
        packScalar(a, m, signs + start / 8);
        if (r != nullptr) subtractScalar(r, m, s);
      }
    }
  }

  void decodeRange(const uint8_t* wire, size_t begin, size_t end, size_t capacity, float* out,
                   bool add) const override {
    if (add)
      run<true>(wire, begin, end, capacity, out);
    else
      run<false>(wire, begin, end, capacity, out);
  }

  void zeroUnused(uint8_t* wire, size_t n, size_t capacity) const override {
    const size_t usedBlocks = numBlocks(n), usedBytes = (n + 7) / 8;
    std::memset(wire + usedBlocks * sizeof(float), 0,
                (numBlocks(capacity) - usedBlocks) * sizeof(float));
    uint8_t* signs = wire + numBlocks(capacity) * sizeof(float);
    std::memset(signs + usedBytes, 0, (capacity + 7) / 8 - usedBytes);
  }

 private:
  size_t numBlocks(size_t n) const { return (n + block_ - 1) / block_; }

  template <bool kAdd>
  void run(const uint8_t* wire, size_t begin, size_t end, size_t capacity, float* out) const {
    const uint8_t* signs = wire + numBlocks(capacity) * sizeof(float);
    for (size_t start = begin; start < end; start += block_) {
      const size_t m = std::min(block_, end - start);
      float s;
      std::memcpy(&s, wire + (start / block_) * sizeof(float), sizeof(float));
      float* o = out + (start - begin);
      if (avx2_)
        expandAvx2<kAdd>(signs + start / 8, m, s, o);
      else
        expandScalar<kAdd>(signs + start / 8, m, s, o);
    }
  }

  size_t block_;
  bool avx2_;
};

}  // namespace

std::unique_ptr<ChunkCodec> makeOneBitCodec(size_t block) {
  return std::make_unique<OneBitCodec>(block);
}

}  // namespace weft::compression
