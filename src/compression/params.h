// Compressor parameters: checks with messages that say what to fix, and the
// text form that all_reduce_perf -Z and weftCompressorCreateFromString take.
#pragma once

#include <string>

#include "base/status.h"
#include "weft/weft.h"

namespace weft::compression {

const char* kindName(weftCompressKind_t kind);
weftCompressorParams_t defaultParams();
// Checks everything that does not depend on the buffer (rank >= 1, ratio in
// (0,1], block a multiple of 8, ...).
Status validateParams(int rawKind, const weftCompressorParams_t& p);
// "kind[:key=value,...]"; keys: ef, block, rank, rows, cols, rate (min
// compression rate), ratio, random, seed. The shapes list is C-API only.
Status parseSpec(const std::string& spec, weftCompressKind_t* kind, weftCompressorParams_t* p);

}  // namespace weft::compression
