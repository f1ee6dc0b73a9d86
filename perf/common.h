// The shared harness of the nccl-tests-style perf binaries.
//
// Each binary (all_reduce_perf, all_gather_perf, ...) fills in one Coll: how
// to size its buffers for a given byte count, its bus-bandwidth factor, how to
// issue the collective, and where each element it receives comes from. The
// harness does the rest: flags, the table, timing, data checks, JSON output.
//
// One process is one rank; the communicator comes from weftCommInitFromEnv,
// so the binaries run under `weftrun -n N`, mpirun or srun.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/weft.h"

namespace weftperf {

// Element counts for one size, as nccl-tests' getCollByteCount. The in-place
// offsets are multiplied by the rank: the in-place send buffer is
// recvbuff + sendInplaceOffset*rank, the in-place receive buffer is
// recvbuff + recvInplaceOffset*rank (elements).
struct Counts {
  size_t send = 0;
  size_t recv = 0;
  size_t param = 0;  // the count passed to the collective (the table's count column)
  size_t sendInplaceOffset = 0;
  size_t recvInplaceOffset = 0;
};

// Where element j of a rank's receive region comes from: nowhere (not
// checked), element idx of rank `rank`'s input, or the reduction over all
// ranks of element idx of their inputs.
struct Source {
  enum Kind { kNone, kCopy, kReduce } kind = kNone;
  int rank = 0;
  size_t idx = 0;
};

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;  // Counts::param
  weftDataType_t type;
  weftRedOp_t op;
  int root;
  int rank;
  int nranks;
  weftComm_t comm;
  weftStream_t stream;
};

struct Coll {
  const char* name;  // e.g. "AllReduce"
  bool usesOp;       // loops over -o; the redop column says "none" otherwise
  bool usesRoot;     // loops over -r; the root column says -1 otherwise
  Counts (*counts)(size_t count, int nranks);
  // algbw = algFactor * count * typesize / time; busbw = algbw * busFactor.
  double (*algFactor)(int nranks);
  double (*busFactor)(int nranks);
  weftResult_t (*issue)(const CallArgs& a);
  // Whether `rank` receives anything it can check (false: non-roots of
  // reduce and gather).
  bool (*receives)(int rank, int root);
  Source (*source)(int rank, int nranks, int root, size_t j, size_t paramCount);
  // False where the library rejects the in-place call: the in-place columns
  // then say N/A.
  bool inplace = true;
  // Takes -Z <compressor>: issues weftCompressedAllReduce instead (sum/avg,
  // float/half/bfloat16) and prints the wire bytes and compression ratio.
  bool compressible = false;
};

// Runs the whole benchmark; the return value is main's.
int perfMain(int argc, char** argv, const Coll& coll);

// Small helpers for the Coll definitions.
inline double factorOne(int) {
  return 1.0;
}
inline double factorN(int n) {
  return static_cast<double>(n);
}
inline double factorNm1OverN(int n) {
  return n > 0 ? static_cast<double>(n - 1) / n : 0.0;
}
inline bool receivesAll(int, int) {
  return true;
}
inline bool receivesRoot(int rank, int root) {
  return rank == root;
}

}  // namespace weftperf
