// weftCommShrink: a communicator of the survivors, made without the excluded
// (typically dead) ranks.
//
// The old communicator's rendezvous root and bootstrap star both hang off
// rank 0, which may be among the dead, so the survivors meet afresh: the
// lowest surviving rank serves a new rendezvous on its own bootstrap
// listener (kept open for this; every rank knows its address from the rank
// table), and every survivor derives the same new secret from the old one,
// the shrink count and the excluded list. No message has to reach any
// excluded rank, and nothing waits for one.
#include <algorithm>
#include <vector>

#include "base/log.h"
#include "core/comm.h"

namespace weft {

Status commShrink(weftComm* comm, const int* excludeRanks, int nExclude, const weftConfig_t* config,
                  int flags, weftComm** out) {
  *out = nullptr;
  if (nExclude < 0 || (nExclude > 0 && excludeRanks == nullptr))
    return makeError(weftInvalidArgument,
                     "excludeRanksList is NULL or excludeRanksCount (%d) is negative", nExclude);
  if ((flags & ~WEFT_SHRINK_ABORT) != 0)
    return makeError(weftInvalidArgument,
                     "unknown shrink flags 0x%x: use WEFT_SHRINK_DEFAULT or WEFT_SHRINK_ABORT",
                     flags);
  std::vector<bool> excluded(comm->nranks, false);
  for (int i = 0; i < nExclude; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= comm->nranks)
      return makeError(weftInvalidArgument, "excluded rank %d is out of range for %d ranks", r,
                       comm->nranks);
    excluded[r] = true;
  }
  if (excluded[comm->rank])
    return makeError(weftInvalidArgument,
                     "rank %d is in excludeRanksList: only the ranks that stay call "
                     "weftCommShrink",
                     comm->rank);
  std::vector<int> survivors;
  for (int r = 0; r < comm->nranks; ++r)
    if (!excluded[r]) survivors.push_back(r);
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), comm->rank) -
                                       survivors.begin());

  // Work still queued on the old communicator ends first: at once with
  // WEFT_SHRINK_ABORT, else when it fails (dead peer, timeout) or finishes.
  if ((flags & WEFT_SHRINK_ABORT) != 0 && comm->asyncError.load() == weftSuccess)
    commFail(comm, Status(weftRemoteError, "stopped by weftCommShrink(WEFT_SHRINK_ABORT)"));
  WEFT_RETURN_IF_ERROR(comm->engine->drain());

  // Every survivor computes the same secret; outsiders cannot (the old one is secret).
  uint64_t secret = comm->bootstrap->secret() ^ (0x7368726e6b000000ull + ++comm->shrinks);
  for (int r = 0; r < comm->nranks; ++r)
    secret = (secret ^ (excluded[r] ? 0x9e3779b97f4a7c15ull * (r + 1) : 0)) * 1099511628211ull;
  const int leader = survivors[0];
  if (comm->rank == leader) WEFT_RETURN_IF_ERROR(comm->bootstrap->serveRendezvous(secret));
  weftUniqueId id;
  WEFT_RETURN_IF_ERROR(encodeUniqueId(comm->bootstrap->listenerOf(leader), secret, &id));
  WEFT_INFO(kLogInit, "shrink: rank %d becomes rank %d of %zu (rendezvous at rank %d)", comm->rank,
            newRank, survivors.size(), leader);
  weftConfig_t inherited = WEFT_CONFIG_INITIALIZER;
  inherited.timeoutMs = static_cast<int>(comm->timeoutMs);
  if (!comm->name.empty()) inherited.commName = comm->name.c_str();
  return commInit(static_cast<int>(survivors.size()), id, newRank,
                  config != nullptr ? config : &inherited, out);
}

}  // namespace weft
