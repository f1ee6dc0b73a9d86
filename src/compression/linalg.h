// The small dense linear algebra PowerSGD needs, on row-major fp32 matrices,
// through CBLAS (OpenBLAS).
#pragma once

#include <cstddef>

namespace weft::compression {

// Sets OpenBLAS's thread count once per process from WEFT_BLAS_THREADS
// (default 1: every rank is a process with a core of its own, and BLAS
// threads spinning next to the ranks slow the collectives; 0 leaves
// OpenBLAS's own setting). With the serial OpenBLAS the build prefers,
// more than 1 is warned about and runs one thread.
void configureBlasThreads();

// C (m x n) = alpha * op(A) op(B) + beta * C; op = transpose when the flag is set.
void gemm(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Orthonormalises the r columns of P (m x r, row-major, m >= r) in place.
// r <= kGramSchmidtMaxRank: modified Gram-Schmidt; larger: Householder QR
// (more stable when columns are close to dependent). A column that is
// (numerically) dependent on the ones before it becomes zero. `work` holds
// 2*m*r floats (Householder only).
constexpr size_t kGramSchmidtMaxRank = 16;
void orthonormalize(float* p, size_t m, size_t r, float* work);
void gramSchmidt(float* p, size_t m, size_t r);
void householderQ(float* p, size_t m, size_t r, float* work);

}  // namespace weft::compression
