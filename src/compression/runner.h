// What a compressed collective needs from the ranks: three plain collectives
// on bytes or fp32, and nothing else. Codecs never see this; the compressed
// collectives (two_phase, topk, powersgd) call it between encode and decode.
//
// The communicator implements it over its algorithms (core/compression_api);
// LocalGroup (local_group.h) implements it between threads of one process, as
// the serial model that tests and all_reduce_perf -Z check against.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace weft::compression {

class CollRunner {
 public:
  virtual ~CollRunner() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // recv[p*bytes .. (p+1)*bytes) = peer p's send[rank*bytes ..].
  virtual Status allToAll(const void* send, void* recv, size_t bytes) = 0;
  // recv[p*bytes ..] = peer p's send.
  virtual Status allGather(const void* send, void* recv, size_t bytes) = 0;
  // In place: buf = sum over ranks of buf (fp32).
  virtual Status allReduceSum(float* buf, size_t count) = 0;
};

// Counts the bytes this rank puts on the wire for each call, by the volume
// of the algorithms the communicator uses (pairwise all-to-all, ring
// all-gather, ring allreduce): (n-1)*b, (n-1)*b and 2(n-1)/n*B.
class CountingRunner final : public CollRunner {
 public:
  explicit CountingRunner(CollRunner& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int nranks() const override { return inner_.nranks(); }
  Status allToAll(const void* send, void* recv, size_t bytes) override {
    wire_ += static_cast<double>(nranks() - 1) * bytes;
    return inner_.allToAll(send, recv, bytes);
  }
  Status allGather(const void* send, void* recv, size_t bytes) override {
    wire_ += static_cast<double>(nranks() - 1) * bytes;
    return inner_.allGather(send, recv, bytes);
  }
  Status allReduceSum(float* buf, size_t count) override {
    wire_ += ringAllReduceBytes(count * sizeof(float), nranks());
    return inner_.allReduceSum(buf, count);
  }
  double wireBytes() const { return wire_; }
  static double ringAllReduceBytes(size_t bytes, int n) {
    return n > 1 ? 2.0 * (n - 1) / n * static_cast<double>(bytes) : 0.0;
  }

 private:
  CollRunner& inner_;
  double wire_ = 0;
};

}  // namespace weft::compression
