// Argument checks for a collective or point-to-point call, made when the call
// is issued so that bad input fails at once on the rank that gave it.
#pragma once

#include "core/work.h"

namespace weft {

// `api` names the entry point in messages ("weftAllReduce").
Status validateCall(weftComm* comm, const char* api, const CollCall& call);

// Points an all-to-all-v call at copies of the caller's arrays (kept in
// call.vcounts). Does nothing where comm is not valid or an array is NULL:
// validateCall reports those.
Status keepVCounts(weftComm* comm, CollCall& call, const size_t* sendcounts, const size_t* sdispls,
                   const size_t* recvcounts, const size_t* rdispls);

}  // namespace weft
