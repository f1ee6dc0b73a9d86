/* mpi_coll_perf: the MPI peer of weft's nccl-tests-style perf binaries.
 *
 * Times MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block or MPI_Alltoall
 * (float, sum) over a range of sizes and prints the nccl-tests table, so that
 * perf/compare can read weft and MPI output with one parser.
 *
 *   mpirun -np 2 mpi_coll_perf -c allreduce -b 8 -e 64M -f 2 -n 20 -w 5
 *
 * Sizes follow nccl-tests: "size" is the whole buffer (the allreduce buffer;
 * the gathered / scattered / exchanged buffer for the others), and per-rank
 * blocks are size / nranks. time is the mean over ranks of the mean time per
 * iteration; algbw = size / time; busbw = algbw * factor with factor
 * 2(n-1)/n for allreduce and (n-1)/n for the other three.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL };
static const char* const kCollNames[] = {"allreduce", "allgather", "reducescatter", "alltoall"};

struct options {
  enum coll coll;
  size_t min_bytes, max_bytes, step_bytes;
  double step_factor;
  int iters, warmup;
  int check;   /* verify results once per size */
  int inplace; /* also run the in-place variant */
};

static int g_rank, g_nranks;

static void usage(FILE* out) {
  fprintf(out,
          "usage: mpi_coll_perf [options]\n"
          "  -c, --coll NAME      allreduce | allgather | reducescatter | alltoall "
          "(default allreduce)\n"
          "  -b, --minbytes SIZE  smallest size (default 32M); suffixes K, M, G\n"
          "  -e, --maxbytes SIZE  largest size (default 32M)\n"
          "  -f, --stepfactor F   multiply the size by F each step (default 2)\n"
          "  -i, --stepbytes SIZE add SIZE each step instead (when -f is 1 or absent)\n"
          "  -n, --iters N        timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N untimed iterations per size (default 5)\n"
          "  -k, --check 0|1      verify the result once per size (default 1)\n"
          "  -I, --inplace 0|1    also time the in-place variant (default 1)\n"
          "  -h, --help           this help\n"
          "Data type float, reduction sum. Run under mpirun.\n");
}

static int parse_size(const char* s, size_t* out) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  double mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024.0;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024.0 * 1024.0;
      ++end;
      break;
    default:
      break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return -1;
  *out = (size_t)(v * mult);
  return 0;
}

static int parse_int(const char* s, int lo, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > 1000000000L) return -1;
  *out = (int)v;
  return 0;
}

/* Only rank 0 reports; every rank exits with the same code. */
static void fail_usage(const char* msg, const char* arg) {
  if (g_rank == 0) {
    fprintf(stderr, "mpi_coll_perf: %s '%s'\n", msg, arg);
    usage(stderr);
  }
  MPI_Finalize();
  exit(2);
}

static void parse_args(int argc, char** argv, struct options* o) {
  o->coll = ALLREDUCE;
  o->min_bytes = o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->inplace = 1;
  int factor_given = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      if (g_rank == 0) usage(stdout);
      MPI_Finalize();
      exit(0);
    }
    if (i + 1 >= argc) fail_usage("missing value for", a);
    const char* v = argv[++i];
    int bad = 0;
    if (!strcmp(a, "-c") || !strcmp(a, "--coll")) {
      int found = -1;
      for (int c = 0; c < 4; ++c) {
        if (!strcmp(v, kCollNames[c])) found = c;
      }
      if (!strcmp(v, "all_reduce")) found = ALLREDUCE;
      if (!strcmp(v, "all_gather")) found = ALLGATHER;
      if (!strcmp(v, "reduce_scatter")) found = REDUCESCATTER;
      bad = found < 0;
      if (!bad) o->coll = (enum coll)found;
    } else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes")) {
      bad = parse_size(v, &o->min_bytes);
    } else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) {
      bad = parse_size(v, &o->max_bytes);
    } else if (!strcmp(a, "-i") || !strcmp(a, "--stepbytes")) {
      bad = parse_size(v, &o->step_bytes) || o->step_bytes == 0;
    } else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) {
      char* end = NULL;
      o->step_factor = strtod(v, &end);
      bad = end == v || *end != '\0' || o->step_factor < 1;
      factor_given = 1;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) {
      bad = parse_int(v, 1, &o->iters);
    } else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters")) {
      bad = parse_int(v, 0, &o->warmup);
    } else if (!strcmp(a, "-k") || !strcmp(a, "--check")) {
      bad = parse_int(v, 0, &o->check);
    } else if (!strcmp(a, "-I") || !strcmp(a, "--inplace")) {
      bad = parse_int(v, 0, &o->inplace);
    } else {
      --i;
      fail_usage("unknown option", a);
    }
    if (bad) fail_usage("bad value", v);
  }
  if (!factor_given) o->step_factor = 2;
  if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
}

/* The value rank r contributes at element i: small integers, so float sums
 * over any rank count used here are exact. */
static float value(int r, size_t i) {
  return (float)((r % 16) * 8 + (int)(i % 7) + 1);
}

/* Elements in the whole buffer for a requested size: a multiple of nranks
 * where the buffer is cut into rank blocks; allreduce takes any count, as in
 * nccl-tests (rounded, 8 B at 4 ranks was 0 and its latency went unmeasured). */
static size_t total_count(enum coll c, size_t bytes) {
  size_t n = bytes / sizeof(float);
  return c == ALLREDUCE ? n : n / (size_t)g_nranks * (size_t)g_nranks;
}

/* Fills the input for one run; in place, the input is recv. */
static void init_input(enum coll c, float* send, float* recv, size_t count, int inplace) {
  size_t block = count / (size_t)g_nranks;
  switch (c) {
    case ALLREDUCE:
    case REDUCESCATTER:
    case ALLTOALL: {
      float* in = inplace ? recv : send;
      for (size_t i = 0; i < count; ++i) in[i] = value(g_rank, i);
      break;
    }
    case ALLGATHER: {
      float* in = inplace ? recv + (size_t)g_rank * block : send;
      for (size_t j = 0; j < block; ++j) in[j] = value(g_rank, j);
      break;
    }
  }
}

static void run_once(enum coll c, float* send, float* recv, size_t count, int inplace) {
  const int block = (int)(count / (size_t)g_nranks);
  const void* in = inplace ? MPI_IN_PLACE : send;
  switch (c) {
    case ALLREDUCE:
      MPI_Allreduce(in, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case ALLGATHER:
      MPI_Allgather(in, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case REDUCESCATTER:
      MPI_Reduce_scatter_block(in, recv, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case ALLTOALL:
      MPI_Alltoall(in, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
      break;
  }
}

/* Number of wrong elements in this rank's output. */
static long check_output(enum coll c, const float* recv, size_t count) {
  size_t block = count / (size_t)g_nranks;
  long wrong = 0;
  switch (c) {
    case ALLREDUCE:
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < g_nranks; ++r) want += value(r, i);
        wrong += recv[i] != want;
      }
      break;
    case ALLGATHER:
      for (int r = 0; r < g_nranks; ++r) {
        for (size_t j = 0; j < block; ++j) wrong += recv[(size_t)r * block + j] != value(r, j);
      }
      break;
    case REDUCESCATTER:
      for (size_t j = 0; j < block; ++j) {
        float want = 0;
        for (int r = 0; r < g_nranks; ++r) want += value(r, (size_t)g_rank * block + j);
        wrong += recv[j] != want;
      }
      break;
    case ALLTOALL:
      for (int s = 0; s < g_nranks; ++s) {
        for (size_t j = 0; j < block; ++j) {
          wrong += recv[(size_t)s * block + j] != value(s, (size_t)g_rank * block + j);
        }
      }
      break;
  }
  return wrong;
}

static double bus_factor(enum coll c) {
  double n = g_nranks;
  return c == ALLREDUCE ? 2.0 * (n - 1) / n : (n - 1) / n;
}

/* Times one size in one placement; returns the mean time per iteration (us)
 * over ranks, and the total wrong count over ranks (or -1 unchecked). */
static double time_case(const struct options* o, float* send, float* recv, size_t count,
                        int inplace, long* wrong) {
  init_input(o->coll, send, recv, count, inplace);
  for (int i = 0; i < o->warmup; ++i) run_once(o->coll, send, recv, count, inplace);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) run_once(o->coll, send, recv, count, inplace);
  double us = (MPI_Wtime() - t0) * 1e6 / o->iters;
  double sum_us = 0;
  MPI_Allreduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

  *wrong = -1;
  if (o->check) {
    init_input(o->coll, send, recv, count, inplace);
    run_once(o->coll, send, recv, count, inplace);
    long mine = check_output(o->coll, recv, count), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    *wrong = all;
  }
  return sum_us / g_nranks;
}

static void print_cell(double us, size_t bytes, double factor, long wrong) {
  double algbw = us > 0 ? (double)bytes / us / 1e3 : 0; /* GB/s */
  printf(" %8.2f %7.2f %7.2f", us, algbw, algbw * factor);
  if (wrong < 0) {
    printf(" %6s", "N/A");
  } else {
    printf(" %6ld", wrong);
  }
}

static void* alloc_or_die(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0) {
    fprintf(stderr, "mpi_coll_perf: rank %d: cannot allocate %zu bytes\n", g_rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(p, 0, bytes);
  return p;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
  struct options o;
  parse_args(argc, argv, &o);

  const size_t max_count = total_count(o.coll, o.max_bytes);
  if ((uint64_t)max_count > (uint64_t)INT32_MAX) {
    if (g_rank == 0) fprintf(stderr, "mpi_coll_perf: -e too large for MPI int counts\n");
    MPI_Finalize();
    return 2;
  }
  const size_t max_block = max_count / (size_t)g_nranks;
  /* recv holds the whole buffer for every collective: in place, the
   * reduce-scatter input lives there too. */
  float* send = alloc_or_die((o.coll == ALLGATHER ? max_block : max_count) * sizeof(float));
  float* recv = alloc_or_die(max_count * sizeof(float));

  int version = 0, subversion = 0;
  MPI_Get_version(&version, &subversion);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int lib_len = 0;
  MPI_Get_library_version(lib, &lib_len);
  char* nl = strchr(lib, '\n');
  if (nl) *nl = '\0';

  const char* redop = (o.coll == ALLGATHER || o.coll == ALLTOALL) ? "none" : "sum";
  const double factor = bus_factor(o.coll);
  if (g_rank == 0) {
    printf(
        "# mpi_coll_perf %s: nranks %d minBytes %zu maxBytes %zu step: %g(%s) warmup iters: "
        "%d iters: %d validation: %d\n",
        kCollNames[o.coll], g_nranks, o.min_bytes, o.max_bytes,
        o.step_factor > 1 ? o.step_factor : (double)o.step_bytes,
        o.step_factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
    printf("# MPI %d.%d: %s\n#\n", version, subversion, lib);
    printf("# %54s %27s %s\n", "", "out-of-place",
           o.inplace ? "                     in-place" : "");
    printf("# %10s %12s %8s %6s %6s %8s %7s %7s %6s", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong");
    if (o.inplace) printf(" %8s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
    printf("\n# %10s %12s %8s %6s %6s %8s %7s %7s %6s", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
    if (o.inplace) printf(" %8s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("\n");
    fflush(stdout);
  }

  double bw_sum = 0;
  int bw_n = 0;
  long wrong_total = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
    size_t count = total_count(o.coll, bytes);
    size_t real_bytes = count * sizeof(float);
    long wrong_out = 0, wrong_in = 0;
    double us_out = time_case(&o, send, recv, count, 0, &wrong_out);
    double us_in = o.inplace ? time_case(&o, send, recv, count, 1, &wrong_in) : 0;
    if (g_rank == 0) {
      printf("  %10zu %12zu %8s %6s %6d", real_bytes, count, "float", redop, -1);
      print_cell(us_out, real_bytes, factor, wrong_out);
      if (o.inplace) print_cell(us_in, real_bytes, factor, wrong_in);
      printf("\n");
      fflush(stdout);
    }
    if (us_out > 0) {
      bw_sum += (double)real_bytes / us_out / 1e3 * factor;
      ++bw_n;
    }
    if (o.inplace && us_in > 0) {
      bw_sum += (double)real_bytes / us_in / 1e3 * factor;
      ++bw_n;
    }
    wrong_total += (wrong_out > 0 ? wrong_out : 0) + (wrong_in > 0 ? wrong_in : 0);

    size_t next =
        o.step_factor > 1 ? (size_t)((double)bytes * o.step_factor) : bytes + o.step_bytes;
    if (next <= bytes) break; /* -b 0 with a factor, or overflow */
    bytes = next;
  }
  if (g_rank == 0) {
    printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n#\n", bw_n ? bw_sum / bw_n : 0.0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
