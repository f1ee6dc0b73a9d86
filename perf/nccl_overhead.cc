// What libnccl.so.2 costs over weft's own API: the same all-reduce through
// weftAllReduce (libweft.so) and through ncclAllReduce (the shim), on the same
// ranks, sizes and buffers, timed in alternating rounds so that load on the
// machine hits both alike.
//
//   nccl_overhead [-n ranks] [-b minbytes] [-e maxbytes] [-f factor] [-i iters] [-r rounds]
//
// Prints per size the median time per call of each and their ratio
// (weft time / shim time: 1.00 means no overhead; the target is >= 0.98).
// Exit status 0 unless a call fails or the results differ.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl/nccl_abi.h"
#include "weft/weft.h"

// The shim's functions used here (their declarations come from nccl.h in a
// real program; this benchmark builds without the CUDA toolkit).
extern "C" {
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
}

namespace {

struct Options {
  int nranks = 2;
  size_t minBytes = 8;
  size_t maxBytes = 1 << 20;
  size_t factor = 4;
  int iters = 200;
  int rounds = 9;
};

double secondsNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(int rank, const char* what, const char* msg) {
  std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, msg);
  std::fflush(stderr);
  _exit(2);
}

void readAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) _exit(3);
    got += static_cast<size_t>(r);
  }
}

int rankMain(int rank, const Options& o, const std::vector<std::array<int, 2>>& pipes) {
  // Rank 0 makes both ids and passes them on (a side channel, as PyTorch).
  weftUniqueId wid;
  ncclUniqueId nid;
  if (rank == 0) {
    if (weftGetUniqueId(&wid) != weftSuccess)
      die(rank, "weftGetUniqueId", weftGetLastError(nullptr));
    if (ncclGetUniqueId(&nid) != ncclSuccess)
      die(rank, "ncclGetUniqueId", ncclGetLastError(nullptr));
    for (int r = 1; r < o.nranks; ++r) {
      if (write(pipes[r][1], &wid, sizeof wid) != sizeof wid) _exit(3);
      if (write(pipes[r][1], &nid, sizeof nid) != sizeof nid) _exit(3);
    }
  } else {
    readAll(pipes[rank][0], &wid, sizeof wid);
    readAll(pipes[rank][0], &nid, sizeof nid);
  }
  weftComm_t wc;
  ncclComm_t nc;
  if (weftCommInitRank(&wc, o.nranks, wid, rank) != weftSuccess)
    die(rank, "weftCommInitRank", weftGetLastError(nullptr));
  if (ncclCommInitRank(&nc, o.nranks, nid, rank) != ncclSuccess)
    die(rank, "ncclCommInitRank", ncclGetLastError(nullptr));

  std::vector<float> send(o.maxBytes / sizeof(float) + 1, 1.0f);
  std::vector<float> recvW(send.size()), recvN(send.size());
  if (rank == 0)
    std::printf(
        "# nccl_overhead: %d ranks, %d iters x %d rounds, float sum, out of place\n"
        "# %12s %12s %12s %8s\n",
        o.nranks, o.iters, o.rounds, "bytes", "weft us", "shim us", "ratio");
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.factor) {
    const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
    std::vector<double> tw, tn;
    auto runWeft = [&] {
      const double t0 = secondsNow();
      for (int i = 0; i < o.iters; ++i)
        if (weftAllReduce(send.data(), recvW.data(), count, weftFloat, weftSum, wc, nullptr) !=
            weftSuccess)
          die(rank, "weftAllReduce", weftGetLastError(wc));
      tw.push_back((secondsNow() - t0) / o.iters);
    };
    auto runShim = [&] {
      const double t0 = secondsNow();
      for (int i = 0; i < o.iters; ++i)
        if (ncclAllReduce(send.data(), recvN.data(), count, ncclFloat, ncclSum, nc, nullptr) !=
            ncclSuccess)
          die(rank, "ncclAllReduce", ncclGetLastError(nc));
      tn.push_back((secondsNow() - t0) / o.iters);
    };
    runWeft();  // warm-up of both
    runShim();
    tw.clear();
    tn.clear();
    for (int r = 0; r < o.rounds; ++r) {
      // Alternate which goes first so that neither always follows the other.
      if (r % 2 == 0) {
        runWeft();
        runShim();
      } else {
        runShim();
        runWeft();
      }
    }
    if (std::memcmp(recvW.data(), recvN.data(), count * sizeof(float)) != 0)
      die(rank, "compare", "the shim's result differs from weft's");
    std::sort(tw.begin(), tw.end());
    std::sort(tn.begin(), tn.end());
    const double mw = tw[tw.size() / 2], mn = tn[tn.size() / 2];
    if (rank == 0)
      std::printf("  %12zu %12.2f %12.2f %8.3f\n", count * sizeof(float), mw * 1e6, mn * 1e6,
                  mw / mn);
  }
  std::fflush(stdout);
  ncclCommDestroy(nc);
  weftCommDestroy(wc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (f == "-n")
      o.nranks = static_cast<int>(v);
    else if (f == "-b")
      o.minBytes = static_cast<size_t>(v);
    else if (f == "-e")
      o.maxBytes = static_cast<size_t>(v);
    else if (f == "-f")
      o.factor = static_cast<size_t>(v);
    else if (f == "-i")
      o.iters = static_cast<int>(v);
    else if (f == "-r")
      o.rounds = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (o.nranks < 1 || o.factor < 2 || o.minBytes == 0 || o.iters < 1 || o.rounds < 1) {
    std::fprintf(stderr, "bad options\n");
    return 2;
  }
  std::vector<std::array<int, 2>> pipes(o.nranks);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) return 2;
  for (int r = 0; r < o.nranks; ++r)
    if (fork() == 0) {
      const int rc = rankMain(r, o, pipes);
      _exit(rc);
    }
  int failed = 0, status = 0;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  return failed ? 1 : 0;
}
