// Element types: sizes, names, and the 16- and 8-bit float conversions that
// the kernels and the perf tools share. Conversions round to nearest even.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/weft.h"

namespace weft {

bool dtypeValid(int dtype);
size_t dtypeSize(weftDataType_t dtype);
const char* dtypeName(weftDataType_t dtype);  // nccl-tests names: "float", "half", "bfloat16"...
bool dtypeIsFloat(weftDataType_t dtype);

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);  // saturates to +-448
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);  // overflow becomes inf, as IEEE-style e5m2

}  // namespace weft
