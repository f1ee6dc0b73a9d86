// The compressed allreduce as queued work on the communicator's engine (the
// C++ API's Compressor::allReduceAsync; the C call runs the same inline).
#pragma once

#include <memory>

#include "core/work.h"
#include "weft/weft.h"

namespace weft {

// Checks the arguments as weftCompressedAllReduce does, then queues the
// compressed allreduce behind everything already posted on comm. The
// buffers must stay valid, and the compressor alive, until the work is done
// (weftCompressorReset and weftCompressorDestroy wait for it).
Status postCompressedAllReduce(const void* send, void* recv, size_t count, int rawType, int rawOp,
                               weftCompressor* compressor, weftComm* comm,
                               std::shared_ptr<WorkState>* work);

}  // namespace weft
