// Reduction and copy kernels on GPU memory (reduce.cu), callable from plain
// C++: no CUDA header needed here, streams pass as void* (a cudaStream_t) and
// results come back as ints (cudaError_t values, 0 = success).
//
// Same arithmetic as the host kernels (reduce.h): fp16, bf16 and fp8 are
// widened to fp32, combined, and rounded once per output element; integers
// wrap; avg divides the sum (integers truncate toward zero).
#pragma once

#include <cstddef>

#include "weft/weft.h"

namespace weft::cuda {

enum class Op { Sum, Prod, Max, Min };

constexpr int kMaxSources = 8;

struct ReduceArgs {
  void* dst = nullptr;
  const void* srcs[kMaxSources] = {};
  int nsrcs = 0;  // 1..kMaxSources
  size_t count = 0;
  weftDataType_t dtype = weftFloat32;
  Op op = Op::Sum;
  // PreMulSum (with Op::Sum): every source element is multiplied by this
  // before the sum. Zero/absent: no scaling.
  bool preScale = false;
  double scale = 1.0;
  // Avg: the result is divided by this when > 1.
  int divisor = 1;
};

// dst[i] = op over the sources of src[j][i]; dst may alias a source. Sources
// may be peers' buffers opened through CUDA IPC. Grid size follows count;
// 16-byte vector loads when every pointer is 16-byte aligned.
int reduce(const ReduceArgs& args, void* stream);

// bytes from src to dst with the SMs (not the copy engine), 16-byte vectors
// when aligned: for peer copies that should overlap a reduction.
int copy(void* dst, const void* src, size_t bytes, void* stream);

// The name of a CUDA error code.
const char* errorName(int err);

}  // namespace weft::cuda
