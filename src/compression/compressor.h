// A compressor: the persistent state of one gradient buffer across steps
// (residuals, warm-start matrices, workspaces) and the compressed allreduce
// that uses it. Bound on first use to the buffer's count and dtype.
//
// fp32 buffers are reduced straight from the send into the receive buffer;
// fp16/bf16 ones are widened to an fp32 working buffer first and narrowed
// back after. All allocation happens at bind time, not per step.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "compression/runner.h"
#include "compression/workers.h"
#include "weft/weft.h"

namespace weft::compression {

class Compressor {
 public:
  virtual ~Compressor() = default;
  static Status create(weftCompressKind_t kind, const weftCompressorParams_t& params,
                       std::unique_ptr<Compressor>* out);

  // recv = sum (or average) over ranks of send, compressed. Every rank calls
  // it with the same count, dtype and op.
  Status allReduce(CollRunner& runner, const void* send, void* recv, size_t count,
                   weftDataType_t dtype, bool average);
  // Forgets residuals, warm start and the binding.
  void reset();

  weftCompressKind_t kind() const { return kind_; }
  const weftCompressorParams_t& params() const { return params_; }
  double lastWireBytes() const { return wireBytes_; }
  double lastPlainBytes() const { return plainBytes_; }
  // The pool that runs this compressor's data-parallel sweeps; default (and
  // nullptr) WorkerPool::shared(). The pool must outlive the compressor's
  // calls. Results do not depend on the pool's size.
  void setWorkers(WorkerPool* pool) { workers_ = pool; }

 protected:
  Compressor(weftCompressKind_t kind, const weftCompressorParams_t& params)
      : kind_(kind), params_(params) {}
  // Sizes the state for a buffer of `count` elements on `nranks` ranks;
  // rejects buffers this compressor cannot take (a PowerSGD shape that does
  // not match count, ...).
  virtual Status bind(size_t count, int nranks) = 0;
  virtual void clearState() = 0;
  // in: count fp32 values; out: their compressed sum/average (identical on
  // every rank). out may equal in.
  virtual Status reduce(CollRunner& runner, const float* in, float* out, size_t count,
                        bool average) = 0;

  WorkerPool& workers() const { return workers_ != nullptr ? *workers_ : WorkerPool::shared(); }

  weftCompressKind_t kind_;
  weftCompressorParams_t params_;
  WorkerPool* workers_ = nullptr;

 private:
  bool bound_ = false;
  size_t count_ = 0;
  int nranks_ = 0;
  weftDataType_t dtype_ = weftFloat32;
  std::vector<float> work_;  // fp16/bf16 inputs only
  double wireBytes_ = 0;
  double plainBytes_ = 0;
};

std::unique_ptr<Compressor> makeTwoPhaseCompressor(weftCompressKind_t kind,
                                                   const weftCompressorParams_t& params);
std::unique_ptr<Compressor> makeTopKCompressor(const weftCompressorParams_t& params);
std::unique_ptr<Compressor> makePowerSgdCompressor(const weftCompressorParams_t& params);

}  // namespace weft::compression
