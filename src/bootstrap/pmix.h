// Rendezvous through the launcher's PMIx server: how ranks started by
// `mpirun` across hosts (or `srun --mpi=pmix`, `prterun`) learn rank 0's
// bootstrap address with nothing set by hand. One process publishes a value,
// the job fences, every process reads it.
//
// libpmix is opened with dlopen, and only when the environment says a PMIx
// server started this process, so neither libweft nor libnccl.so.2 needs it
// to load. Built without PMIx's headers, launchedUnderPmix() is false.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace weft::pmix {

// True when built with PMIx support and the launcher left a PMIx server's
// address in the environment (PMIX_SERVER_URI*, PMIX_NAMESPACE).
bool launchedUnderPmix();

// Every process of the launcher's job calls this the same number of times
// (it fences the whole job); the k-th calls of all processes meet. The
// process of PMIx rank 0 gets *value from `make` (run there only) and
// publishes it; every process returns with that value. The first call opens
// this process's PMIx session, which stays open until exit. The fence gives
// up after `timeoutMs`.
Status shareFromRankZero(const std::function<Status(std::string*)>& make, int64_t timeoutMs,
                         std::string* value);

}  // namespace weft::pmix
