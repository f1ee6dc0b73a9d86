// all_reduce_perf: every rank ends with the reduction of all inputs.
// busbw = algbw * 2(n-1)/n (a ring sends and receives 2(n-1)/n of the data).
// With -Z <compressor> (onebit, powersgd:rank=4, topk:ratio=0.01, fp16,
// bf16) it runs the compressed allreduce instead; busbw then still counts the
// uncompressed bytes, so it is the bandwidth the compression gives.
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

double busFactor(int n) {
  return n > 0 ? 2.0 * (n - 1) / n : 0.0;
}

weftResult_t issue(const CallArgs& a) {
  return weftAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

Source source(int, int, int, size_t j, size_t) {
  return {Source::kReduce, 0, j};
}

}  // namespace

int main(int argc, char** argv) {
  weftperf::Coll coll{
      "AllReduce",           true,  false, counts, weftperf::factorOne, busFactor, issue,
      weftperf::receivesAll, source};
  coll.compressible = true;
  return weftperf::perfMain(argc, argv, coll);
}
