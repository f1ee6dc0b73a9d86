// Every collective against a serial reference: every dtype, every reduction
// op (NCCL's five and PreMulSum with both scalar residences), in place and
// out of place, counts 0, 1, 7, 1023 (and 1M+3 for a few cases), 1 to 8
// ranks, roots 0 and last. Bytes a collective must not write are checked
// with guard bytes and filler patterns.
//
// One fork per (collective, rank count): the children loop over all cases,
// since forking and rendezvous cost far more than the small collectives.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm.h"
#include "harness/data.h"
#include "harness/multirank.h"
#include "weft/weft.h"

namespace weft::test {
namespace {

const std::vector<size_t> kCounts = {0, 1, 7, 1023};
constexpr size_t kLarge = (size_t(1) << 20) + 3;

// The PreMulSum ops of one communicator, one per dtype and residence.
class RedOps {
 public:
  explicit RedOps(weftComm_t comm) : comm_(comm) {
    for (weftDataType_t dt : allDtypes()) {
      const int d = int(dt);
      storeElem(dt, deviceScalar_[d].data(), 0, kPreMulScalar);
      RANK_CHECK_OK(weftRedOpCreatePreMulSum(&device_[d], deviceScalar_[d].data(), dt,
                                             weftScalarDevice, comm))
          << dtypeStr(dt);
      // The immediate scalar is read at creation: scribble over it afterwards.
      alignas(8) std::array<unsigned char, 8> tmp{};
      storeElem(dt, tmp.data(), 0, kPreMulScalar);
      RANK_CHECK_OK(
          weftRedOpCreatePreMulSum(&immediate_[d], tmp.data(), dt, weftScalarHostImmediate, comm))
          << dtypeStr(dt);
      storeElem(dt, tmp.data(), 0, 0.0);
      RANK_EXPECT(int(device_[d]) >= int(weftNumOps)) << "PreMulSum op value " << device_[d];
      RANK_EXPECT(int(immediate_[d]) >= int(weftNumOps)) << "PreMulSum op value " << immediate_[d];
      RANK_EXPECT(device_[d] != immediate_[d]);
    }
  }
  ~RedOps() {
    for (weftDataType_t dt : allDtypes()) {
      RANK_EXPECT_OK(weftRedOpDestroy(device_[int(dt)], comm_));
      RANK_EXPECT_OK(weftRedOpDestroy(immediate_[int(dt)], comm_));
    }
  }
  weftRedOp_t get(weftDataType_t dt, OpKind k) const {
    switch (k) {
      case OpKind::kSum:
        return weftSum;
      case OpKind::kProd:
        return weftProd;
      case OpKind::kMax:
        return weftMax;
      case OpKind::kMin:
        return weftMin;
      case OpKind::kAvg:
        return weftAvg;
      case OpKind::kPreMulDevice:
        return device_[int(dt)];
      case OpKind::kPreMulImmediate:
        return immediate_[int(dt)];
    }
    return weftSum;
  }

 private:
  weftComm_t comm_;
  std::array<weftRedOp_t, weftNumTypes> device_{}, immediate_{};
  alignas(8) std::array<std::array<unsigned char, 8>, weftNumTypes> deviceScalar_{};
};

// Counts and reports the elements that differ from the reference (the first
// few in detail).
class Checker {
 public:
  Checker(weftDataType_t dt, OpKind op) : dt_(dt), op_(op) {}
  ~Checker() { RANK_EXPECT(bad_ == 0) << bad_ << " wrong elements in total"; }
  // buf[first + i] for i < count must equal expect(i).
  template <class F>
  void elems(const char* what, const void* buf, size_t first, size_t count, F expect) {
    for (size_t i = 0; i < count; ++i) {
      const double got = loadElem(dt_, buf, first + i);
      const double exp = expect(i);
      if (closeEnough(dt_, op_, got, exp)) continue;
      if (++bad_ <= 3) {
        RANK_EXPECT(false) << what << "[" << first + i << "] = " << got << ", expected " << exp;
      }
    }
  }
  void guards(const char* what, const GuardedBuffer& b) {
    RANK_EXPECT(b.guardsIntact()) << what << ": bytes outside the buffer were written";
  }
  void untouched(const char* what, const GuardedBuffer& b, size_t off, size_t len) {
    const size_t at = b.findPatternChange(off, len);
    RANK_EXPECT(at == GuardedBuffer::npos)
        << what << ": byte " << at << " was written but must not be";
  }

 private:
  weftDataType_t dt_;
  OpKind op_;
  size_t bad_ = 0;
};

struct Case {
  weftComm_t comm;
  int rank;
  int n;
  weftDataType_t dt;
  OpKind op;
  weftRedOp_t redop;
  bool inplace;
  size_t count;
  int root;
  uint64_t salt;
  size_t es() const { return elemBytes(dt); }
};

void allReduceCase(const Case& c) {
  RANK_SCOPED_TRACE("AllReduce nranks=" << c.n << " " << dtypeStr(c.dt) << " " << opStr(c.op)
                                        << (c.inplace ? " in-place" : " out-of-place")
                                        << " count=" << c.count);
  const size_t bytes = c.count * c.es();
  GuardedBuffer send(bytes), recv(bytes);
  Checker ck(c.dt, c.op);
  if (c.inplace) {
    fillInput(c.dt, c.op, c.rank, recv.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftAllReduce(recv.data(), recv.data(), c.count, c.dt, c.redop, c.comm, nullptr));
  } else {
    fillInput(c.dt, c.op, c.rank, send.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftAllReduce(send.data(), recv.data(), c.count, c.dt, c.redop, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, c.count,
             [&](size_t i) { return inputValue(c.dt, c.op, c.rank, i, c.salt); });
  }
  ck.elems("recvbuff", recv.data(), 0, c.count,
           [&](size_t i) { return reference(c.dt, c.op, c.n, i, c.salt); });
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void reduceCase(const Case& c) {
  RANK_SCOPED_TRACE("Reduce nranks=" << c.n << " root=" << c.root << " " << dtypeStr(c.dt) << " "
                                     << opStr(c.op) << (c.inplace ? " in-place" : " out-of-place")
                                     << " count=" << c.count);
  const size_t bytes = c.count * c.es();
  GuardedBuffer send(bytes), recv(bytes);
  Checker ck(c.dt, c.op);
  auto mine = [&](size_t i) { return inputValue(c.dt, c.op, c.rank, i, c.salt); };
  if (c.inplace) {
    fillInput(c.dt, c.op, c.rank, recv.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(
        weftReduce(recv.data(), recv.data(), c.count, c.dt, c.redop, c.root, c.comm, nullptr));
    if (c.rank != c.root)
      ck.elems("non-root buffer (must keep its input)", recv.data(), 0, c.count, mine);
  } else {
    fillInput(c.dt, c.op, c.rank, send.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(
        weftReduce(send.data(), recv.data(), c.count, c.dt, c.redop, c.root, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, c.count, mine);
    if (c.rank != c.root) ck.untouched("non-root recvbuff", recv, 0, bytes);
  }
  if (c.rank == c.root) {
    ck.elems("root recvbuff", recv.data(), 0, c.count,
             [&](size_t i) { return reference(c.dt, c.op, c.n, i, c.salt); });
  }
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void reduceScatterCase(const Case& c) {
  RANK_SCOPED_TRACE("ReduceScatter nranks=" << c.n << " " << dtypeStr(c.dt) << " " << opStr(c.op)
                                            << (c.inplace ? " in-place" : " out-of-place")
                                            << " recvcount=" << c.count);
  const size_t total = c.count * size_t(c.n);
  GuardedBuffer send(total * c.es()), recv(c.count * c.es());
  Checker ck(c.dt, c.op);
  fillInput(c.dt, c.op, c.rank, send.data(), total, 0, c.salt);
  const size_t mineFirst = size_t(c.rank) * c.count;
  auto expect = [&](size_t i) { return reference(c.dt, c.op, c.n, mineFirst + i, c.salt); };
  if (c.inplace) {
    char* r = static_cast<char*>(send.data()) + mineFirst * c.es();
    RANK_CHECK_OK(weftReduceScatter(send.data(), r, c.count, c.dt, c.redop, c.comm, nullptr));
    ck.elems("recvbuff (= sendbuff + rank*recvcount)", send.data(), mineFirst, c.count, expect);
  } else {
    RANK_CHECK_OK(
        weftReduceScatter(send.data(), recv.data(), c.count, c.dt, c.redop, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, total,
             [&](size_t i) { return inputValue(c.dt, c.op, c.rank, i, c.salt); });
    ck.elems("recvbuff", recv.data(), 0, c.count, expect);
  }
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void broadcastCase(const Case& c) {
  RANK_SCOPED_TRACE("Broadcast nranks=" << c.n << " root=" << c.root << " " << dtypeStr(c.dt)
                                        << (c.inplace ? " in-place" : " out-of-place")
                                        << " count=" << c.count);
  const size_t bytes = c.count * c.es();
  GuardedBuffer send(bytes), recv(bytes);
  Checker ck(c.dt, OpKind::kSum);
  auto rootVal = [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.root, i, c.salt); };
  if (c.inplace) {
    if (c.rank == c.root) fillInput(c.dt, OpKind::kSum, c.rank, recv.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftBroadcast(recv.data(), recv.data(), c.count, c.dt, c.root, c.comm, nullptr));
  } else {
    fillInput(c.dt, OpKind::kSum, c.rank, send.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftBroadcast(send.data(), recv.data(), c.count, c.dt, c.root, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, c.count,
             [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.rank, i, c.salt); });
  }
  ck.elems("recvbuff", recv.data(), 0, c.count, rootVal);
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void allGatherCase(const Case& c) {
  RANK_SCOPED_TRACE("AllGather nranks=" << c.n << " " << dtypeStr(c.dt)
                                        << (c.inplace ? " in-place" : " out-of-place")
                                        << " sendcount=" << c.count);
  const size_t total = c.count * size_t(c.n);
  GuardedBuffer send(c.count * c.es()), recv(total * c.es());
  Checker ck(c.dt, OpKind::kSum);
  if (c.inplace) {
    char* s = static_cast<char*>(recv.data()) + size_t(c.rank) * c.count * c.es();
    fillInput(c.dt, OpKind::kSum, c.rank, s, c.count, 0, c.salt);
    RANK_CHECK_OK(weftAllGather(s, recv.data(), c.count, c.dt, c.comm, nullptr));
  } else {
    fillInput(c.dt, OpKind::kSum, c.rank, send.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftAllGather(send.data(), recv.data(), c.count, c.dt, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, c.count,
             [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.rank, i, c.salt); });
  }
  for (int q = 0; q < c.n; ++q) {
    ck.elems("recvbuff", recv.data(), size_t(q) * c.count, c.count,
             [&](size_t i) { return inputValue(c.dt, OpKind::kSum, q, i, c.salt); });
  }
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void allToAllCase(const Case& c) {
  RANK_SCOPED_TRACE("AlltoAll nranks=" << c.n << " " << dtypeStr(c.dt) << " count=" << c.count);
  const size_t total = c.count * size_t(c.n);
  GuardedBuffer send(total * c.es()), recv(total * c.es());
  Checker ck(c.dt, OpKind::kSum);
  fillInput(c.dt, OpKind::kSum, c.rank, send.data(), total, 0, c.salt);
  RANK_CHECK_OK(weftAlltoAll(send.data(), recv.data(), c.count, c.dt, c.comm, nullptr));
  ck.elems("sendbuff", send.data(), 0, total,
           [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.rank, i, c.salt); });
  for (int q = 0; q < c.n; ++q) {
    ck.elems("recvbuff", recv.data(), size_t(q) * c.count, c.count, [&](size_t i) {
      return inputValue(c.dt, OpKind::kSum, q, size_t(c.rank) * c.count + i, c.salt);
    });
  }
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void gatherCase(const Case& c) {
  const bool inplace = c.inplace && c.rank == c.root;  // in place only means something at root
  RANK_SCOPED_TRACE("Gather nranks=" << c.n << " root=" << c.root << " " << dtypeStr(c.dt)
                                     << (inplace ? " in-place" : " out-of-place")
                                     << " count=" << c.count);
  const size_t total = c.count * size_t(c.n);
  GuardedBuffer send(c.count * c.es()), recv(total * c.es());
  Checker ck(c.dt, OpKind::kSum);
  if (inplace) {
    char* s = static_cast<char*>(recv.data()) + size_t(c.rank) * c.count * c.es();
    fillInput(c.dt, OpKind::kSum, c.rank, s, c.count, 0, c.salt);
    RANK_CHECK_OK(weftGather(s, recv.data(), c.count, c.dt, c.root, c.comm, nullptr));
  } else {
    fillInput(c.dt, OpKind::kSum, c.rank, send.data(), c.count, 0, c.salt);
    RANK_CHECK_OK(weftGather(send.data(), recv.data(), c.count, c.dt, c.root, c.comm, nullptr));
    ck.elems("sendbuff", send.data(), 0, c.count,
             [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.rank, i, c.salt); });
  }
  if (c.rank == c.root) {
    for (int q = 0; q < c.n; ++q) {
      ck.elems("root recvbuff", recv.data(), size_t(q) * c.count, c.count,
               [&](size_t i) { return inputValue(c.dt, OpKind::kSum, q, i, c.salt); });
    }
  } else {
    ck.untouched("non-root recvbuff", recv, 0, total * c.es());
  }
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

void scatterCase(const Case& c) {
  const bool inplace = c.inplace && c.rank == c.root;
  RANK_SCOPED_TRACE("Scatter nranks=" << c.n << " root=" << c.root << " " << dtypeStr(c.dt)
                                      << (inplace ? " in-place" : " out-of-place")
                                      << " count=" << c.count);
  const size_t total = c.count * size_t(c.n);
  GuardedBuffer send(total * c.es()), recv(c.count * c.es());
  Checker ck(c.dt, OpKind::kSum);
  // Every rank fills its sendbuff; only the root's is read.
  fillInput(c.dt, OpKind::kSum, c.rank, send.data(), total, 0, c.salt);
  const size_t mineFirst = size_t(c.rank) * c.count;
  auto expect = [&](size_t i) {
    return inputValue(c.dt, OpKind::kSum, c.root, mineFirst + i, c.salt);
  };
  if (inplace) {
    char* r = static_cast<char*>(send.data()) + mineFirst * c.es();
    RANK_CHECK_OK(weftScatter(send.data(), r, c.count, c.dt, c.root, c.comm, nullptr));
    ck.elems("recvbuff (= sendbuff + root*count)", send.data(), mineFirst, c.count, expect);
  } else {
    RANK_CHECK_OK(weftScatter(send.data(), recv.data(), c.count, c.dt, c.root, c.comm, nullptr));
    ck.elems("recvbuff", recv.data(), 0, c.count, expect);
  }
  ck.elems("sendbuff", send.data(), 0, total,
           [&](size_t i) { return inputValue(c.dt, OpKind::kSum, c.rank, i, c.salt); });
  ck.guards("sendbuff", send);
  ck.guards("recvbuff", recv);
}

using CaseFn = void (*)(const Case&);

std::vector<int> rootsFor(int n) {
  return n == 1 ? std::vector<int>{0} : std::vector<int>{0, n - 1};
}

// Runs fn over dtypes x ops (when reducing) x in/out of place x counts x
// roots (when rooted) in one multi-rank run.
void sweep(int nranks, CaseFn fn, bool reducing, bool rooted, bool hasInplace) {
  runRanks(nranks, [&](weftComm_t comm, int rank, int n) {
    RedOps ops(comm);
    uint64_t salt = 0;
    const std::vector<OpKind> noOp = {OpKind::kSum};
    for (weftDataType_t dt : allDtypes()) {
      for (OpKind op : reducing ? allOpKinds() : noOp) {
        for (int inplace = 0; inplace <= (hasInplace ? 1 : 0); ++inplace) {
          for (size_t count : kCounts) {
            for (int root : rooted ? rootsFor(n) : std::vector<int>{0}) {
              Case c{comm, rank, n, dt, op, ops.get(dt, op), inplace != 0, count, root, ++salt};
              fn(c);
            }
          }
        }
      }
    }
  });
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduce) {
  sweep(GetParam(), allReduceCase, true, false, true);
}
TEST_P(Collectives, Reduce) {
  sweep(GetParam(), reduceCase, true, true, true);
}
TEST_P(Collectives, ReduceScatter) {
  sweep(GetParam(), reduceScatterCase, true, false, true);
}
TEST_P(Collectives, Broadcast) {
  sweep(GetParam(), broadcastCase, false, true, true);
}
TEST_P(Collectives, AllGather) {
  sweep(GetParam(), allGatherCase, false, false, true);
}
TEST_P(Collectives, AlltoAll) {
  sweep(GetParam(), allToAllCase, false, false, false);
}
TEST_P(Collectives, Gather) {
  sweep(GetParam(), gatherCase, false, true, true);
}
TEST_P(Collectives, Scatter) {
  sweep(GetParam(), scatterCase, false, true, true);
}

// 1M+3 elements: more than any staging slot, odd so that no chunking divides
// it evenly. A few dtypes and ops only.
TEST_P(Collectives, LargeCounts) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    RedOps ops(comm);
    uint64_t salt = 1000;
    auto mk = [&](weftDataType_t dt, OpKind op, bool inplace, size_t count, int root) {
      return Case{comm, rank, n, dt, op, ops.get(dt, op), inplace, count, root, ++salt};
    };
    const int last = n - 1;
    allReduceCase(mk(weftFloat32, OpKind::kSum, false, kLarge, 0));
    allReduceCase(mk(weftBfloat16, OpKind::kSum, true, kLarge, 0));
    allReduceCase(mk(weftInt64, OpKind::kMax, true, kLarge, 0));
    allReduceCase(mk(weftFloat16, OpKind::kPreMulImmediate, false, kLarge, 0));
    allReduceCase(mk(weftFloat8e4m3, OpKind::kAvg, false, kLarge, 0));
    reduceCase(mk(weftFloat32, OpKind::kSum, false, kLarge, last));
    reduceCase(mk(weftInt32, OpKind::kProd, true, kLarge, 0));
    reduceScatterCase(mk(weftFloat32, OpKind::kSum, false, kLarge, 0));
    reduceScatterCase(mk(weftUint8, OpKind::kMin, true, kLarge, 0));
    broadcastCase(mk(weftFloat64, OpKind::kSum, false, kLarge, last));
    broadcastCase(mk(weftInt8, OpKind::kSum, true, kLarge, 0));
    allGatherCase(mk(weftUint8, OpKind::kSum, false, kLarge, 0));
    allGatherCase(mk(weftFloat32, OpKind::kSum, true, kLarge, 0));
    allToAllCase(mk(weftInt32, OpKind::kSum, false, kLarge / size_t(n), 0));
    gatherCase(mk(weftFloat16, OpKind::kSum, false, kLarge, last));
    scatterCase(mk(weftInt32, OpKind::kSum, true, kLarge, last));
  });
}

// TCP copes with WEFT_TCP_SLOTS set differently on some hosts, and the
// ring's message order, which depends on the slot count
// (algorithms/ring_schedule.h), must still be the same at both ends of every
// channel (as must the size of the tuner's calibration stream): 16 slots on
// ranks 0 and 2 alone would pipeline every pass one step behind the last,
// and the 4 rank 1 gets (2, raised to two per socket) every second step.
TEST(TcpSlots, CountsThatDifferBetweenRanksStillGiveOneRingOrder) {
  RunOptions opts;
  opts.env = {{"WEFT_SHM_DISABLE", "1"}, {"WEFT_ALGO", "ring"}};
  runRanksRaw(
      3,
      [](const RankContext& ctx) {
        setenv("WEFT_TCP_SLOTS", ctx.rank == 1 ? "2" : "16", 1);
        weftComm_t comm = nullptr;
        RANK_ASSERT(ctx.initComm(&comm) == weftSuccess);
        {
          RedOps ops(comm);
          const int n = ctx.nranks;
          uint64_t salt = 2000;
          auto mk = [&](weftDataType_t dt, OpKind op, bool inplace, size_t count) {
            return Case{comm, ctx.rank, n, dt, op, ops.get(dt, op), inplace, count, 0, ++salt};
          };
          allReduceCase(mk(weftFloat32, OpKind::kSum, false, kLarge));
          allReduceCase(mk(weftInt32, OpKind::kMax, true, kLarge));
          reduceScatterCase(mk(weftFloat32, OpKind::kSum, false, kLarge));
          allGatherCase(mk(weftInt32, OpKind::kSum, true, kLarge));
        }
        RANK_EXPECT(weftCommDestroy(comm) == weftSuccess);
      },
      opts);
}

// Online tuning (online.h) runs the first calls of each size with different
// algorithms in turn, ends with an all-gather of the ranks' times, and then
// keeps one. Rounds of the same sizes, in and out of place, go on until
// weftCommTuningPending says every size is decided, and two more: every
// phase, each call checked against the reference. Every rank must see the
// same answers, or the ranks would stop after different calls and hang.
TEST_P(Collectives, OnlineTuningKeepsEveryCallRight) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    RedOps ops(comm);
    uint64_t salt = 0;
    const CaseFn fns[] = {allReduceCase, reduceScatterCase, allGatherCase,
                          broadcastCase, reduceCase,        allToAllCase};
    const size_t counts[] = {7, 70001};
    int pendingSizes = 0, decidedRounds = 0, round = 0;
    for (; decidedRounds < 2 && round < 100; ++round) {
      pendingSizes = 0;
      for (CaseFn fn : fns) {
        for (size_t count : counts) {
          Case c{comm,           rank,         n,
                 weftFloat32,    OpKind::kSum, ops.get(weftFloat32, OpKind::kSum),
                 round % 2 == 1, count,        round % std::max(n, 1),
                 ++salt};
          fn(c);
          int pending = -1;
          RANK_CHECK_OK(weftCommTuningPending(comm, &pending));
          pendingSizes += pending;
        }
      }
      decidedRounds = pendingSizes == 0 ? decidedRounds + 1 : 0;
    }
    RANK_EXPECT(pendingSizes == 0)
        << pendingSizes << " sizes still pending after " << round << " rounds";
    // Online tuning took more than one round for some size (none at 1 rank).
    RANK_EXPECT(n == 1 || round > 3) << "decided after " << round << " rounds";
  });
}

// A PreMulSum op with a device-resident scalar reads it on every use.
TEST_P(Collectives, PreMulSumDeviceScalarIsReadEachTime) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    alignas(8) float scalar = 2.0f;
    weftRedOp_t op;
    RANK_CHECK_OK(weftRedOpCreatePreMulSum(&op, &scalar, weftFloat32, weftScalarDevice, comm));
    float x[3] = {float(rank), 1.0f, float(rank + 1)};
    float y[3] = {};
    RANK_CHECK_OK(weftAllReduce(x, y, 3, weftFloat32, op, comm, nullptr));
    const float sumR = float(n * (n - 1) / 2);
    RANK_EXPECT(y[0] == 2 * sumR && y[1] == 2.0f * float(n) && y[2] == 2 * (sumR + float(n)))
        << "scalar 2: got " << y[0] << " " << y[1] << " " << y[2];
    scalar = 0.5f;
    RANK_CHECK_OK(weftAllReduce(x, y, 3, weftFloat32, op, comm, nullptr));
    RANK_EXPECT(y[0] == 0.5f * sumR && y[1] == 0.5f * float(n) && y[2] == 0.5f * (sumR + float(n)))
        << "scalar changed to 0.5: got " << y[0] << " " << y[1] << " " << y[2];
    RANK_EXPECT_OK(weftRedOpDestroy(op, comm));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

// ---------------------------------------------------------------------------
// Every algorithm that only WEFT_ALGO chooses, forced in real processes over
// shared memory: a smaller matrix (four dtypes, every op, counts 0, 1, 7,
// 1023 and one of several slots, in and out of place, roots 0 and last).

struct Forced {
  const char* algo;  // WEFT_ALGO
  CaseFn fn;
  bool reducing, rooted, hasInplace;
};
const Forced kForced[] = {
    {"allreduce:tree", allReduceCase, true, false, true},
    {"allreduce:rhd", allReduceCase, true, false, true},
    {"allreduce:recdoubling", allReduceCase, true, false, true},
    {"allreduce:hier", allReduceCase, true, false, true},
    {"reducescatter:rhd", reduceScatterCase, true, false, true},
    {"reducescatter:hier", reduceScatterCase, true, false, true},
    {"allgather:recdoubling", allGatherCase, false, false, true},
    {"allgather:hier", allGatherCase, false, false, true},
    {"broadcast:binomial", broadcastCase, false, true, true},
    {"reduce:binomial", reduceCase, true, true, true},
    {"alltoall:bruck", allToAllCase, false, false, false},
};

// A test name from (table index, ranks): "allreduce_rhd_4".
template <size_t N>
std::string forcedName(const Forced (&table)[N], const std::tuple<int, int>& param) {
  std::string name = table[std::get<0>(param)].algo;
  for (char& ch : name)
    if (ch == ':') ch = '_';
  return name + "_" + std::to_string(std::get<1>(param));
}

class ForcedAlgorithms : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ForcedAlgorithms, MatchesReference) {
  const Forced& f = kForced[std::get<0>(GetParam())];
  const int nranks = std::get<1>(GetParam());
  RunOptions opts;
  opts.env = {{"WEFT_ALGO", f.algo}};
  runRanks(
      nranks,
      [&](weftComm_t comm, int rank, int n) {
        RedOps ops(comm);
        uint64_t salt = 0;
        const std::vector<OpKind> noOp = {OpKind::kSum};
        for (weftDataType_t dt : {weftFloat32, weftBfloat16, weftInt64, weftUint8}) {
          for (OpKind op : f.reducing ? allOpKinds() : noOp) {
            for (int inplace = 0; inplace <= (f.hasInplace ? 1 : 0); ++inplace) {
              for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{70001}}) {
                for (int root : f.rooted ? rootsFor(n) : std::vector<int>{0}) {
                  Case c{comm, rank, n, dt, op, ops.get(dt, op), inplace != 0, count, root, ++salt};
                  f.fn(c);
                }
              }
            }
          }
        }
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Algos, ForcedAlgorithms,
                         ::testing::Combine(::testing::Range(0, int(sizeof(kForced) /
                                                                    sizeof(kForced[0]))),
                                            ::testing::Values(2, 3, 4, 7)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return forcedName(kForced, info.param);
                         });

// The pairwise exchanges (exchange.h) over TCP, where a send runs at most one
// chunk ahead of its receive, and the tree engine (tree.h), whose down chunks
// land from the socket straight into the output: 4 KiB chunks, so that 70001
// elements take tens of chunks per step, at rank counts with and without
// extras to fold.
const Forced kOverTcp[] = {
    {"allreduce:tree", allReduceCase, true, false, true},
    {"broadcast:binomial", broadcastCase, false, true, true},
    {"allreduce:rhd", allReduceCase, true, false, true},
    {"allreduce:recdoubling", allReduceCase, true, false, true},
    {"reducescatter:rhd", reduceScatterCase, true, false, true},
    {"allgather:recdoubling", allGatherCase, false, false, true},
    {"alltoall:bruck", allToAllCase, false, false, false},
    {"alltoall:pairwise", allToAllCase, false, false, true},
};

class ExchangesOverTcp : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ExchangesOverTcp, MatchReference) {
  const Forced& f = kOverTcp[std::get<0>(GetParam())];
  RunOptions opts;
  opts.env = {{"WEFT_ALGO", f.algo},
              {"WEFT_SHM_DISABLE", "1"},
              {"WEFT_TCP_SLOT_BYTES", "4096"},
              {"WEFT_TIMEOUT_MS", "60000"}};
  runRanks(
      std::get<1>(GetParam()),
      [&](weftComm_t comm, int rank, int n) {
        RedOps ops(comm);
        uint64_t salt = 0;
        for (weftDataType_t dt : {weftFloat32, weftInt64}) {
          for (OpKind op : f.reducing ? std::vector<OpKind>{OpKind::kSum, OpKind::kMax}
                                      : std::vector<OpKind>{OpKind::kSum}) {
            for (int inplace = 0; inplace <= (f.hasInplace ? 1 : 0); ++inplace) {
              for (size_t count : {size_t{7}, size_t{70001}}) {
                for (int root : f.rooted ? rootsFor(n) : std::vector<int>{0}) {
                  Case c{comm, rank, n, dt, op, ops.get(dt, op), inplace != 0, count, root, ++salt};
                  f.fn(c);
                }
              }
            }
          }
        }
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Algos, ExchangesOverTcp,
                         ::testing::Combine(::testing::Range(0, int(sizeof(kOverTcp) /
                                                                    sizeof(kOverTcp[0]))),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return forcedName(kOverTcp, info.param);
                         });

// ---------------------------------------------------------------------------
// Ranks dealt round-robin to two hosts (WEFT_HOSTID): the ring and chain
// algorithms go round the ring ordered by host (ring_order.h), 0 2 4 1 3,
// over shared memory within a host and TCP between them, and still match
// the reference at every root.

TEST(RingOrder, RingAndChainAlgorithmsFollowTheHostOrderedRing) {
  RunOptions opts;
  opts.env = {{"WEFT_ALGO",
               "allreduce:ring;reducescatter:ring;allgather:ring;broadcast:chain;"
               "reduce:chain"}};
  runRanksRaw(
      5,
      [&](const RankContext& rc) {
        ::setenv("WEFT_HOSTID", rc.rank % 2 == 0 ? "ring-order-host-a" : "ring-order-host-b", 1);
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(rc.initComm(&comm));
        setCurrentComm(comm);
        const int n = rc.nranks, rank = rc.rank;
        std::vector<int> ring;
        for (int p = 0; p < n; ++p) ring.push_back(comm->context.ringRank(p));
        RANK_EXPECT(ring == std::vector<int>({0, 2, 4, 1, 3}))
            << "ring " << ring[0] << " " << ring[1] << " " << ring[2] << " " << ring[3] << " "
            << ring[4];
        RANK_EXPECT_EQ(comm->context.ringRank(comm->context.ringPos(rank)), rank);
        {  // the ops go before the communicator
          RedOps ops(comm);
          uint64_t salt = 0;
          for (weftDataType_t dt : {weftFloat32, weftInt64}) {
            for (int inplace = 0; inplace <= 1; ++inplace) {
              for (size_t count : {size_t{1}, size_t{1023}, size_t{70001}}) {
                for (CaseFn fn : {allReduceCase, reduceScatterCase, allGatherCase}) {
                  fn(Case{comm, rank, n, dt, OpKind::kSum, ops.get(dt, OpKind::kSum), inplace != 0,
                          count, 0, ++salt});
                }
                for (int root = 0; root < n; ++root) {
                  for (CaseFn fn : {broadcastCase, reduceCase}) {
                    fn(Case{comm, rank, n, dt, OpKind::kSum, ops.get(dt, OpKind::kSum),
                            inplace != 0, count, root, ++salt});
                  }
                }
              }
            }
          }
        }
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

// ---------------------------------------------------------------------------
// All-to-all-v in real processes: random uneven counts with zeros, blocks in
// shuffled order with gaps that must stay untouched.

// Count of elements rank `from` sends to rank `to` in round `round`.
size_t vcount(int from, int to, int round, size_t maxCount) {
  uint64_t x = uint64_t(from) * 1000003u + uint64_t(to) * 7919u + uint64_t(round) * 104729u + 1;
  x ^= x >> 17;
  x *= 0xED5AD4BBu;
  x ^= x >> 11;
  if (x % 5 == 0) return 0;
  return size_t(x % (maxCount + 1));
}

// Displacements for blocks of `sizes`, laid out in reverse peer order with a
// one-element gap before each; returns the total.
size_t vlayout(const std::vector<size_t>& sizes, std::vector<size_t>& displs) {
  const int n = int(sizes.size());
  displs.assign(n, 0);
  size_t at = 0;
  for (int p = n - 1; p >= 0; --p) {
    at += 1;
    displs[p] = at;
    at += sizes[p];
  }
  return at + 1;
}

class AllToAllV : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllV, RandomCounts) {
  runRanks(GetParam(), [](weftComm_t comm, int rank, int n) {
    int round = 0;
    for (weftDataType_t dt : {weftFloat32, weftInt8, weftFloat64}) {
      for (size_t maxCount : {size_t{0}, size_t{1}, size_t{300}, size_t{100000}}) {
        ++round;
        RANK_SCOPED_TRACE("AllToAllv nranks=" << n << " " << dtypeStr(dt) << " max " << maxCount);
        std::vector<size_t> sc(n), sd, rc(n), rd;
        for (int p = 0; p < n; ++p) {
          sc[p] = vcount(rank, p, round, maxCount);
          rc[p] = vcount(p, rank, round, maxCount);
        }
        const size_t es = elemBytes(dt);
        GuardedBuffer send(vlayout(sc, sd) * es), recv(vlayout(rc, rd) * es);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < sc[p]; ++i)
            storeElem(dt, send.data(), sd[p] + i, double((rank * 31 + p * 7 + int(i)) % 100));
        }
        RANK_CHECK_OK(weftAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(),
                                    rd.data(), dt, comm, nullptr));
        Checker ck(dt, OpKind::kSum);
        for (int p = 0; p < n; ++p) {
          ck.elems("recvbuff", recv.data(), rd[p], rc[p],
                   [&](size_t i) { return double((p * 31 + rank * 7 + int(i)) % 100); });
          ck.untouched("gap", recv, (rd[p] - 1) * es, es);
        }
        ck.guards("recvbuff", recv);
      }
    }
  });
}

// Bad arguments fail at once with weftInvalidArgument on the rank that gave
// them; mismatched counts between a sender and its receiver fail the receiver
// with weftInvalidUsage (and, through it, the communicator), never corrupt.
TEST(AllToAllVErrors, BadArguments) {
  runRanks(2, [](weftComm_t comm, int rank, int n) {
    std::vector<float> send(64), recv(64);
    std::vector<size_t> c(n, 4), d = {0, 8};
    auto call = [&](const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                    const size_t* rd) {
      return weftAllToAllv(s, sc, sd, r, rc, rd, weftFloat32, comm, nullptr);
    };
    RANK_EXPECT(call(send.data(), nullptr, d.data(), recv.data(), c.data(), d.data()) ==
                weftInvalidArgument);
    RANK_EXPECT(call(send.data(), c.data(), d.data(), recv.data(), c.data(), nullptr) ==
                weftInvalidArgument);
    RANK_EXPECT(call(nullptr, c.data(), d.data(), recv.data(), c.data(), d.data()) ==
                weftInvalidArgument);
    std::vector<size_t> overlapping = {0, 2};  // blocks of 4 at 0 and 2
    RANK_EXPECT(call(send.data(), c.data(), d.data(), recv.data(), c.data(), overlapping.data()) ==
                weftInvalidArgument);
    RANK_EXPECT(std::string(weftGetLastError(comm)).find("overlap") != std::string::npos)
        << weftGetLastError(comm);
    RANK_EXPECT(call(send.data(), c.data(), d.data(), send.data(), c.data(), d.data()) ==
                weftInvalidArgument);  // in place
    std::vector<size_t> huge = {SIZE_MAX / 2, 4};
    RANK_EXPECT(call(send.data(), huge.data(), d.data(), recv.data(), c.data(), d.data()) ==
                weftInvalidArgument);
    RANK_EXPECT(weftAllToAllv(send.data(), c.data(), d.data(), recv.data(), c.data(), d.data(),
                              weftDataType_t(99), comm, nullptr) == weftInvalidArgument);
    // Still usable: a good call goes through.
    RANK_CHECK_OK(call(send.data(), c.data(), d.data(), recv.data(), c.data(), d.data()));
  });
}

TEST(AllToAllVErrors, MismatchedCountsFailTheReceiver) {
  runRanks(3, [](weftComm_t comm, int rank, int n) {
    std::vector<float> send(64, 1.0f), recv(64);
    std::vector<size_t> sc(n, 4), rc(n, 4), d = {0, 16, 32};
    if (rank == 1) rc[0] = 5;  // rank 0 sends 4
    const weftResult_t res = weftAllToAllv(send.data(), sc.data(), d.data(), recv.data(), rc.data(),
                                           d.data(), weftFloat32, comm, nullptr);
    if (rank == 1) {
      RANK_EXPECT(res == weftInvalidUsage) << weftGetErrorString(res);
      RANK_EXPECT(std::string(weftGetLastError(comm)).find("must agree") != std::string::npos)
          << weftGetLastError(comm);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllV, ::testing::Values(1, 2, 3, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
}  // namespace weft::test
