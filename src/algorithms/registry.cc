// The algorithm table and the selector.
//
// WEFT_ALGO uses NCCL_ALGO's syntax, case-insensitive: a comma list of
// algorithm names allows only those ("ring,direct"), a leading ^ excludes
// them ("^direct"), and ';'-separated sections may name a collective
// ("allreduce:direct,ring;broadcast:chain"). A section naming a collective
// overrides a plain one for that collective. Where a setting leaves nothing
// that can run, the default rule applies. The variable is parsed once;
// resetAlgorithmSelectionForTesting() makes the next call parse it again.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "algorithms/algorithms.h"
#include "algorithms/select.h"
#include "base/dtype.h"
#include "base/env.h"
#include "base/log.h"

namespace weft {

namespace {

// Lone sends and receives outside a group are a batch of one.
Status singleSend(CollContext& ctx, const CollArgs& a) {
  const P2POp op{true, a.peer, const_cast<void*>(a.send), a.count * dtypeSize(a.dtype)};
  return runP2P(ctx, std::span<const P2POp>(&op, 1));
}
Status singleRecv(CollContext& ctx, const CollArgs& a) {
  const P2POp op{false, a.peer, a.recv, a.count * dtypeSize(a.dtype)};
  return runP2P(ctx, std::span<const P2POp>(&op, 1));
}

constexpr Algorithm kAlgorithms[] = {
    {CollKind::AllReduce, "ring", "reduce-scatter then all-gather around a ring, pipelined",
     "2(n-1) steps; sends and receives 2(n-1)/n*N, reduces (n-1)/n*N", ringAllReduce},
    {CollKind::AllReduce, "direct",
     "one hop: every rank sends its input to all peers and reduces all n (N <= chunk)",
     "1 step; sends and receives (n-1)*N, reduces (n-1)*N", directAllReduce},
    {CollKind::Broadcast, "chain", "pipelined chain root -> root+1 -> ... -> root-1",
     "n-1+C-1 pipeline steps (C chunks); sends and receives N", chainBroadcast},
    {CollKind::Reduce, "chain", "pipelined chain root+1 -> ... -> root, reducing on the way",
     "n-1+C-1 pipeline steps (C chunks); sends, receives and reduces N", chainReduce},
    {CollKind::AllGather, "ring", "blocks passed around a ring, pipelined",
     "n-1 steps; sends and receives (n-1)/n*N (N = whole output)", ringAllGather},
    {CollKind::ReduceScatter, "ring", "partial sums passed around a ring, pipelined",
     "n-1 steps; sends, receives and reduces (n-1)/n*N (N = whole input)", ringReduceScatter},
    {CollKind::AllToAll, "pairwise", "step s sends to r+s while receiving from r-s",
     "n-1 steps; sends and receives (n-1)/n*N (N = whole buffer)", pairwiseAllToAll},
    {CollKind::Gather, "direct", "every rank sends to the root, polled round-robin",
     "1 step; the root receives (n-1)*N, others send N", directGather},
    {CollKind::Scatter, "direct", "the root sends each rank its block, round-robin",
     "1 step; the root sends (n-1)*N, others receive N", directScatter},
    // Single copy: chosen for messages of at least directMinBytes() per peer
    // where the channels can publish.
    {CollKind::AllGather, "direct",
     "single copy: every rank reads each peer's block straight from its memory",
     "1 step; copies (n-1)/n*N once from the peers' buffers (N = whole output)", directAllGather},
    {CollKind::AllToAll, "direct",
     "single copy: every rank reads its block straight from each peer's memory",
     "1 step; copies (n-1)/n*N once from the peers' buffers (N = whole buffer), +N local in "
     "place",
     directAllToAll},
    {CollKind::Broadcast, "direct",
     "single copy: every non-root reads the message straight from the root's memory",
     "1 step; each non-root copies N once from the root's buffer", directBroadcast},
    // Chosen only when WEFT_ALGO asks for them (the tuner decides otherwise).
    {CollKind::AllReduce, "tree",
     "double binary tree (two complementary trees, half the data each), reduce up and "
     "broadcast down, pipelined",
     "~2log2(n)+C pipeline steps (C chunks); sends and receives <= 3N/2, reduces <= N",
     treeAllReduce},
    {CollKind::AllReduce, "rhd",
     "Rabenseifner: recursive-halving reduce-scatter then recursive-doubling all-gather",
     "2log2(p2) steps (+2 if n != p2 = 2^floor(log2 n)); sends and receives 2(p2-1)/p2*N, "
     "reduces (p2-1)/p2*N",
     rhdAllReduce},
    {CollKind::AllReduce, "recdoubling",
     "recursive doubling: whole buffer swapped with rank r^2^k each step (small messages)",
     "log2(p2) steps (+2 if n != p2); sends, receives and reduces log2(p2)*N",
     recDoublingAllReduce},
    {CollKind::ReduceScatter, "rhd", "recursive halving: the kept half halves each step",
     "log2(p2) steps (+2 if n != p2); sends, receives and reduces ~(p2-1)/p2*N (N = whole input)",
     rhdReduceScatter},
    {CollKind::AllGather, "recdoubling", "recursive doubling: the held blocks double each step",
     "log2(p2) steps (+2 if n != p2); sends and receives ~(n-1)/n*N (N = whole output)",
     recDoublingAllGather},
    {CollKind::Broadcast, "binomial", "binomial tree from the root, pipelined",
     "ceil(log2 n)+C-1 pipeline steps; root sends ceil(log2 n)*N, others receive N",
     binomialBroadcast},
    {CollKind::Reduce, "binomial", "binomial tree to the root, reducing on the way, pipelined",
     "ceil(log2 n)+C-1 pipeline steps; non-roots send N, root receives and reduces "
     "ceil(log2 n)*N",
     binomialReduce},
    {CollKind::AllToAll, "bruck", "Bruck: log n steps of packed blocks (small messages)",
     "ceil(log2 n) steps; sends and receives ~N/2*log2(n) (N = whole buffer)", bruckAllToAll},
    {CollKind::AllToAllV, "pairwise",
     "step s sends to r+s while receiving from r-s, counts checked against the sender's",
     "n-1 steps; sends S and receives R bytes (this rank's totals) plus a header per peer",
     pairwiseAllToAllV},
    {CollKind::AllReduce, "hier",
     "two-level: reduce-scatter within each host, allreduce across hosts per slice, all-gather "
     "within the host",
     "within a host of m ranks 2log2(m) steps and 2(m-1)/m*N; across H hosts 2(H-1) ring steps "
     "and 2(H-1)/H*N/m",
     hierAllReduce},
    {CollKind::ReduceScatter, "hier",
     "two-level: reduce-scatter within each host, then across hosts per slice",
     "within a host of m ranks log2(m) steps and (m-1)/m*N; across H hosts log2(H) steps and "
     "(H-1)/H*N/m (N = whole input)",
     hierReduceScatter},
    {CollKind::AllGather, "hier",
     "two-level: all-gather across hosts per slice, then within each host",
     "across H hosts log2(H) steps and (H-1)/H*N/m; within a host of m ranks log2(m) steps and "
     "(m-1)/m*N (N = whole output)",
     hierAllGather},
    {CollKind::Send, "p2p", "a lone send: one-message batch", "ceil(N/chunk) slots; sends N",
     singleSend},
    {CollKind::Recv, "p2p", "a lone receive: one-message batch", "ceil(N/chunk) slots; receives N",
     singleRecv},
};
constexpr int kNumAlgorithms = sizeof(kAlgorithms) / sizeof(kAlgorithms[0]);
static_assert(kNumAlgorithms <= 32, "masks are 32 bits");
constexpr int kNumKinds = static_cast<int>(CollKind::Recv) + 1;
constexpr size_t kDirectMaxTotalBytes = 256 * 1024;

uint32_t kindMask(CollKind kind) {
  uint32_t m = 0;
  for (int i = 0; i < kNumAlgorithms; ++i) {
    if (kAlgorithms[i].kind == kind) m |= 1u << i;
  }
  return m;
}

// Lower case, without '_', '-' and blanks: "Reduce_Scatter" -> "reducescatter".
std::string normalize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == '-' || std::isspace(static_cast<unsigned char>(c))) continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// The entries only WEFT_ALGO can choose: allowed only where a list names them
// (not by default, not by excluding others). The tuner will choose among
// them; until then the default rule never does.
uint32_t optInMask() {
  static const uint32_t mask = [] {
    uint32_t m = 0;
    for (int i = 0; i < kNumAlgorithms; ++i) {
      const std::string_view name = kAlgorithms[i].name;
      const bool optIn = name == "tree" || name == "rhd" || name == "recdoubling" ||
                         name == "binomial" || name == "bruck" || name == "hier";
      if (optIn) m |= 1u << i;
    }
    return m;
  }();
  return mask;
}

// Which table entries each collective may use.
struct Selection {
  uint32_t allowed[kNumKinds];
};

Selection parse(const std::string& spec) {
  uint32_t general = ~optInMask();
  uint32_t specific[kNumKinds] = {};
  bool hasSpecific[kNumKinds] = {};
  std::string_view rest(spec);
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    std::string_view section = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    int kind = -1;
    if (const size_t colon = section.find(':'); colon != std::string_view::npos) {
      const std::string name = normalize(section.substr(0, colon));
      for (int k = 0; k < kNumKinds; ++k) {
        if (name == normalize(collName(static_cast<CollKind>(k)))) kind = k;
      }
      section = section.substr(colon + 1);
      if (kind < 0) {
        WEFT_WARN(kLogTuning, "WEFT_ALGO: unknown collective '%s' ignored", name.c_str());
        continue;
      }
    }
    std::string list = normalize(section);
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    uint32_t named = 0;
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string name = list.substr(pos, comma - pos);
      pos = comma + 1;
      if (name.empty()) continue;
      uint32_t hit = 0;
      for (int i = 0; i < kNumAlgorithms; ++i) {
        if (name == kAlgorithms[i].name) hit |= 1u << i;
      }
      if (!hit) WEFT_WARN(kLogTuning, "WEFT_ALGO: unknown algorithm '%s' ignored", name.c_str());
      named |= hit;
    }
    const uint32_t mask = exclude ? ~named & ~optInMask() : named;
    if (kind < 0) {
      general = mask;
    } else {
      specific[kind] = mask;
      hasSpecific[kind] = true;
    }
  }
  Selection sel;
  for (int k = 0; k < kNumKinds; ++k) {
    const uint32_t all = kindMask(static_cast<CollKind>(k));
    sel.allowed[k] = (hasSpecific[k] ? specific[k] : general) & all;
    if (sel.allowed[k] == 0 && all != 0) {
      WEFT_WARN(kLogTuning, "WEFT_ALGO='%s' allows no %s algorithm; using the default",
                spec.c_str(), collName(static_cast<CollKind>(k)));
    }
  }
  return sel;
}

}  // namespace

std::vector<uint32_t> parseAlgoSpec(const std::string& spec) {
  const Selection sel = parse(spec);
  return std::vector<uint32_t>(std::begin(sel.allowed), std::end(sel.allowed));
}

namespace {

std::atomic<Selection*> gSelection{nullptr};

const Selection& selection() {
  Selection* sel = gSelection.load(std::memory_order_acquire);
  if (sel) return *sel;
  auto* fresh = new Selection(parse(envString("ALGO").value_or("")));
  if (gSelection.compare_exchange_strong(sel, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *sel;
}

int indexOf(CollKind kind, const char* name) {
  for (int i = 0; i < kNumAlgorithms; ++i) {
    if (kAlgorithms[i].kind == kind && std::string_view(kAlgorithms[i].name) == name) return i;
  }
  return -1;
}

}  // namespace

void resetAlgorithmSelectionForTesting() {
  delete gSelection.exchange(nullptr, std::memory_order_acq_rel);
}

std::span<const Algorithm> allAlgorithms() {
  return kAlgorithms;
}

namespace {

// The choice; canPublish says whether the channels can carry single-copy
// messages, directMin is the per-peer message size from which they should.
const Algorithm& select(const CollArgs& args, int nranks, size_t chunkBytes, bool canPublish,
                        size_t directMin) {
  static const int kRing = indexOf(CollKind::AllReduce, "ring");
  static const int kDirect = indexOf(CollKind::AllReduce, "direct");
  static const int kSingleCopy[] = {indexOf(CollKind::AllGather, "direct"),
                                    indexOf(CollKind::AllToAll, "direct"),
                                    indexOf(CollKind::Broadcast, "direct")};
  const size_t bytes = args.count * dtypeSize(args.dtype);
  const bool fitsOneSlot = bytes <= chunkBytes;
  // Single copy needs peers whose channels publish; one rank needs nothing.
  const bool singleCopyRuns = canPublish || nranks == 1;
  auto isSingleCopy = [&](int i) {
    return std::find(std::begin(kSingleCopy), std::end(kSingleCopy), i) != std::end(kSingleCopy);
  };
  auto runnable = [&](int i) {
    if (i == kDirect) return fitsOneSlot;
    if (isSingleCopy(i)) return singleCopyRuns;
    return true;
  };

  int fallback = -1;
  if (args.kind == CollKind::AllReduce) {
    const bool latencyBound =
        fitsOneSlot && bytes * static_cast<size_t>(nranks) <= kDirectMaxTotalBytes;
    fallback = latencyBound ? kDirect : kRing;
  } else {
    // The first entry of the kind, or its single-copy one for large messages
    // (the per-peer message is `bytes` for every kind that has one).
    const bool singleCopy = canPublish && nranks > 1 && bytes > 0 && bytes >= directMin;
    for (int i = 0; i < kNumAlgorithms && fallback < 0; ++i) {
      if (kAlgorithms[i].kind == args.kind && !isSingleCopy(i)) fallback = i;
    }
    // Broadcast only when asked for (WEFT_ALGO): on 2 ranks its single
    // reader loses to the chain, where root and receiver copy in parallel.
    for (int i : kSingleCopy) {
      if (singleCopy && kAlgorithms[i].kind == args.kind && args.kind != CollKind::Broadcast)
        fallback = i;
    }
  }
  const uint32_t allowed = selection().allowed[static_cast<int>(args.kind)];
  if (allowed & (1u << fallback)) return kAlgorithms[fallback];
  for (int i = 0; i < kNumAlgorithms; ++i) {
    if ((allowed & (1u << i)) && runnable(i)) return kAlgorithms[i];
  }
  return kAlgorithms[fallback];
}

}  // namespace

const Algorithm& selectAlgorithm(const CollArgs& args, CollContext& ctx) {
  const int n = ctx.nranks();
  const bool canPublish = n > 1 && ctx.sendTo((ctx.rank() + 1) % n).canPublish();
  return select(args, n, ctx.chunkBytes(), canPublish, ctx.directMinBytes());
}

const Algorithm& selectAlgorithm(const CollArgs& args, int nranks, size_t chunkBytes) {
  return select(args, nranks, chunkBytes, false, SIZE_MAX);
}

}  // namespace weft
