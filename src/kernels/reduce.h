// Reduction and copy kernels on host memory: one entry per (dtype, op),
// vectorised with runtime dispatch (AVX-512 / AVX2 / baseline).
//
// Half-precision and fp8 inputs are widened to fp32, combined, and rounded
// once per output element. Integer arithmetic wraps (two's complement), as
// NCCL's does on the GPU.
#pragma once

#include <cstddef>

#include "weft/weft.h"

namespace weft::kernels {

enum class ReduceKind { Sum, Prod, Max, Min };

// dst[i] = a[i] op b[i]. dst may alias a or b.
void reduce(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype,
            ReduceKind op);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], left to right.
// dst may alias any source. n >= 1.
void reduceMany(void* dst, const void* const* srcs, int n, size_t count, weftDataType_t dtype,
                ReduceKind op);

// dst[i] = scalar * a[i] + b[i]; b may be nullptr (dst[i] = scalar * a[i]).
// scalar points at one element of dtype. dst may alias a or b.
void preMulSum(void* dst, const void* a, const void* scalar, const void* b, size_t count,
               weftDataType_t dtype);

// dst[i] = src[i] / divisor: the final step of avg. Integers divide with
// truncation toward zero; floats divide in fp32 (fp64 for double).
void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int divisor);

// memcpy that switches to non-temporal stores above WEFT_NT_COPY_THRESHOLD
// (default 1 MiB) bytes. A copy's own size says little of the working set
// it belongs to; a piece of a collective's output goes by copyOut instead.
void copy(void* dst, const void* src, size_t bytes);

// The stream threshold of copyOut: WEFT_NT_COPY_THRESHOLD if set; else half
// this rank's share of its last-level cache (useCacheShare), at least 1 MiB;
// else 1 MiB. A collective touches its output and about as much again
// (input, channel slots), so an output larger than half the share cannot
// stay in cache, while a smaller one written with non-temporal stores is
// read back from memory by the next step that forwards it: at 4 ranks
// sharing a 32 MiB L3, the chain broadcast of 2 MiB took 534 us streamed
// against 293 cached, and of 16 MiB 4666 against 5194.
size_t streamThreshold();
// A communicator's view of this rank's share of its last-level cache (its
// size over the ranks that share it); the smallest share any communicator
// reported counts.
void useCacheShare(size_t bytes);

// memcpy through the cache, for the data path. glibc's memcpy of a large
// block runs 16-18x slower on AMD hosts when dst lies 1-31 bytes past src
// modulo 4 KiB (its rep movsb; 256 KiB: 92-128 us against 6-8): there this
// copies in 64-byte blocks of plain vector moves (7-11 us), else it is
// memcpy.
void copyCached(void* dst, const void* src, size_t bytes);

// A piece of a collective's output: non-temporal stores when the whole
// output (outputBytes) is above the stream threshold, since it cannot stay
// in cache anyway and plain stores would first read every line they write.
void copyOut(void* dst, const void* src, size_t bytes, size_t outputBytes);
// Whether copyOut would stream an output of this size (for kernels that
// write their results straight out with non-temporal stores).
bool streamsOutput(size_t outputBytes);

}  // namespace weft::kernels
