// The TCP channels, driven directly on a live two-rank communicator over
// loopback: commitFrom() sends the caller's bytes, land() puts a payload
// straight into place, a payload larger than the named space stays in the
// slot, clearLandings() stops all writes to named addresses, and chunks that
// go out on whichever socket has the least waiting still arrive in order,
// and staging buffers come round again most recently freed first.
// The collectives built on these run in tcp.* and netns_test.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/comm.h"
#include "harness/multirank.h"
#include "transport/tcp/tcp_transport.h"

namespace weft {
namespace {

constexpr size_t kChunk = 4096;

// Waits for the next slot of `ch`; fails the rank on timeout or error.
const void* peekWait(weftComm_t comm, RecvChannel& ch, size_t* bytes) {
  Progress progress(comm->health);
  comm->health.beginCollective();
  for (;;) {
    if (const void* d = ch.tryPeek(bytes)) return d;
    const Status st = progress.idle();
    RANK_CHECK_OK(st.code()) << st.message();
  }
}

void* acquireWait(weftComm_t comm, SendChannel& ch) {
  Progress progress(comm->health);
  comm->health.beginCollective();
  for (;;) {
    if (void* s = ch.tryAcquire()) return s;
    const Status st = progress.idle();
    RANK_CHECK_OK(st.code()) << st.message();
  }
}

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return v;
}

test::RunOptions overTcp() {
  test::RunOptions opts;
  opts.env = {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_TIMEOUT_MS", "20000"}};
  return opts;
}

// Rank 0 sends only once rank 1 has named its destinations (a signal, not
// a collective: a collective's end forgets landings).
TEST(TcpChannel, LandsInPlaceOnlyWhereNamedAndWithinCapacity) {
  test::RankSignal named;
  test::runRanks(
      2,
      [&](weftComm_t comm, int rank, int) {
        if (rank == 0) {
          named.wait();
          SendChannel& tx = comm->transport->sendTo(1);
          for (int m = 0; m < 3; ++m) {
            const std::vector<char> data = pattern(kChunk, m);
            void* slot = acquireWait(comm, tx);
            tx.commitFrom(slot, data.data(), data.size());
            // `data` goes out of scope: the caller's memory must be free
            // again once nothing reads it.
            Progress progress(comm->health);
            while (tx.sourcesInUse()) RANK_CHECK_OK(progress.idle().code());
          }
          RANK_CHECK_OK(comm->transport->flush([] { return Status::ok(); }).code());
        } else {
          RecvChannel& rx = comm->transport->recvFrom(0);
          RANK_ASSERT(rx.canLand());
          std::vector<char> first(kChunk, 0), third(kChunk / 2, 0x55);
          rx.land(first.data(), first.size());
          rx.land(nullptr, 0);                  // the second stays in the slot
          rx.land(third.data(), third.size());  // too small: stays in the slot
          named.post();
          size_t bytes = 0;
          const void* d = peekWait(comm, rx, &bytes);
          RANK_EXPECT(d == first.data()) << "the first payload was not landed in place";
          RANK_EXPECT(bytes == kChunk);
          RANK_EXPECT(first == pattern(kChunk, 0)) << "landed bytes differ";
          rx.release();
          d = peekWait(comm, rx, &bytes);
          RANK_EXPECT(d != first.data() && bytes == kChunk);
          RANK_EXPECT(std::memcmp(d, pattern(kChunk, 1).data(), kChunk) == 0);
          rx.release();
          d = peekWait(comm, rx, &bytes);
          RANK_EXPECT(d != third.data()) << "a payload larger than the named space was landed";
          RANK_EXPECT(std::memcmp(d, pattern(kChunk, 2).data(), kChunk) == 0);
          RANK_EXPECT(third == std::vector<char>(kChunk / 2, 0x55)) << "named space overrun";
          rx.release();
          comm->transport->endCollective();
        }
        test::rankBarrier(comm);
      },
      overTcp());
}

TEST(TcpChannel, ClearedLandingsAreNeverWritten) {
  test::runRanks(
      2,
      [](weftComm_t comm, int rank, int) {
        // Rank 1 names a destination, then forgets it before the data is sent.
        std::vector<char> dst(kChunk, 0x11);
        if (rank == 1) {
          RecvChannel& rx = comm->transport->recvFrom(0);
          rx.land(dst.data(), dst.size());
          comm->transport->endCollective();
        }
        test::rankBarrier(comm);
        if (rank == 0) {
          SendChannel& tx = comm->transport->sendTo(1);
          const std::vector<char> data = pattern(kChunk, 7);
          void* slot = acquireWait(comm, tx);
          tx.commitFrom(slot, data.data(), data.size());
          RANK_CHECK_OK(comm->transport->flush([] { return Status::ok(); }).code());
        } else {
          RecvChannel& rx = comm->transport->recvFrom(0);
          size_t bytes = 0;
          const void* d = peekWait(comm, rx, &bytes);
          RANK_EXPECT(d != dst.data() && bytes == kChunk);
          RANK_EXPECT(std::memcmp(d, pattern(kChunk, 7).data(), kChunk) == 0);
          RANK_EXPECT(dst == std::vector<char>(kChunk, 0x11)) << "a forgotten landing was written";
          rx.release();
        }
        test::rankBarrier(comm);
      },
      overTcp());
}

// Every third chunk is large and the others small, so taking turns would
// put every large one on the same one of 3 sockets; with socket buffers
// smaller than a chunk, and the receiver reading only once every slot of the
// sender waits, that socket's queue grows and chunks go to the others
// instead. The receiver must still get every chunk in order, whichever
// socket brought it.
TEST(TcpChannel, ChunksOnTheLeastBusySocketArriveInOrder) {
  constexpr size_t kBig = 256 << 10;
  constexpr int kChunks = 200;
  // Sizes differ from chunk to chunk, so a frame put in the wrong place shows.
  auto chunkBytes = [](int m) { return m % 3 == 0 ? kBig : 1000 + static_cast<size_t>(m); };
  test::RunOptions opts = overTcp();
  opts.env.push_back({"WEFT_SOCKET_BUF_BYTES", "65536"});
  opts.env.push_back({"WEFT_NSOCKS_PERTHREAD", "3"});
  opts.env.push_back({"WEFT_TCP_SLOT_BYTES", std::to_string(kBig)});
  test::RankSignal blocked;
  test::runRanks(
      2,
      [&](weftComm_t comm, int rank, int) {
        if (rank == 0) {
          SendChannel& tx = comm->transport->sendTo(1);
          RANK_ASSERT(tx.slotBytes() == kBig);
          bool started = false;
          for (int m = 0; m < kChunks; ++m) {
            const size_t bytes = chunkBytes(m);
            const std::vector<char> data = pattern(bytes, m);
            void* slot = tx.tryAcquire();
            if (slot == nullptr) {
              // Every slot waits for the kernel: let the receiver start.
              if (!started) blocked.post();
              started = true;
              slot = acquireWait(comm, tx);
            }
            std::memcpy(slot, data.data(), bytes);
            tx.commit(bytes);
          }
          if (!started) blocked.post();
          RANK_CHECK_OK(comm->transport->flush([] { return Status::ok(); }).code());
          auto* tcp = dynamic_cast<TcpSendChannel*>(&tx);
          RANK_ASSERT(tcp != nullptr);
          RANK_EXPECT(tcp->chunksOffTurn() > 0)
              << "every chunk went out in turn: the test did not exercise uneven sockets";
        } else {
          RecvChannel& rx = comm->transport->recvFrom(0);
          blocked.wait();
          for (int m = 0; m < kChunks; ++m) {
            size_t bytes = 0;
            const void* d = peekWait(comm, rx, &bytes);
            const size_t want = chunkBytes(m);
            RANK_ASSERT(bytes == want) << "chunk " << m << ": " << bytes << " bytes";
            RANK_ASSERT(std::memcmp(d, pattern(want, m).data(), want) == 0)
                << "chunk " << m << " holds another chunk's bytes";
            rx.release();
          }
          comm->transport->endCollective();
        }
        test::rankBarrier(comm);
      },
      opts);
}

// A communicator whose ranks all talk TCP takes TCP's own chunk, the
// smallest any rank asks for: a receiver's slots must hold whatever it is
// sent. Ranks asking 1 MiB, 128 KiB and 512 KiB all get 128 KiB, and an
// allreduce of several such chunks per block matches the reference.
TEST(TcpChannel, ChunkIsTheSmallestTcpSlotAnyRankAsksFor) {
  constexpr size_t kSmallest = 128 << 10;
  const char* asks[] = {"1M", "128K", "512K"};
  test::RunOptions opts = overTcp();
  test::runRanksRaw(
      3,
      [&](const test::RankContext& ctx) {
        setenv("WEFT_TCP_SLOT_BYTES", asks[ctx.rank], 1);
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        test::setCurrentComm(comm);
        for (int p = 0; p < ctx.nranks; ++p) {
          if (p == ctx.rank) continue;
          RANK_EXPECT(comm->transport->sendTo(p).slotBytes() == kSmallest) << "peer " << p;
        }
        RANK_EXPECT(comm->transport->slotBytes() == kSmallest);
        // 3 blocks of 4 chunks each.
        const size_t count = 3 * 4 * kSmallest / sizeof(float);
        std::vector<float> x(count);
        for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i % 97) * (ctx.rank + 1));
        RANK_CHECK_OK(
            weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_ASSERT(x[i] == static_cast<float>((i % 97) * 6)) << "element " << i;
        test::setCurrentComm(nullptr);
        RANK_CHECK_OK(weftCommDestroy(comm));
      },
      opts);
}

// One chunk in flight at a time (rank 1 answers each before rank 0 sends
// the next): every chunk, whatever its slot number, is staged in the buffer
// the last one freed, on both sides, so a channel touches one buffer rather
// than cycling through all of them. A buffer given back while still in use
// would show as a chunk holding another's bytes.
TEST(TcpChannel, StagingBuffersComeBackMostRecentlyFreedFirst) {
  constexpr int kRounds = 40;  // more than twice the default 16 slots
  test::runRanks(
      2,
      [&](weftComm_t comm, int rank, int) {
        SendChannel& tx = comm->transport->sendTo(1 - rank);
        RecvChannel& rx = comm->transport->recvFrom(1 - rank);
        const void* sendStaging = nullptr;
        const void* recvStaging = nullptr;
        for (int m = 0; m < kRounds; ++m) {
          size_t bytes = 0;
          if (rank == 0) {
            void* slot = acquireWait(comm, tx);
            if (m == 0) sendStaging = slot;
            RANK_EXPECT(slot == sendStaging) << "chunk " << m << " staged in another buffer";
            const std::vector<char> data = pattern(kChunk, m);
            std::memcpy(slot, data.data(), kChunk);
            tx.commit(kChunk);
            // The answer: its arrival means chunk m was read, so the kernel
            // took all of it and its buffer is free.
            peekWait(comm, rx, &bytes);
            rx.release();
          } else {
            const void* d = peekWait(comm, rx, &bytes);
            if (m == 0) recvStaging = d;
            RANK_EXPECT(d == recvStaging) << "chunk " << m << " received into another buffer";
            RANK_ASSERT(bytes == kChunk && std::memcmp(d, pattern(kChunk, m).data(), kChunk) == 0)
                << "chunk " << m << " holds other bytes";
            rx.release();
            *static_cast<char*>(acquireWait(comm, tx)) = static_cast<char>(m);
            tx.commit(1);
          }
        }
        RANK_CHECK_OK(comm->transport->flush([] { return Status::ok(); }).code());
        comm->transport->endCollective();
        test::rankBarrier(comm);
      },
      overTcp());
}

// The congestion control of this process's TCP sockets: name -> sockets.
std::map<std::string, int> congestionOfOpenSockets() {
  std::map<std::string, int> out;
  for (int fd = 0; fd < 4096; ++fd) {
    char name[32] = {};
    socklen_t len = sizeof name;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0) ++out[name];
  }
  return out;
}

std::string firstLineOf(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool kernelOffers(const std::string& cc) {
  std::istringstream names(firstLineOf("/proc/sys/net/ipv4/tcp_available_congestion_control"));
  for (std::string n; names >> n;) {
    if (n == cc) return true;
  }
  return false;
}

// The data sockets run the congestion control WEFT_SOCKET_CC names (reno,
// which every kernel has), cubic when it is unset (where the kernel offers
// cubic and lets this process choose it), and the kernel's default with
// "system" or a name the kernel does not know. Each rank of two holds
// nsocks (2) data sockets and a control socket to its peer.
TEST(TcpChannel, DataSocketsRunTheCongestionControlAsked) {
  const std::string system = firstLineOf("/proc/sys/net/ipv4/tcp_congestion_control");
  if (system.empty()) GTEST_SKIP() << "no /proc/sys/net/ipv4/tcp_congestion_control";
  struct Case {
    const char* env;  // nullptr: unset
    std::string want;
  };
  // A name the kernel does not know is warned of and leaves the default.
  std::vector<Case> cases = {{"reno", "reno"}, {"system", system}, {"no-such-cc", system}};
  if (kernelOffers("cubic")) cases.push_back({nullptr, "cubic"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.env ? c.env : "(unset)");
    test::RunOptions opts = overTcp();
    if (c.env) opts.env.emplace_back("WEFT_SOCKET_CC", c.env);
    test::runRanks(
        2,
        [&](weftComm_t comm, int, int) {
          const std::map<std::string, int> socks = congestionOfOpenSockets();
          const auto it = socks.find(c.want);
          const int got = it == socks.end() ? 0 : it->second;
          // An unprivileged process may be refused a congestion control
          // outside net.ipv4.tcp_allowed_congestion_control: then the
          // sockets keep the kernel's default, and no more is asked here.
          const bool refused = c.env == nullptr && got == 0 && geteuid() != 0;
          RANK_EXPECT(refused || got >= 3) << got << " sockets run " << c.want;
          test::rankBarrier(comm);
        },
        opts);
  }
}

}  // namespace
}  // namespace weft
