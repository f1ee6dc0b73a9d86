// The thread's last-error message behind weftGetLastError, for C-API entry
// points that live outside c_api.cc (compression_api.cc).
#pragma once

#include "base/status.h"

namespace weft {

// Records st as this thread's last error (if it is one) and returns its code.
weftResult_t recordApiResult(const Status& st);

}  // namespace weft
