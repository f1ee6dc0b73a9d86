// reduce_perf: the root ends with the reduction of all inputs.
// busbw = algbw. Only the root's output is checked.
#include "common.h"

namespace {

using weftperf::CallArgs;
using weftperf::Counts;
using weftperf::Source;

Counts counts(size_t count, int) {
  Counts c;
  c.send = c.recv = c.param = count;
  return c;
}

weftResult_t issue(const CallArgs& a) {
  return weftReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}

Source source(int, int, int, size_t j, size_t) {
  return {Source::kReduce, 0, j};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"Reduce",
                            true,
                            true,
                            counts,
                            weftperf::factorOne,
                            weftperf::factorOne,
                            issue,
                            weftperf::receivesRoot,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
