// Runtime ISA dispatch for the host kernels (internal to src/kernels/, tests
// and benchmarks).
//
// The kernel bodies live in simd_impl.h, which is compiled once per target
// (simd_generic.cc, simd_avx2.cc, simd_avx512.cc, each with its own -m flags)
// into a table of function pointers. reduce.cc picks the best table the CPU
// supports once, on first use; WEFT_KERNEL_ISA=generic|avx2|avx512 caps it.
#pragma once

#include <cstddef>

#include "weft/weft.h"

namespace weft::kernels {

enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };
inline constexpr int kNumIsas = 3;
inline constexpr int kNumReduceKinds = 4;

const char* isaName(Isa isa);
// True when the kernels for `isa` are compiled in and this CPU (and OS) runs them.
bool isaSupported(Isa isa);
// The ISA whose kernels reduce() & co. use now.
Isa activeIsa();
// Switches every entry point to `isa`'s kernels; false (and no change) when
// unsupported. For tests and benchmarks; not meant to race with kernel calls.
bool setIsa(Isa isa);

using BinaryFn = void (*)(void* dst, const void* a, const void* b, size_t count);
using ManyFn = void (*)(void* dst, const void* const* srcs, int n, size_t count);
using PreMulSumFn = void (*)(void* dst, const void* a, const void* scalar, const void* b,
                             size_t count);
using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);
using CopyFn = void (*)(void* dst, const void* src, size_t bytes);

struct KernelTable {
  Isa isa;
  BinaryFn binary[weftNumTypes][kNumReduceKinds];
  ManyFn many[weftNumTypes][kNumReduceKinds];  // n >= 3; n <= 2 goes to binary/copy
  PreMulSumFn preMulSum[weftNumTypes];
  DivideFn divide[weftNumTypes];
  CopyFn streamCopy;  // non-temporal stores, any size and alignment, fenced
};

// One table per compiled-in target; nullptr when that target is not built
// (non-x86 hosts). Each is filled at static-initialisation time.
const KernelTable* genericTable();
const KernelTable* avx2Table();
const KernelTable* avx512Table();

// The active table (never null).
const KernelTable& activeTable();

}  // namespace weft::kernels
