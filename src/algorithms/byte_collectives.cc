#include "algorithms/byte_collectives.h"

#include "algorithms/detail.h"
#include "base/dtype.h"

namespace weft::algo {

namespace {

CollArgs bytesArgs(CollKind kind, const void* send, void* recv, size_t bytes) {
  CollArgs a;
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = bytes;
  a.dtype = weftUint8;
  return a;
}

Status runAndWait(CollContext& ctx, const CollArgs& a, AlgorithmFn run) {
  WEFT_RETURN_IF_ERROR(run(ctx, a));
  Progress progress(ctx.health());
  return waitSourcesRead(ctx, progress);
}

}  // namespace

Status allGatherBytes(CollContext& ctx, const void* send, void* recv, size_t bytes,
                      AlgorithmFn run) {
  const CollArgs a = bytesArgs(CollKind::AllGather, send, recv, bytes);
  return runAndWait(ctx, a, run != nullptr ? run : selectAlgorithm(a, ctx).run);
}

Status broadcastBytes(CollContext& ctx, void* data, size_t bytes) {
  CollArgs a = bytesArgs(CollKind::Broadcast, data, data, bytes);
  a.root = 0;
  return runAndWait(ctx, a, chainBroadcast);
}

}  // namespace weft::algo
