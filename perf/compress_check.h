// What all_reduce_perf -Z checks a compressed allreduce against: the same
// compressor, fresh, run by the in-process model of n ranks (threads that
// exchange through memory, compression/local_group.h) on the same inputs.
// Codecs whose collectives only move bytes (onebit, topk, fp16, bf16) must
// match the model bit for bit; PowerSGD and random-k also sum fp32 values in
// an allreduce whose order differs from the model's, so they are compared
// with a tolerance (compressExact says which).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weftperf {

bool compressExact(const std::string& spec);

// fill(rank, buf) writes rank's count input elements of `type` into buf.
// On success `out` holds rank 0's result (count elements of `type`).
bool compressModel(const std::string& spec, int nranks, weftDataType_t type, bool average,
                   size_t count, const std::function<void(int, void*)>& fill,
                   std::vector<char>* out, std::string* error);

}  // namespace weftperf
