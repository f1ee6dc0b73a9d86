// WEFT_CHECK=1: before each collective the ranks exchange a fingerprint of
// the call (kind, count, dtype, op, root) and refuse to run it when they
// differ, naming the rank and the field. Costs one small all-gather over the
// channels per collective, so it is a debugging mode, off by default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/work.h"

struct weftComm;

namespace weft {

struct CallFingerprint {
  uint64_t seq;
  uint64_t count;
  int32_t kind;
  int32_t dtype;
  int32_t op;    // -1 where the kind has no op
  int32_t root;  // -1 where the kind has no root
};
static_assert(sizeof(CallFingerprint) == 32);

CallFingerprint fingerprintOf(const CollCall& call, uint64_t seq);
// Pure: the first difference between the ranks' fingerprints as a message
// naming the rank and field, or "" when they all agree. Every rank computes
// the same text from the same table, so all fail alike.
std::string compareFingerprints(const std::vector<CallFingerprint>& all);
// Gathers the fingerprints over the channels and compares them. *mismatch
// tells a difference (seen alike by all ranks) from a failed exchange.
Status checkCallMatches(weftComm* comm, const CollCall& call, uint64_t seq, bool* mismatch);
bool checkEnabledFromEnv();  // WEFT_CHECK

}  // namespace weft
