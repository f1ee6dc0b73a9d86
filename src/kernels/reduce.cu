// GPU reduction and copy kernels: one kernel template per element type (12
// instantiations), the op a uniform run-time switch, since a memory-bound
// kernel does not feel it and every (type, op) pair would be 48 kernels to
// build on CI's two cores. Each thread moves 16 bytes per step (uint4 loads
// and stores) when all pointers are 16-byte aligned; the tail and unaligned
// calls go element by element. Avg rounds the sum to the type before dividing
// and nothing is contracted into FMAs (-fmad=false), so results match the
// host kernels bit for bit. Grid: enough 256-thread blocks to cover the
// vectors, capped at 8 blocks per SM (grid-stride beyond that).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_kernels.h"

namespace weft::cuda {
namespace {

// Storage tags of the narrow float types (ints of the same size are weft's
// int8/uint8/... types, so these need names of their own).
struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
struct E4M3 {
  uint8_t v;
};
struct E5M2 {
  uint8_t v;
};

// How a type is widened for arithmetic and narrowed back.
template <class T>
struct Cvt {
  using Acc = T;
  __device__ static Acc load(T x) { return x; }
  __device__ static T store(Acc a) { return a; }
};
template <>
struct Cvt<F16> {
  using Acc = float;
  __device__ static float load(F16 x) { return __half2float(__ushort_as_half(x.v)); }
  __device__ static F16 store(float a) { return {__half_as_ushort(__float2half_rn(a))}; }
};
template <>
struct Cvt<BF16> {
  using Acc = float;
  __device__ static float load(BF16 x) { return __bfloat162float(__ushort_as_bfloat16(x.v)); }
  __device__ static BF16 store(float a) { return {__bfloat16_as_ushort(__float2bfloat16_rn(a))}; }
};
template <>
struct Cvt<E4M3> {
  using Acc = float;
  __device__ static float load(E4M3 x) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.v, __NV_E4M3)));
  }
  // Saturating, as weft's host conversion (e4m3 has no infinity).
  __device__ static E4M3 store(float a) {
    return {__nv_cvt_float_to_fp8(a, __NV_SATFINITE, __NV_E4M3)};
  }
};
template <>
struct Cvt<E5M2> {
  using Acc = float;
  __device__ static float load(E5M2 x) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.v, __NV_E5M2)));
  }
  // Overflow becomes infinity, as weft's host conversion.
  __device__ static E5M2 store(float a) {
    return {__nv_cvt_float_to_fp8(a, __NV_NOSAT, __NV_E5M2)};
  }
};

// Integers wrap: add and multiply in the unsigned type of the same width.
template <class A>
__device__ A combine(A a, A b, Op op) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    switch (op) {
      case Op::Sum:
        return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      case Op::Prod:
        return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
      case Op::Max:
        return a > b ? a : b;
      case Op::Min:
        return a < b ? a : b;
    }
  } else {
    switch (op) {
      case Op::Sum:
        return a + b;
      case Op::Prod:
        return a * b;
      case Op::Max:
        return a > b ? a : b;
      case Op::Min:
        return a < b ? a : b;
    }
  }
  return a;
}

template <class T>
struct Params {
  T* dst;
  const T* src[kMaxSources];
  int nsrcs;
  size_t count;
  Op op;
  bool preScale;
  typename Cvt<T>::Acc scale;
  int divisor;
  bool vector;  // all pointers 16-byte aligned
};

template <class T>
__device__ T reduceOne(const Params<T>& p, size_t i) {
  using C = Cvt<T>;
  using A = typename C::Acc;
  A acc = C::load(p.src[0][i]);
  if (p.preScale) acc = acc * p.scale;
  for (int j = 1; j < p.nsrcs; ++j) {
    A x = C::load(p.src[j][i]);
    if (p.preScale) x = x * p.scale;
    acc = combine(acc, x, p.op);
  }
  if (p.divisor > 1) acc = C::load(C::store(acc)) / static_cast<A>(p.divisor);
  return C::store(acc);
}

template <class T>
__global__ void reduceKernel(Params<T> p) {
  constexpr int kVec = 16 / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (p.vector) {
    const size_t nvec = p.count / kVec;
    for (size_t v = first; v < nvec; v += stride) {
      union Pack {
        uint4 raw;
        T e[kVec];
      };
      Pack in[kMaxSources];
      for (int j = 0; j < p.nsrcs; ++j) in[j].raw = reinterpret_cast<const uint4*>(p.src[j])[v];
      Pack out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        using C = Cvt<T>;
        using A = typename C::Acc;
        A acc = C::load(in[0].e[k]);
        if (p.preScale) acc = acc * p.scale;
        for (int j = 1; j < p.nsrcs; ++j) {
          A x = C::load(in[j].e[k]);
          if (p.preScale) x = x * p.scale;
          acc = combine(acc, x, p.op);
        }
        if (p.divisor > 1) acc = C::load(C::store(acc)) / static_cast<A>(p.divisor);
        out.e[k] = C::store(acc);
      }
      reinterpret_cast<uint4*>(p.dst)[v] = out.raw;
    }
    done = nvec * kVec;
  }
  for (size_t i = done + first; i < p.count; i += stride) p.dst[i] = reduceOne(p, i);
}

__global__ void copyKernel(uint4* dst, const uint4* src, size_t nvec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t v = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += stride)
    dst[v] = src[v];
}

__global__ void copyBytesKernel(unsigned char* dst, const unsigned char* src, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

constexpr int kThreads = 256;

unsigned gridFor(size_t items) {
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 80;
    return n;
  }();
  const size_t blocks = (items + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(sms) * 8;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks < cap ? blocks : cap));
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <class T>
int launch(const ReduceArgs& a, cudaStream_t stream) {
  Params<T> p{};
  p.dst = static_cast<T*>(a.dst);
  p.nsrcs = a.nsrcs;
  p.count = a.count;
  p.op = a.op;
  p.preScale = a.preScale;
  p.scale = static_cast<typename Cvt<T>::Acc>(a.scale);
  p.divisor = a.divisor;
  p.vector = aligned16(a.dst);
  for (int j = 0; j < a.nsrcs; ++j) {
    p.src[j] = static_cast<const T*>(a.srcs[j]);
    p.vector = p.vector && aligned16(a.srcs[j]);
  }
  const size_t items = p.vector ? a.count / (16 / sizeof(T)) + 16 : a.count;
  reduceKernel<T><<<gridFor(items), kThreads, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int reduce(const ReduceArgs& a, void* stream) {
  if (a.count == 0) return cudaSuccess;
  if (a.nsrcs < 1 || a.nsrcs > kMaxSources || a.dst == nullptr) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case weftInt8:
      return launch<int8_t>(a, s);
    case weftUint8:
      return launch<uint8_t>(a, s);
    case weftInt32:
      return launch<int32_t>(a, s);
    case weftUint32:
      return launch<uint32_t>(a, s);
    case weftInt64:
      return launch<int64_t>(a, s);
    case weftUint64:
      return launch<uint64_t>(a, s);
    case weftFloat16:
      return launch<F16>(a, s);
    case weftFloat32:
      return launch<float>(a, s);
    case weftFloat64:
      return launch<double>(a, s);
    case weftBfloat16:
      return launch<BF16>(a, s);
    case weftFloat8e4m3:
      return launch<E4M3>(a, s);
    case weftFloat8e5m2:
      return launch<E5M2>(a, s);
    default:
      return cudaErrorInvalidValue;
  }
}

int copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  if (aligned16(dst) && aligned16(src)) {
    const size_t nvec = bytes / 16;
    if (nvec > 0)
      copyKernel<<<gridFor(nvec), kThreads, 0, s>>>(static_cast<uint4*>(dst),
                                                    static_cast<const uint4*>(src), nvec);
    const size_t done = nvec * 16;
    if (done < bytes)
      copyBytesKernel<<<1, kThreads, 0, s>>>(static_cast<unsigned char*>(dst) + done,
                                             static_cast<const unsigned char*>(src) + done,
                                             bytes - done);
  } else {
    copyBytesKernel<<<gridFor(bytes), kThreads, 0, s>>>(
        static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes);
  }
  return static_cast<int>(cudaGetLastError());
}

const char* errorName(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace weft::cuda
