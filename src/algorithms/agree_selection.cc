// The algorithm-selection settings, compared across ranks at set-up.
//
// Each rank reads WEFT_ALGO, WEFT_PROTO, WEFT_HIER_SEGMENTS, the online
// tuner's settings and WEFT_SHM_DIRECT_MIN from its own environment. Ranks
// that read them differently run different algorithms or protocols for one
// call (or cut hier allreduce differently, or time different trials) and
// wait for messages that never come: a hang, or a size mismatch mid-call.
// Comparing them once, where every rank sees every rank's settings, turns
// that into one error at communicator creation, the same on every rank.
// Cost: one all-gather of a record of 136 bytes per rank at set-up.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/byte_collectives.h"
#include "algorithms/tuner.h"
#include "base/env.h"
#include "base/hash.h"

namespace weft {
namespace {

// One rank's settings: what selection runs on (the parsed restrictions, so
// that "RING" and "ring" agree), and the text for the message.
struct SelectionRecord {
  uint64_t algoHash = 0;
  uint64_t protoHash = 0;
  uint64_t hierSegments = 0;
  int64_t onlineRounds = 0;
  uint64_t directMinBytes = 0;
  char algoText[64] = {};
  char protoText[32] = {};
};

template <typename T, size_t N>
uint64_t hashOf(const T (&a)[N], const bool (&restricted)[N]) {
  uint64_t h = kFnvOffsetBasis;
  for (size_t k = 0; k < N; ++k) {
    // An unrestricted collective allows everything, whatever its bits say.
    const T value = restricted[k] ? a[k] : T{};
    h = fnv1a(h, &value, sizeof value);
    h = fnv1a(h, &restricted[k], sizeof restricted[k]);
  }
  return h;
}

// Text for the message, cut to the field (a longer setting is shown cut).
template <size_t N>
void textInto(char (&field)[N], const char* setting) {
  const std::string text = envString(setting).value_or("");
  std::strncpy(field, text.c_str(), N - 1);
}

std::string quoted(const char* text) {
  return text[0] ? "\"" + std::string(text) + "\"" : "unset";
}

std::string onlineText(int64_t rounds) {
  return rounds == 0 ? "off" : "on, " + std::to_string(rounds) + " rounds";
}

}  // namespace

Status agreeSelection(CollContext& ctx, const Restrictions& r, int onlineRounds,
                      size_t directMinBytes) {
  const int n = ctx.nranks();
  if (n <= 1) return Status::ok();
  SelectionRecord mine;
  mine.algoHash = hashOf(r.algo, r.algoRestricted);
  mine.protoHash = hashOf(r.proto, r.protoRestricted);
  mine.hierSegments = r.hierSegments;
  mine.onlineRounds = onlineRounds;
  mine.directMinBytes = directMinBytes;
  textInto(mine.algoText, "ALGO");
  textInto(mine.protoText, "PROTO");
  std::vector<SelectionRecord> all(static_cast<size_t>(n));
  WEFT_RETURN_IF_ERROR(
      algo::allGatherBytes(ctx, &mine, all.data(), sizeof(SelectionRecord), ringAllGather));
  // Every rank compares against rank 0 and names the first rank that
  // differs, so that all of them report the same thing.
  const SelectionRecord& first = all[0];
  for (int q = 1; q < n; ++q) {
    const SelectionRecord& other = all[static_cast<size_t>(q)];
    std::string what;
    if (other.algoHash != first.algoHash) {
      what = "WEFT_ALGO (NCCL_ALGO) is " + quoted(first.algoText) + " on rank 0 and " +
             quoted(other.algoText) + " on rank " + std::to_string(q);
    } else if (other.protoHash != first.protoHash) {
      what = "WEFT_PROTO (NCCL_PROTO) is " + quoted(first.protoText) + " on rank 0 and " +
             quoted(other.protoText) + " on rank " + std::to_string(q);
    } else if (other.hierSegments != first.hierSegments) {
      auto text = [](uint64_t k) { return k == 0 ? std::string("unset") : std::to_string(k); };
      what = "WEFT_HIER_SEGMENTS is " + text(first.hierSegments) + " on rank 0 and " +
             text(other.hierSegments) + " on rank " + std::to_string(q);
    } else if (other.onlineRounds != first.onlineRounds) {
      what = "online tuning (WEFT_TUNER_ONLINE, WEFT_TUNER_ONLINE_ROUNDS) is " +
             onlineText(first.onlineRounds) + " on rank 0 and " + onlineText(other.onlineRounds) +
             " on rank " + std::to_string(q);
    } else if (other.directMinBytes != first.directMinBytes) {
      what = "WEFT_SHM_DIRECT_MIN is " + std::to_string(first.directMinBytes) +
             " bytes on rank 0 and " + std::to_string(other.directMinBytes) + " on rank " +
             std::to_string(q);
    } else {
      continue;
    }
    // Every rank has this verdict. Before any leaves (and its teardown
    // breaks the channels), each waits until all have it: a rank still
    // forwarding the all-gather would otherwise see only that a peer failed.
    // The wait's own outcome does not matter: this rank knows what it must say.
    uint8_t done = 1;
    std::vector<uint8_t> everyone(static_cast<size_t>(n));
    (void)algo::allGatherBytes(ctx, &done, everyone.data(), 1, ringAllGather);
    return Status(weftInvalidUsage,
                  what +
                      ": ranks would pick different algorithms for the same call and hang; set "
                      "the algorithm-selection variables alike on every rank");
  }
  return Status::ok();
}

}  // namespace weft
