#include "compression/linalg.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/env.h"
#include "base/log.h"

namespace weft::compression {
namespace {

// Relative size below which a column counts as dependent on the others.
constexpr float kDependent = 1e-6f;

}  // namespace

void configureBlasThreads() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int64_t threads = envInt("BLAS_THREADS", 1);
    // The build links the serial OpenBLAS where installed
    // (src/compression/CMakeLists.txt): one thread, whatever is asked.
    if (threads > 1 && openblas_get_parallel() == 0) {
      WEFT_WARN(kLogEnv,
                "WEFT_BLAS_THREADS=%lld: this OpenBLAS is the serial build (weft links it to "
                "keep a BLAS thread pool out of every rank); PowerSGD runs BLAS on one thread",
                static_cast<long long>(threads));
    }
    if (threads > 0) openblas_set_num_threads(static_cast<int>(threads));
  });
}

void gemm(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  const int lda = static_cast<int>(transA ? m : k);
  const int ldb = static_cast<int>(transB ? k : n);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, lda, b, ldb,
              beta, c, static_cast<int>(n));
}

void gramSchmidt(float* p, size_t m, size_t r) {
  const int mi = static_cast<int>(m), ri = static_cast<int>(r);
  for (size_t i = 0; i < r; ++i) {
    float* col = p + i;
    const float before = cblas_snrm2(mi, col, ri);
    for (size_t j = 0; j < i; ++j) {
      const float d = cblas_sdot(mi, p + j, ri, col, ri);
      cblas_saxpy(mi, -d, p + j, ri, col, ri);
    }
    const float norm = cblas_snrm2(mi, col, ri);
    if (norm > kDependent * before && norm > 0.0f) {
      cblas_sscal(mi, 1.0f / norm, col, ri);
    } else {
      cblas_sscal(mi, 0.0f, col, ri);
    }
  }
}

// P = Q R with Householder reflections H_j = I - 2 v_j v_j^T applied to the
// columns in turn; then Q's first r columns = H_0 ... H_{r-1} [I; 0].
void householderQ(float* p, size_t m, size_t r, float* work) {
  const int ri = static_cast<int>(r);
  float* v = work;          // m x r: column j holds v_j (zero above row j)
  float* q = work + m * r;  // m x r: the result
  std::memset(v, 0, m * r * sizeof(float));
  std::vector<bool> dependent(r, false);
  const float scale = cblas_snrm2(static_cast<int>(m * r), p, 1);
  for (size_t j = 0; j < r; ++j) {
    const int len = static_cast<int>(m - j);
    float* x = p + j * r + j;  // column j from row j down, stride r
    const float norm = cblas_snrm2(len, x, ri);
    if (norm <= kDependent * scale || norm == 0.0f) {
      dependent[j] = true;
      continue;
    }
    const float alpha = x[0] >= 0.0f ? -norm : norm;
    float* vj = v + j * r + j;
    cblas_scopy(len, x, ri, vj, ri);
    vj[0] -= alpha;
    const float vnorm = cblas_snrm2(len, vj, ri);
    cblas_sscal(len, 1.0f / vnorm, vj, ri);
    // A[j:, j:] -= 2 v (v^T A[j:, j:]).
    const int cols = static_cast<int>(r - j);
    std::vector<float> w(cols);
    cblas_sgemv(CblasRowMajor, CblasTrans, len, cols, 1.0f, x, ri, vj, ri, 0.0f, w.data(), 1);
    cblas_sger(CblasRowMajor, len, cols, -2.0f, vj, ri, w.data(), 1, x, ri);
  }
  std::memset(q, 0, m * r * sizeof(float));
  for (size_t j = 0; j < r; ++j) q[j * r + j] = 1.0f;
  std::vector<float> w(r);
  for (size_t j = r; j-- > 0;) {
    if (dependent[j]) continue;
    const int len = static_cast<int>(m - j);
    const float* vj = v + j * r + j;
    float* sub = q + j * r;  // rows j.., all r columns
    cblas_sgemv(CblasRowMajor, CblasTrans, len, ri, 1.0f, sub, ri, vj, ri, 0.0f, w.data(), 1);
    cblas_sger(CblasRowMajor, len, ri, -2.0f, vj, ri, w.data(), 1, sub, ri);
  }
  // Columns of dependent steps are not part of the span of P: zero them.
  for (size_t j = 0; j < r; ++j)
    if (dependent[j]) cblas_sscal(static_cast<int>(m), 0.0f, q + j, ri);
  std::memcpy(p, q, m * r * sizeof(float));
}

void orthonormalize(float* p, size_t m, size_t r, float* work) {
  if (r <= kGramSchmidtMaxRank)
    gramSchmidt(p, m, r);
  else
    householderQ(p, m, r, work);
}

}  // namespace weft::compression
