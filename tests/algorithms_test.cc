// The algorithm layer, in process: every rank is a thread, every channel an
// in-memory ring of slots. Each algorithm is checked against a serial
// reference over dtypes, ops, counts, rank counts, roots and in-place use,
// with tiny slots (2 x 256 B: many chunks, tight back-pressure) and roomy
// ones (4 x 64 KiB). A rank that hangs fails its collective with a timeout
// from the test health monitor instead of hanging the test. The *Direct
// configurations also let channels publish (single copy: the receiver copies
// straight from the sender's buffer, here one process) and turn on the
// single-copy algorithms from a small size; the others cover the FIFO paths.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/detail.h"
#include "algorithms/online.h"
#include "algorithms/select.h"
#include "base/dtype.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// In-memory channels and a thread-per-rank world.

class MemChannel final : public SendChannel, public RecvChannel {
 public:
  // lazy: commitFrom() reads its source only when the receiver first peeks at
  // the message, the latest a transport that sends from the caller's memory
  // (TCP) may read it. A collective that writes such a source too early then
  // delivers the wrong bytes.
  MemChannel(size_t slotBytes, int depth, bool canPublish, bool lazy = false)
      : slotBytes_(slotBytes),
        depth_(depth),
        canPublish_(canPublish),
        lazy_(lazy),
        sizes_(depth),
        published_(depth),
        lazySources_(depth),
        data_(slotBytes * depth + 64) {}

  void* tryAcquire() override {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) >= static_cast<uint64_t>(depth_)) return nullptr;
    acquired_ = true;
    return slot(h);
  }
  void commit(size_t bytes) override {
    if (!acquired_ || bytes > slotBytes_) misuse_.fetch_add(1);
    acquired_ = false;
    size_t seen = largestCommit_.load(std::memory_order_relaxed);
    while (bytes > seen && !largestCommit_.compare_exchange_weak(seen, bytes)) {
    }
    const uint64_t h = head_.load(std::memory_order_relaxed);
    sizes_[h % depth_] = bytes;
    published_[h % depth_] = nullptr;
    head_.store(h + 1, std::memory_order_release);
  }
  void commitFrom(void* slot, const void* src, size_t bytes) override {
    if (!lazy_) return SendChannel::commitFrom(slot, src, bytes);
    if (slot != this->slot(head_.load(std::memory_order_relaxed))) misuse_.fetch_add(1);
    lazySources_[head_.load(std::memory_order_relaxed) % depth_] = static_cast<const char*>(src);
    lazyUnread_.fetch_add(1);
    commit(bytes);
  }
  bool sourcesInUse() override { return lazyUnread_.load(std::memory_order_acquire) != 0; }
  bool readsSourceLater() const override { return lazy_; }
  bool canPublish() const override { return canPublish_; }
  void publish(const void* src, size_t bytes) override {
    if (!acquired_ || !canPublish_) misuse_.fetch_add(1);
    acquired_ = false;
    const uint64_t h = head_.load(std::memory_order_relaxed);
    sizes_[h % depth_] = bytes;
    published_[h % depth_] = static_cast<const char*>(src);
    publishedOut_.fetch_add(1);
    head_.store(h + 1, std::memory_order_release);
  }
  size_t slotBytes() const override { return slotBytes_; }
  bool drained() override {
    return tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_relaxed);
  }

  const void* tryPeek(size_t* bytes) override {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t == head_.load(std::memory_order_acquire)) return nullptr;
    peeked_ = true;
    *bytes = sizes_[t % depth_];
    if (const char* src = std::exchange(lazySources_[t % depth_], nullptr)) {
      std::memcpy(slot(t), src, *bytes);
      lazyUnread_.fetch_sub(1, std::memory_order_release);
    }
    return slot(t);
  }
  void release() override {
    if (!peeked_) misuse_.fetch_add(1);
    peeked_ = false;
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (published_[t % depth_]) {
      published_[t % depth_] = nullptr;
      publishedOut_.fetch_sub(1);
    } else {
      std::memset(slot(t), 0xCD, sizes_[t % depth_]);  // catches reads after release
    }
    tail_.store(t + 1, std::memory_order_release);
  }
  bool peekedPublished() const override {
    if (!peeked_) misuse_.fetch_add(1);
    return published_[tail_.load(std::memory_order_relaxed) % depth_] != nullptr;
  }
  // Same process: a plain copy out of the published buffer.
  Status readPublished(void* dst, size_t offset, size_t bytes) override {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    const char* src = published_[t % depth_];
    if (!peeked_ || !src || offset > sizes_[t % depth_] || bytes > sizes_[t % depth_] - offset) {
      misuse_.fetch_add(1);
      return makeError(weftInternalError, "bad readPublished(%zu, %zu)", offset, bytes);
    }
    std::memcpy(dst, src + offset, bytes);
    return Status::ok();
  }

  uint64_t unread() const { return head_.load() - tail_.load(); }
  // Published buffers the receiver has not released yet: must be 0 whenever
  // the sender's collective has returned.
  int publishedOutstanding() const { return publishedOut_.load(); }
  static std::atomic<int> misuse_;
  // The largest FIFO message any channel carried since the last reset.
  static std::atomic<size_t> largestCommit_;

 private:
  char* slot(uint64_t seq) {
    char* base = data_.data() + (64 - reinterpret_cast<uintptr_t>(data_.data()) % 64) % 64;
    return base + (seq % depth_) * slotBytes_;
  }
  const size_t slotBytes_;
  const int depth_;
  const bool canPublish_;
  const bool lazy_;
  std::vector<size_t> sizes_;
  std::vector<const char*> published_;    // per slot: the published buffer, or null for data
  std::vector<const char*> lazySources_;  // per slot: a lazy commitFrom's source, not read yet
  std::atomic<int> lazyUnread_{0};
  std::vector<char> data_;
  std::atomic<int> publishedOut_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  bool acquired_ = false;
  bool peeked_ = false;
};
std::atomic<int> MemChannel::misuse_{0};
std::atomic<size_t> MemChannel::largestCommit_{0};

struct ChannelConfig {
  size_t slotBytes;
  int depth;
  bool publish = false;         // channels can publish (single copy)
  size_t directMin = SIZE_MAX;  // CollContext::directMinBytes()
  bool lazy = false;            // commitFrom() reads its source late (MemChannel)
  size_t callChunk = 0;         // CollArgs::chunkBytes (the tuner's chunk); 0: the slot
};
constexpr ChannelConfig kTiny{256, 2};
constexpr ChannelConfig kRoomy{64 * 1024, 4};
// Single copy from just above one slot (so that a published message never
// has a FIFO chunk's size and a mismatch shows as one).
constexpr ChannelConfig kTinyDirect{256, 2, true, 1000};
constexpr ChannelConfig kRoomyDirect{64 * 1024, 4, true, 100000};
// As over TCP: 16 slots, and sends from the collective's own buffers are read late.
constexpr ChannelConfig kTinyLazy{256, 16, false, SIZE_MAX, true};

std::string str(ChannelConfig c) {
  std::string s = std::to_string(c.depth) + "x" + std::to_string(c.slotBytes) + "B";
  if (c.publish) s += " direct>=" + std::to_string(c.directMin) + "B";
  if (c.lazy) s += " lazy";
  if (c.callChunk) s += " chunk " + std::to_string(c.callChunk) + "B";
  return s;
}

struct World {
  World(int n, ChannelConfig cfg, std::chrono::milliseconds timeout)
      : n(n), cfg(cfg), timeout(timeout) {
    for (int i = 0; i < n * n; ++i)
      channels.push_back(
          std::make_unique<MemChannel>(cfg.slotBytes, cfg.depth, cfg.publish, cfg.lazy));
  }
  MemChannel& channel(int from, int to) { return *channels[from * n + to]; }
  int n;
  ChannelConfig cfg;
  std::chrono::milliseconds timeout;  // per collective
  std::atomic<bool> failed{false};
  std::vector<std::unique_ptr<MemChannel>> channels;
  std::vector<int> hosts;  // CollContext::hostOf per rank; empty: one host
};

// The host layout the next runWorld gives its contexts (hierarchical tests).
std::vector<int> gHosts;

class TestHealth final : public HealthMonitor {
 public:
  explicit TestHealth(World& w) : w_(w) { arm(); }
  // Starts the clock for one collective.
  void arm() { deadline_ = Clock::now() + w_.timeout; }
  bool failed() const override { return w_.failed.load(std::memory_order_relaxed); }
  Status check() override {
    if (w_.failed.load()) return makeError(weftRemoteError, "another rank failed");
    if (Clock::now() > deadline_) {
      w_.failed.store(true);
      return makeError(weftTimeout, "test deadline passed (deadlock?)");
    }
    return Status::ok();
  }

 private:
  World& w_;
  Clock::time_point deadline_;
};

class TestContext final : public CollContext {
 public:
  // health: a monitor of the test's own instead of the world's deadline.
  TestContext(World& w, int rank, HealthMonitor* health = nullptr)
      : w_(w), rank_(rank), health_(w), override_(health) {}
  int rank() const override { return rank_; }
  int nranks() const override { return w_.n; }
  SendChannel& sendTo(int peer) override { return w_.channel(rank_, peer); }
  RecvChannel& recvFrom(int peer) override { return w_.channel(peer, rank_); }
  HealthMonitor& health() override { return override_ ? *override_ : health_; }
  size_t chunkBytes() const override { return w_.cfg.slotBytes; }
  size_t slotsPerChannel() const override { return static_cast<size_t>(w_.cfg.depth); }
  size_t directMinBytes() const override { return w_.cfg.directMin; }
  int hostOf(int rank) const override { return w_.hosts.empty() ? 0 : w_.hosts[rank]; }
  const Tuner* tuner() const override { return tuner_; }
  void useTuner(const Tuner* t) { tuner_ = t; }
  void armDeadline() { health_.arm(); }
  // True while a peer may still read a buffer this rank published.
  bool publishedOutstanding() const {
    for (int p = 0; p < w_.n; ++p)
      if (w_.channel(rank_, p).publishedOutstanding() != 0) return true;
    return false;
  }

 private:
  World& w_;
  int rank_;
  TestHealth health_;
  HealthMonitor* override_;
  const Tuner* tuner_ = nullptr;
};

using RankFn = std::function<Status(CollContext&)>;

// Runs fn on n threads, one per rank. A failing rank flags the world so that
// the others give up at once. With expectDrained, checks that every message
// sent was received.
std::vector<Status> runWorld(int n, ChannelConfig cfg, const RankFn& fn,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60),
                             bool expectDrained = true) {
  World w(n, cfg, timeout);
  w.hosts = gHosts;
  std::vector<Status> result(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      TestContext ctx(w, r);
      result[r] = fn(ctx);
      if (!result[r].isOk()) w.failed.store(true);
    });
  }
  for (auto& t : threads) t.join();
  if (expectDrained && !w.failed.load()) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(w.channel(i, j).unread(), 0u) << "messages left on " << i << "->" << j;
      }
    }
  }
  return result;
}

std::string firstError(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) {
    if (!st[r].isOk()) return "rank " + std::to_string(r) + ": " + st[r].message();
  }
  return "";
}

// ---------------------------------------------------------------------------
// Data and the serial reference.

enum class Op { Sum, Prod, Max, Min, Avg, PreMulSum };
const Op kAllOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum};
const weftDataType_t kDtypes[] = {weftFloat32,  weftInt32,   weftFloat16,
                                  weftBfloat16, weftFloat64, weftInt8};
constexpr double kScalar = 3;

const char* opName(Op op) {
  switch (op) {
    case Op::Sum:
      return "sum";
    case Op::Prod:
      return "prod";
    case Op::Max:
      return "max";
    case Op::Min:
      return "min";
    case Op::Avg:
      return "avg";
    case Op::PreMulSum:
      return "premulsum";
  }
  return "?";
}

bool isFloat(weftDataType_t dt) {
  return dt == weftFloat32 || dt == weftFloat16 || dt == weftBfloat16 || dt == weftFloat64;
}

double load(weftDataType_t dt, const void* p, size_t i) {
  switch (dt) {
    case weftFloat32:
      return static_cast<const float*>(p)[i];
    case weftFloat64:
      return static_cast<const double*>(p)[i];
    case weftInt32:
      return static_cast<const int32_t*>(p)[i];
    case weftInt8:
      return static_cast<const int8_t*>(p)[i];
    case weftFloat16:
      return halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case weftBfloat16:
      return bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      ADD_FAILURE() << "dtype";
      return 0;
  }
}

// Stores v; integers wrap (two's complement), floats round to nearest.
void store(weftDataType_t dt, void* p, size_t i, double v) {
  switch (dt) {
    case weftFloat32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case weftFloat64:
      static_cast<double*>(p)[i] = v;
      break;
    case weftInt32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case weftInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case weftFloat16:
      static_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v));
      break;
    case weftBfloat16:
      static_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v));
      break;
    default:
      ADD_FAILURE() << "dtype";
  }
}

// Integer-valued inputs: every reduction of up to 8 ranks is exact in every
// dtype here (sums within +-96, products of +-1 and +-2 are powers of two).
double input(Op op, int rank, size_t i, int salt = 0) {
  const size_t h = i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(salt) * 5;
  if (op == Op::Prod) {
    static const double kFactors[] = {1, -1, 2, 1, -2, 1, 1, -1, 1};
    return kFactors[h % 9];
  }
  return static_cast<double>(h % 9) - 4;
}

RedOp makeOp(Op op, weftDataType_t dt) {
  RedOp r;
  switch (op) {
    case Op::Sum:
      break;
    case Op::Prod:
      r.kind = kernels::ReduceKind::Prod;
      break;
    case Op::Max:
      r.kind = kernels::ReduceKind::Max;
      break;
    case Op::Min:
      r.kind = kernels::ReduceKind::Min;
      break;
    case Op::Avg:
      r.average = true;
      break;
    case Op::PreMulSum:
      r.preMul = true;
      store(dt, r.scalar, 0, kScalar);
      break;
  }
  return r;
}

// Writes the reduction over ranks 0..n-1 of input(op, q, first + j, salt).
void reference(weftDataType_t dt, Op op, int n, void* out, size_t count, size_t first = 0,
               int salt = 0) {
  auto wrapInt = [dt](int64_t v) -> int64_t {
    return dt == weftInt8 ? static_cast<int8_t>(v) : static_cast<int32_t>(v);
  };
  for (size_t j = 0; j < count; ++j) {
    const size_t i = first + j;
    int64_t acc = static_cast<int64_t>(input(op, 0, i, salt)) * (op == Op::PreMulSum ? 3 : 1);
    for (int q = 1; q < n; ++q) {
      const int64_t v = static_cast<int64_t>(input(op, q, i, salt));
      switch (op) {
        case Op::Sum:
        case Op::Avg:
          acc += v;
          break;
        case Op::PreMulSum:
          acc += 3 * v;
          break;
        case Op::Prod:
          acc *= v;
          break;
        case Op::Max:
          acc = std::max(acc, v);
          break;
        case Op::Min:
          acc = std::min(acc, v);
          break;
      }
    }
    double v = static_cast<double>(acc);
    if (op == Op::Avg) {
      if (dt == weftFloat64) {
        v = static_cast<double>(acc) / n;
      } else if (isFloat(dt)) {
        v = static_cast<float>(acc) / static_cast<float>(n);
      } else {
        v = static_cast<double>(wrapInt(acc) / n);
      }
    }
    store(dt, out, j, v);
  }
}

void fillInput(weftDataType_t dt, Op op, int rank, void* buf, size_t count, size_t first = 0,
               int salt = 0) {
  for (size_t j = 0; j < count; ++j) store(dt, buf, j, input(op, rank, first + j, salt));
}

// "" if got matches want element for element, else where it first differs.
std::string compare(weftDataType_t dt, Op op, const void* got, const void* want, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const double g = load(dt, got, i), w = load(dt, want, i);
    bool ok = g == w;
    if (!ok && op == Op::Avg && isFloat(dt)) {  // a kernel may round avg differently
      const double tol = dt == weftFloat32 ? 1e-6 : dt == weftFloat64 ? 1e-14 : 1.0 / 64;
      ok = std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
    }
    if (!ok) {
      std::ostringstream s;
      s << "element " << i << " of " << count << ": got " << g << ", want " << w;
      return s.str();
    }
  }
  return "";
}

using Bytes = std::vector<unsigned char>;

// Parameters every check prints when it fails.
std::string describe(const char* what, weftDataType_t dt, Op op, size_t count, int n,
                     ChannelConfig cfg, bool inPlace, int root = -1) {
  std::ostringstream s;
  s << what << " dtype=" << dtypeName(dt) << " op=" << opName(op) << " count=" << count
    << " n=" << n << " slots=" << str(cfg) << (inPlace ? " in-place" : " out-of-place");
  if (root >= 0) s << " root=" << root;
  return s.str();
}

class ScopedAlgoEnv {
 public:
  explicit ScopedAlgoEnv(const char* value) {
    if (value) {
      setenv("WEFT_ALGO", value, 1);
    } else {
      unsetenv("WEFT_ALGO");
    }
    resetAlgorithmSelectionForTesting();
  }
  ~ScopedAlgoEnv() {
    unsetenv("WEFT_ALGO");
    resetAlgorithmSelectionForTesting();
  }
};

// The algorithms the measured size rules chose among: the selection tests
// below check that the tuner, restricted to them, still makes those choices.
constexpr const char* kMeasuredRuleAlgorithms = "ring,direct,chain,pairwise,p2p";

const int kRankCounts[] = {1, 2, 3, 4, 8};
// Roots 0 and last, once each.
std::vector<int> rootsFor(int n) {
  return n == 1 ? std::vector<int>{0} : std::vector<int>{0, n - 1};
}
const size_t kSmallCounts[] = {0, 1, 7, 1023};
constexpr size_t kLargeCount = 100003;

// ---------------------------------------------------------------------------
// Cases: a collective every rank runs, and the check of its results. The
// cases of one test run back to back on one world, so a rank may start the
// next collective while its peers still finish the last one, as in real use.

struct Case {
  std::string name;
  std::function<Status(CollContext&)> run;
  std::function<std::string()> verify;  // "" or what is wrong
};

void runCases(int n, ChannelConfig cfg, const std::vector<Case>& cases) {
  std::vector<std::string> failedIn(n);
  auto st = runWorld(n, cfg, [&](CollContext& ctx) {
    for (const Case& c : cases) {
      static_cast<TestContext&>(ctx).armDeadline();
      Status s = c.run(ctx);
      if (!s.isOk()) {
        failedIn[ctx.rank()] = c.name;
        return s;
      }
      if (static_cast<TestContext&>(ctx).publishedOutstanding()) {
        failedIn[ctx.rank()] = c.name;
        return makeError(weftInternalError, "returned before its published buffers drained");
      }
    }
    return Status::ok();
  });
  bool failed = false;
  for (int r = 0; r < n; ++r) {
    if (!st[r].isOk()) {
      ADD_FAILURE() << "rank " << r << " failed in " << failedIn[r] << ": " << st[r].message();
      failed = true;
    }
  }
  if (failed) return;
  for (const Case& c : cases) EXPECT_EQ(c.verify(), "") << c.name;
}

// ---------------------------------------------------------------------------
// AllReduce.

// Allreduce through selectAlgorithm; expectAlgo (if set) is what it must pick.
// segments: CollArgs::segments (hier allreduce's pipeline), as the tuner
// would set it; 0 leaves it to the algorithm.
Case allReduceCase(const char* expectAlgo, weftDataType_t dt, Op op, size_t count, int n,
                   ChannelConfig cfg, bool inPlace, size_t segments = 0) {
  struct State {
    std::vector<Bytes> send, recv;
    std::atomic<int> wrongAlgo{0};
  };
  auto s = std::make_shared<State>();
  const size_t es = dtypeSize(dt);
  s->send.assign(n, Bytes(count * es + 1));
  s->recv.assign(n, Bytes(count * es + 1, 0xEE));
  for (int r = 0; r < n; ++r) fillInput(dt, op, r, s->send[r].data(), count);
  if (inPlace) s->recv = s->send;
  const RedOp redop = makeOp(op, dt);
  Case c;
  c.name = describe("allreduce", dt, op, count, n, cfg, inPlace);
  if (segments > 0) c.name += " segments " + std::to_string(segments);
  c.run = [=](CollContext& ctx) {
    const int r = ctx.rank();
    CollArgs a;
    a.kind = CollKind::AllReduce;
    a.segments = segments;
    a.send = inPlace ? s->recv[r].data() : s->send[r].data();
    a.recv = s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.op = redop;
    a.chunkBytes = cfg.callChunk;
    const Algorithm& alg = selectAlgorithm(a, ctx);
    if (expectAlgo && std::strcmp(alg.name, expectAlgo) != 0) s->wrongAlgo++;
    return alg.run(ctx, a);
  };
  c.verify = [=]() -> std::string {
    if (s->wrongAlgo) return std::string("the selector did not pick ") + expectAlgo;
    Bytes want(count * es + 1);
    reference(dt, op, n, want.data(), count);
    for (int r = 0; r < n; ++r) {
      const Bytes& got = s->recv[r];
      if (auto e = compare(dt, op, got.data(), want.data(), count); !e.empty()) {
        return "rank " + std::to_string(r) + ": " + e;
      }
      if (std::memcmp(got.data(), s->recv[0].data(), count * es) != 0) {
        return "rank " + std::to_string(r) + " differs bitwise from rank 0";
      }
      if (got[count * es] != (inPlace ? s->send[r][count * es] : 0xEE)) {
        return "rank " + std::to_string(r) + " wrote past the end";
      }
    }
    return "";
  };
  return c;
}

void allReduceMatrix(const char* env, const char* expectAlgo) {
  ScopedAlgoEnv scoped(env);
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kRankCounts) {
      std::vector<Case> cases;
      for (weftDataType_t dt : kDtypes) {
        for (Op op : kAllOps) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              // direct takes only what fits one slot; the rest goes to the ring.
              const bool fits = count * dtypeSize(dt) <= cfg.slotBytes;
              cases.push_back(
                  allReduceCase(fits ? expectAlgo : nullptr, dt, op, count, n, cfg, inPlace));
            }
          }
        }
      }
      runCases(n, cfg, cases);
    }
  }
}

TEST(AlgorithmsTest, AllReduceRing) {
  allReduceMatrix("ring", "ring");
}
TEST(AlgorithmsTest, AllReduceDirect) {
  allReduceMatrix("allreduce:direct", "direct");
}
TEST(AlgorithmsTest, AllReduceDefaultSelection) {
  allReduceMatrix(nullptr, nullptr);
}

TEST(AlgorithmsTest, AllReduceLarge) {
  // Among the algorithms of the measured size rules (the tuner may prefer
  // others where the table holds more; tuner_test covers its choices).
  ScopedAlgoEnv scoped(kMeasuredRuleAlgorithms);
  for (ChannelConfig cfg : {kRoomy, kTiny}) {
    for (int n : {2, 3, 8}) {
      if (cfg.slotBytes == kTiny.slotBytes && n == 8) continue;
      std::vector<Case> cases;
      for (weftDataType_t dt : {weftFloat32, weftFloat16, weftInt8, weftFloat64}) {
        for (Op op : {Op::Sum, Op::Avg, Op::PreMulSum, Op::Max}) {
          const bool inPlace = op == Op::Sum || op == Op::Max;
          cases.push_back(allReduceCase("ring", dt, op, kLargeCount, n, cfg, inPlace));
        }
      }
      runCases(n, cfg, cases);
    }
  }
}

// ---------------------------------------------------------------------------
// ReduceScatter.

Case reduceScatterCase(weftDataType_t dt, Op op, size_t count, int n, ChannelConfig cfg,
                       bool inPlace) {
  struct State {
    std::vector<Bytes> send, recv;
  };
  auto s = std::make_shared<State>();
  const size_t es = dtypeSize(dt);
  const size_t total = count * n;
  s->send.assign(n, Bytes(total * es + 1));
  s->recv.assign(n, Bytes(count * es + 1, 0xEE));
  for (int r = 0; r < n; ++r) fillInput(dt, op, r, s->send[r].data(), total);
  const RedOp redop = makeOp(op, dt);
  Case c;
  c.name = describe("reducescatter", dt, op, count, n, cfg, inPlace);
  c.run = [=](CollContext& ctx) {
    const int r = ctx.rank();
    CollArgs a;
    a.kind = CollKind::ReduceScatter;
    a.send = s->send[r].data();
    a.recv = inPlace ? s->send[r].data() + r * count * es : s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.op = redop;
    a.chunkBytes = cfg.callChunk;
    return selectAlgorithm(a, ctx).run(ctx, a);
  };
  c.verify = [=]() -> std::string {
    Bytes want(count * es + 1);
    for (int r = 0; r < n; ++r) {
      reference(dt, op, n, want.data(), count, r * count);
      const unsigned char* got = inPlace ? s->send[r].data() + r * count * es : s->recv[r].data();
      if (auto e = compare(dt, op, got, want.data(), count); !e.empty()) {
        return "rank " + std::to_string(r) + ": " + e;
      }
      if (!inPlace && s->recv[r][count * es] != 0xEE) return "wrote past the end";
    }
    return "";
  };
  return c;
}

TEST(AlgorithmsTest, ReduceScatter) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kRankCounts) {
      std::vector<Case> cases;
      for (weftDataType_t dt : kDtypes) {
        for (Op op : kAllOps) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(reduceScatterCase(dt, op, count, n, cfg, inPlace));
            }
          }
        }
      }
      if (n == 3 || n == 8) {
        cases.push_back(reduceScatterCase(weftFloat32, Op::Sum, kLargeCount / n, n, cfg, n == 3));
        cases.push_back(reduceScatterCase(weftFloat16, Op::Avg, kLargeCount / n, n, cfg, false));
        cases.push_back(reduceScatterCase(weftInt8, Op::PreMulSum, kLargeCount / n, n, cfg, true));
      }
      runCases(n, cfg, cases);
    }
  }
}

// ---------------------------------------------------------------------------
// Reduce.

Case reduceCase(weftDataType_t dt, Op op, size_t count, int n, int root, ChannelConfig cfg,
                bool inPlace) {
  struct State {
    std::vector<Bytes> send, recv, sendBefore;
  };
  auto s = std::make_shared<State>();
  const size_t es = dtypeSize(dt);
  s->send.assign(n, Bytes(count * es + 1));
  s->recv.assign(n, Bytes(count * es + 1, 0xEE));
  for (int r = 0; r < n; ++r) fillInput(dt, op, r, s->send[r].data(), count);
  s->sendBefore = s->send;
  const RedOp redop = makeOp(op, dt);
  Case c;
  c.name = describe("reduce", dt, op, count, n, cfg, inPlace, root);
  c.run = [=](CollContext& ctx) {
    const int r = ctx.rank();
    CollArgs a;
    a.kind = CollKind::Reduce;
    a.send = s->send[r].data();
    a.recv = inPlace ? s->send[r].data() : s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.op = redop;
    a.root = root;
    return selectAlgorithm(a, ctx).run(ctx, a);
  };
  c.verify = [=]() -> std::string {
    Bytes want(count * es + 1);
    reference(dt, op, n, want.data(), count);
    for (int r = 0; r < n; ++r) {
      const Bytes& out = inPlace ? s->send[r] : s->recv[r];
      if (r == root) {
        if (auto e = compare(dt, op, out.data(), want.data(), count); !e.empty()) {
          return "root: " + e;
        }
      } else if (inPlace ? out != s->sendBefore[r] : out != Bytes(count * es + 1, 0xEE)) {
        return "non-root rank " + std::to_string(r) + " had its buffer changed";
      }
    }
    return "";
  };
  return c;
}

TEST(AlgorithmsTest, Reduce) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kRankCounts) {
      std::vector<Case> cases;
      for (int root : rootsFor(n)) {
        for (weftDataType_t dt : kDtypes) {
          for (Op op : kAllOps) {
            for (size_t count : kSmallCounts) {
              for (bool inPlace : {false, true}) {
                cases.push_back(reduceCase(dt, op, count, n, root, cfg, inPlace));
              }
            }
          }
        }
      }
      if (n == 3 || n == 8) {
        cases.push_back(reduceCase(weftFloat32, Op::Sum, kLargeCount, n, n - 1, cfg, false));
        cases.push_back(reduceCase(weftFloat16, Op::Avg, kLargeCount, n, 1, cfg, true));
      }
      runCases(n, cfg, cases);
    }
  }
}

// ---------------------------------------------------------------------------
// Data movement: broadcast, all-gather, all-to-all, gather, scatter. Inputs
// differ per (rank, element), so any misplaced block shows.

const weftDataType_t kMoveDtypes[] = {weftInt8, weftFloat16, weftFloat32, weftFloat64};

void fillDistinct(weftDataType_t dt, int rank, void* buf, size_t count) {
  // Exact in every dtype here: int8 wraps, fp16 stays within +-2048.
  for (size_t j = 0; j < count; ++j) {
    const double v = static_cast<double>((j * 3 + static_cast<size_t>(rank) * 17) % 4000);
    store(dt, buf, j, dt == weftInt8 ? v : v - 2000);
  }
}

// A collective whose arguments setup(rank, args) fills, run through the
// selector.
std::function<Status(CollContext&)> viaSelector(std::function<void(int, CollArgs&)> setup) {
  return [setup](CollContext& ctx) {
    CollArgs a;
    setup(ctx.rank(), a);
    return selectAlgorithm(a, ctx).run(ctx, a);
  };
}

struct MoveState {
  std::vector<Bytes> send, recv;
  Bytes want;
};

Case broadcastCase(weftDataType_t dt, size_t count, int n, int root, ChannelConfig cfg,
                   bool inPlace) {
  auto s = std::make_shared<MoveState>();
  const size_t bytes = count * dtypeSize(dt);
  s->want.assign(bytes + 1, 0xEE);
  fillDistinct(dt, root, s->want.data(), count);
  s->send.assign(1, s->want);
  s->recv.assign(n, Bytes(bytes + 1, 0xEE));
  if (inPlace) s->recv[root] = s->want;
  Case c;
  c.name = describe("broadcast", dt, Op::Sum, count, n, cfg, inPlace, root);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::Broadcast;
    a.send = r == root ? (inPlace ? s->recv[r].data() : s->send[0].data()) : nullptr;
    a.recv = s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.root = root;
  });
  c.verify = [=]() -> std::string {
    for (int r = 0; r < n; ++r) {
      if (s->recv[r] != s->want) return "rank " + std::to_string(r) + " got the wrong data";
    }
    return "";
  };
  return c;
}

Case allGatherCase(weftDataType_t dt, size_t count, int n, int, ChannelConfig cfg, bool inPlace) {
  auto s = std::make_shared<MoveState>();
  const size_t bb = count * dtypeSize(dt);
  s->send.assign(n, Bytes(bb + 1));
  s->recv.assign(n, Bytes(n * bb + 1, 0xEE));
  s->want.assign(n * bb + 1, 0xEE);
  for (int r = 0; r < n; ++r) {
    fillDistinct(dt, r, s->send[r].data(), count);
    fillDistinct(dt, r, s->want.data() + r * bb, count);
    if (inPlace) fillDistinct(dt, r, s->recv[r].data() + r * bb, count);
  }
  Case c;
  c.name = describe("allgather", dt, Op::Sum, count, n, cfg, inPlace);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::AllGather;
    a.send = inPlace ? s->recv[r].data() + r * bb : s->send[r].data();
    a.recv = s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.chunkBytes = cfg.callChunk;
  });
  c.verify = [=]() -> std::string {
    for (int r = 0; r < n; ++r) {
      if (s->recv[r] != s->want) return "rank " + std::to_string(r) + " got the wrong data";
    }
    return "";
  };
  return c;
}

Case allToAllCase(weftDataType_t dt, size_t count, int n, int, ChannelConfig cfg, bool inPlace) {
  auto s = std::make_shared<MoveState>();
  const size_t bb = count * dtypeSize(dt);
  s->send.assign(n, Bytes(n * bb + 1, 0xEE));
  s->recv.assign(n, Bytes(n * bb + 1, 0xEE));
  // Rank r's block p holds fillDistinct(r*n+p); rank p's block r must get it.
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) fillDistinct(dt, r * n + p, s->send[r].data() + p * bb, count);
  }
  if (inPlace) s->recv = s->send;
  Case c;
  c.name = describe("alltoall", dt, Op::Sum, count, n, cfg, inPlace);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::AllToAll;
    a.send = inPlace ? s->recv[r].data() : s->send[r].data();
    a.recv = s->recv[r].data();
    a.count = count;
    a.dtype = dt;
  });
  c.verify = [=]() -> std::string {
    Bytes want(n * bb + 1, 0xEE);
    for (int p = 0; p < n; ++p) {
      for (int r = 0; r < n; ++r) fillDistinct(dt, r * n + p, want.data() + r * bb, count);
      if (s->recv[p] != want) return "rank " + std::to_string(p) + " got the wrong data";
    }
    return "";
  };
  return c;
}

Case gatherCase(weftDataType_t dt, size_t count, int n, int root, ChannelConfig cfg, bool inPlace) {
  auto s = std::make_shared<MoveState>();
  const size_t bb = count * dtypeSize(dt);
  s->send.assign(n, Bytes(bb + 1));
  s->recv.assign(1, Bytes(n * bb + 1, 0xEE));
  s->want.assign(n * bb + 1, 0xEE);
  for (int r = 0; r < n; ++r) {
    fillDistinct(dt, r, s->send[r].data(), count);
    fillDistinct(dt, r, s->want.data() + r * bb, count);
  }
  if (inPlace) fillDistinct(dt, root, s->recv[0].data() + root * bb, count);
  Case c;
  c.name = describe("gather", dt, Op::Sum, count, n, cfg, inPlace, root);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::Gather;
    a.send = inPlace && r == root ? s->recv[0].data() + r * bb : s->send[r].data();
    a.recv = r == root ? s->recv[0].data() : nullptr;
    a.count = count;
    a.dtype = dt;
    a.root = root;
  });
  c.verify = [=]() -> std::string {
    return s->recv[0] == s->want ? "" : "the root got the wrong data";
  };
  return c;
}

Case scatterCase(weftDataType_t dt, size_t count, int n, int root, ChannelConfig cfg,
                 bool inPlace) {
  auto s = std::make_shared<MoveState>();
  const size_t bb = count * dtypeSize(dt);
  s->send.assign(2, Bytes(n * bb + 1, 0xEE));  // the root's input, and a copy
  for (int p = 0; p < n; ++p) fillDistinct(dt, p, s->send[0].data() + p * bb, count);
  s->send[1] = s->send[0];
  s->recv.assign(n, Bytes(bb + 1, 0xEE));
  Case c;
  c.name = describe("scatter", dt, Op::Sum, count, n, cfg, inPlace, root);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::Scatter;
    a.send = r == root ? s->send[0].data() : nullptr;
    a.recv = inPlace && r == root ? s->send[0].data() + r * bb : s->recv[r].data();
    a.count = count;
    a.dtype = dt;
    a.root = root;
  });
  c.verify = [=]() -> std::string {
    if (s->send[0] != s->send[1]) return "the root's send buffer changed";
    Bytes want(bb + 1, 0xEE);
    for (int r = 0; r < n; ++r) {
      if (inPlace && r == root) continue;
      fillDistinct(dt, r, want.data(), count);
      if (s->recv[r] != want) return "rank " + std::to_string(r) + " got the wrong data";
    }
    return "";
  };
  return c;
}

using MoveCaseFn = Case (*)(weftDataType_t, size_t, int, int, ChannelConfig, bool);

void moveMatrix(bool rooted, MoveCaseFn make) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyDirect, kRoomyDirect, kTinyLazy}) {
    for (int n : kRankCounts) {
      std::vector<Case> cases;
      for (int root : rooted ? rootsFor(n) : std::vector<int>{0}) {
        for (weftDataType_t dt : kMoveDtypes) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(make(dt, count, n, root, cfg, inPlace));
            }
          }
        }
      }
      if (n == 3 || n == 8) {
        cases.push_back(make(weftFloat32, kLargeCount / n, n, n - 1, cfg, false));
        cases.push_back(make(weftInt8, kLargeCount / n, n, 1, cfg, true));
        cases.push_back(make(weftFloat16, 5003, n, 2, cfg, false));
      }
      if (cfg.publish && n > 1) {
        // Just below and above the single-copy threshold, and (a few ranks)
        // a message read in several pieces.
        const size_t atMin = cfg.directMin / 4;
        for (bool inPlace : {false, true}) {
          cases.push_back(make(weftFloat32, atMin - 1, n, n - 1, cfg, inPlace));
          cases.push_back(make(weftFloat32, atMin + 1, n, 0, cfg, inPlace));
          cases.push_back(make(weftInt8, cfg.directMin + 3, n, n / 2, cfg, inPlace));
        }
        if (n <= 3 && cfg.slotBytes == kRoomyDirect.slotBytes) {
          cases.push_back(make(weftFloat32, (9 << 20) / 4 + 5, n, n - 1, cfg, n == 2));
        }
      }
      runCases(n, cfg, cases);
    }
  }
}

TEST(AlgorithmsTest, Broadcast) {
  moveMatrix(true, broadcastCase);
}
TEST(AlgorithmsTest, BroadcastDirect) {
  ScopedAlgoEnv scoped("broadcast:direct");  // where the channels publish
  moveMatrix(true, broadcastCase);
}
TEST(AlgorithmsTest, AllGather) {
  moveMatrix(false, allGatherCase);
}

// The rings take CollArgs::chunkBytes (the tuner's chunk) as the chains do:
// below the slot each block spans several passes, and a chunk need not be a
// whole number of elements. Every message stays within it.
TEST(AlgorithmsTest, RingsRunWithTheTunersChunk) {
  ScopedAlgoEnv scoped("ring");
  constexpr size_t kChunk = 1000;
  constexpr ChannelConfig kRoomyChunked{64 * 1024, 4, false, SIZE_MAX, false, kChunk};
  constexpr ChannelConfig kLazyChunked{64 * 1024, 16, false, SIZE_MAX, true, kChunk};
  for (ChannelConfig cfg : {kRoomyChunked, kLazyChunked}) {
    for (int n : {2, 3, 5}) {
      MemChannel::largestCommit_ = 0;
      std::vector<Case> cases;
      for (weftDataType_t dt : {weftFloat32, weftFloat16, weftInt8, weftFloat64}) {
        for (size_t count : {size_t{7}, size_t{1023}, kLargeCount}) {
          for (bool inPlace : {false, true}) {
            cases.push_back(allReduceCase("ring", dt, Op::Sum, count, n, cfg, inPlace));
            cases.push_back(reduceScatterCase(dt, Op::Avg, count, n, cfg, inPlace));
            cases.push_back(allGatherCase(dt, count, n, 0, cfg, inPlace));
          }
        }
      }
      runCases(n, cfg, cases);
      EXPECT_GT(MemChannel::largestCommit_.load(), size_t{0}) << str(cfg);
      EXPECT_LE(MemChannel::largestCommit_.load(), kChunk) << str(cfg);
    }
  }
}

TEST(AlgorithmsTest, AllToAll) {
  moveMatrix(false, allToAllCase);
}
TEST(AlgorithmsTest, Gather) {
  moveMatrix(true, gatherCase);
}
TEST(AlgorithmsTest, Scatter) {
  moveMatrix(true, scatterCase);
}

// Every kind of collective, interleaved on one world with tiny slots: ranks
// run ahead into the next collective while peers finish the previous one.
TEST(AlgorithmsTest, MixedSequence) {
  for (ChannelConfig cfg : {kTiny, kTinyDirect}) {
    for (int n : {3, 4}) {
      std::vector<Case> cases;
      for (size_t count : {size_t{1}, size_t{300}, size_t{1023}}) {
        for (int root : rootsFor(n)) {
          cases.push_back(allReduceCase(nullptr, weftFloat32, Op::Sum, count, n, cfg, false));
          cases.push_back(broadcastCase(weftInt8, count, n, root, cfg, false));
          cases.push_back(reduceCase(weftInt32, Op::Max, count, n, root, cfg, true));
          cases.push_back(allGatherCase(weftFloat16, count, n, root, cfg, true));
          cases.push_back(reduceScatterCase(weftFloat64, Op::Avg, count, n, cfg, false));
          cases.push_back(allToAllCase(weftFloat32, count, n, root, cfg, false));
          cases.push_back(gatherCase(weftFloat32, count, n, root, cfg, false));
          cases.push_back(scatterCase(weftFloat32, count, n, root, cfg, true));
          cases.push_back(allToAllCase(weftFloat16, count, n, root, cfg, true));
          cases.push_back(broadcastCase(weftFloat32, count, n, root, cfg, true));
        }
      }
      runCases(n, cfg, cases);
    }
  }
}

// ---------------------------------------------------------------------------
// Point to point.

Bytes pattern(size_t bytes, int from, int to, int seq) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; ++i)
    b[i] = static_cast<unsigned char>(i * 7 + from * 31 + to * 11 + seq * 5);
  return b;
}

// Every rank sends msgs[k] bytes to each peer in `peers(r)` and receives the
// same from each rank that sends to it; the ops are posted in an order that
// would deadlock if they were run one by one (receives first).
void checkP2P(int n, ChannelConfig cfg, const std::vector<size_t>& msgs,
              const std::function<std::vector<int>(int, int)>& sendPeers,
              const std::function<std::vector<int>(int, int)>& recvPeers) {
  std::vector<std::vector<Bytes>> recvBufs(n);
  auto st = runWorld(n, cfg, [&](CollContext& ctx) {
    const int r = ctx.rank();
    std::vector<Bytes> sendBufs;
    std::vector<P2POp> ops;
    std::vector<Bytes>& rb = recvBufs[r];
    // Sizes first so that no buffer moves after its pointer is taken.
    for (int from : recvPeers(r, n)) {
      for (size_t k = 0; k < msgs.size(); ++k) rb.emplace_back(msgs[k] + 1, 0xEE);
      (void)from;
    }
    for (int to : sendPeers(r, n)) {
      for (size_t k = 0; k < msgs.size(); ++k) sendBufs.push_back(pattern(msgs[k], r, to, int(k)));
    }
    size_t ri = 0;
    for (int from : recvPeers(r, n)) {
      for (size_t k = 0; k < msgs.size(); ++k, ++ri)
        ops.push_back({false, from, rb[ri].data(), msgs[k]});
    }
    size_t si = 0;
    for (int to : sendPeers(r, n)) {
      for (size_t k = 0; k < msgs.size(); ++k, ++si)
        ops.push_back({true, to, sendBufs[si].data(), msgs[k]});
    }
    Status st = runP2P(ctx, ops);
    // As the communicator does after every call (Transports::flush): the
    // send buffers end with this lambda, and a lazy channel reads late.
    Progress progress(ctx.health());
    if (st.isOk()) st = algo::waitSourcesRead(ctx, progress);
    return st;
  });
  ASSERT_EQ(firstError(st), "");
  for (int r = 0; r < n; ++r) {
    size_t ri = 0;
    for (int from : recvPeers(r, n)) {
      for (size_t k = 0; k < msgs.size(); ++k, ++ri) {
        Bytes want = pattern(msgs[k], from, r, int(k));
        want.push_back(0xEE);
        EXPECT_TRUE(recvBufs[r][ri] == want)
            << "rank " << r << " message " << k << " from " << from << " (" << msgs[k] << " B)";
      }
    }
  }
}

TEST(AlgorithmsTest, P2PRing) {
  const std::vector<size_t> msgs = {0, 1, 256, 257, 1000, 0, 70000, 3};
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyDirect}) {
    for (int n : kRankCounts) {
      checkP2P(
          n, cfg, msgs, [](int r, int n) { return std::vector<int>{(r + 1) % n}; },
          [](int r, int n) { return std::vector<int>{(r + n - 1) % n}; });
    }
  }
}

TEST(AlgorithmsTest, P2PAllToAllWithSelf) {
  auto everyone = [](int, int n) {
    std::vector<int> v;
    for (int p = n - 1; p >= 0; --p) v.push_back(p);
    return v;
  };
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kRankCounts) checkP2P(n, cfg, {5, 0, 300, 4096}, everyone, everyone);
  }
}

// A send whose buffer a receive of the same batch overwrites goes out as it
// was when posted. Where the send and the receive start at the same address
// and are alone in their FIFOs (in-place sendrecv, in-place all-to-all),
// the send takes its first FIFO's worth before any receive writes, and only
// what the receive then overtakes is staged (so nothing for a message that
// fits the FIFO); any other overlap, a send that goes by single copy, and
// one of more than four chunks, is staged whole. `sendOff` is where in the
// rank's buffer the send starts (the receive starts at 0); sizes differ per
// rank.
bool stagedWhole(ChannelConfig cfg, size_t bytes) {
  return (cfg.publish && bytes >= cfg.directMin) || bytes > 4 * cfg.slotBytes;
}
size_t mostStagedWhenGated(ChannelConfig cfg, size_t bytes) {
  const size_t fifo = cfg.slotBytes * size_t(cfg.depth);
  if (stagedWhole(cfg, bytes)) return bytes;
  return bytes > fifo ? bytes - fifo : 0;
}

void checkInPlaceRing(ChannelConfig cfg, int n, size_t base, size_t sendOff, bool expectStaged) {
  const size_t span = base + 97 * size_t(n) + sendOff + 1;
  auto sendBytes = [&](int r) { return base + 97 * size_t(r); };
  std::vector<Bytes> bufs(n), before(n);
  std::vector<size_t> staged(n, 0);
  for (int r = 0; r < n; ++r) before[r] = bufs[r] = pattern(span, r, 0, 9);
  auto st = runWorld(n, cfg, [&](CollContext& ctx) {
    const int r = ctx.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    P2POp ops[] = {{true, next, bufs[r].data() + sendOff, sendBytes(r)},
                   {false, prev, bufs[r].data(), sendBytes(prev)}};
    Status s = runP2P(ctx, ops);
    staged[r] = p2pLastStagedBytes();
    return s;
  });
  const std::string what = "n=" + std::to_string(n) + " " + str(cfg) +
                           " base=" + std::to_string(base) + " sendOff=" + std::to_string(sendOff);
  ASSERT_EQ(firstError(st), "") << what;
  for (int r = 0; r < n; ++r) {
    const int prev = (r + n - 1) % n;
    const size_t got = sendBytes(prev);
    Bytes want = before[r];
    std::copy_n(before[prev].begin() + sendOff, got, want.begin());
    EXPECT_TRUE(bufs[r] == want) << what << " rank " << r;
    if (expectStaged || stagedWhole(cfg, sendBytes(r))) {
      EXPECT_EQ(staged[r], sendBytes(r)) << what << " rank " << r;
    } else {
      EXPECT_LE(staged[r], mostStagedWhenGated(cfg, sendBytes(r))) << what << " rank " << r;
    }
  }
}

TEST(AlgorithmsTest, P2PInPlaceSendRecvStagesOnlyWhatItOvertakes) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyDirect}) {
    for (int n : {2, 3, 5}) {
      for (size_t base : {size_t(1), size_t(256), size_t(3000), size_t(70000)}) {
        checkInPlaceRing(cfg, n, base, 0, false);
      }
    }
  }
}

TEST(AlgorithmsTest, P2POverlapAtAnOffsetIsStaged) {
  for (ChannelConfig cfg : {kTiny, kTinyDirect}) {
    for (int n : {2, 3}) checkInPlaceRing(cfg, n, 3000, 100, true);
  }
}

// The peer posts its receive only after its own send completed: rank 0's
// receive must overtake rank 0's send (which needs that receive), so what
// the send has not taken by then is staged; a receive that waited for it
// would deadlock. With one slot per FIFO and four chunks (the most that is
// gated), rank 0's send takes one chunk and then waits until rank 1's send
// is complete, by which time rank 0 has received at least three chunks:
// two of them overtook the send. A message of many FIFOs is staged whole
// and must come through all the same.
TEST(AlgorithmsTest, P2PGatedReceiveOvertakesWhenThePeerReceivesLater) {
  constexpr ChannelConfig kOneSlot{256, 1};
  for (ChannelConfig cfg : {kOneSlot, kTiny, kRoomy}) {
    const bool gated = cfg.depth == 1;
    const size_t bytes = gated ? 4 * cfg.slotBytes : cfg.slotBytes * cfg.depth * 10 + 3;
    Bytes inPlace = pattern(bytes, 0, 1, 4);
    const Bytes sent0 = inPlace;
    Bytes send1 = pattern(bytes, 1, 0, 4), recv1(bytes, 0xEE);
    size_t staged = 0;
    auto st = runWorld(2, cfg, [&](CollContext& ctx) {
      if (ctx.rank() == 0) {
        P2POp ops[] = {{true, 1, inPlace.data(), bytes}, {false, 1, inPlace.data(), bytes}};
        Status s = runP2P(ctx, ops);
        staged = p2pLastStagedBytes();
        return s;
      }
      P2POp send[] = {{true, 0, send1.data(), bytes}};
      WEFT_RETURN_IF_ERROR(runP2P(ctx, send));
      P2POp recv[] = {{false, 0, recv1.data(), bytes}};
      return runP2P(ctx, recv);
    });
    ASSERT_EQ(firstError(st), "") << str(cfg);
    EXPECT_TRUE(inPlace == send1) << str(cfg);
    EXPECT_TRUE(recv1 == sent0) << str(cfg);
    if (gated) {
      EXPECT_GE(staged, 2 * cfg.slotBytes) << str(cfg);
      EXPECT_LE(staged, 3 * cfg.slotBytes) << str(cfg);
    } else {
      EXPECT_EQ(staged, bytes) << str(cfg);
    }
  }
}

// In-place all-to-all by sends and receives: block p of every rank goes to
// rank p and is replaced by what p sent. Each pair is gated.
TEST(AlgorithmsTest, P2PInPlaceAllToAllStagesOnlyWhatItOvertakes) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyDirect}) {
    for (int n : kRankCounts) {
      const size_t block = 1500;
      std::vector<Bytes> bufs(n);
      std::vector<size_t> staged(n, 1);
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          const Bytes b = pattern(block, r, p, 3);
          bufs[r].insert(bufs[r].end(), b.begin(), b.end());
        }
      }
      auto st = runWorld(n, cfg, [&](CollContext& ctx) {
        const int r = ctx.rank();
        std::vector<P2POp> ops;
        for (int p = 0; p < n; ++p) ops.push_back({false, p, bufs[r].data() + p * block, block});
        for (int p = n - 1; p >= 0; --p)
          ops.push_back({true, p, bufs[r].data() + p * block, block});
        Status s = runP2P(ctx, ops);
        staged[r] = p2pLastStagedBytes();
        return s;
      });
      ASSERT_EQ(firstError(st), "") << "n=" << n << " " << str(cfg);
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          const Bytes want = pattern(block, p, r, 3);
          EXPECT_TRUE(std::equal(want.begin(), want.end(), bufs[r].begin() + p * block))
              << "n=" << n << " " << str(cfg) << " rank " << r << " block " << p;
        }
        EXPECT_LE(staged[r], size_t(n - 1) * mostStagedWhenGated(cfg, block))
            << "n=" << n << " " << str(cfg) << " rank " << r;
      }
    }
  }
}

TEST(AlgorithmsTest, P2PSelfMismatchIsInvalidUsage) {
  auto st = runWorld(1, kTiny, [](CollContext& ctx) {
    char a[8] = {}, b[8];
    P2POp ops[] = {{true, 0, a, 8}, {false, 0, b, 4}};
    return runP2P(ctx, ops);
  });
  EXPECT_EQ(st[0].code(), weftInvalidUsage) << st[0].message();
  st = runWorld(2, kTiny, [](CollContext& ctx) {
    char a[8] = {};
    P2POp ops[] = {{true, 5, a, 8}};
    return runP2P(ctx, ops);
  });
  EXPECT_EQ(st[0].code(), weftInvalidArgument) << st[0].message();
}

// ---------------------------------------------------------------------------
// Errors: mismatched calls and hangs end in errors, not deadlocks.

TEST(AlgorithmsTest, SizeMismatchIsInvalidUsage) {
  for (const char* algo : {"ring", "direct"}) {
    ScopedAlgoEnv scoped(algo);
    std::vector<float> buf[2] = {std::vector<float>(2048, 1), std::vector<float>(2048, 1)};
    auto st = runWorld(
        2, kRoomy,
        [&](CollContext& ctx) {
          CollArgs a;
          a.send = a.recv = buf[ctx.rank()].data();
          a.count = ctx.rank() == 0 ? 1024 : 2048;
          return selectAlgorithm(a, ctx).run(ctx, a);
        },
        std::chrono::seconds(20), false);
    bool sawUsage = false;
    for (const Status& s : st) {
      EXPECT_FALSE(s.isOk());
      if (s.code() == weftInvalidUsage) {
        sawUsage = true;
        EXPECT_NE(s.message().find("were expected"), std::string::npos) << s.message();
      }
    }
    EXPECT_TRUE(sawUsage) << algo << ": " << firstError(st);
  }
}

// A single-copy receiver that gets another size, or FIFO data from a peer
// that chose a FIFO algorithm for its (different) count, fails with the
// mismatch error instead of misreading; so does a FIFO receiver that gets a
// published reference.
TEST(AlgorithmsTest, SingleCopySizeMismatchIsInvalidUsage) {
  ScopedAlgoEnv scoped("broadcast:direct");
  for (CollKind kind : {CollKind::AllGather, CollKind::AllToAll, CollKind::Broadcast}) {
    for (size_t other : {size_t{40000}, size_t{100}}) {
      std::vector<float> send[2], recv[2];
      for (int r = 0; r < 2; ++r) {
        send[r].assign(2 * 40000, 1);
        recv[r].assign(2 * 40000, 0);
      }
      auto st = runWorld(
          2, kRoomyDirect,
          [&](CollContext& ctx) {
            const int r = ctx.rank();
            CollArgs a;
            a.kind = kind;
            a.send = send[r].data();
            a.recv = recv[r].data();
            a.count = r == 0 ? 30000 : other;
            return selectAlgorithm(a, ctx).run(ctx, a);
          },
          std::chrono::seconds(20), false);
      bool sawUsage = false;
      for (const Status& s : st) {
        EXPECT_FALSE(s.isOk());
        if (s.code() == weftInvalidUsage) {
          sawUsage = true;
          EXPECT_NE(s.message().find("were expected"), std::string::npos) << s.message();
        }
      }
      EXPECT_TRUE(sawUsage) << collName(kind) << " other=" << other << ": " << firstError(st);
    }
  }
}

// A peer may post its last data, finish, then abort or exit while this rank
// is between a pass that found nothing and its health check: the check
// fails, but what the peer sent is still used. (CI once saw a barrier fail
// so, against a peer that had completed it and aborted its communicator.)
class PeerLeavesDuringCheck final : public HealthMonitor {
 public:
  explicit PeerLeavesDuringCheck(std::function<void()> lastSend) : lastSend_(std::move(lastSend)) {}
  bool failed() const override { return false; }
  Status check() override {
    ++checks;
    if (lastSend_) std::exchange(lastSend_, nullptr)();
    return makeError(weftRemoteError, "rank 1 died in the middle of a collective");
  }
  int checks = 0;

 private:
  std::function<void()> lastSend_;
};

// A wait's spin ends with its first health check: on an oversubscribed host
// after a few dozen rounds (the peer it waits for may need this CPU),
// otherwise after a couple of thousand.
class CountingHealth final : public HealthMonitor {
 public:
  explicit CountingHealth(bool crowded) : crowded_(crowded) {}
  bool failed() const override { return false; }
  Status check() override {
    ++checks;
    return Status::ok();
  }
  bool oversubscribed() const override { return crowded_; }
  int checks = 0;

 private:
  bool crowded_;
};

int idleRoundsBeforeFirstCheck(bool crowded) {
  CountingHealth health(crowded);
  Progress progress(health);
  for (int round = 0; round < 100000; ++round) {
    if (!progress.idle().isOk() || health.checks > 0) return round;
  }
  return -1;
}

// The first check comes where the spin ends and the yields begin: at once
// on an oversubscribed host, after the long spin otherwise.
TEST(AlgorithmsTest, AWaitOnAnOversubscribedHostYieldsAtOnce) {
  const int crowded = idleRoundsBeforeFirstCheck(true);
  const int roomy = idleRoundsBeforeFirstCheck(false);
  EXPECT_EQ(crowded, 0);
  EXPECT_GE(roomy, 1000);
}

void sendChunk(MemChannel& ch, const void* data, size_t bytes) {
  void* slot = ch.tryAcquire();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, data, bytes);
  ch.commit(bytes);
}

// Rank 0's side of a one-element int32 direct allreduce, in place; the test
// plays the other rank.
Status loneDirectAllReduce(World& w, HealthMonitor& health, int32_t* value) {
  TestContext ctx(w, 0, &health);
  CollArgs a;
  a.send = a.recv = value;
  a.count = 1;
  a.dtype = weftInt32;
  return directAllReduce(ctx, a);
}

TEST(AlgorithmsTest, DataSentBeforeAFailedCheckIsStillUsed) {
  {  // direct allreduce: the peer's contribution lands during the check
    World w(2, kTiny, std::chrono::seconds(5));
    const int32_t theirs = 40;
    PeerLeavesDuringCheck health([&] { sendChunk(w.channel(1, 0), &theirs, sizeof theirs); });
    int32_t mine = 2;
    const Status st = loneDirectAllReduce(w, health, &mine);
    EXPECT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(mine, 42);
    EXPECT_EQ(health.checks, 1);
  }
  {  // a receive of two chunks, both sent during the check
    World w(2, kTiny, std::chrono::seconds(5));
    std::vector<char> sent(2 * kTiny.slotBytes), got(sent.size(), 0);
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 + 1);
    PeerLeavesDuringCheck health([&] {
      sendChunk(w.channel(1, 0), sent.data(), kTiny.slotBytes);
      sendChunk(w.channel(1, 0), sent.data() + kTiny.slotBytes, kTiny.slotBytes);
    });
    TestContext ctx(w, 0, &health);
    const P2POp ops[] = {{false, 1, got.data(), got.size()}};
    const Status st = runP2P(ctx, ops);
    EXPECT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(got, sent);
    EXPECT_EQ(w.channel(1, 0).unread(), 0u);
  }
  {  // nothing comes: the failure is reported after that one more pass
    World w(2, kTiny, std::chrono::seconds(5));
    PeerLeavesDuringCheck health(nullptr);
    int32_t mine = 2;
    const Status st = loneDirectAllReduce(w, health, &mine);
    EXPECT_EQ(st.code(), weftRemoteError) << st.message();
    EXPECT_NE(st.message().find("died"), std::string::npos) << st.message();
    EXPECT_EQ(health.checks, 2);
  }
}

TEST(AlgorithmsTest, MissingRankTimesOut) {
  const auto start = Clock::now();
  auto st = runWorld(
      3, kTiny,
      [](CollContext& ctx) {
        if (ctx.rank() == 2) return Status::ok();  // never joins
        std::vector<float> buf(4000, 1);
        CollArgs a;
        a.send = a.recv = buf.data();
        a.count = buf.size();
        return ringAllReduce(ctx, a);
      },
      std::chrono::milliseconds(500), false);
  EXPECT_EQ(st[0].code() == weftTimeout || st[1].code() == weftTimeout, true) << firstError(st);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// ---------------------------------------------------------------------------
// Selection.

const char* pick(CollKind kind, size_t count, int n = 4, size_t chunk = 65536) {
  CollArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = weftFloat32;
  return selectAlgorithm(a, n, chunk).name;
}

TEST(AlgorithmsTest, SelectDefaults) {
  ScopedAlgoEnv scoped(kMeasuredRuleAlgorithms);
  EXPECT_STREQ(pick(CollKind::AllReduce, 1), "direct");
  EXPECT_STREQ(pick(CollKind::AllReduce, 16384), "direct");   // 64 KiB x 4 = 256 KiB
  EXPECT_STREQ(pick(CollKind::AllReduce, 16384, 8), "ring");  // 512 KiB in all
  EXPECT_STREQ(pick(CollKind::AllReduce, 16385), "ring");     // over one slot
  EXPECT_STREQ(pick(CollKind::Broadcast, 1), "chain");
  EXPECT_STREQ(pick(CollKind::Reduce, 1), "chain");
  EXPECT_STREQ(pick(CollKind::AllGather, 1), "ring");
  EXPECT_STREQ(pick(CollKind::ReduceScatter, 1), "ring");
  EXPECT_STREQ(pick(CollKind::AllToAll, 1), "pairwise");
  EXPECT_STREQ(pick(CollKind::Gather, 1), "direct");
  EXPECT_STREQ(pick(CollKind::Scatter, 1), "direct");
  for (const Algorithm& a : allAlgorithms()) {
    EXPECT_TRUE(a.name && *a.name && a.description && *a.description && a.cost && *a.cost);
    EXPECT_NE(a.run, nullptr);
  }
}

const char* pickWith(ChannelConfig cfg, CollKind kind, size_t count, int n = 4) {
  World w(n, cfg, std::chrono::seconds(1));
  TestContext ctx(w, n - 1);
  CollArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = weftFloat32;
  return selectAlgorithm(a, ctx).name;
}

TEST(AlgorithmsTest, SelectSingleCopy) {
  {
    ScopedAlgoEnv scoped(kMeasuredRuleAlgorithms);
    // kRoomyDirect: single copy from 100000 bytes (25000 floats) per peer.
    for (int n : {2, 4}) {
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 24999, n), "ring");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 25000, n), "direct");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllToAll, 24999, n), "pairwise");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllToAll, 25000, n), "direct");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::Broadcast, 24999, n), "chain");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::Broadcast, 25000, n), "chain");  // asked only
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllReduce, 1 << 20, n), "ring");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::Reduce, 1 << 20, n), "chain");
      EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::ReduceScatter, 1 << 20, n), "ring");
    }
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 1 << 20, 1), "ring");
    EXPECT_STREQ(pickWith(kRoomy, CollKind::AllGather, 1 << 20), "ring");  // cannot publish
    EXPECT_STREQ(pickWith(kRoomy, CollKind::AllToAll, 1 << 20), "pairwise");
    EXPECT_STREQ(pickWith(kRoomy, CollKind::Broadcast, 1 << 20), "chain");
    EXPECT_STREQ(pick(CollKind::AllGather, 1 << 20), "ring");  // the overload without context
  }
  {
    ScopedAlgoEnv scoped("^direct,recdoubling");
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 1 << 20), "ring");
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllToAll, 1 << 20), "pairwise");
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::Broadcast, 1 << 20), "chain");
  }
  {
    ScopedAlgoEnv scoped("allgather:direct;broadcast:direct");
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 1), "direct");  // forced
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::Broadcast, 1), "direct");
    EXPECT_STREQ(pickWith(kRoomyDirect, CollKind::AllGather, 1, 1), "direct");
    EXPECT_STREQ(pickWith(kRoomy, CollKind::AllGather, 1), "ring");  // cannot publish
    EXPECT_STREQ(pick(CollKind::Broadcast, 1), "chain");
  }
}

TEST(AlgorithmsTest, SelectFromEnv) {
  {
    ScopedAlgoEnv scoped("Ring");
    EXPECT_STREQ(pick(CollKind::AllReduce, 1), "ring");
    EXPECT_STREQ(pick(CollKind::Broadcast, 1), "chain");  // nothing allowed: default
  }
  {
    ScopedAlgoEnv scoped("^DIRECT");
    EXPECT_STREQ(pick(CollKind::AllReduce, 1), "ring");
    EXPECT_STREQ(pick(CollKind::Gather, 1), "direct");  // nothing left: default
  }
  {
    ScopedAlgoEnv scoped("allreduce:direct,ring;broadcast:chain");
    EXPECT_STREQ(pick(CollKind::AllReduce, 1), "direct");
    EXPECT_STREQ(pick(CollKind::AllReduce, 16384, 8), "ring");
  }
  {
    ScopedAlgoEnv scoped(" ring ; AllReduce : Direct ");          // the specific section wins
    EXPECT_STREQ(pick(CollKind::AllReduce, 16384, 8), "direct");  // fits one slot
    EXPECT_STREQ(pick(CollKind::AllReduce, 16385), "ring");       // does not: default
  }
  {
    ScopedAlgoEnv scoped("all_reduce:^ring");
    EXPECT_STREQ(pick(CollKind::AllReduce, 16384, 8), "direct");
  }
  {
    // Excluding both defaults leaves the others (tree, rhd, ...) to choose from.
    ScopedAlgoEnv scoped("allreduce:^ring,direct");
    for (size_t count : {size_t(1), size_t(100000)}) {
      const std::string_view name = pick(CollKind::AllReduce, count);
      EXPECT_NE(name, "ring") << count;
      EXPECT_NE(name, "direct") << count;
    }
  }
  {
    ScopedAlgoEnv scoped("bogus;nocoll:ring");
    EXPECT_STREQ(pick(CollKind::AllReduce, 1), "direct");
    EXPECT_STREQ(pick(CollKind::AllReduce, 100000), "ring");
  }
}

// ---------------------------------------------------------------------------
// The algorithms chosen only through WEFT_ALGO: each forced in turn at 1..8
// ranks (powers of two and not), counts 0, 1, odd, and many chunks.

const int kEveryRankCount[] = {1, 2, 3, 4, 5, 6, 7, 8};
const weftDataType_t kForcedDtypes[] = {weftFloat32, weftInt32, weftFloat16, weftInt8};
constexpr size_t kSeveralChunks = 5003;  // ~80 tiny slots of floats

void forcedAllReduce(const char* env, const char* name) {
  ScopedAlgoEnv scoped(env);
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kEveryRankCount) {
      std::vector<Case> cases;
      for (weftDataType_t dt : kForcedDtypes) {
        for (Op op : kAllOps) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(allReduceCase(name, dt, op, count, n, cfg, inPlace));
            }
          }
        }
      }
      const size_t big = cfg.slotBytes == kTiny.slotBytes ? kSeveralChunks : kLargeCount;
      cases.push_back(allReduceCase(name, weftFloat32, Op::Sum, big, n, cfg, false));
      cases.push_back(allReduceCase(name, weftFloat16, Op::Avg, big, n, cfg, true));
      cases.push_back(allReduceCase(name, weftInt8, Op::PreMulSum, big + 1, n, cfg, false));
      cases.push_back(allReduceCase(name, weftFloat64, Op::Max, big, n, cfg, true));
      runCases(n, cfg, cases);
    }
  }
}

TEST(AlgorithmsTest, AllReduceTree) {
  forcedAllReduce("allreduce:tree", "tree");
}
TEST(AlgorithmsTest, AllReduceRhd) {
  forcedAllReduce("allreduce:rhd", "rhd");
}
TEST(AlgorithmsTest, AllReduceRecDoubling) {
  forcedAllReduce("recdoubling", "recdoubling");
}

void forcedReduceScatter(const char* env) {
  ScopedAlgoEnv scoped(env);
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kEveryRankCount) {
      std::vector<Case> cases;
      for (weftDataType_t dt : kForcedDtypes) {
        for (Op op : kAllOps) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(reduceScatterCase(dt, op, count, n, cfg, inPlace));
            }
          }
        }
      }
      cases.push_back(reduceScatterCase(weftFloat32, Op::Sum, kSeveralChunks, n, cfg, n % 2 == 1));
      cases.push_back(reduceScatterCase(weftFloat16, Op::Avg, kSeveralChunks, n, cfg, false));
      cases.push_back(reduceScatterCase(weftInt8, Op::PreMulSum, kSeveralChunks, n, cfg, true));
      runCases(n, cfg, cases);
    }
  }
}

TEST(AlgorithmsTest, ReduceScatterRhd) {
  forcedReduceScatter("reducescatter:rhd");
}

TEST(AlgorithmsTest, ReduceBinomial) {
  ScopedAlgoEnv scoped("reduce:binomial");
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kEveryRankCount) {
      std::vector<Case> cases;
      for (int root : rootsFor(n)) {
        for (weftDataType_t dt : kForcedDtypes) {
          for (Op op : kAllOps) {
            for (size_t count : kSmallCounts) {
              for (bool inPlace : {false, true}) {
                cases.push_back(reduceCase(dt, op, count, n, root, cfg, inPlace));
              }
            }
          }
        }
      }
      cases.push_back(reduceCase(weftFloat32, Op::Sum, kLargeCount, n, n / 2, cfg, false));
      cases.push_back(reduceCase(weftFloat16, Op::Avg, kSeveralChunks, n, n - 1, cfg, true));
      cases.push_back(reduceCase(weftInt32, Op::PreMulSum, kSeveralChunks, n, 0, cfg, false));
      runCases(n, cfg, cases);
    }
  }
}

// The tree engine claims any slot count: with one slot per channel, an up
// and a down stream sharing a channel (the allreduce's lag) must still not
// wait on each other.
TEST(AlgorithmsTest, TreesWithOneSlotPerChannel) {
  constexpr ChannelConfig kOneSlot{256, 1};
  ScopedAlgoEnv scoped("allreduce:tree,reduce:binomial,broadcast:binomial");
  for (int n : kEveryRankCount) {
    std::vector<Case> cases;
    for (bool inPlace : {false, true}) {
      cases.push_back(
          allReduceCase("tree", weftFloat32, Op::Sum, kSeveralChunks, n, kOneSlot, inPlace));
      cases.push_back(
          allReduceCase("tree", weftInt8, Op::Avg, kSeveralChunks + 1, n, kOneSlot, inPlace));
      cases.push_back(
          reduceCase(weftFloat32, Op::Max, kSeveralChunks, n, n / 2, kOneSlot, inPlace));
      cases.push_back(broadcastCase(weftInt8, kSeveralChunks, n, n - 1, kOneSlot, inPlace));
    }
    runCases(n, kOneSlot, cases);
  }
}

// Data movement forced to one algorithm, every rank count 1..8, FIFO channels.
void forcedMove(const char* env, bool rooted, MoveCaseFn make) {
  ScopedAlgoEnv scoped(env);
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kEveryRankCount) {
      std::vector<Case> cases;
      std::vector<int> roots = rooted ? rootsFor(n) : std::vector<int>{0};
      if (rooted && n > 2) roots.push_back(n / 2);
      for (int root : roots) {
        for (weftDataType_t dt : kMoveDtypes) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(make(dt, count, n, root, cfg, inPlace));
            }
          }
        }
      }
      cases.push_back(make(weftFloat32, kLargeCount / n, n, n - 1, cfg, false));
      cases.push_back(make(weftInt8, kSeveralChunks, n, n / 2, cfg, true));
      runCases(n, cfg, cases);
    }
  }
}

TEST(AlgorithmsTest, BroadcastBinomial) {
  forcedMove("broadcast:binomial", true, broadcastCase);
}
TEST(AlgorithmsTest, AllGatherRecDoubling) {
  forcedMove("allgather:recdoubling", false, allGatherCase);
}
TEST(AlgorithmsTest, AllToAllBruck) {
  forcedMove("alltoall:bruck", false, allToAllCase);
}

// Every forced name reaches its own entry, for its kinds only, and the
// default choice does not change.
TEST(AlgorithmsTest, SelectForcedNewAlgorithms) {
  struct Want {
    const char* env;
    CollKind kind;
    const char* name;
  };
  const Want wants[] = {
      {"tree", CollKind::AllReduce, "tree"},
      {"rhd", CollKind::AllReduce, "rhd"},
      {"rhd", CollKind::ReduceScatter, "rhd"},
      {"recdoubling", CollKind::AllReduce, "recdoubling"},
      {"recdoubling", CollKind::AllGather, "recdoubling"},
      {"binomial", CollKind::Broadcast, "binomial"},
      {"binomial", CollKind::Reduce, "binomial"},
      {"bruck", CollKind::AllToAll, "bruck"},
      {"hier", CollKind::AllReduce, "hier"},
      {"hier", CollKind::ReduceScatter, "hier"},
      {"hier", CollKind::AllGather, "hier"},
      {"pairwise", CollKind::AllToAllV, "pairwise"},
      {"tree", CollKind::Broadcast, "chain"},  // no tree broadcast: default
      {nullptr, CollKind::AllToAllV, "pairwise"},
  };
  for (const Want& w : wants) {
    ScopedAlgoEnv scoped(w.env);
    for (size_t count : {size_t{1}, size_t{1} << 20}) {
      EXPECT_STREQ(pick(w.kind, count), w.name) << (w.env ? w.env : "default");
    }
  }
  ScopedAlgoEnv scoped(nullptr);
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 22}) {
    for (CollKind k : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather,
                       CollKind::Broadcast, CollKind::Reduce, CollKind::AllToAll}) {
      for (const char* fresh : {"tree", "rhd", "recdoubling", "binomial", "bruck", "hier"})
        EXPECT_STRNE(pick(k, count), fresh);
    }
  }
}

// Both trees of the double binary tree are trees (every rank reaches the
// root, at most two children) for every rank count up to 64, and for n > 2
// no rank is a leaf of both.
TEST(AlgorithmsTest, DoubleTreeLayout) {
  for (int n = 1; n <= 64; ++n) {
    std::vector<int> kids[2];
    for (int t = 0; t < 2; ++t) {
      kids[t].assign(n, 0);
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const int p = doubleTreeParent(t, r, n);
        if (p < 0) {
          ++roots;
          continue;
        }
        ASSERT_LT(p, n);
        ASSERT_NE(p, r);
        ++kids[t][p];
        int x = r, hops = 0;
        while (doubleTreeParent(t, x, n) >= 0 && hops <= n) {
          x = doubleTreeParent(t, x, n);
          ++hops;
        }
        EXPECT_LE(hops, n) << "cycle: n=" << n << " tree " << t << " rank " << r;
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
      for (int r = 0; r < n; ++r) EXPECT_LE(kids[t][r], 2) << "n=" << n << " rank " << r;
    }
    if (n > 2) {
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(kids[0][r] > 0 || kids[1][r] > 0)
            << "n=" << n << ": rank " << r << " is a leaf of both trees";
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Online tuning (online.h): the model's choice and its runners-up run in
// three passes, each pass a segment of every candidate in turn, starting one
// candidate later each pass; then every rank keeps the one whose slowest
// rank's median segment mean was fastest, never counting a segment's
// untimed first call.
// OnlineTuner's syncFromUs for segments that never end in a wait.
constexpr double kNoSync = std::numeric_limits<double>::infinity();

// n ranks on one host with room for each, the model's tuner for them and
// a float allreduce of 1024 elements whose trials the tests script.
struct TrialWorld {
  explicit TrialWorld(int n) : shape(shapeFor(n)), tuner(shape, defaultTunerParams()) {
    a.kind = CollKind::AllReduce;
    a.count = 1024;
    a.dtype = weftFloat32;
  }
  static TunerShape shapeFor(int n) {
    TunerShape s;
    s.nranks = n;
    s.ranksPerHost = n;
    s.slotBytes = kRoomy.slotBytes;
    return s;
  }
  // Every candidate the model ranks, up to three.
  std::vector<Choice> candidates(const CollArgs& call) const {
    return trialChoices(call.kind, call.count * dtypeSize(call.dtype), shape, defaultTunerParams(),
                        allAlgorithms(), envRestrictions(), 1e9, 3);
  }
  // Runs a's trials to their end on n ranks (OnlineTuner(rounds, 0, 1e9, 3,
  // syncFromUs)): call `call` on rank r reports us(r, call). Returns rank
  // 0's decision.
  const Algorithm* decide(int n, int rounds, double syncFromUs,
                          const std::function<double(int rank, int call)>& us) const {
    const Algorithm* kept = nullptr;
    const int calls = OnlineTuner::kPasses * static_cast<int>(candidates(a).size()) *
                      OnlineTuner::segmentFor(rounds);
    const auto st = runWorld(n, kRoomy, [&](CollContext& base) -> Status {
      auto& ctx = static_cast<TestContext&>(base);
      ctx.useTuner(&tuner);
      OnlineTuner online(rounds, 0, 1e9, 3, syncFromUs);
      for (int call = 0; call < calls; ++call) {
        (void)online.choose(a, ctx);
        WEFT_RETURN_IF_ERROR(online.ran(ctx, us(ctx.rank(), call)));
      }
      if (online.pending()) return makeError(weftInternalError, "still pending");
      const Algorithm* mine = online.choose(a, ctx).alg;
      if (ctx.rank() == 0) kept = mine;
      return Status::ok();
    });
    EXPECT_EQ(firstError(st), "");
    return kept;
  }
  TunerShape shape;
  Tuner tuner;
  CollArgs a;
};

TEST(OnlineTuner, EveryRankKeepsTheCandidateWhoseSlowestRankWasFastest) {
  static_assert(OnlineTuner::kPasses == 3, "the times below are written for three passes");
  const int n = 4, rounds = 7;  // 6 timed calls per candidate: 2 per segment
  const int segment = OnlineTuner::segmentFor(rounds);
  ASSERT_EQ(segment, 3);
  const TrialWorld world(n);
  const Tuner& tuner = world.tuner;
  const CollArgs& a = world.a;
  const std::vector<Choice> candidates = world.candidates(a);
  ASSERT_EQ(candidates.size(), 3u);
  CollArgs close = a;
  close.count = 1000;
  const std::vector<Choice> closeCall = world.candidates(close);
  ASSERT_GE(closeCall.size(), 2u);
  CollArgs cheap = a;
  cheap.count = 100;
  const size_t cheapCandidates = world.candidates(cheap).size();
  ASSERT_GE(cheapCandidates, 2u);
  const int m = static_cast<int>(candidates.size());
  const int target = m - 1;  // the model's least favourite
  const auto st = runWorld(n, kRoomy, [&](CollContext& base) -> Status {
    auto& ctx = static_cast<TestContext&>(base);
    ctx.useTuner(&tuner);
    OnlineTuner online(rounds, 0, 1e9, 3);
    std::vector<int> firstOfPass;
    for (int call = 0; call < OnlineTuner::kPasses * m * segment; ++call) {
      const Choice c = online.choose(a, ctx);
      const int pass = call / (m * segment), within = call % segment;
      const int k = (call / segment % m + pass) % m;  // pass p starts at candidate p
      if (call % (m * segment) == 0) firstOfPass.push_back(k);
      if (c.alg != candidates[k].alg)
        return makeError(weftInternalError, "call %d ran %s, not %s", call, c.alg->name,
                         candidates[k].alg->name);
      if (!online.pending()) return makeError(weftInternalError, "call %d is not pending", call);
      // Untimed calls: the middle candidate looks fastest by far. Timed
      // calls, two per segment:
      // - the model's choice: 10 on ranks 0-2; on rank 3 50 then 10 in
      //   every segment (mean 30; its last call alone would say 10);
      // - the target: 20, but on rank 1 segments of 4, 20 and 60 (median
      //   20; mean 28, within 10% of the model's 30; best segment 4);
      // - the middle one: 5, but on rank 2 segments of 5, 40 and 40 (median
      //   40): fastest by its best calls, its best segment or the mean over
      //   ranks, slowest by the slowest rank's median.
      double us = 0;
      if (within == 0) {
        us = k == 1 ? 0.001 : 1e6;
      } else if (k == 0) {
        us = ctx.rank() == 3 ? (within == 1 ? 50 : 10) : 10;
      } else if (k == target) {
        us = ctx.rank() == 1 ? (pass == 0 ? 4 : pass == 1 ? 20 : 60) : 20;
      } else {
        us = ctx.rank() == 2 && pass > 0 ? 40 : 5;
      }
      WEFT_RETURN_IF_ERROR(online.ran(ctx, us));
    }
    if (firstOfPass != std::vector<int>{0, 1, 2})
      return makeError(weftInternalError, "the passes did not start with each candidate in turn");
    if (online.pending()) return makeError(weftInternalError, "still pending after agreeing");
    for (int again = 0; again < 3; ++again) {
      const Choice c = online.choose(a, ctx);
      if (c.alg != candidates[target].alg)
        return makeError(weftInternalError, "kept %s, not %s", c.alg->name,
                         candidates[target].alg->name);
      WEFT_RETURN_IF_ERROR(online.ran(ctx, 1e9));  // no longer a trial: ignored
    }
    // Another size: the target is only 5% faster than the model's choice,
    // within the noise of a few calls, so the model's choice stays.
    const int mb = static_cast<int>(closeCall.size());
    for (int call = 0; call < OnlineTuner::kPasses * mb * segment; ++call) {
      const int k = OnlineTuner::trialCall(call, mb, segment).candidate;
      if (online.choose(close, ctx).alg != closeCall[k].alg)
        return makeError(weftInternalError, "close call %d ran another candidate", call);
      WEFT_RETURN_IF_ERROR(online.ran(ctx, k == 0 ? 20 : k == mb - 1 ? 19 : 40));
    }
    if (const Choice c = online.choose(close, ctx); c.alg != closeCall[0].alg)
      return makeError(weftInternalError, "5%% faster replaced the model's %s with %s",
                       closeCall[0].alg->name, c.alg->name);
    // With a budget far above the calls' predicted time, each candidate runs
    // the most calls, and the tuner stays pending until the last of them.
    OnlineTuner budgeted(rounds, 1e9, 1e9, 3);
    const int most = OnlineTuner::segmentFor(OnlineTuner::kMostRounds);
    int calls = 0;
    const Algorithm* first = budgeted.choose(cheap, ctx).alg;
    while (budgeted.pending() && calls < 1000) {
      WEFT_RETURN_IF_ERROR(budgeted.ran(ctx, 1));
      ++calls;
      const Algorithm* now = budgeted.choose(cheap, ctx).alg;
      if (calls < most && now != first)
        return makeError(weftInternalError, "call %d left the first candidate early", calls);
    }
    if (calls != static_cast<int>(cheapCandidates) * OnlineTuner::kPasses * most)
      return makeError(weftInternalError, "%d trial calls, not %zu x %d x %d", calls,
                       cheapCandidates, OnlineTuner::kPasses, most);
    return Status::ok();
  });
  EXPECT_EQ(firstError(st), "");
}

// Long segments leave their longest call out: one stall of a time slice in
// a segment of five calls is the host's, not the algorithm's. Two are not.
TEST(OnlineTuner, LongSegmentsLeaveTheirLongestCallOut) {
  const int n = 3, rounds = OnlineTuner::kMostRounds;
  const int segment = OnlineTuner::segmentFor(rounds);
  ASSERT_GE(segment - 1, OnlineTuner::kTrimFrom);
  const TrialWorld world(n);
  const CollArgs& a = world.a;
  const std::vector<Choice> candidates = world.candidates(a);
  ASSERT_GE(candidates.size(), 2u);
  const int m = static_cast<int>(candidates.size());
  // Every candidate but the model's choice takes 12 us a call. The model's
  // choice takes 10, but on rank 1 one call of 400 lands in each of the
  // first two passes: untrimmed, that rank's median segment is 88 and a
  // runner-up would win; trimmed, it is 10. With two such calls in each of
  // those segments, the trimmed mean is (3 x 10 + 400) / 4 = 107.5 and the
  // runner-up wins.
  auto decide = [&](int stalls) {
    return world.decide(n, rounds, kNoSync, [&](int rank, int call) {
      const OnlineTuner::TrialCall tc = OnlineTuner::trialCall(call, m, segment);
      const int within = call % segment;
      if (!tc.timed) return 1e6;
      if (tc.candidate == 0 && rank == 1 && tc.pass < 2 && within >= 1 && within <= stalls)
        return 400.0;
      return tc.candidate == 0 ? 10.0 : 12.0;
    });
  };
  EXPECT_EQ(decide(1), candidates[0].alg);
  const Algorithm* twice = decide(2);
  EXPECT_NE(twice, candidates[0].alg);
  EXPECT_NE(twice, nullptr);
}

// With segments synchronised (as WEFT_TUNER_ONLINE runs them), a rank that
// is still busy with a candidate's work when its peers end the segment
// charges them the wait: here rank 1 reports the model's choice at 10 us a
// call but returns to the tuner 20 ms late at the end of each of its
// segments, as a root whose sends sit in socket buffers leaves its peers
// to drain them. Unsynchronised, every rank's figure says 10 us and the
// model's choice stays; synchronised, the others' figures carry the 20 ms
// and a runner-up at 12 us wins.
TEST(OnlineTuner, SynchronisedSegmentsChargeALaggingRanksWork) {
  const int n = 3, rounds = 7;
  const int segment = OnlineTuner::segmentFor(rounds);
  const TrialWorld world(n);
  const CollArgs& a = world.a;
  const std::vector<Choice> candidates = world.candidates(a);
  ASSERT_GE(candidates.size(), 2u);
  const int m = static_cast<int>(candidates.size());
  auto decide = [&](bool sync) {
    return world.decide(n, rounds, sync ? 0 : kNoSync, [&](int rank, int call) {
      const OnlineTuner::TrialCall tc = OnlineTuner::trialCall(call, m, segment);
      if (tc.candidate == 0 && rank == 1 && (call + 1) % segment == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return tc.candidate == 0 ? 10.0 : 12.0;
    });
  };
  EXPECT_EQ(decide(false), candidates[0].alg);
  const Algorithm* synced = decide(true);
  EXPECT_NE(synced, candidates[0].alg);
  EXPECT_NE(synced, nullptr);
}

// Hierarchical algorithms over faked host layouts (CollContext::hostOf).

struct HostsScope {
  explicit HostsScope(std::vector<int> hosts) { gHosts = std::move(hosts); }
  ~HostsScope() { gHosts.clear(); }
};

TEST(AlgorithmsTest, Hierarchical) {
  ScopedAlgoEnv scoped("hier");
  const std::vector<std::vector<int>> layouts = {
      {0, 0},
      {0, 1},
      {0, 0, 1, 1},
      {0, 1, 0, 1},              // hosts interleaved
      {0, 0, 0, 1, 1, 1},        // 2 hosts x 3
      {0, 0, 1, 1, 2, 2},        // 3 hosts x 2
      {0, 0, 0, 0, 1, 1, 1, 1},  // 2 x 4
      {3, 2, 1, 0, 3, 2, 1, 0},  // 4 x 2, ids out of order
      {0, 0, 0, 1, 1},           // uneven: falls back to the flat algorithms
      {0, 1, 2, 0, 1, 2, 0},     // uneven
  };
  for (const auto& layout : layouts) {
    HostsScope hosts(layout);
    const int n = static_cast<int>(layout.size());
    for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
      std::vector<Case> cases;
      for (weftDataType_t dt : {weftFloat32, weftInt8}) {
        for (Op op : kAllOps) {
          for (size_t count : kSmallCounts) {
            for (bool inPlace : {false, true}) {
              cases.push_back(allReduceCase("hier", dt, op, count, n, cfg, inPlace));
              cases.push_back(reduceScatterCase(dt, op, count, n, cfg, inPlace));
            }
          }
        }
      }
      for (weftDataType_t dt : {weftFloat16, weftInt8}) {
        for (size_t count : kSmallCounts) {
          for (bool inPlace : {false, true}) {
            cases.push_back(allGatherCase(dt, count, n, 0, cfg, inPlace));
          }
        }
      }
      cases.push_back(allReduceCase("hier", weftFloat32, Op::Avg, kSeveralChunks, n, cfg, true));
      // The tuner's segment counts (CollArgs::segments), one per segment up
      // to more segments than elements (cut down to the count).
      for (size_t k : {1u, 3u, 8u, 64u}) {
        cases.push_back(
            allReduceCase("hier", weftFloat32, Op::Sum, kSeveralChunks, n, cfg, false, k));
        cases.push_back(allReduceCase("hier", weftInt8, Op::Max, 37, n, cfg, true, k));
      }
      cases.push_back(reduceScatterCase(weftFloat16, Op::PreMulSum, kSeveralChunks, n, cfg, false));
      // Hosts of consecutive ranks reduce each host's blocks in the input
      // where they are (no reordering copy), in place too.
      cases.push_back(reduceScatterCase(weftFloat32, Op::Sum, kSeveralChunks, n, cfg, true));
      cases.push_back(allGatherCase(weftFloat32, kSeveralChunks, n, 0, cfg, false));
      cases.push_back(allGatherCase(weftInt8, kSeveralChunks, n, 0, cfg, true));
      runCases(n, cfg, cases);
    }
  }
}

// ---------------------------------------------------------------------------
// All-to-all-v: random uneven counts with zeros, blocks in shuffled order with
// gaps that must stay untouched.

Case allToAllVCase(weftDataType_t dt, int n, ChannelConfig cfg, unsigned seed, size_t maxCount) {
  struct State {
    std::vector<std::vector<size_t>> sc, sd, rc, rd;
    std::vector<Bytes> send, recv, want;
  };
  auto s = std::make_shared<State>();
  const size_t es = dtypeSize(dt);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto rnd = [&x](size_t bound) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return bound == 0 ? size_t{0} : static_cast<size_t>(x % bound);
  };
  std::vector<std::vector<size_t>> counts(n, std::vector<size_t>(n));
  for (auto& row : counts)
    for (size_t& c : row) c = rnd(4) == 0 ? 0 : rnd(maxCount + 1);
  // Lays out n blocks of the given sizes in a shuffled order, a gap of one
  // element before each; returns the displacements and the total.
  auto layout = [&](const std::vector<size_t>& sizes, std::vector<size_t>& displs) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rnd(i + 1)]);
    displs.assign(n, 0);
    size_t at = 0;
    for (int i : order) {
      at += 1;
      displs[i] = at;
      at += sizes[i];
    }
    return at + 1;
  };
  s->sc.resize(n);
  s->sd.resize(n);
  s->rc.resize(n);
  s->rd.resize(n);
  s->send.resize(n);
  s->recv.resize(n);
  s->want.resize(n);
  for (int r = 0; r < n; ++r) {
    s->sc[r] = counts[r];
    for (int p = 0; p < n; ++p) s->rc[r].push_back(counts[p][r]);
    const size_t sendTotal = layout(s->sc[r], s->sd[r]);
    const size_t recvTotal = layout(s->rc[r], s->rd[r]);
    s->send[r].assign(sendTotal * es, 0x11);
    s->recv[r].assign(recvTotal * es, 0xEE);
    s->want[r] = s->recv[r];
    for (int p = 0; p < n; ++p) {
      fillDistinct(dt, r * n + p, s->send[r].data() + s->sd[r][p] * es, s->sc[r][p]);
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      fillDistinct(dt, p * n + r, s->want[r].data() + s->rd[r][p] * es, s->rc[r][p]);
    }
  }
  Case c;
  c.name =
      describe("alltoallv", dt, Op::Sum, maxCount, n, cfg, false) + " seed=" + std::to_string(seed);
  c.run = viaSelector([=](int r, CollArgs& a) {
    a.kind = CollKind::AllToAllV;
    a.send = s->send[r].data();
    a.recv = s->recv[r].data();
    a.dtype = dt;
    a.sendCounts = s->sc[r].data();
    a.sendDispls = s->sd[r].data();
    a.recvCounts = s->rc[r].data();
    a.recvDispls = s->rd[r].data();
  });
  c.verify = [=]() -> std::string {
    for (int r = 0; r < n; ++r) {
      if (s->recv[r] != s->want[r]) return "rank " + std::to_string(r) + " got the wrong data";
    }
    return "";
  };
  return c;
}

TEST(AlgorithmsTest, AllToAllV) {
  for (ChannelConfig cfg : {kTiny, kRoomy, kTinyLazy}) {
    for (int n : kEveryRankCount) {
      std::vector<Case> cases;
      unsigned seed = 1;
      for (weftDataType_t dt : kMoveDtypes) {
        for (size_t maxCount : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
          cases.push_back(allToAllVCase(dt, n, cfg, seed++, maxCount));
        }
      }
      cases.push_back(allToAllVCase(weftFloat32, n, cfg, seed++, 20000));
      cases.push_back(allToAllVCase(weftInt8, n, cfg, seed++, 1000));
      runCases(n, cfg, cases);
    }
  }
}

// A receiver whose recvcounts disagree with the sender's sendcounts fails
// with weftInvalidUsage naming the mismatch, whichever side is larger and
// also when one side is zero or the sizes differ by whole chunks.
TEST(AlgorithmsTest, AllToAllVCountMismatch) {
  struct Bad {
    size_t sends, expects;
  };
  for (Bad bad : {Bad{10, 11}, Bad{11, 10}, Bad{0, 5}, Bad{5, 0}, Bad{128, 192}, Bad{192, 128}}) {
    const int n = 3;
    std::vector<float> send(4096, 1), recv[n];
    for (auto& v : recv) v.assign(4096, 0);
    auto st = runWorld(
        n, kTiny,
        [&](CollContext& ctx) {
          const int r = ctx.rank();
          std::vector<size_t> sc(n, 4), sd(n), rc(n, 4), rd(n);
          for (int p = 0; p < n; ++p) sd[p] = rd[p] = 1000 * p;
          if (r == 0) sc[1] = bad.sends;
          if (r == 1) rc[0] = bad.expects;
          CollArgs a;
          a.kind = CollKind::AllToAllV;
          a.send = send.data();
          a.recv = recv[r].data();
          a.sendCounts = sc.data();
          a.sendDispls = sd.data();
          a.recvCounts = rc.data();
          a.recvDispls = rd.data();
          return pairwiseAllToAllV(ctx, a);
        },
        std::chrono::seconds(20), false);
    EXPECT_EQ(st[1].code(), weftInvalidUsage)
        << bad.sends << " vs " << bad.expects << ": " << st[1].message();
    EXPECT_NE(st[1].message().find("must agree"), std::string::npos) << st[1].message();
  }
  auto st = runWorld(1, kTiny, [](CollContext& ctx) {
    float a[4] = {}, b[4];
    size_t sc = 4, rc = 3, d = 0;
    CollArgs args;
    args.kind = CollKind::AllToAllV;
    args.send = a;
    args.recv = b;
    args.sendCounts = &sc;
    args.recvCounts = &rc;
    args.sendDispls = args.recvDispls = &d;
    return pairwiseAllToAllV(ctx, args);
  });
  EXPECT_EQ(st[0].code(), weftInvalidUsage) << st[0].message();
}

// Mismatched counts end in weftInvalidUsage for the new reducing algorithms too.
TEST(AlgorithmsTest, SizeMismatchNewAlgorithms) {
  for (const char* algo : {"tree", "rhd", "recdoubling", "hier"}) {
    ScopedAlgoEnv scoped(algo);
    std::vector<float> buf[2] = {std::vector<float>(2048, 1), std::vector<float>(2048, 1)};
    auto st = runWorld(
        2, kRoomy,
        [&](CollContext& ctx) {
          CollArgs a;
          a.send = a.recv = buf[ctx.rank()].data();
          a.count = ctx.rank() == 0 ? 1024 : 2048;
          return selectAlgorithm(a, ctx).run(ctx, a);
        },
        std::chrono::seconds(20), false);
    bool sawUsage = false;
    for (const Status& s : st) {
      if (s.code() == weftInvalidUsage) sawUsage = true;
    }
    EXPECT_TRUE(sawUsage) << algo << ": " << firstError(st);
  }
}

TEST(AlgorithmsTest, ChannelProtocolWasFollowed) {
  // Runs last in file order: any commit without acquire, oversized commit or
  // release without peek in the tests above shows here.
  EXPECT_EQ(MemChannel::misuse_.load(), 0);
}

}  // namespace
}  // namespace weft
