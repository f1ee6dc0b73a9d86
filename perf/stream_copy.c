/* stream_copy: memory bandwidth of a plain copy, a non-temporal copy and an
 * in-place add, with T threads each working on its own slice of two arrays.
 *
 * This is the physical limit of a shared-memory collective on one host:
 * every byte a rank receives is read from one buffer and written to another
 * at least once. GB/s counts bytes read plus bytes written (10^9 bytes/s),
 * the best of several runs.
 *
 *   stream_copy [-t threads] [-s MiB per array] [-r runs] [-p]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_NT_STORES 1
#else
#define HAVE_NT_STORES 0
#endif

enum kernel { K_MEMCPY, K_NT_COPY, K_ADD, K_COUNT };
static const char* const kNames[K_COUNT] = {"memcpy", "nt_copy", "add"};
/* Bytes moved per byte of array: copy reads src, writes dst; add reads a and
 * b and writes a. */
static const double kTraffic[K_COUNT] = {2.0, 2.0, 3.0};
static const char* const kWhat[K_COUNT] = {"memcpy(dst, src)", "non-temporal stores",
                                           "a[i] += b[i] (float)"};

struct shared {
  char* src;
  char* dst;
  size_t bytes;
  int threads;
  int runs;
  int pin;
  pthread_barrier_t barrier;
  double best[K_COUNT]; /* seconds, written by thread 0 */
};

struct worker {
  struct shared* sh;
  int id;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#if HAVE_NT_STORES
/* 64 bytes per step, 16-byte aligned loads and streaming stores (SSE2 is
 * part of x86-64, so this needs no runtime dispatch). */
static void nt_copy(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_load_si128((const __m128i*)(src + i));
    __m128i b = _mm_load_si128((const __m128i*)(src + i + 16));
    __m128i c = _mm_load_si128((const __m128i*)(src + i + 32));
    __m128i d = _mm_load_si128((const __m128i*)(src + i + 48));
    _mm_stream_si128((__m128i*)(dst + i), a);
    _mm_stream_si128((__m128i*)(dst + i + 16), b);
    _mm_stream_si128((__m128i*)(dst + i + 32), c);
    _mm_stream_si128((__m128i*)(dst + i + 48), d);
  }
  _mm_sfence();
  if (i < n) memcpy(dst + i, src + i, n - i);
}
#endif

static void add_floats(float* restrict a, const float* restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

static void run_kernel(enum kernel k, char* dst, const char* src, size_t n) {
  switch (k) {
    case K_MEMCPY:
      memcpy(dst, src, n);
      break;
    case K_NT_COPY:
#if HAVE_NT_STORES
      nt_copy(dst, src, n);
#else
      memcpy(dst, src, n);
#endif
      break;
    case K_ADD:
      add_floats((float*)dst, (const float*)src, n / sizeof(float));
      break;
    case K_COUNT:
      break;
  }
}

static void* work(void* arg) {
  struct worker* w = arg;
  struct shared* sh = w->sh;
  if (sh->pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->id % CPU_SETSIZE, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  /* Slices are whole cache lines, so every thread's part stays aligned. */
  size_t lines = sh->bytes / 64;
  size_t begin = lines * (size_t)w->id / (size_t)sh->threads * 64;
  size_t end = lines * (size_t)(w->id + 1) / (size_t)sh->threads * 64;
  if (w->id == sh->threads - 1) end = sh->bytes;
  char* dst = sh->dst + begin;
  char* src = sh->src + begin;
  size_t n = end - begin;

  /* First touch by the thread that will use the pages. */
  for (size_t i = 0; i < n / sizeof(float); ++i) ((float*)src)[i] = (float)(i & 1023);
  memset(dst, 0, n);

  for (int k = 0; k < K_COUNT; ++k) {
    run_kernel((enum kernel)k, dst, src, n); /* warm-up */
    for (int r = 0; r < sh->runs; ++r) {
      pthread_barrier_wait(&sh->barrier);
      double t0 = now_s();
      run_kernel((enum kernel)k, dst, src, n);
      pthread_barrier_wait(&sh->barrier);
      double t = now_s() - t0;
      if (w->id == 0 && t < sh->best[k]) sh->best[k] = t;
    }
  }
  return NULL;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: stream_copy [-t threads (2)] [-s MiB per array (256)] [-r runs (10)] [-p]\n"
          "  -p  pin thread i to CPU i\n");
}

static int parse_pos(const char* s, long max, long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 1 || v > max) return -1;
  *out = v;
  return 0;
}

int main(int argc, char** argv) {
  long threads = 2, mib = 256, runs = 10;
  int pin = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    long* target = NULL;
    long max = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "-p")) {
      pin = 1;
      continue;
    } else if (!strcmp(a, "-t")) {
      target = &threads;
      max = 1024;
    } else if (!strcmp(a, "-s")) {
      target = &mib;
      max = 1 << 20;
    } else if (!strcmp(a, "-r")) {
      target = &runs;
      max = 100000;
    } else {
      fprintf(stderr, "stream_copy: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc || parse_pos(argv[++i], max, target) != 0) {
      fprintf(stderr, "stream_copy: bad or missing value for %s\n", a);
      usage(stderr);
      return 2;
    }
  }

  struct shared sh;
  memset(&sh, 0, sizeof(sh));
  sh.bytes = (size_t)mib << 20;
  sh.threads = (int)threads;
  sh.runs = (int)runs;
  sh.pin = pin;
  for (int k = 0; k < K_COUNT; ++k) sh.best[k] = 1e30;
  void* src = NULL;
  void* dst = NULL;
  if (posix_memalign(&src, 4096, sh.bytes) || posix_memalign(&dst, 4096, sh.bytes)) {
    fprintf(stderr, "stream_copy: cannot allocate 2 x %ld MiB\n", mib);
    return 1;
  }
  sh.src = src;
  sh.dst = dst;
  pthread_barrier_init(&sh.barrier, NULL, (unsigned)threads);

  struct worker* ws = calloc((size_t)threads, sizeof(*ws));
  pthread_t* tids = calloc((size_t)threads, sizeof(*tids));
  if (!ws || !tids) return 1;
  for (int t = 0; t < threads; ++t) {
    ws[t].sh = &sh;
    ws[t].id = t;
    if (t > 0 && pthread_create(&tids[t], NULL, work, &ws[t]) != 0) {
      fprintf(stderr, "stream_copy: pthread_create failed\n");
      return 1;
    }
  }
  work(&ws[0]); /* the main thread is thread 0 */
  for (int t = 1; t < threads; ++t) pthread_join(tids[t], NULL);

  printf("# stream_copy: %ld threads, %ld MiB per array, best of %ld runs%s\n", threads, mib, runs,
         pin ? ", pinned" : "");
  printf("# GB/s = (bytes read + bytes written) / time, 1 GB = 1e9 B\n");
  for (int k = 0; k < K_COUNT; ++k) {
    double gbs = kTraffic[k] * (double)sh.bytes / sh.best[k] / 1e9;
    printf("%-8s %8.2f GB/s   # %s\n", kNames[k], gbs, kWhat[k]);
  }
  if (!HAVE_NT_STORES) printf("# nt_copy is plain memcpy on this architecture\n");

  pthread_barrier_destroy(&sh.barrier);
  free(ws);
  free(tids);
  free(src);
  free(dst);
  return 0;
}
