// Ranks on different "hosts": network namespaces joined by veth pairs and a
// bridge (harness/netns.h), so ranks in different namespaces talk TCP and
// ranks in one namespace shared memory. Runs the collectives against the
// serial reference over IPv4 and IPv6, one and several ranks per namespace;
// checks interface selection (WEFT_SOCKET_IFNAME) and that killing a rank
// with SIGKILL mid-collective fails the survivors instead of hanging.
// Skips when not root or without iproute2.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <linux/if_link.h>
#include <signal.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/data.h"
#include "harness/multirank.h"
#include "harness/netns.h"
#include "weft/weft.h"

namespace weft::test {
namespace {

#define SKIP_WITHOUT_NETNS()                                                          \
  do {                                                                                \
    if (std::string why = NetnsLab::unavailable(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

struct Case {
  weftDataType_t dt;
  OpKind op;
};
const Case kCases[] = {{weftFloat32, OpKind::kSum},
                       {weftInt32, OpKind::kMax},
                       {weftBfloat16, OpKind::kSum},
                       {weftFloat64, OpKind::kAvg}};
// 0, one element, odd, and several 256 KiB chunks per peer.
const size_t kCounts[] = {0, 1, 1023, 300007};

weftRedOp_t toOp(OpKind k) {
  switch (k) {
    case OpKind::kMax:
      return weftMax;
    case OpKind::kMin:
      return weftMin;
    case OpKind::kProd:
      return weftProd;
    case OpKind::kAvg:
      return weftAvg;
    default:
      return weftSum;
  }
}

// Elements of buf[first, first+count) that differ from expect(i); reports the first.
template <class F>
void expectElems(const char* what, weftDataType_t dt, OpKind op, const void* buf, size_t count,
                 F expect) {
  size_t bad = 0, firstBad = 0;
  double got0 = 0, exp0 = 0;
  for (size_t i = 0; i < count; ++i) {
    const double got = loadElem(dt, buf, i), exp = expect(i);
    if (!closeEnough(dt, op, got, exp)) {
      if (bad++ == 0) firstBad = i, got0 = got, exp0 = exp;
    }
  }
  RANK_EXPECT(bad == 0) << what << " " << dtypeStr(dt) << " count " << count << ": " << bad
                        << " wrong, first at " << firstBad << " got " << got0 << " expected "
                        << exp0;
}

// Every collective, both in place and out of place, against the reference.
void collectiveMatrix(weftComm_t comm, int rank, int n) {
  for (const Case& c : kCases) {
    const size_t es = elemBytes(c.dt);
    const weftRedOp_t op = toOp(c.op);
    for (size_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        RANK_SCOPED_TRACE(dtypeStr(c.dt) << " " << opStr(c.op) << " count " << count
                                         << (inPlace ? " in place" : " out of place"));
        const int root = n - 1;
        std::vector<char> in(count * n * es + 8), out(count * n * es + 8);
        // AllReduce
        fillInput(c.dt, c.op, rank, in.data(), count);
        void* dst = inPlace ? in.data() : out.data();
        RANK_CHECK_OK(weftAllReduce(in.data(), dst, count, c.dt, op, comm, nullptr));
        expectElems("allreduce", c.dt, c.op, dst, count,
                    [&](size_t i) { return reference(c.dt, c.op, n, i); });
        // Reduce
        fillInput(c.dt, c.op, rank, in.data(), count);
        dst = inPlace ? in.data() : out.data();
        RANK_CHECK_OK(weftReduce(in.data(), dst, count, c.dt, op, root, comm, nullptr));
        if (rank == root)
          expectElems("reduce", c.dt, c.op, dst, count,
                      [&](size_t i) { return reference(c.dt, c.op, n, i); });
        // Broadcast
        fillInput(c.dt, OpKind::kSum, rank, in.data(), count);
        dst = inPlace ? in.data() : out.data();
        RANK_CHECK_OK(weftBroadcast(in.data(), dst, count, c.dt, root, comm, nullptr));
        expectElems("broadcast", c.dt, OpKind::kSum, dst, count,
                    [&](size_t i) { return inputValue(c.dt, OpKind::kSum, root, i); });
        // AllGather: block q holds rank q's input.
        char* gathered = inPlace ? in.data() : out.data();
        char* mine = inPlace ? gathered + rank * count * es : in.data();
        fillInput(c.dt, OpKind::kSum, rank, mine, count);
        RANK_CHECK_OK(weftAllGather(mine, gathered, count, c.dt, comm, nullptr));
        for (int q = 0; q < n; ++q)
          expectElems("allgather", c.dt, OpKind::kSum, gathered + q * count * es, count,
                      [&](size_t i) { return inputValue(c.dt, OpKind::kSum, q, i); });
        // ReduceScatter: this rank gets block `rank` of the reduction.
        fillInput(c.dt, c.op, rank, in.data(), count * n);
        dst = inPlace ? in.data() + rank * count * es : out.data();
        RANK_CHECK_OK(weftReduceScatter(in.data(), dst, count, c.dt, op, comm, nullptr));
        expectElems("reducescatter", c.dt, c.op, dst, count,
                    [&](size_t i) { return reference(c.dt, c.op, n, rank * count + i); });
        if (inPlace) continue;  // the rest have no in-place form worth a second pass
        // AllToAll: block q of rank r's input goes to block r of rank q.
        for (int q = 0; q < n; ++q)
          fillInput(c.dt, OpKind::kSum, rank, in.data() + q * count * es, count, q * count);
        RANK_CHECK_OK(weftAlltoAll(in.data(), out.data(), count, c.dt, comm, nullptr));
        for (int q = 0; q < n; ++q)
          expectElems(
              "alltoall", c.dt, OpKind::kSum, out.data() + q * count * es, count,
              [&](size_t i) { return inputValue(c.dt, OpKind::kSum, q, rank * count + i); });
        // Gather to root, Scatter from root.
        fillInput(c.dt, OpKind::kSum, rank, in.data(), count);
        RANK_CHECK_OK(weftGather(in.data(), out.data(), count, c.dt, root, comm, nullptr));
        if (rank == root)
          for (int q = 0; q < n; ++q)
            expectElems("gather", c.dt, OpKind::kSum, out.data() + q * count * es, count,
                        [&](size_t i) { return inputValue(c.dt, OpKind::kSum, q, i); });
        fillInput(c.dt, OpKind::kSum, root, in.data(), count * n);
        RANK_CHECK_OK(weftScatter(in.data(), out.data(), count, c.dt, root, comm, nullptr));
        expectElems("scatter", c.dt, OpKind::kSum, out.data(), count, [&](size_t i) {
          return inputValue(c.dt, OpKind::kSum, root, rank * count + i);
        });
        // Send/recv around a ring (one group, so no order deadlocks).
        fillInput(c.dt, OpKind::kSum, rank, in.data(), count);
        RANK_CHECK_OK(weftGroupStart());
        RANK_CHECK_OK(weftSend(in.data(), count, c.dt, (rank + 1) % n, comm, nullptr));
        RANK_CHECK_OK(weftRecv(out.data(), count, c.dt, (rank + n - 1) % n, comm, nullptr));
        RANK_CHECK_OK(weftGroupEnd());
        expectElems("sendrecv", c.dt, OpKind::kSum, out.data(), count, [&](size_t i) {
          return inputValue(c.dt, OpKind::kSum, (rank + n - 1) % n, i);
        });
      }
    }
  }
}

struct Layout {
  const char* name;
  int namespaces;
  std::vector<int> placement;
  bool ipv6;
};

class Netns : public ::testing::TestWithParam<Layout> {};

TEST_P(Netns, CollectivesMatchReference) {
  SKIP_WITHOUT_NETNS();
  const Layout& l = GetParam();
  NetnsLab lab({.namespaces = l.namespaces});
  ASSERT_TRUE(lab.ok()) << lab.error();
  RunOptions opts;
  opts.timeout = std::chrono::seconds(240);
  opts.env = {{"WEFT_TIMEOUT_MS", "60000"}};
  runRanksInNetns(lab, {l.placement, l.ipv6}, collectiveMatrix, opts);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Netns,
    ::testing::Values(Layout{"TwoHostsOneRankEach", 2, {0, 1}, false},
                      Layout{"TwoHostsOneRankEachV6", 2, {0, 1}, true},
                      Layout{"TwoHostsTwoRanksEach", 2, {0, 0, 1, 1}, false},
                      Layout{"ThreeHostsMixed", 3, {0, 1, 2, 0, 2}, false},
                      Layout{"FourHostsInterleavedV6", 4, {0, 1, 2, 3, 3, 2}, true}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

// Bytes an interface sent, seen from inside the calling process's namespace.
uint64_t txBytes(const char* ifname) {
  ifaddrs* list = nullptr;
  uint64_t tx = 0;
  if (getifaddrs(&list) != 0) return 0;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next)
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_PACKET && a->ifa_data &&
        std::strcmp(a->ifa_name, ifname) == 0)
      tx = static_cast<const rtnl_link_stats*>(a->ifa_data)->tx_bytes;
  freeifaddrs(list);
  return tx;
}

// WEFT_SOCKET_IFNAME=eth1 moves the data onto network B (the rendezvous
// address is on network A): eth1 carries the bulk, eth0 only the bootstrap.
TEST(NetnsIfname, SocketIfnameChoosesTheInterface) {
  SKIP_WITHOUT_NETNS();
  NetnsLab lab({.namespaces = 2, .secondNet = true});
  ASSERT_TRUE(lab.ok()) << lab.error();
  for (const char* spec : {"eth1", "=eth1", "^eth0,lo"}) {
    SCOPED_TRACE(spec);
    RunOptions opts;
    opts.env = {{"WEFT_SOCKET_IFNAME", spec}, {"WEFT_TIMEOUT_MS", "60000"}};
    runRanksInNetns(
        lab, {{0, 1}, false},
        [](weftComm_t comm, int rank, int n) {
          const size_t count = size_t(4) << 20;  // 16 MiB of floats
          std::vector<float> x(count, 1.0f);
          const uint64_t eth0 = txBytes("eth0"), eth1 = txBytes("eth1");
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr));
          RANK_EXPECT(x[0] == float(n) && x[count - 1] == float(n));
          const uint64_t d0 = txBytes("eth0") - eth0, d1 = txBytes("eth1") - eth1;
          RANK_EXPECT(d1 >= count * sizeof(float) / 2)
              << "eth1 sent only " << d1 << " bytes (eth0: " << d0 << ")";
          RANK_EXPECT(d0 < (1u << 20)) << "eth0 carried " << d0 << " bytes";
        },
        opts);
  }
}

TEST(NetnsIfname, NoMatchingInterfaceFailsEveryRank) {
  SKIP_WITHOUT_NETNS();
  NetnsLab lab({.namespaces = 2});
  ASSERT_TRUE(lab.ok()) << lab.error();
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"WEFT_SOCKET_IFNAME", "=nosuch0"}, {"WEFT_BOOTSTRAP_TIMEOUT_MS", "10000"}};
  runRanksInNetnsRaw(
      lab, {{0, 1}, false},
      [](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        const weftResult_t r = ctx.initComm(&comm);
        RANK_EXPECT(r != weftSuccess) << "init succeeded without a matching interface";
        RANK_EXPECT(comm == nullptr);
      },
      opts);
}

// SIGKILL of a rank in another namespace in the middle of a large allreduce:
// every survivor gets weftRemoteError (EOF on its sockets without a goodbye)
// well within the timeout, and later calls fail too.
TEST(NetnsFailures, KilledRankFailsSurvivors) {
  SKIP_WITHOUT_NETNS();
  NetnsLab lab({.namespaces = 3});
  ASSERT_TRUE(lab.ok()) << lab.error();
  const std::vector<int> placement = {0, 1, 2, 0, 1, 2};
  const int n = static_cast<int>(placement.size());
  RankSignal entering;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(90);
  opts.env = {{"WEFT_TIMEOUT_MS", "30000"}};
  opts.expected.assign(size_t(n), Outcome::exitCode(0));
  const int victim = 4;  // namespace 1, with a peer on its host
  opts.expected[victim] = Outcome::signal(SIGKILL);
  runRanksInNetnsRaw(
      lab, {placement, false},
      [&](const RankContext& ctx) {
        weftComm_t comm = nullptr;
        RANK_CHECK_OK(ctx.initComm(&comm));
        setCurrentComm(comm);
        rankBarrier(comm);
        const size_t count = size_t(8) << 20;
        std::vector<float> x(count, 1.0f);
        if (ctx.rank == victim) {
          for (int q = 0; q < n - 1; ++q) entering.wait();
          weftStream_t stream = nullptr;
          RANK_CHECK_OK(weftStreamCreate(&stream));
          RANK_CHECK_OK(
              weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, stream));
          ::raise(SIGKILL);
        }
        entering.post();
        const auto start = std::chrono::steady_clock::now();
        const weftResult_t r =
            weftAllReduce(x.data(), x.data(), count, weftFloat32, weftSum, comm, nullptr);
        const auto took = std::chrono::steady_clock::now() - start;
        RANK_EXPECT_EQ(r, weftRemoteError);
        RANK_EXPECT(took < std::chrono::seconds(20))
            << "took " << std::chrono::duration<double>(took).count() << " s";
        int one = 1;
        const weftResult_t r2 = weftAllReduce(&one, &one, 1, weftInt32, weftSum, comm, nullptr);
        RANK_EXPECT(r2 != weftSuccess);
        setCurrentComm(nullptr);
        RANK_EXPECT_OK(weftCommDestroy(comm));
      },
      opts);
}

}  // namespace
}  // namespace weft::test
