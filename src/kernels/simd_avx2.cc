// The kernels of simd_impl.h built for AVX2 + F16C.
// Compile flags: src/kernels/CMakeLists.txt.
#if defined(__x86_64__)
#define WEFT_SIMD_NS avx2
#define WEFT_SIMD_BYTES 32
#define WEFT_SIMD_TABLE avx2Table
#include "kernels/simd_impl.h"
#else
#include "kernels/dispatch.h"
namespace weft::kernels {
const KernelTable* avx2Table() {
  return nullptr;
}
}  // namespace weft::kernels
#endif
