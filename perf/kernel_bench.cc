// Host kernel throughput: reduce (float/half/bf16 sum), reduceMany and copy at
// 64 KiB, 1 MiB and 64 MiB per buffer.
//
// Bytes counted are every stream the kernel touches: reduce is 2 reads + 1
// write (3 x size), reduceMany n reads + 1 write, copy 1 read + 1 write. The
// label names the ISA path; WEFT_KERNEL_ISA=generic|avx2|avx512 caps it and
// WEFT_NT_COPY_THRESHOLD moves the memcpy/streaming switch of copy.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/dtype.h"
#include "kernels/dispatch.h"
#include "kernels/reduce.h"

namespace {

using weft::kernels::ReduceKind;

// Page-touched, 64-byte aligned buffer filled with small finite values.
struct Buffer {
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    p_ = static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    for (size_t i = 0; i < bytes; ++i) p_[i] = static_cast<unsigned char>(0x3c ^ (i % 7));
  }
  ~Buffer() { std::free(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  unsigned char* data() const { return p_; }

 private:
  size_t bytes_;
  unsigned char* p_;
};

void setLabel(benchmark::State& state) {
  state.SetLabel(weft::kernels::isaName(weft::kernels::activeIsa()));
}

void BM_Reduce(benchmark::State& state, weftDataType_t dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / weft::dtypeSize(dtype);
  Buffer a(bytes), b(bytes), d(bytes);
  for (auto _ : state) {
    weft::kernels::reduce(d.data(), a.data(), b.data(), count, dtype, ReduceKind::Sum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * bytes);
  setLabel(state);
}

void BM_ReduceInPlace(benchmark::State& state, weftDataType_t dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / weft::dtypeSize(dtype);
  Buffer a(bytes), b(bytes);
  for (auto _ : state) {
    weft::kernels::reduce(a.data(), a.data(), b.data(), count, dtype, ReduceKind::Sum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * bytes);
  setLabel(state);
}

void BM_ReduceMany(benchmark::State& state, weftDataType_t dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const size_t count = bytes / weft::dtypeSize(dtype);
  std::vector<std::unique_ptr<Buffer>> srcs;
  std::vector<const void*> ptrs;
  for (int k = 0; k < n; ++k) {
    srcs.push_back(std::make_unique<Buffer>(bytes));
    ptrs.push_back(srcs.back()->data());
  }
  Buffer d(bytes);
  for (auto _ : state) {
    weft::kernels::reduceMany(d.data(), ptrs.data(), n, count, dtype, ReduceKind::Sum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (n + 1) * bytes);
  setLabel(state);
}

void BM_Copy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer s(bytes), d(bytes);
  for (auto _ : state) {
    weft::kernels::copy(d.data(), s.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
  setLabel(state);
}

// The two copy paths side by side, whatever the threshold.
void BM_CopyMemcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer s(bytes), d(bytes);
  for (auto _ : state) {
    std::memcpy(d.data(), s.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
}

void BM_CopyStreaming(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer s(bytes), d(bytes);
  const auto fn = weft::kernels::activeTable().streamCopy;
  for (auto _ : state) {
    fn(d.data(), s.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
  setLabel(state);
}

constexpr int64_t k64K = 64 << 10, k1M = 1 << 20, k64M = 64 << 20;

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(k64K)->Arg(k1M)->Arg(k64M)->UseRealTime();
}
void sizesAndSources(benchmark::internal::Benchmark* b) {
  for (int64_t size : {k64K, k1M, k64M}) {
    for (int n : {4, 8}) b->Args({size, n});
  }
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Reduce, float, weftFloat32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, half, weftFloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, bfloat16, weftBfloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f8e4m3, weftFloat8e4m3)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceInPlace, float, weftFloat32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceMany, float, weftFloat32)->Apply(sizesAndSources);
BENCHMARK_CAPTURE(BM_ReduceMany, half, weftFloat16)->Apply(sizesAndSources);
BENCHMARK_CAPTURE(BM_ReduceMany, bfloat16, weftBfloat16)->Apply(sizesAndSources);
BENCHMARK(BM_Copy)->Apply(sizes);
BENCHMARK(BM_CopyMemcpy)->Apply(sizes);
BENCHMARK(BM_CopyStreaming)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
