// The kernels of simd_impl.h built for AVX-512 F/BW/DQ/VL.
// Compile flags: src/kernels/CMakeLists.txt.
#if defined(__x86_64__)
#define WEFT_SIMD_NS avx512
#define WEFT_SIMD_BYTES 64
#define WEFT_SIMD_TABLE avx512Table
#include "kernels/simd_impl.h"
#else
#include "kernels/dispatch.h"
namespace weft::kernels {
const KernelTable* avx512Table() {
  return nullptr;
}
}  // namespace weft::kernels
#endif
