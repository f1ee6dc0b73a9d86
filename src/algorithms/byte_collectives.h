// Collectives of raw bytes that the library runs for itself: the agreements
// at communicator set-up (CPU layout, tuner parameters) and the online
// tuner's. Unlike a user's call, each returns only once no TCP send still
// reads its buffers, which are usually the caller's locals.
#pragma once

#include <cstddef>

#include "algorithms/algorithms.h"

namespace weft::algo {

// Every rank's `bytes` at send, in rank order, at recv. `run` is the
// all-gather algorithm; left out, the model's choice (selectAlgorithm: never
// an online trial, which only users' calls run), which needs the
// communicator's tuner, so set-up names one.
Status allGatherBytes(CollContext& ctx, const void* send, void* recv, size_t bytes,
                      AlgorithmFn run = nullptr);

// Rank 0's `bytes` at data, on every rank (chain broadcast).
Status broadcastBytes(CollContext& ctx, void* data, size_t bytes);

}  // namespace weft::algo
