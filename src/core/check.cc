#include "core/check.h"

#include <map>

#include "algorithms/algorithms.h"
#include "base/dtype.h"
#include "base/env.h"
#include "core/comm.h"

namespace weft {
namespace {

bool reducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}
bool rooted(CollKind k) {
  return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Gather ||
         k == CollKind::Scatter;
}

std::string opText(int32_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < 5) return names[op];
  if (op < 0) return "none";
  return "premulsum#" + std::to_string(op);
}

std::string describe(const CallFingerprint& f) {
  // The table came from peers: range-check before turning ints into enums.
  const bool kindOk = f.kind >= 0 && f.kind <= static_cast<int32_t>(CollKind::Recv);
  const bool dtypeOk = f.dtype >= 0 && f.dtype < weftNumTypes;
  std::string s =
      kindOk ? collName(static_cast<CollKind>(f.kind)) : "kind#" + std::to_string(f.kind);
  s += " count " + std::to_string(f.count) + " dtype " +
       (dtypeOk ? std::string(dtypeName(static_cast<weftDataType_t>(f.dtype)))
                : "#" + std::to_string(f.dtype));
  if (f.op >= 0) s += " op " + opText(f.op);
  if (f.root >= 0) s += " root " + std::to_string(f.root);
  return s;
}

// The value most ranks hold (ties go to the lowest rank's value).
template <class Get>
auto majority(const std::vector<CallFingerprint>& all, Get get) {
  std::map<decltype(get(all[0])), int> votes;
  for (const auto& f : all) ++votes[get(f)];
  auto best = get(all[0]);
  for (const auto& f : all)
    if (votes[get(f)] > votes[best]) best = get(f);
  return best;
}

}  // namespace

bool checkEnabledFromEnv() {
  return envInt("CHECK", 0) != 0;
}

CallFingerprint fingerprintOf(const CollCall& call, uint64_t seq) {
  const CollArgs& a = call.args;
  CallFingerprint f{};
  f.seq = seq;
  f.count = a.count;
  f.kind = static_cast<int32_t>(a.kind);
  f.dtype = static_cast<int32_t>(a.dtype);
  f.op = reducing(a.kind) ? call.rawOp : -1;
  f.root = rooted(a.kind) ? a.root : -1;
  return f;
}

std::string compareFingerprints(const std::vector<CallFingerprint>& all) {
  if (all.size() < 2) return "";
  struct Field {
    const char* name;
    int64_t (*get)(const CallFingerprint&);
  };
  static const Field fields[] = {
      {"kind", [](const CallFingerprint& f) { return int64_t(f.kind); }},
      {"count", [](const CallFingerprint& f) { return int64_t(f.count); }},
      {"dtype", [](const CallFingerprint& f) { return int64_t(f.dtype); }},
      {"op", [](const CallFingerprint& f) { return int64_t(f.op); }},
      {"root", [](const CallFingerprint& f) { return int64_t(f.root); }},
  };
  for (const Field& field : fields) {
    const int64_t want = majority(all, field.get);
    for (size_t r = 0; r < all.size(); ++r) {
      if (field.get(all[r]) == want) continue;
      size_t ref = 0;
      while (ref < all.size() && field.get(all[ref]) != want) ++ref;
      return "WEFT_CHECK: collective #" + std::to_string(all[r].seq) + ": rank " +
             std::to_string(r) + " differs in " + field.name + ": rank " + std::to_string(r) +
             " called " + describe(all[r]) + ", rank " + std::to_string(ref) + " called " +
             describe(all[ref]) + " (every rank must make the same calls in the same order)";
    }
  }
  return "";
}

Status checkCallMatches(weftComm* comm, const CollCall& call, uint64_t seq, bool* mismatch) {
  *mismatch = false;
  if (comm->nranks == 1) return Status::ok();
  std::vector<CallFingerprint> all(comm->nranks);
  const CallFingerprint mine = fingerprintOf(call, seq);
  CollArgs gather;
  gather.kind = CollKind::AllGather;
  gather.send = &mine;
  gather.recv = all.data();
  gather.count = sizeof mine;
  gather.dtype = weftUint8;
  const Algorithm& alg = selectAlgorithm(gather, comm->context);
  WEFT_RETURN_IF_ERROR(alg.run(comm->context, gather));
  const std::string diff = compareFingerprints(all);
  if (!diff.empty()) {
    *mismatch = true;
    return Status(weftInvalidUsage, diff);
  }
  return Status::ok();
}

}  // namespace weft
