/* An NCCL program, compiled as C against the CUDA toolkit's own nccl.h and
 * linked to weft's libnccl.so.2, run on host memory by forked ranks.
 *
 * It does what PyTorch does with NCCL: rank 0 makes the unique id and hands
 * it to the others over a side channel (pipes here), every rank calls
 * ncclCommInitRank, then collectives, grouped send/recv, ncclCommSplit,
 * non-blocking init polled with ncclCommGetAsyncError, ncclCommAbort. Every
 * result is checked against a serial reference computed here.
 *
 *   nccl_c_test [nranks]     (default 4; exit status 0 when all checks pass)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <nccl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 16
#define N 4099 /* elements per rank: odd, not a multiple of any vector width */

static int g_rank = -1, g_nranks = 0, g_failures = 0;
static ncclComm_t g_comm = NULL;
static int g_idPipe[MAX_RANKS][2];
static pid_t g_pids[MAX_RANKS];
static volatile sig_atomic_t g_timedOut = 0;

static void killRanks(int sig) {
  (void)sig;
  g_timedOut = 1;
  for (int r = 0; r < g_nranks; ++r)
    if (g_pids[r] > 0) kill(g_pids[r], SIGKILL);
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    ncclResult_t r_ = (call);                                                              \
    if (r_ != ncclSuccess) {                                                               \
      fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", g_rank, __FILE__, __LINE__, #call, \
              ncclGetErrorString(r_), ncclGetLastError(g_comm));                           \
      if (g_comm) ncclCommAbort(g_comm);                                                   \
      _exit(2);                                                                            \
    }                                                                                      \
  } while (0)

#define EXPECT(cond, ...)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "rank %d: %s:%d: FAILED %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
      ++g_failures;                                                                      \
    }                                                                                    \
  } while (0)

/* Rank r's input element i: small integers, so every float sum is exact. */
static double input(int r, size_t i) {
  return (double)((r + 1) * (int)((i % 7) + 1));
}

/* The side channel: rank 0 makes an id and writes it to every other rank. */
static void shareId(ncclUniqueId* id) {
  if (g_rank == 0) {
    CHECK(ncclGetUniqueId(id));
    for (int r = 1; r < g_nranks; ++r)
      if (write(g_idPipe[r][1], id, sizeof *id) != (ssize_t)sizeof *id) _exit(3);
  } else {
    size_t got = 0;
    while (got < sizeof *id) {
      ssize_t n = read(g_idPipe[g_rank][0], (char*)id + got, sizeof *id - got);
      if (n <= 0) _exit(3);
      got += (size_t)n;
    }
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void testAllReduce(void) {
  const int n = g_nranks;
  float* fs = malloc(N * sizeof(float));
  float* fr = malloc(N * sizeof(float));
  int32_t* is = malloc(N * sizeof(int32_t));
  int32_t* ir = malloc(N * sizeof(int32_t));
  double* ds = malloc(N * sizeof(double));
  for (size_t i = 0; i < N; ++i) {
    fs[i] = (float)input(g_rank, i);
    is[i] = (int32_t)input(g_rank, i);
    ds[i] = input(g_rank, i);
  }
  const double tri = n * (n + 1) / 2.0;

  CHECK(ncclAllReduce(fs, fr, N, ncclFloat, ncclSum, g_comm, NULL));
  for (size_t i = 0; i < N; ++i) {
    EXPECT(fr[i] == (float)(tri * (double)((i % 7) + 1)), "sum[%zu]=%g", i, fr[i]);
    if (fr[i] != (float)(tri * (double)((i % 7) + 1))) break;
  }
  /* In place. */
  memcpy(fr, fs, N * sizeof(float));
  CHECK(ncclAllReduce(fr, fr, N, ncclFloat, ncclSum, g_comm, NULL));
  EXPECT(fr[5] == (float)(tri * 6), "in-place sum[5]=%g", fr[5]);

  CHECK(ncclAllReduce(is, ir, N, ncclInt32, ncclMax, g_comm, NULL));
  EXPECT(ir[3] == n * 4, "max[3]=%d", ir[3]);
  CHECK(ncclAllReduce(is, ir, N, ncclInt32, ncclMin, g_comm, NULL));
  EXPECT(ir[3] == 4, "min[3]=%d", ir[3]);
  CHECK(ncclAllReduce(is, ir, N, ncclInt32, ncclProd, g_comm, NULL));
  {
    int64_t want = 1;
    for (int r = 0; r < n; ++r) want *= (int64_t)input(r, 2);
    EXPECT(ir[2] == want, "prod[2]=%d want %lld", ir[2], (long long)want);
  }
  CHECK(ncclAllReduce(ds, ds, N, ncclDouble, ncclAvg, g_comm, NULL));
  EXPECT(ds[6] == tri * 7 / n, "avg[6]=%g", ds[6]);

  /* PreMulSum: every rank scales its input by 0.5 before the sum. */
  float half = 0.5f;
  ncclRedOp_t scaled;
  CHECK(ncclRedOpCreatePreMulSum(&scaled, &half, ncclFloat, ncclScalarHostImmediate, g_comm));
  CHECK(ncclAllReduce(fs, fr, N, ncclFloat, scaled, g_comm, NULL));
  EXPECT(fr[1] == (float)(0.5 * tri * 2), "premulsum[1]=%g", fr[1]);
  CHECK(ncclRedOpDestroy(scaled, g_comm));

  /* Count 0 is a valid no-op. */
  CHECK(ncclAllReduce(fs, fr, 0, ncclFloat, ncclSum, g_comm, NULL));
  free(fs), free(fr), free(is), free(ir), free(ds);
}

static void testRooted(void) {
  const int n = g_nranks;
  float* s = malloc(N * sizeof(float));
  float* r = malloc((size_t)n * N * sizeof(float));
  for (size_t i = 0; i < N; ++i) s[i] = (float)input(g_rank, i);

  const int bRoot = 1 % n;
  CHECK(ncclBroadcast(s, r, N, ncclFloat, bRoot, g_comm, NULL));
  EXPECT(r[10] == (float)input(bRoot, 10), "broadcast[10]=%g", r[10]);

  const int cRoot = 2 % n;
  for (size_t i = 0; i < N; ++i) r[i] = (float)input(g_rank, i);
  CHECK(ncclBcast(r, N, ncclFloat, cRoot, g_comm, NULL));
  EXPECT(r[N - 1] == (float)input(cRoot, N - 1), "bcast[last]=%g", r[N - 1]);

  int64_t* ls = malloc(N * sizeof(int64_t));
  int64_t* lr = malloc(N * sizeof(int64_t));
  for (size_t i = 0; i < N; ++i) ls[i] = (int64_t)input(g_rank, i);
  const int rRoot = 3 % n;
  CHECK(ncclReduce(ls, lr, N, ncclInt64, ncclSum, rRoot, g_comm, NULL));
  if (g_rank == rRoot)
    EXPECT(lr[4] == (int64_t)(n * (n + 1) / 2 * 5), "reduce[4]=%lld", (long long)lr[4]);

  /* Gather to rank 0: slot k holds rank k's input. */
  CHECK(ncclGather(s, r, N, ncclFloat, 0, g_comm, NULL));
  if (g_rank == 0)
    for (int k = 0; k < n; ++k)
      EXPECT(r[(size_t)k * N + 9] == (float)input(k, 9), "gather slot %d", k);

  /* Scatter from rank 1 % n: rank k gets slot k of the root's buffer. */
  const int sRoot = 1 % n;
  float* big = malloc((size_t)n * N * sizeof(float));
  for (size_t j = 0; j < (size_t)n * N; ++j) big[j] = (float)(j % 1000);
  CHECK(ncclScatter(big, s, N, ncclFloat, sRoot, g_comm, NULL));
  EXPECT(s[3] == (float)(((size_t)g_rank * N + 3) % 1000), "scatter[3]=%g", s[3]);
  free(s), free(r), free(ls), free(lr), free(big);
}

static void testGatherScatterFamily(void) {
  const int n = g_nranks;
  float* s = malloc((size_t)n * N * sizeof(float));
  float* r = malloc((size_t)n * N * sizeof(float));
  for (size_t i = 0; i < N; ++i) s[i] = (float)input(g_rank, i);
  CHECK(ncclAllGather(s, r, N, ncclFloat, g_comm, NULL));
  for (int k = 0; k < n; ++k)
    EXPECT(r[(size_t)k * N + 8] == (float)input(k, 8), "allgather slot %d", k);
  /* In place: the input sits in this rank's slot. */
  for (size_t i = 0; i < N; ++i) r[(size_t)g_rank * N + i] = (float)input(g_rank, i) + 1;
  CHECK(ncclAllGather(r + (size_t)g_rank * N, r, N, ncclFloat, g_comm, NULL));
  for (int k = 0; k < n; ++k)
    EXPECT(r[(size_t)k * N] == (float)input(k, 0) + 1, "in-place allgather %d", k);

  /* Reduce-scatter: element j of the n*N input is input(rank, j). */
  for (size_t j = 0; j < (size_t)n * N; ++j) s[j] = (float)input(g_rank, j);
  CHECK(ncclReduceScatter(s, r, N, ncclFloat, ncclSum, g_comm, NULL));
  {
    const size_t j = (size_t)g_rank * N + 11;
    double want = 0;
    for (int k = 0; k < n; ++k) want += input(k, j);
    EXPECT(r[11] == (float)want, "reducescatter[11]=%g want %g", r[11], want);
  }

  /* All-to-all: block k of rank q's input goes to rank k's block q. */
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < N; ++i)
      s[(size_t)k * N + i] = (float)(g_rank * 100000 + k * 1000 + (int)(i % 1000));
  CHECK(ncclAlltoAll(s, r, N, ncclFloat, g_comm, NULL));
  for (int q = 0; q < n; ++q)
    EXPECT(r[(size_t)q * N + 17] == (float)(q * 100000 + g_rank * 1000 + 17), "alltoall from %d",
           q);
  free(s), free(r);
}

static void testSendRecv(void) {
  const int n = g_nranks;
  const int to = (g_rank + 1) % n, from = (g_rank + n - 1) % n;
  double* s = malloc(N * sizeof(double));
  double* r = malloc(N * sizeof(double));
  for (size_t i = 0; i < N; ++i) s[i] = input(g_rank, i) + 0.25;
  /* A ring: each rank sends first, which deadlocks unless grouped. */
  CHECK(ncclGroupStart());
  CHECK(ncclSend(s, N, ncclDouble, to, g_comm, NULL));
  CHECK(ncclRecv(r, N, ncclDouble, from, g_comm, NULL));
  CHECK(ncclGroupEnd());
  EXPECT(r[N / 2] == input(from, N / 2) + 0.25, "ring recv %g", r[N / 2]);

  /* Two collectives in one group. */
  float a = (float)g_rank, b = 1.0f;
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(&a, &a, 1, ncclFloat, ncclSum, g_comm, NULL));
  CHECK(ncclAllReduce(&b, &b, 1, ncclFloat, ncclSum, g_comm, NULL));
  CHECK(ncclGroupEnd());
  EXPECT(a == (float)(n * (n - 1) / 2) && b == (float)n, "grouped allreduce %g %g", a, b);
  free(s), free(r);
}

static void testSplit(void) {
  const int n = g_nranks;
  ncclComm_t sub = NULL;
  /* Two colours; key -rank reverses the order inside each. */
  CHECK(ncclCommSplit(g_comm, g_rank % 2, -g_rank, &sub, NULL));
  int subRank = -1, subCount = -1;
  CHECK(ncclCommUserRank(sub, &subRank));
  CHECK(ncclCommCount(sub, &subCount));
  const int members = (n - g_rank % 2 + 1) / 2;
  EXPECT(subCount == members, "split count %d want %d", subCount, members);
  int above = 0; /* members with a larger original rank come first */
  for (int q = g_rank + 2; q < n; q += 2) ++above;
  EXPECT(subRank == above, "split rank %d want %d", subRank, above);
  int v = g_rank, want = 0;
  for (int q = g_rank % 2; q < n; q += 2) want += q;
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt, ncclSum, sub, NULL));
  EXPECT(v == want, "split allreduce %d want %d", v, want);
  CHECK(ncclCommDestroy(sub));

  /* The last rank takes no colour and gets NCCL_COMM_NULL. */
  ncclComm_t rest = NULL;
  const int color = g_rank == n - 1 ? NCCL_SPLIT_NOCOLOR : 7;
  CHECK(ncclCommSplit(g_comm, color, 0, &rest, NULL));
  if (g_rank == n - 1) {
    EXPECT(rest == NULL, "NOCOLOR rank got a communicator");
  } else {
    int c = 0;
    CHECK(ncclCommCount(rest, &c));
    EXPECT(c == n - 1, "count %d", c);
    CHECK(ncclCommDestroy(rest));
  }
}

static void testNonBlockingInit(void) {
  ncclUniqueId id;
  shareId(&id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nonblocking";
  ncclComm_t nb = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&nb, g_nranks, id, g_rank, &config);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "non-blocking init returned %d", (int)r);
  EXPECT(nb != NULL, "no handle from a non-blocking init");
  /* Poll as PyTorch does, with a deadline instead of forever. */
  ncclResult_t state = ncclInProgress;
  const double deadline = now() + 60;
  int polls = 0;
  do {
    CHECK(ncclCommGetAsyncError(nb, &state));
    ++polls;
    if (state == ncclInProgress) sched_yield();
  } while (state == ncclInProgress && now() < deadline);
  EXPECT(state == ncclSuccess, "non-blocking init ended with %d after %d polls: %s", (int)state,
         polls, ncclGetLastError(nb));
  float x = 1;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, nb, NULL));
  EXPECT(x == (float)g_nranks, "allreduce on the non-blocking comm %g", x);
  CHECK(ncclCommFinalize(nb));
  CHECK(ncclCommDestroy(nb));
}

static void testAbort(void) {
  ncclComm_t doomed = NULL;
  CHECK(ncclCommSplit(g_comm, 0, g_rank, &doomed, NULL));
  /* weft tells peers when a rank aborts, so that none waits for it forever:
     a rank still inside the split would fail. A barrier on the parent (which
     no rank leaves before every rank entered it) keeps the abort after it. */
  float token = 1;
  CHECK(ncclAllReduce(&token, &token, 1, ncclFloat, ncclSum, g_comm, NULL));
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(doomed, &async));
  EXPECT(async == ncclSuccess, "async error %d on a healthy communicator", (int)async);
  CHECK(ncclCommAbort(doomed));
  float x = 1;
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, doomed, NULL);
  EXPECT(r != ncclSuccess, "allreduce on an aborted communicator succeeded");
  EXPECT(strlen(ncclGetLastError(NULL)) > 0, "no message after using an aborted communicator");
}

static void testMisc(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version));
  EXPECT(version >= NCCL_VERSION_CODE, "version %d older than the header's %d", version,
         NCCL_VERSION_CODE);
  EXPECT(strlen(ncclGetErrorString(ncclInvalidUsage)) > 0, "no error string");
  int count = 0, dev = 0;
  CHECK(ncclCommCount(g_comm, &count));
  EXPECT(count == g_nranks, "count %d", count);
  CHECK(ncclCommCuDevice(g_comm, &dev));
  EXPECT(dev == -1, "a host-memory communicator reports device %d", dev);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(g_comm, &async));
  EXPECT(async == ncclSuccess, "async error %d", (int)async);

  /* ncclMemAlloc gives host memory here, usable in collectives. */
  float* m = NULL;
  CHECK(ncclMemAlloc((void**)&m, 64 * sizeof(float)));
  void* handle = NULL;
  CHECK(ncclCommRegister(g_comm, m, 64 * sizeof(float), &handle));
  for (int i = 0; i < 64; ++i) m[i] = 1;
  CHECK(ncclAllReduce(m, m, 64, ncclFloat, ncclSum, g_comm, NULL));
  EXPECT(m[63] == (float)g_nranks, "allreduce on ncclMemAlloc memory %g", m[63]);
  CHECK(ncclCommDeregister(g_comm, handle));
  CHECK(ncclMemFree(m));

  /* What weft cannot do says so. */
  ncclResult_t r = ncclCommRevoke(g_comm, NCCL_REVOKE_DEFAULT);
  EXPECT(r == ncclInvalidUsage, "ncclCommRevoke returned %d", (int)r);
  EXPECT(strstr(ncclGetLastError(g_comm), "not supported") != NULL, "message: %s",
         ncclGetLastError(g_comm));
  ncclComm_t none = NULL;
  int exclude = 0;
  r = ncclCommShrink(g_comm, &exclude, 1, &none, NULL, NCCL_SHRINK_DEFAULT);
  EXPECT(r == ncclInvalidUsage && none == NULL, "ncclCommShrink returned %d", (int)r);

  /* Bad input is an error with a message, not a crash. */
  ncclConfig_t bad;
  memset(&bad, 0, sizeof bad);
  ncclComm_t c = NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  r = ncclCommInitRankConfig(&c, g_nranks, id, g_rank, &bad);
  EXPECT(r == ncclInvalidArgument, "uninitialised config gave %d", (int)r);
  float x = 0;
  r = ncclAllReduce(&x, &x, 1, (ncclDataType_t)99, ncclSum, g_comm, NULL);
  EXPECT(r == ncclInvalidArgument, "bad datatype gave %d", (int)r);
}

/* A non-blocking init that can never finish (the other rank never comes) is
 * aborted: the abort returns at once and the handle is dead. */
static void testAbortDuringInit(void) {
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t lonely = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&lonely, 2, id, 0, &config);
  EXPECT(r == ncclInProgress, "init returned %d", (int)r);
  ncclResult_t state = ncclSuccess;
  CHECK(ncclCommGetAsyncError(lonely, &state));
  EXPECT(state == ncclInProgress, "state %d while the peer is missing", (int)state);
  CHECK(ncclCommAbort(lonely));
  r = ncclCommGetAsyncError(lonely, &state);
  EXPECT(r == ncclInvalidUsage, "an aborted handle answered %d", (int)r);
}

/* ncclCommInitAll: all ranks of a communicator in this one process, driven
 * from one thread through a group. */
static void testInitAll(void) {
  enum { K = 3 };
  ncclComm_t comms[K];
  CHECK(ncclCommInitAll(comms, K, NULL));
  float v[K];
  for (int i = 0; i < K; ++i) v[i] = (float)(i + 1);
  CHECK(ncclGroupStart());
  for (int i = 0; i < K; ++i)
    CHECK(ncclAllReduce(&v[i], &v[i], 1, ncclFloat, ncclSum, comms[i], NULL));
  CHECK(ncclGroupEnd());
  for (int i = 0; i < K; ++i) EXPECT(v[i] == 6.0f, "initAll comm %d got %g", i, v[i]);
  for (int i = 0; i < K; ++i) CHECK(ncclCommDestroy(comms[i]));
}

static int rankMain(void) {
  ncclUniqueId id;
  shareId(&id);
  CHECK(ncclCommInitRank(&g_comm, g_nranks, id, g_rank));
  testAllReduce();
  testRooted();
  testGatherScatterFamily();
  testSendRecv();
  testSplit();
  testNonBlockingInit();
  testAbort();
  testMisc();
  if (g_rank == 0) testInitAll();
  if (g_rank == 1 % g_nranks) testAbortDuringInit();
  CHECK(ncclCommFinalize(g_comm));
  CHECK(ncclCommDestroy(g_comm));
  if (g_failures == 0) printf("rank %d: all checks passed\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  g_nranks = argc > 1 ? atoi(argv[1]) : 4;
  if (g_nranks < 1 || g_nranks > MAX_RANKS) {
    fprintf(stderr, "nranks must be 1..%d\n", MAX_RANKS);
    return 2;
  }
  for (int r = 0; r < g_nranks; ++r)
    if (pipe(g_idPipe[r]) != 0) return 2;
  for (int r = 0; r < g_nranks; ++r) {
    g_pids[r] = fork();
    if (g_pids[r] == 0) {
      g_rank = r;
      const int rc = rankMain();
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
  }
  /* Wait with a deadline: SIGALRM kills ranks still running then. */
  signal(SIGALRM, killRanks);
  alarm(240);
  int failed = 0;
  for (int left = g_nranks; left > 0;) {
    int status = 0;
    const pid_t p = waitpid(-1, &status, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --left;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      fprintf(stderr, "a rank (pid %d) failed: status 0x%x%s\n", (int)p, status,
              g_timedOut ? " (killed at the deadline)" : "");
    }
  }
  alarm(0);
  printf("%s: %d ranks, %d failed\n", failed ? "FAIL" : "PASS", g_nranks, failed);
  return failed ? 1 : 0;
}
