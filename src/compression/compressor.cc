#include "compression/compressor.h"

#include <cstring>

#include "base/dtype.h"
#include "compression/convert.h"
#include "compression/params.h"

namespace weft::compression {

Status Compressor::create(weftCompressKind_t kind, const weftCompressorParams_t& params,
                          std::unique_ptr<Compressor>* out) {
  WEFT_RETURN_IF_ERROR(validateParams(kind, params));
  switch (kind) {
    case weftCompressOneBit:
    case weftCompressFp16:
    case weftCompressBf16:
      *out = makeTwoPhaseCompressor(kind, params);
      break;
    case weftCompressTopK:
      *out = makeTopKCompressor(params);
      break;
    case weftCompressPowerSGD:
      *out = makePowerSgdCompressor(params);
      break;
    default:
      return Status(weftInvalidArgument, "invalid compressor kind");
  }
  return Status::ok();
}

void Compressor::reset() {
  bound_ = false;
  count_ = 0;
  work_.clear();
  work_.shrink_to_fit();
  clearState();
}

Status Compressor::allReduce(CollRunner& runner, const void* send, void* recv, size_t count,
                             weftDataType_t dtype, bool average) {
  if (!compressibleDtype(dtype))
    return makeError(weftInvalidArgument,
                     "%s compression takes float, half or bfloat16 buffers, not %s",
                     kindName(kind_), dtypeName(dtype));
  if (bound_ && (count != count_ || dtype != dtype_ || runner.nranks() != nranks_))
    return makeError(weftInvalidUsage,
                     "this %s compressor holds the state of a buffer of %zu %s elements and was "
                     "called with %zu %s elements; use one compressor per buffer (or "
                     "weftCompressorReset it on every rank first)",
                     kindName(kind_), count_, dtypeName(dtype_), count, dtypeName(dtype));
  if (count == 0) {  // nothing to send; does not bind the state to a size
    wireBytes_ = plainBytes_ = 0;
    return Status::ok();
  }
  if (!bound_) {
    WEFT_RETURN_IF_ERROR(bind(count, runner.nranks()));
    if (dtype != weftFloat32) work_.assign(count, 0.0f);
    bound_ = true;
    count_ = count;
    dtype_ = dtype;
    nranks_ = runner.nranks();
  }
  const float* in = static_cast<const float*>(send);
  float* out = static_cast<float*>(recv);
  if (dtype != weftFloat32) {
    toFloat(send, dtype, count, work_.data());
    in = out = work_.data();
  }
  CountingRunner counting(runner);
  wireBytes_ = 0;
  plainBytes_ = CountingRunner::ringAllReduceBytes(count * dtypeSize(dtype), runner.nranks());
  Status st = reduce(counting, in, out, count, average);
  wireBytes_ = counting.wireBytes();
  if (!st.isOk()) return st;
  if (dtype != weftFloat32) fromFloat(out, dtype, count, recv);
  return Status::ok();
}

}  // namespace weft::compression
