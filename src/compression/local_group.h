// n ranks as threads of one process, exchanging through shared pointers and
// a barrier: the serial model of a compressed collective. Tests run codecs
// on it without forking, and all_reduce_perf -Z checks the communicator's
// result against it. Sums run in rank order.
#pragma once

#include <functional>

#include "compression/runner.h"

namespace weft::compression {

// Runs body(runner) on n threads, one per rank, and returns when all are
// done. The first error any rank's body returns is the result.
Status runLocalGroup(int n, const std::function<Status(CollRunner& runner)>& body);

}  // namespace weft::compression
