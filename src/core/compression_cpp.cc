// The C++ wrapper of the compressed allreduce (weft::Compressor).
#include <utility>

#include "core/compression_api.h"
#include "weft/weft.hpp"

namespace weft {
namespace {

void throwIfError(weftResult_t code) {
  if (code != weftSuccess) throw Error(code, weftGetLastError(nullptr));
}

}  // namespace

Compressor::Compressor(Comm& comm, weftCompressKind_t kind, const weftCompressorParams_t* params)
    : comm_(comm.handle()) {
  throwIfError(weftCompressorCreate(comm_, kind, params, &c_));
}

Compressor::Compressor(Comm& comm, const std::string& spec) : comm_(comm.handle()) {
  throwIfError(weftCompressorCreateFromString(comm_, spec.c_str(), &c_));
}

Compressor& Compressor::operator=(Compressor&& other) noexcept {
  if (this != &other) {
    if (c_ != nullptr) (void)weftCompressorDestroy(c_);
    c_ = std::exchange(other.c_, nullptr);
    comm_ = other.comm_;
  }
  return *this;
}

Compressor::~Compressor() {
  if (c_ != nullptr) (void)weftCompressorDestroy(c_);
}

void Compressor::allReduce(const void* send, void* recv, size_t count, weftDataType_t dtype,
                           weftRedOp_t op) {
  throwIfError(weftCompressedAllReduce(send, recv, count, dtype, op, c_, comm_, nullptr));
}

Work Compressor::allReduceAsync(const void* send, void* recv, size_t count, weftDataType_t dtype,
                                weftRedOp_t op) {
  std::shared_ptr<WorkState> work;
  Status st = postCompressedAllReduce(send, recv, count, static_cast<int>(dtype),
                                      static_cast<int>(op), c_, comm_, &work);
  if (!st.isOk()) throw Error(st.code(), st.message());
  return Work(std::move(work));
}

weftCompressorStats_t Compressor::stats() const {
  weftCompressorStats_t s{};
  throwIfError(weftCompressorGetStats(c_, &s));
  return s;
}

void Compressor::reset() {
  throwIfError(weftCompressorReset(c_));
}

}  // namespace weft
