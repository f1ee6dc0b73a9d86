// gather_perf: the root ends with all ranks' inputs, in rank order.
// busbw = algbw * (n-1)/n; in place, rank r sends from recvbuff + r*count.
#include "common.h"

namespace {

using weftperf::CallArgs;
using weftperf::Counts;
using weftperf::Source;

Counts counts(size_t count, int n) {
  Counts c;
  c.send = c.param = c.sendInplaceOffset = count / n;
  c.recv = (count / n) * n;
  return c;
}

weftResult_t issue(const CallArgs& a) {
  return weftGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

Source source(int, int, int, size_t j, size_t c) {
  return {Source::kCopy, static_cast<int>(j / c), j % c};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"Gather",
                            false,
                            true,
                            counts,
                            weftperf::factorN,
                            weftperf::factorNm1OverN,
                            issue,
                            weftperf::receivesRoot,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
