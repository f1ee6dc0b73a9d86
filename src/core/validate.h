// Argument checks for a collective or point-to-point call, made when the call
// is issued so that bad input fails at once on the rank that gave it.
#pragma once

#include "core/work.h"

namespace weft {

// `api` names the entry point in messages ("weftAllReduce").
Status validateCall(weftComm* comm, const char* api, const CollCall& call);

}  // namespace weft
