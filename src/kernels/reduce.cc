// Entry points of the host kernels: pick the ISA once, then one table lookup
// per call. The kernels themselves are in simd_impl.h.
#include "kernels/reduce.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/env.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/dtype.h"
#include "kernels/dispatch.h"

namespace weft::kernels {
namespace {

const KernelTable* tableFor(Isa isa) {
  switch (isa) {
    case Isa::Generic:
      return genericTable();
    case Isa::Avx2:
      return avx2Table();
    case Isa::Avx512:
      return avx512Table();
  }
  return nullptr;
}

#if defined(__x86_64__)
// F16C from CPUID leaf 1 (ECX bit 29): clang before 16 has no "f16c" for
// __builtin_cpu_supports, and the fuzz targets build with clang 14.
bool hasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

bool cpuRuns(Isa isa) {
#if defined(__x86_64__)
  // libgcc's checks include the OS (XCR0) state for AVX and AVX-512.
  switch (isa) {
    case Isa::Generic:
      return true;
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && hasF16c();
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == Isa::Generic;
#endif
}

// WEFT_KERNEL_ISA caps the choice (generic, avx2, avx512); unset or unknown
// means the best the CPU runs.
const KernelTable* chooseTable() {
  int cap = kNumIsas - 1;
  if (const char* env = std::getenv("WEFT_KERNEL_ISA")) {
    for (int i = 0; i < kNumIsas; ++i) {
      if (std::strcmp(env, isaName(static_cast<Isa>(i))) == 0) cap = i;
    }
  }
  for (int i = cap; i > 0; --i) {
    if (isaSupported(static_cast<Isa>(i))) return tableFor(static_cast<Isa>(i));
  }
  return genericTable();
}

std::atomic<const KernelTable*> gTable{nullptr};

constexpr size_t kDefaultStreamThreshold = size_t{1} << 20;
std::atomic<size_t> gCacheThreshold{0};  // 0: no communicator said yet

bool validOp(weftDataType_t dtype, ReduceKind op) {
  const unsigned k = static_cast<unsigned>(op);
  return static_cast<unsigned>(dtype) < weftNumTypes && k < kNumReduceKinds;
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Generic:
      return "generic";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "unknown";
}

bool isaSupported(Isa isa) {
  return tableFor(isa) != nullptr && cpuRuns(isa);
}

const KernelTable& activeTable() {
  const KernelTable* t = gTable.load(std::memory_order_acquire);
  if (__builtin_expect(t == nullptr, 0)) {
    // Racing first calls all compute the same answer.
    t = chooseTable();
    gTable.store(t, std::memory_order_release);
  }
  return *t;
}

Isa activeIsa() {
  return activeTable().isa;
}

bool setIsa(Isa isa) {
  if (!isaSupported(isa)) return false;
  gTable.store(tableFor(isa), std::memory_order_release);
  return true;
}

// Invalid dtype or op: the call does nothing (callers validate arguments).
void reduce(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype,
            ReduceKind op) {
  if (!validOp(dtype, op) || count == 0) return;
  activeTable().binary[dtype][static_cast<int>(op)](dst, a, b, count);
}

void reduceMany(void* dst, const void* const* srcs, int n, size_t count, weftDataType_t dtype,
                ReduceKind op) {
  if (!validOp(dtype, op) || count == 0 || n < 1) return;
  if (n == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * dtypeSize(dtype));
    return;
  }
  const KernelTable& t = activeTable();
  if (n == 2) {
    t.binary[dtype][static_cast<int>(op)](dst, srcs[0], srcs[1], count);
    return;
  }
  t.many[dtype][static_cast<int>(op)](dst, srcs, n, count);
}

void preMulSum(void* dst, const void* a, const void* scalar, const void* b, size_t count,
               weftDataType_t dtype) {
  if (static_cast<unsigned>(dtype) >= weftNumTypes || count == 0) return;
  activeTable().preMulSum[dtype](dst, a, scalar, b, count);
}

void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int divisor) {
  if (static_cast<unsigned>(dtype) >= weftNumTypes || count == 0) return;
  activeTable().divide[dtype](dst, src, count, divisor);
}

// The destination 1-63 bytes past the source modulo 4 KiB (the slow window
// measured is 1-31; 32-63 costs the block loop at most a tenth), and enough
// bytes for it to matter.
static bool inAliasWindow(const void* dst, const void* src, size_t bytes) {
  const uintptr_t ahead =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return bytes >= 1024 && ahead >= 1 && ahead <= 63;
}

void copyCached(void* dst, const void* src, size_t bytes) {
  if (!inAliasWindow(dst, src, bytes)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Fixed-size memcpy compiles to vector loads and stores, never rep movsb.
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) __builtin_memcpy(d + i, s + i, 64);
  std::memcpy(d + i, s + i, bytes - i);
}

size_t forcedThreshold() {
  static const uint64_t forced = envBytes("NT_COPY_THRESHOLD", 0);
  return static_cast<size_t>(forced);
}

size_t streamThreshold() {
  if (const size_t forced = forcedThreshold()) return forced;
  const size_t fromCache = gCacheThreshold.load(std::memory_order_relaxed);
  return fromCache > 0 ? fromCache : kDefaultStreamThreshold;
}

void useCacheShare(size_t bytes) {
  if (bytes == 0) return;
  const size_t proposed = std::max(kDefaultStreamThreshold, bytes / 2);
  size_t seen = gCacheThreshold.load(std::memory_order_relaxed);
  while ((seen == 0 || proposed < seen) &&
         !gCacheThreshold.compare_exchange_weak(seen, proposed, std::memory_order_relaxed)) {
  }
}

// Copies above the threshold bypass the cache; smaller ones go through it.
// Measured with the cache's share instead (4 ranks dealt to two host ids on
// one 32 MiB L3, hierarchical reduce-scatter, whose 4 MiB block copies then
// went through the cache into a 16 MiB scratch): 8-32 MiB took 1.13-1.25x
// as long.
void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const size_t forced = forcedThreshold();
  if (bytes <= (forced > 0 ? forced : kDefaultStreamThreshold)) {
    copyCached(dst, src, bytes);
    return;
  }
  activeTable().streamCopy(dst, src, bytes);
}

bool streamsOutput(size_t outputBytes) {
  return outputBytes > streamThreshold();
}

void copyOut(void* dst, const void* src, size_t bytes, size_t outputBytes) {
  if (bytes == 0) return;
  if (outputBytes <= streamThreshold() || bytes < 4096) {
    copyCached(dst, src, bytes);
    return;
  }
  activeTable().streamCopy(dst, src, bytes);
}

}  // namespace weft::kernels
