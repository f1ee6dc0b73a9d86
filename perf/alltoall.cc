// alltoall_perf: block p of rank r's input goes to rank p, into block r.
// busbw = algbw * (n-1)/n. In place means sendbuff == recvbuff.
#include "common.h"

namespace {

using weftperf::CallArgs;
using weftperf::Counts;
using weftperf::Source;

Counts counts(size_t count, int n) {
  Counts c;
  c.send = c.recv = (count / n) * n;
  c.param = count / n;
  return c;
}

weftResult_t issue(const CallArgs& a) {
  return weftAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

Source source(int rank, int, int, size_t j, size_t c) {
  return {Source::kCopy, static_cast<int>(j / c), static_cast<size_t>(rank) * c + j % c};
}

}  // namespace

int main(int argc, char** argv) {
  const weftperf::Coll coll{"AlltoAll",
                            false,
                            false,
                            counts,
                            weftperf::factorN,
                            weftperf::factorNm1OverN,
                            issue,
                            weftperf::receivesAll,
                            source};
  return weftperf::perfMain(argc, argv, coll);
}
