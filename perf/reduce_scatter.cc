// reduce_scatter_perf: rank r ends with block r of the reduction of all
// inputs. busbw = algbw * (n-1)/n; in place, rank r receives into
// sendbuff + r*recvcount.
#include "common.h"

namespace {

using weftperf::CallArgs;
using weftperf::Counts;
using weftperf::Source;

Counts counts(size_t count, int n) {
  Counts c;
  c.send = (count / n) * n;
  c.recv = c.param = c.recvInplaceOffset = count / n;
  return c;
}

weftResult_t issue(const CallArgs& a) {
  return weftReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

Source source(int rank, int, int, size_t j, size_t c) {
  return {Source::kReduce, 0, static_cast<size_t>(rank) * c + j};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"ReduceScatter",
                            true,
                            false,
                            counts,
                            weftperf::factorN,
                            weftperf::factorNm1OverN,
                            issue,
                            weftperf::receivesAll,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
