// sendrecv_perf: every rank sends to the next rank and receives from the
// previous one, both in one group. busbw = algbw.
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
  const int next = (a.rank + 1) % a.nranks, prev = (a.rank - 1 + a.nranks) % a.nranks;
  weftResult_t r = weftGroupStart();
  if (r != weftSuccess) return r;
  r = weftSend(a.send, a.count, a.type, next, a.comm, a.stream);
  if (r == weftSuccess) r = weftRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
  const weftResult_t e = weftGroupEnd();
  return r != weftSuccess ? r : e;
}

Source source(int rank, int n, int, size_t j, size_t) {
  return {Source::kCopy, (rank - 1 + n) % n, j};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"SendRecv",
                            false,
                            false,
                            counts,
                            weftperf::factorOne,
                            weftperf::factorOne,
                            issue,
                            weftperf::receivesAll,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
