// scatter_perf: rank r ends with block r of the root's input.
// busbw = algbw * (n-1)/n; in place, rank r receives into
// recvbuff + r*count (the root's send buffer is recvbuff).
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
  return weftScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

Source source(int rank, int, int root, size_t j, size_t c) {
  return {Source::kCopy, root, static_cast<size_t>(rank) * c + j};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"Scatter",
                            false,
                            true,
                            counts,
                            weftperf::factorN,
                            weftperf::factorNm1OverN,
                            issue,
                            weftperf::receivesAll,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
