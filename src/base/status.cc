#include "base/status.h"

#include <cstdarg>
#include <cstdio>

namespace weft {

Status makeError(weftResult_t code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status(code, buf);
}

}  // namespace weft
