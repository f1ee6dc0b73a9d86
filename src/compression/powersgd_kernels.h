// PowerSGD's three products over the big matrix M (rows x cols, row-major),
// written for a small rank r so that each is one streaming sweep over M with
// Q (r x cols, kept transposed as Qt) in cache:
//
//   project:     M_i = R_i - P'_i Qt + G_i  (stored back into R_i),  P_i = M_i Qt^T
//   backProject: Qt += P_i^T M_i             (four rows per sweep step)
//   expand:      O_i = P_i Qt                (non-temporal stores for big outputs)
//
// (R: residual, G: gradient, P': last step's P.) A row is `width` <= ld
// elements; the elements past width are padding the caller handles. Every
// kernel runs row by row with 8-wide FMA (AVX2) where the CPU has it, scalar
// otherwise; expand and the M^ part of project compute each element the same
// way on both paths (P_i0 * Qt_0j, then fma in k order), so every rank
// derives bit-identical M^ from the same P and Qt.
//
// Cost per element of M, r = 4: project 2 loads + 1 store + 2r flops,
// backProject 1 load, expand 1 store; all memory-bound on one core.
#pragma once

#include <cstddef>

namespace weft::compression {

// Ranks up to this use the kernels below; larger ranks use BLAS.
constexpr size_t kMaxFusedRank = 8;

// One row: with res, M = (res - (pOld ? pOld Qt : 0)) + in, stored into res;
// without, M = in. p[0..r) = M Qt^T. qt row k is qt + k*ld.
void psgdProjectRow(size_t r, size_t ld, size_t width, const float* in, float* res,
                    const float* pOld, const float* qt, float* p);

// qt[k][0..width) += sum over i < nrows of p[i*r + k] * m[i*ld + 0..width).
void psgdBackProjectRows(size_t r, size_t ld, size_t width, size_t nrows, const float* m,
                         const float* p, float* qt);

// Row i < nrows of out (out + i*ld, width elements) = p[i*r ..] Qt;
// non-temporal stores when `stream` (call psgdStreamFence() after the last).
void psgdExpandRows(size_t r, size_t ld, size_t width, size_t nrows, const float* p,
                    const float* qt, float* out, bool stream);
void psgdStreamFence();

// Tests: the scalar kernels even where AVX2 is there (off again with false).
void psgdUseScalarKernels(bool on);

}  // namespace weft::compression
