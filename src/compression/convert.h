// Conversions between the caller's dtype and the fp32 working buffers of the
// compressed collectives (fp32, fp16 and bf16 inputs), vectorised where the
// CPU allows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/weft.h"

namespace weft::compression {

bool compressibleDtype(weftDataType_t dtype);  // fp32, fp16, bf16
void toFloat(const void* src, weftDataType_t dtype, size_t n, float* dst);
void fromFloat(const float* src, weftDataType_t dtype, size_t n, void* dst);

// Round to nearest even, as the wire formats of the cast codecs.
void floatsToHalf(const float* src, size_t n, uint16_t* dst);
void halfToFloats(const uint16_t* src, size_t n, float* dst);
void floatsToBf16(const float* src, size_t n, uint16_t* dst);
void bf16ToFloats(const uint16_t* src, size_t n, float* dst);

}  // namespace weft::compression
