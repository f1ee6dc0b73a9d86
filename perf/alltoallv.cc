// alltoallv_perf: weftAllToAllv with every count equal (count/n elements to
// each peer, displacements p*count/n), so the data and busbw match
// alltoall_perf and the difference is all-to-all-v's own cost (per-peer
// arrays, a size header per transfer). busbw = algbw * (n-1)/n. No in-place
// form.
#include <vector>

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
  thread_local std::vector<size_t> cnt, displ;
  cnt.assign(a.nranks, a.count);
  displ.resize(a.nranks);
  for (int p = 0; p < a.nranks; ++p) displ[p] = static_cast<size_t>(p) * a.count;
  return weftAllToAllv(a.send, cnt.data(), displ.data(), a.recv, cnt.data(), displ.data(), a.type,
                       a.comm, a.stream);
}

Source source(int rank, int, int, size_t j, size_t c) {
  return {Source::kCopy, static_cast<int>(j / c), static_cast<size_t>(rank) * c + j % c};
}

}  // namespace

int main(int argc, char** argv) {
  weftperf::Coll coll{"AlltoAllv",
                      false,
                      false,
                      counts,
                      weftperf::factorN,
                      weftperf::factorNm1OverN,
                      issue,
                      weftperf::receivesAll,
                      source};
  coll.inplace = false;
  return weftperf::perfMain(argc, argv, coll);
}
