// broadcast_perf: every rank ends with the root's input. busbw = algbw.
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
  return weftBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

Source source(int, int, int root, size_t j, size_t) {
  return {Source::kCopy, root, j};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{
      "Broadcast",           false, true, counts, weftperf::factorOne, weftperf::factorOne, issue,
      weftperf::receivesAll, source};
  return weftperf::perfMain(argc, argv, coll);
}
