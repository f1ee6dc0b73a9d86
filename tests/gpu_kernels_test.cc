// GPU kernels (src/kernels/reduce.cu) against the host kernels, bit for bit:
// every dtype x op, 1 to 8 sources, aligned (vector path) and misaligned
// (scalar path) pointers, avg and PreMulSum, and the copy kernel.
//
// Skips where weft was built without CUDA (WEFT_CUDA) or no GPU is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/reduce.h"

#ifdef WEFT_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_kernels.h"
#endif

namespace weft {
namespace {

#ifndef WEFT_HAVE_CUDA
TEST(GpuKernels, RequiresCuda) {
  GTEST_SKIP() << "weft was built without CUDA (configure with -DWEFT_CUDA=ON)";
}
#else

bool gpuPresent() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  return ok;
}

#define SKIP_WITHOUT_GPU() \
  if (!gpuPresent()) GTEST_SKIP() << "no GPU"

#define CUDA_OK(call) ASSERT_EQ(static_cast<int>(call), 0) << #call

// Values every type holds exactly and whose sums, products, maxima and
// minima over up to 8 sources stay exact: 1 and 2 for the float types (a sum
// is at most 16, a product a power of two), anything for the integers (they
// wrap alike on both sides).
void fill(std::vector<unsigned char>& buf, weftDataType_t t, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t sz = dtypeSize(t);
  buf.assign(count * sz, 0);
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(1 + (rng() & 1));
    unsigned char* p = buf.data() + i * sz;
    switch (t) {
      case weftFloat16: {
        const uint16_t h = floatToHalf(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case weftBfloat16: {
        const uint16_t h = floatToBf16(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case weftFloat8e4m3:
        *p = floatToFp8e4m3(v);
        break;
      case weftFloat8e5m2:
        *p = floatToFp8e5m2(v);
        break;
      case weftFloat32:
        std::memcpy(p, &v, 4);
        break;
      case weftFloat64: {
        const double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      default:
        for (size_t b = 0; b < sz; ++b) p[b] = static_cast<unsigned char>(rng());
    }
  }
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { (void)cudaMalloc(&p, bytes + 64); }
  ~DeviceBuffer() { (void)cudaFree(p); }
  char* at(size_t offset) const { return static_cast<char*>(p) + offset; }
};

const weftDataType_t kTypes[] = {weftInt8,    weftUint8,    weftInt32,      weftUint32,
                                 weftInt64,   weftUint64,   weftFloat16,    weftFloat32,
                                 weftFloat64, weftBfloat16, weftFloat8e4m3, weftFloat8e5m2};

struct Case {
  int nsrcs;
  size_t count;
  size_t offset;  // bytes added to every pointer: 0 is the vector path
};

// One GPU reduction against reduceMany (+ divide for avg) on the host.
void checkReduce(weftDataType_t t, kernels::ReduceKind hostOp, cuda::Op op, const Case& c,
                 int divisor) {
  const size_t sz = dtypeSize(t), bytes = c.count * sz;
  std::vector<std::vector<unsigned char> > in(c.nsrcs);
  std::vector<const void*> hostSrcs;
  std::vector<std::unique_ptr<DeviceBuffer> > dev;
  cuda::ReduceArgs args;
  for (int j = 0; j < c.nsrcs; ++j) {
    fill(in[j], t, c.count, 1000u * static_cast<uint32_t>(t) + static_cast<uint32_t>(j));
    hostSrcs.push_back(in[j].data());
    dev.push_back(std::make_unique<DeviceBuffer>(bytes));
    ASSERT_EQ(cudaMemcpy(dev[j]->at(c.offset), in[j].data(), bytes, cudaMemcpyHostToDevice),
              cudaSuccess);
    args.srcs[j] = dev[j]->at(c.offset);
  }
  DeviceBuffer out(bytes);
  args.dst = out.at(c.offset);
  args.nsrcs = c.nsrcs;
  args.count = c.count;
  args.dtype = t;
  args.op = op;
  args.divisor = divisor;
  ASSERT_EQ(cuda::reduce(args, nullptr), 0);
  std::vector<unsigned char> got(bytes), want(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), out.at(c.offset), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  kernels::reduceMany(want.data(), hostSrcs.data(), c.nsrcs, c.count, t, hostOp);
  if (divisor > 1) kernels::divide(want.data(), want.data(), c.count, t, divisor);
  for (size_t i = 0; i < c.count; ++i)
    if (std::memcmp(got.data() + i * sz, want.data() + i * sz, sz) != 0) {
      ADD_FAILURE() << dtypeName(t) << " op " << static_cast<int>(op) << " divisor " << divisor
                    << " sources " << c.nsrcs << " count " << c.count << " offset " << c.offset
                    << ": first difference at element " << i;
      return;
    }
}

TEST(GpuKernels, EveryTypeAndOpMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const struct {
    kernels::ReduceKind host;
    cuda::Op dev;
  } ops[] = {{kernels::ReduceKind::Sum, cuda::Op::Sum},
             {kernels::ReduceKind::Prod, cuda::Op::Prod},
             {kernels::ReduceKind::Max, cuda::Op::Max},
             {kernels::ReduceKind::Min, cuda::Op::Min}};
  const Case cases[] = {{2, 100003, 0}, {3, 4099, 0}, {8, 1031, 0}, {1, 17, 0}, {4, 5003, 1}};
  for (weftDataType_t t : kTypes)
    for (const auto& op : ops)
      for (const Case& c : cases) {
        // Misaligned by one byte only where the type allows it.
        Case cc = c;
        cc.offset = c.offset * dtypeSize(t);
        checkReduce(t, op.host, op.dev, cc, 1);
      }
}

TEST(GpuKernels, AvgDividesTheRoundedSum) {
  SKIP_WITHOUT_GPU();
  for (weftDataType_t t : kTypes)
    checkReduce(t, kernels::ReduceKind::Sum, cuda::Op::Sum, {4, 4099, 0}, 4);
}

TEST(GpuKernels, PreMulSumScalesEverySource) {
  SKIP_WITHOUT_GPU();
  for (weftDataType_t t : {weftFloat32, weftFloat64, weftFloat16, weftBfloat16}) {
    const size_t count = 70001, sz = dtypeSize(t), bytes = count * sz;
    std::vector<unsigned char> a, b;
    fill(a, t, count, 1);
    fill(b, t, count, 2);
    DeviceBuffer da(bytes), db(bytes), out(bytes);
    ASSERT_EQ(cudaMemcpy(da.p, a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db.p, b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    cuda::ReduceArgs args;
    args.dst = out.p;
    args.srcs[0] = da.p;
    args.srcs[1] = db.p;
    args.nsrcs = 2;
    args.count = count;
    args.dtype = t;
    args.preScale = true;
    args.scale = 0.5;
    ASSERT_EQ(cuda::reduce(args, nullptr), 0);
    std::vector<unsigned char> got(bytes), want(bytes), scalar(8);
    fill(scalar, t, 1, 0);  // any value; overwritten below with 0.5 in the type
    const float half = 0.5f;
    switch (t) {
      case weftFloat16: {
        const uint16_t h = floatToHalf(half);
        std::memcpy(scalar.data(), &h, 2);
        break;
      }
      case weftBfloat16: {
        const uint16_t h = floatToBf16(half);
        std::memcpy(scalar.data(), &h, 2);
        break;
      }
      case weftFloat64: {
        const double d = half;
        std::memcpy(scalar.data(), &d, 8);
        break;
      }
      default:
        std::memcpy(scalar.data(), &half, 4);
    }
    kernels::preMulSum(want.data(), a.data(), scalar.data(), nullptr, count, t);
    kernels::preMulSum(want.data(), b.data(), scalar.data(), want.data(), count, t);
    ASSERT_EQ(cudaMemcpy(got.data(), out.p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), bytes)) << dtypeName(t);
  }
}

TEST(GpuKernels, CopyAlignedAndNot) {
  SKIP_WITHOUT_GPU();
  for (size_t offset : {0, 1, 3})
    for (size_t bytes : {0, 1, 15, 16, 4097, 1 << 20}) {
      std::vector<unsigned char> in(bytes + 8), got(bytes + 8);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
      DeviceBuffer src(bytes + 8), dst(bytes + 8);
      ASSERT_EQ(cudaMemcpy(src.p, in.data(), bytes + 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cuda::copy(dst.at(offset), src.at(offset), bytes, nullptr), 0);
      ASSERT_EQ(cudaMemcpy(got.data(), dst.at(offset), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(0, std::memcmp(got.data(), in.data() + offset, bytes))
          << bytes << " bytes at offset " << offset;
    }
}

TEST(GpuKernels, RejectsBadArguments) {
  SKIP_WITHOUT_GPU();
  cuda::ReduceArgs args;
  args.count = 10;
  args.nsrcs = 0;
  EXPECT_NE(cuda::reduce(args, nullptr), 0);
  args.nsrcs = cuda::kMaxSources + 1;
  EXPECT_NE(cuda::reduce(args, nullptr), 0);
}
#endif

}  // namespace
}  // namespace weft
