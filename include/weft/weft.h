/* weft: collective communication for distributed training.
 *
 * The C API is shaped like NCCL's so that the libnccl.so.2 shim is a thin
 * mapping: enum values, argument order and in-place rules are NCCL's.
 * Buffers are host memory. Every call returns weftResult_t; no C++ exception
 * ever crosses this boundary.
 *
 * Streams: a weftStream_t is a host stream, an ordered queue of work. A
 * collective issued on a NULL stream has completed when the call returns; one
 * issued on a stream runs in the communicator's progress engine and completes
 * at weftStreamSynchronize (or when weftStreamQuery says weftSuccess).
 */
#ifndef WEFT_WEFT_H_
#define WEFT_WEFT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_MAJOR 0
#define WEFT_MINOR 1
#define WEFT_PATCH 0
#define WEFT_VERSION_CODE(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define WEFT_VERSION WEFT_VERSION_CODE(WEFT_MAJOR, WEFT_MINOR, WEFT_PATCH)

typedef struct weftComm* weftComm_t;
typedef struct weftStream* weftStream_t;

#define WEFT_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weftUniqueId;

/* Result codes: values as NCCL 2.30. */
typedef enum {
  weftSuccess = 0,
  weftUnhandledCudaError = 1,
  weftSystemError = 2,
  weftInternalError = 3,
  weftInvalidArgument = 4,
  weftInvalidUsage = 5,
  weftRemoteError = 6,
  weftInProgress = 7,
  weftTimeout = 8,
  weftNumResults = 9
} weftResult_t;

/* Data types: values as NCCL's. */
typedef enum {
  weftInt8 = 0,
  weftChar = 0,
  weftUint8 = 1,
  weftInt32 = 2,
  weftInt = 2,
  weftUint32 = 3,
  weftInt64 = 4,
  weftUint64 = 5,
  weftFloat16 = 6,
  weftHalf = 6,
  weftFloat32 = 7,
  weftFloat = 7,
  weftFloat64 = 8,
  weftDouble = 8,
  weftBfloat16 = 9,
  weftFloat8e4m3 = 10,
  weftFloat8e5m2 = 11,
  weftNumTypes = 12
} weftDataType_t;

/* Reduction ops: values as NCCL's. Ops made by weftRedOpCreatePreMulSum take
 * values from weftNumOps up. */
typedef enum {
  weftSum = 0,
  weftProd = 1,
  weftMax = 2,
  weftMin = 3,
  weftAvg = 4,
  weftNumOps = 5,
  weftMaxRedOp = 0x7fffffff
} weftRedOp_t;

/* Where the PreMulSum scalar lives: read once at creation (HostImmediate) or
 * read through the pointer each time the op runs (Device, as NCCL names it;
 * for host buffers the pointer is a host pointer). */
typedef enum { weftScalarDevice = 0, weftScalarHostImmediate = 1 } weftScalarResidence_t;

/* Versioned communicator config. Initialise with WEFT_CONFIG_INITIALIZER; a
 * config whose size/magic/version header is not set is rejected. Fields left
 * at WEFT_CONFIG_UNDEF_* take the default (or the WEFT_* environment). */
#define WEFT_CONFIG_MAGIC 0x77656674u /* "weft" */
#define WEFT_CONFIG_UNDEF_INT (-2147483647 - 1)
#define WEFT_CONFIG_UNDEF_PTR NULL
typedef struct weftConfig_v1 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;   /* 1 (default): init returns when ready; 0: weftInProgress */
  int timeoutMs;  /* per-collective timeout; <= 0 means none (WEFT_TIMEOUT_MS) */
  int splitShare; /* accepted for NCCL compatibility; resources are not shared */
  const char* commName;
} weftConfig_t;

#define WEFT_CONFIG_INITIALIZER                                                   \
  {                                                                               \
    sizeof(weftConfig_t), WEFT_CONFIG_MAGIC, WEFT_VERSION, WEFT_CONFIG_UNDEF_INT, \
        WEFT_CONFIG_UNDEF_INT, WEFT_CONFIG_UNDEF_INT, WEFT_CONFIG_UNDEF_PTR       \
  }

#define WEFT_SPLIT_NOCOLOR (-1)

/* Version and errors. */
weftResult_t weftGetVersion(int* version);
const char* weftGetErrorString(weftResult_t result);
/* The message of the last error on this thread (comm may be NULL). */
const char* weftGetLastError(weftComm_t comm);

/* Communicator lifetime. */
weftResult_t weftGetUniqueId(weftUniqueId* uniqueId);
weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank);
weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId, int rank,
                                    weftConfig_t* config);
/* Rank, size and rendezvous address from the environment: WEFT_RANK /
 * WEFT_WORLD_SIZE / WEFT_ADDR (host:port of rank 0's listener), torchrun's
 * RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, Open MPI's
 * OMPI_COMM_WORLD_RANK / _SIZE, Slurm's SLURM_PROCID / SLURM_NTASKS and PMI's
 * PMI_RANK / PMI_SIZE. config may be NULL. */
weftResult_t weftCommInitFromEnv(weftComm_t* comm, weftConfig_t* config);
weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                           weftConfig_t* config);
weftResult_t weftCommFinalize(weftComm_t comm);
weftResult_t weftCommDestroy(weftComm_t comm);
weftResult_t weftCommAbort(weftComm_t comm);
/* Shrink, as NCCL 2.27's ncclCommShrink: every rank of comm that is not in
 * excludeRanksList calls it with the same list and gets a communicator of the
 * survivors (ranks renumbered in order). It works after excluded ranks died:
 * it needs nothing from them. WEFT_SHRINK_ABORT first stops work still
 * pending on comm. comm itself stays to be destroyed or aborted. */
#define WEFT_SHRINK_DEFAULT 0x00
#define WEFT_SHRINK_ABORT 0x01
weftResult_t weftCommShrink(weftComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            weftComm_t* newcomm, weftConfig_t* config, int shrinkFlags);
/* Writes this rank's flight record of comm (the last WEFT_FLIGHT_RECORDS
 * collectives) as JSON into dir (NULL: WEFT_FLIGHT_DIR, default /tmp), as a
 * timeout or SIGUSR1 does; tools/weft-hang merges the ranks' files. */
weftResult_t weftCommDumpFlightRecord(weftComm_t comm, const char* dir);
weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError);
weftResult_t weftCommCount(const weftComm_t comm, int* count);
weftResult_t weftCommUserRank(const weftComm_t comm, int* rank);
/* Online tuning (WEFT_TUNER_ONLINE) times the first calls of each
 * collective, type and size on comm with different algorithms. *pending is 1
 * while another call like the last one comm ran would still be such a trial,
 * 0 once that is decided or where online tuning is off. Ask after comm's
 * calls have completed (weftStreamSynchronize). Every rank answers alike
 * after the same calls, so a benchmark can make untimed calls until it is 0. */
weftResult_t weftCommTuningPending(const weftComm_t comm, int* pending);

/* Host streams. */
weftResult_t weftStreamCreate(weftStream_t* stream);
weftResult_t weftStreamSynchronize(weftStream_t stream);
/* weftSuccess when all work on the stream is done, weftInProgress if not, or
 * the error of the work that failed. */
weftResult_t weftStreamQuery(weftStream_t stream);
weftResult_t weftStreamDestroy(weftStream_t stream);

/* Custom reduction ops. */
weftResult_t weftRedOpCreatePreMulSum(weftRedOp_t* op, void* scalar, weftDataType_t datatype,
                                      weftScalarResidence_t residence, weftComm_t comm);
weftResult_t weftRedOpDestroy(weftRedOp_t op, weftComm_t comm);

/* Collectives. Counts are in elements. */
weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                           weftStream_t stream);
weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm, weftStream_t stream);
weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        weftRedOp_t op, int root, weftComm_t comm, weftStream_t stream);
/* recvbuff holds nranks*sendcount elements; in place when
 * sendbuff == recvbuff + rank*sendcount. */
weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream);
/* sendbuff holds nranks*recvcount elements; in place when
 * recvbuff == sendbuff + rank*recvcount. */
weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                               weftStream_t stream);
/* count elements go to each peer: sendbuff and recvbuff hold nranks*count. */
weftResult_t weftAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm, weftStream_t stream);
/* All-to-all with per-peer sizes (the MoE case): sendcounts[p] elements from
 * sendbuff + sdispls[p] go to rank p, which receives them into its recvbuff +
 * rdispls[r] and must give recvcounts[r] equal to that count (a mismatch fails
 * with weftInvalidUsage). Counts and displacements are in elements, nranks
 * entries each, read during the call. Receive blocks must not overlap each
 * other or any send block (no in-place form). */
weftResult_t weftAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           weftDataType_t datatype, weftComm_t comm, weftStream_t stream);
/* The root's recvbuff holds nranks*count elements. */
weftResult_t weftGather(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        int root, weftComm_t comm, weftStream_t stream);
/* The root's sendbuff holds nranks*count elements. */
weftResult_t weftScatter(const void* sendbuff, void* recvbuff, size_t count,
                         weftDataType_t datatype, int root, weftComm_t comm, weftStream_t stream);
weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream);
weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftStream_t stream);

/* Groups: calls between GroupStart and GroupEnd are issued together at
 * GroupEnd; sends and receives in one group never deadlock on each other. */
weftResult_t weftGroupStart(void);
weftResult_t weftGroupEnd(void);

/* ------------------------------------------------------------------------
 * Compressed allreduce (gradient compression).
 *
 * A compressor is the persistent state of one gradient buffer: its
 * error-feedback residuals and PowerSGD's warm-started Q. Create one per
 * buffer, call weftCompressedAllReduce on that buffer every step, destroy it
 * at the end. It is bound to its communicator, and on first use to the
 * buffer's count and dtype; another count or dtype later is an error
 * (weftCompressorReset forgets the state and the binding).
 *
 * Kinds:
 *   OneBit   sign bits (8 per byte) + one fp32 scale per block; two phases
 *            (all-to-all to chunk owners, decode-reduce-encode with a server
 *            residual, all-gather): about 2/32 of the fp32 volume.
 *   PowerSGD rank-r approximation of each matrix (Vogels et al. 2019):
 *            allreduces of P (rows x r) and Q (cols x r) only.
 *   TopK     the k = ratio*count largest |values| (of gradient + residual)
 *            with their indices, all-gathered; randomK picks the same random
 *            indices on every rank (shared seed) and allreduces the values.
 *   Fp16/Bf16 cast to 16 bits on the wire, fp32 accumulation.
 * Inputs: fp32, fp16 or bf16. op is weftSum or weftAvg; weftAvg matches an
 * uncompressed weftAvg allreduce in expectation (with error feedback, the
 * running sum of results tracks the running sum of true averages). Every rank
 * gets bit-identical results.
 * ------------------------------------------------------------------------ */
typedef struct weftCompressor* weftCompressor_t;

typedef enum {
  weftCompressOneBit = 0,
  weftCompressPowerSGD = 1,
  weftCompressTopK = 2,
  weftCompressFp16 = 3,
  weftCompressBf16 = 4,
  weftNumCompressKinds = 5
} weftCompressKind_t;

#define WEFT_COMPRESSOR_PARAMS_MAGIC 0x7766637au /* "wfcz" */
typedef struct weftCompressorParams_v1 {
  size_t size;               /* sizeof(weftCompressorParams_t) */
  unsigned int magic;        /* WEFT_COMPRESSOR_PARAMS_MAGIC */
  int errorFeedback;         /* OneBit, TopK, PowerSGD: 1 keeps residuals (default) */
  int blockSize;             /* OneBit: elements per scale, multiple of 8 (2048) */
  int rank;                  /* PowerSGD: approximation rank, >= 1 (4) */
  size_t rows, cols;         /* PowerSGD: the buffer is one rows x cols matrix (row
                              * major); 0 x 0: reshaped to about sqrt(count) square */
  int numTensors;            /* PowerSGD: > 0: the buffer packs this many tensors, */
  const size_t* shapes;      /* shapes[2i], shapes[2i+1] = rows, cols of tensor i */
  double minCompressionRate; /* PowerSGD: a tensor is compressed only when
                              * (rows+cols)*rank*rate < rows*cols, else it goes in
                              * one uncompressed allreduce with the others (2) */
  double ratio;              /* TopK: fraction of elements kept, in (0,1] (0.01) */
  int randomK;               /* TopK: 1 = random-k with a shared seed (0) */
  unsigned long long seed;   /* PowerSGD initial Q, random-k: same on all ranks */
} weftCompressorParams_t;
#define WEFT_COMPRESSOR_PARAMS_INITIALIZER                                                        \
  {                                                                                               \
    sizeof(weftCompressorParams_t), WEFT_COMPRESSOR_PARAMS_MAGIC, 1, 2048, 4, 0, 0, 0, NULL, 2.0, \
        0.01, 0, 0x5eedull                                                                        \
  }

typedef struct {
  double wireBytes;  /* bytes this rank sent in its last compressed allreduce */
  double plainBytes; /* bytes a plain ring allreduce of the buffer sends per rank */
  double ratio;      /* plainBytes / wireBytes (0 when nothing was sent) */
} weftCompressorStats_t;

/* params may be NULL (defaults). */
weftResult_t weftCompressorCreate(weftComm_t comm, weftCompressKind_t kind,
                                  const weftCompressorParams_t* params,
                                  weftCompressor_t* compressor);
/* From text, as all_reduce_perf -Z takes it: "onebit", "onebit:block=1024,ef=0",
 * "powersgd:rank=4,rows=4096,cols=4096", "topk:ratio=0.01,random=1", "fp16",
 * "bf16". */
weftResult_t weftCompressorCreateFromString(weftComm_t comm, const char* spec,
                                            weftCompressor_t* compressor);
/* With a NULL stream, blocking: done when it returns. On a stream, queued
 * like a plain collective: it returns at once, runs in order with the work
 * already posted on comm, and is done (its error reported) when
 * weftStreamSynchronize returns; until then the buffers stay in use.
 * Not part of groups: between weftGroupStart and weftGroupEnd it is still
 * issued at once. sendbuff may equal recvbuff. */
weftResult_t weftCompressedAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     weftDataType_t datatype, weftRedOp_t op,
                                     weftCompressor_t compressor, weftComm_t comm,
                                     weftStream_t stream);
weftResult_t weftCompressorGetStats(weftCompressor_t compressor, weftCompressorStats_t* stats);
/* Forgets residuals, warm start and the buffer binding (every rank must reset). */
weftResult_t weftCompressorReset(weftCompressor_t compressor);
weftResult_t weftCompressorDestroy(weftCompressor_t compressor);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_WEFT_H_ */
