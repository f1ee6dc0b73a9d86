// The kernels of simd_impl.h built for baseline x86-64 (SSE2) or any other CPU.
// Compile flags: src/kernels/CMakeLists.txt.
#define WEFT_SIMD_NS generic
#define WEFT_SIMD_BYTES 16
#define WEFT_SIMD_TABLE genericTable
#include "kernels/simd_impl.h"
