// One NCCL collective or point-to-point call, as the shim hands it on: to
// weft's C API for host memory (issueHost) or to the device path.
#pragma once

#include <cstddef>

#include "nccl/nccl_types.h"
#include "weft/weft.h"

namespace weft::nccl {

enum class CollOp {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv
};

struct CollDesc {
  CollOp op;
  const void* send;
  void* recv;
  size_t count;
  int dtype;  // raw: validated by weft
  int redop;  // raw: validated by weft
  int root;   // root, or the peer of Send/Recv
};

// Issues the call through weft's C API on host memory; `stream` is weft's.
inline weftResult_t issueHost(const CollDesc& d, weftComm_t comm, weftStream_t stream) {
  const auto type = static_cast<weftDataType_t>(d.dtype);
  const auto op = static_cast<weftRedOp_t>(d.redop);
  switch (d.op) {
    case CollOp::AllReduce:
      return weftAllReduce(d.send, d.recv, d.count, type, op, comm, stream);
    case CollOp::Broadcast:
      return weftBroadcast(d.send, d.recv, d.count, type, d.root, comm, stream);
    case CollOp::Reduce:
      return weftReduce(d.send, d.recv, d.count, type, op, d.root, comm, stream);
    case CollOp::AllGather:
      return weftAllGather(d.send, d.recv, d.count, type, comm, stream);
    case CollOp::ReduceScatter:
      return weftReduceScatter(d.send, d.recv, d.count, type, op, comm, stream);
    case CollOp::AlltoAll:
      return weftAlltoAll(d.send, d.recv, d.count, type, comm, stream);
    case CollOp::Gather:
      return weftGather(d.send, d.recv, d.count, type, d.root, comm, stream);
    case CollOp::Scatter:
      return weftScatter(d.send, d.recv, d.count, type, d.root, comm, stream);
    case CollOp::Send:
      return weftSend(d.send, d.count, type, d.root, comm, stream);
    case CollOp::Recv:
      return weftRecv(d.recv, d.count, type, d.root, comm, stream);
  }
  return weftInternalError;
}

// Bytes a rank reads from send and writes to recv for this call (what the
// device path stages). Zero where the rank does not use the buffer.
struct CollBytes {
  size_t send = 0;
  size_t recv = 0;
};
CollBytes collBytes(const CollDesc& d, size_t typeSize, int rank, int nranks);

}  // namespace weft::nccl
