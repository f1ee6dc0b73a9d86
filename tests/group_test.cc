// Group calls: point-to-point patterns that only work when issued together
// (rings and all-to-alls of large messages), self send/recv, several
// collectives in one group, nested groups, and send/recv on streams.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/data.h"
#include "harness/multirank.h"
#include "weft/weft.h"

namespace weft::test {
namespace {

constexpr size_t kBig = (size_t(4) << 20) / sizeof(int32_t);  // 4 MiB of int32

// The salt of the message from src to dst (tag is the n-th message of that pair).
uint64_t pairSalt(int src, int dst, int tag = 0) {
  return uint64_t(src) * 1000003u + uint64_t(dst) * 1009u + uint64_t(tag) * 7u + 1;
}

// Checks that buf holds the message src sent (count int32 of src's input).
void expectMessage(const char* what, const GuardedBuffer& buf, size_t count, int src, int dst,
                   weftDataType_t dt = weftInt32, int tag = 0) {
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const double got = loadElem(dt, buf.data(), i);
    const double want = inputValue(dt, OpKind::kSum, src, i, pairSalt(src, dst, tag));
    if (got != want && ++bad <= 3) {
      RANK_EXPECT(false) << what << " from rank " << src << ": [" << i << "] = " << got
                         << ", expected " << want;
    }
  }
  RANK_EXPECT(bad == 0) << what << " from rank " << src << ": " << bad << " wrong elements";
  RANK_EXPECT(buf.guardsIntact()) << what << ": bytes outside the buffer were written";
}

GuardedBuffer message(size_t count, int src, int dst, weftDataType_t dt = weftInt32, int tag = 0) {
  GuardedBuffer b(count * elemBytes(dt));
  fillInput(dt, OpKind::kSum, src, b.data(), count, 0, pairSalt(src, dst, tag));
  return b;
}

class Group : public ::testing::TestWithParam<int> {};

// Every rank sends 4 MiB to rank+1 and receives 4 MiB from rank-1. Without
// the group every rank would block in its send.
TEST_P(Group, RingOfLargeMessages) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (int round = 0; round < 3; ++round) {
      GuardedBuffer out = message(kBig, rank, next, weftInt32, round);
      GuardedBuffer in(kBig * sizeof(int32_t));
      RANK_CHECK_OK(weftGroupStart());
      RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, next, comm, nullptr));
      RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, prev, comm, nullptr));
      RANK_CHECK_OK(weftGroupEnd());
      expectMessage("ring recv", in, kBig, prev, rank, weftInt32, round);
    }
  });
}

// The same ring the other way round, with receives posted before sends.
TEST_P(Group, RingReceiveFirst) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    GuardedBuffer out = message(kBig + 5, rank, prev, weftFloat32);
    GuardedBuffer in((kBig + 5) * sizeof(float));
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftRecv(in.data(), kBig + 5, weftFloat32, next, comm, nullptr));
    RANK_CHECK_OK(weftSend(out.data(), kBig + 5, weftFloat32, prev, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    expectMessage("reverse ring recv", in, kBig + 5, next, rank, weftFloat32);
  });
}

// All-to-all from sends and receives in one group, including to self, with
// a different size for every pair.
TEST_P(Group, AllToAllFromSendRecv) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    auto countOf = [](int src, int dst) { return size_t(1000 + 37 * src + 101 * dst); };
    std::vector<GuardedBuffer> outs, ins;
    for (int q = 0; q < n; ++q) {
      outs.push_back(message(countOf(rank, q), rank, q, weftInt64));
      ins.emplace_back(countOf(q, rank) * sizeof(int64_t));
    }
    RANK_CHECK_OK(weftGroupStart());
    for (int k = 0; k < n; ++k) {
      const int q = (rank + k) % n;
      RANK_CHECK_OK(
          weftSend(outs[size_t(q)].data(), countOf(rank, q), weftInt64, q, comm, nullptr));
    }
    for (int k = 0; k < n; ++k) {
      const int q = (rank + n - k) % n;
      RANK_CHECK_OK(weftRecv(ins[size_t(q)].data(), countOf(q, rank), weftInt64, q, comm, nullptr));
    }
    RANK_CHECK_OK(weftGroupEnd());
    for (int q = 0; q < n; ++q) {
      expectMessage("all-to-all recv", ins[size_t(q)], countOf(q, rank), q, rank, weftInt64);
    }
  });
}

TEST_P(Group, SelfSendRecv) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    for (size_t count : {size_t(0), size_t(1), size_t(4099), kBig}) {
      RANK_SCOPED_TRACE("self send/recv count=" << count);
      GuardedBuffer out = message(count, rank, rank);
      GuardedBuffer in(count * sizeof(int32_t));
      RANK_CHECK_OK(weftGroupStart());
      RANK_CHECK_OK(weftSend(out.data(), count, weftInt32, rank, comm, nullptr));
      RANK_CHECK_OK(weftRecv(in.data(), count, weftInt32, rank, comm, nullptr));
      RANK_CHECK_OK(weftGroupEnd());
      expectMessage("self recv", in, count, rank, rank);
    }
  });
}

// Two messages to the same peer in one group arrive in the order sent.
TEST_P(Group, MessagesToOnePeerKeepOrder) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    const size_t c0 = 333, c1 = 70001;
    GuardedBuffer o0 = message(c0, rank, next, weftInt32, 0);
    GuardedBuffer o1 = message(c1, rank, next, weftInt32, 1);
    GuardedBuffer i0(c0 * 4), i1(c1 * 4);
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftSend(o0.data(), c0, weftInt32, next, comm, nullptr));
    RANK_CHECK_OK(weftSend(o1.data(), c1, weftInt32, next, comm, nullptr));
    RANK_CHECK_OK(weftRecv(i0.data(), c0, weftInt32, prev, comm, nullptr));
    RANK_CHECK_OK(weftRecv(i1.data(), c1, weftInt32, prev, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    expectMessage("first message", i0, c0, prev, rank, weftInt32, 0);
    expectMessage("second message", i1, c1, prev, rank, weftInt32, 1);
  });
}

// Blocking send/recv outside a group, ordered so that they cannot deadlock:
// even ranks send first, odd ranks receive first.
TEST_P(Group, UngroupedSendRecvPairs) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "needs a peer";
  runRanks(n, [](weftComm_t comm, int rank, int n) {
    const int count = 1 << 16;
    if (n % 2 == 1 && rank == n - 1) {
      rankBarrier(comm);
      return;
    }
    const int peer = rank ^ 1;
    GuardedBuffer out = message(count, rank, peer);
    GuardedBuffer in(count * 4);
    if (rank % 2 == 0) {
      RANK_CHECK_OK(weftSend(out.data(), count, weftInt32, peer, comm, nullptr));
      RANK_CHECK_OK(weftRecv(in.data(), count, weftInt32, peer, comm, nullptr));
    } else {
      RANK_CHECK_OK(weftRecv(in.data(), count, weftInt32, peer, comm, nullptr));
      RANK_CHECK_OK(weftSend(out.data(), count, weftInt32, peer, comm, nullptr));
    }
    expectMessage("pair recv", in, count, peer, rank);
    rankBarrier(comm);
  });
}

// Several collectives issued together in one group.
TEST_P(Group, SeveralCollectivesInOneGroup) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const size_t count = 10007;
    const uint64_t saltA = 11, saltB = 12, saltC = 13;
    GuardedBuffer a(count * 4), b(count * 8), gIn(count * 2), gOut(count * 2 * size_t(n));
    fillInput(weftFloat32, OpKind::kSum, rank, a.data(), count, 0, saltA);
    if (rank == n - 1) fillInput(weftFloat64, OpKind::kSum, rank, b.data(), count, 0, saltB);
    fillInput(weftBfloat16, OpKind::kSum, rank, gIn.data(), count, 0, saltC);
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftAllReduce(a.data(), a.data(), count, weftFloat32, weftSum, comm, nullptr));
    RANK_CHECK_OK(weftBroadcast(b.data(), b.data(), count, weftFloat64, n - 1, comm, nullptr));
    RANK_CHECK_OK(weftAllGather(gIn.data(), gOut.data(), count, weftBfloat16, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      bad +=
          loadElem(weftFloat32, a.data(), i) != reference(weftFloat32, OpKind::kSum, n, i, saltA);
      bad += loadElem(weftFloat64, b.data(), i) !=
             inputValue(weftFloat64, OpKind::kSum, n - 1, i, saltB);
      for (int q = 0; q < n; ++q) {
        bad += loadElem(weftBfloat16, gOut.data(), size_t(q) * count + i) !=
               inputValue(weftBfloat16, OpKind::kSum, q, i, saltC);
      }
    }
    RANK_EXPECT(bad == 0) << bad << " wrong elements across allreduce/broadcast/allgather";
  });
}

// Groups nest: only the outermost GroupEnd issues the calls.
TEST_P(Group, NestedGroups) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    GuardedBuffer out = message(kBig / 4, rank, next);
    GuardedBuffer in(kBig);
    int64_t x = rank + 1;
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftSend(out.data(), kBig / 4, weftInt32, next, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftRecv(in.data(), kBig / 4, weftInt32, prev, comm, nullptr));
    RANK_CHECK_OK(weftAllReduce(&x, &x, 1, weftInt64, weftSum, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    RANK_CHECK_OK(weftGroupEnd());
    expectMessage("nested group recv", in, kBig / 4, prev, rank);
    RANK_EXPECT_EQ(x, int64_t(n) * (n + 1) / 2);
  });
}

// Send/recv in a group on a host stream: done once the stream is synchronised.
TEST_P(Group, SendRecvOnStream) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    weftStream_t stream = nullptr;
    RANK_CHECK_OK(weftStreamCreate(&stream));
    std::vector<GuardedBuffer> outs, ins;
    for (int round = 0; round < 4; ++round) {
      outs.push_back(message(kBig / 2, rank, next, weftInt32, round));
      ins.emplace_back(kBig / 2 * 4);
    }
    for (int round = 0; round < 4; ++round) {
      RANK_CHECK_OK(weftGroupStart());
      RANK_CHECK_OK(weftSend(outs[size_t(round)].data(), kBig / 2, weftInt32, next, comm, stream));
      RANK_CHECK_OK(weftRecv(ins[size_t(round)].data(), kBig / 2, weftInt32, prev, comm, stream));
      RANK_CHECK_OK(weftGroupEnd());
    }
    RANK_CHECK_OK(weftStreamSynchronize(stream));
    RANK_EXPECT_EQ(weftStreamQuery(stream), weftSuccess);
    for (int round = 0; round < 4; ++round) {
      expectMessage("stream recv", ins[size_t(round)], kBig / 2, prev, rank, weftInt32, round);
    }
    RANK_CHECK_OK(weftStreamDestroy(stream));
  });
}

// In-place sendrecv: one buffer sent to rank+1 and filled from rank-1 in the
// same group. What goes out is the buffer as it was when posted, over shared
// memory and over TCP (where receives are read straight into place), with
// counts that differ from rank to rank so that a send outlasts or trails
// its receive.
TEST_P(Group, InPlaceSendRecvRing) {
  const std::vector<std::pair<std::string, std::string>> transports[] = {
      {}, {{"WEFT_SHM_DISABLE", "1"}}};
  for (const auto& env : transports) {
    RunOptions opts;
    opts.env = env;
    runRanks(
        GetParam(),
        [](weftComm_t comm, int rank, int n) {
          const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
          auto countOf = [](int r, int round) { return kBig / (round + 1) + size_t(r) * 4099; };
          for (int round = 0; round < 3; ++round) {
            RANK_SCOPED_TRACE("round " << round);
            const size_t sendCount = countOf(rank, round), recvCount = countOf(prev, round);
            GuardedBuffer buf =
                message(std::max(sendCount, recvCount), rank, next, weftInt32, round);
            RANK_CHECK_OK(weftGroupStart());
            RANK_CHECK_OK(weftSend(buf.data(), sendCount, weftInt32, next, comm, nullptr));
            RANK_CHECK_OK(weftRecv(buf.data(), recvCount, weftInt32, prev, comm, nullptr));
            RANK_CHECK_OK(weftGroupEnd());
            expectMessage("in-place recv", buf, recvCount, prev, rank, weftInt32, round);
          }
        },
        opts);
  }
}

// Rank 0 sends and receives one buffer in a group; rank 1 sends first and
// receives only once that send completed, so rank 0's receive must
// overwrite the buffer before rank 0's send got through: what rank 1
// receives is still the buffer as it was posted. Over TCP with the fewest
// slots and the smallest socket buffers, the message is many times what
// rank 0 can hand the wire before rank 1 receives.
TEST(GroupInPlace, ReceiveOvertakesTheSendWhenThePeerReceivesLater) {
  const std::vector<std::pair<std::string, std::string>> transports[] = {
      {}, {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_SOCKET_BUF_BYTES", "65536"}, {"WEFT_TCP_SLOTS", "2"}}};
  for (const auto& env : transports) {
    RunOptions opts;
    opts.env = env;
    runRanks(
        2,
        [](weftComm_t comm, int rank, int) {
          const int peer = 1 - rank;
          GuardedBuffer out = message(kBig, rank, peer);
          if (rank == 0) {
            RANK_CHECK_OK(weftGroupStart());
            RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftRecv(out.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftGroupEnd());
            expectMessage("in-place recv", out, kBig, peer, rank);
          } else {
            GuardedBuffer in(kBig * sizeof(int32_t));
            RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, peer, comm, nullptr));
            expectMessage("recv", in, kBig, peer, rank);
          }
        },
        opts);
  }
}

// Rank 0 sends and receives large messages in one group; rank 1 takes rank
// 0's message first and sends its own only after that (a blocking receive,
// then a send; or a first small message in the group and the rest in a
// later one). Over sockets rank 0's sends are paced by what comes back from
// rank 1, which here is nothing until rank 0's send is through: the pacing
// must give up rather than deadlock. Shared memory runs it as well.
TEST(GroupPacing, PeerSendsOnlyAfterItsReceiveCompleted) {
  const std::vector<std::pair<std::string, std::string>> transports[] = {
      {}, {{"WEFT_SHM_DISABLE", "1"}}};
  constexpr size_t kSmall = 1000;
  for (const auto& env : transports) {
    RunOptions opts;
    opts.env = env;
    opts.timeout = std::chrono::milliseconds(60000);
    runRanks(
        2,
        [](weftComm_t comm, int rank, int) {
          const int peer = 1 - rank;
          for (int round = 0; round < 3; ++round) {
            GuardedBuffer out = message(kBig, rank, peer, weftInt32, round);
            GuardedBuffer in(kBig * sizeof(int32_t));
            if (rank == 0) {
              RANK_CHECK_OK(weftGroupStart());
              RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
              RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, peer, comm, nullptr));
              RANK_CHECK_OK(weftGroupEnd());
              expectMessage("recv", in, kBig, peer, rank, weftInt32, round);
            } else {
              RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, peer, comm, nullptr));
              RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
              expectMessage("recv", in, kBig, peer, rank, weftInt32, round);
            }
          }
          // A small message first in the same group, then the rest later.
          GuardedBuffer out = message(kBig, rank, peer, weftInt32, 7);
          GuardedBuffer first = message(kSmall, rank, peer, weftInt32, 8);
          GuardedBuffer in(kBig * sizeof(int32_t)), inFirst(kSmall * sizeof(int32_t));
          if (rank == 0) {
            RANK_CHECK_OK(weftGroupStart());
            RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftRecv(inFirst.data(), kSmall, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftGroupEnd());
          } else {
            RANK_CHECK_OK(weftGroupStart());
            RANK_CHECK_OK(weftSend(first.data(), kSmall, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftRecv(in.data(), kBig, weftInt32, peer, comm, nullptr));
            RANK_CHECK_OK(weftGroupEnd());
            RANK_CHECK_OK(weftSend(out.data(), kBig, weftInt32, peer, comm, nullptr));
          }
          if (rank == 0) expectMessage("first recv", inFirst, kSmall, peer, rank, weftInt32, 8);
          expectMessage("recv", in, kBig, peer, rank, weftInt32, 7);
        },
        opts);
  }
}

// Zero-byte sends and receives in a group complete and touch nothing.
TEST_P(Group, ZeroCountSendRecv) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    GuardedBuffer out(0), in(0);
    RANK_CHECK_OK(weftGroupStart());
    RANK_CHECK_OK(weftSend(out.data(), 0, weftInt32, next, comm, nullptr));
    RANK_CHECK_OK(weftRecv(in.data(), 0, weftInt32, prev, comm, nullptr));
    RANK_CHECK_OK(weftGroupEnd());
    RANK_EXPECT(in.guardsIntact());
    rankBarrier(comm);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Group, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
}  // namespace weft::test
