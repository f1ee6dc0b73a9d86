// Status: a weftResult_t plus a message that says what went wrong and what to
// do. Internal code returns Status; the C API turns it into weftResult_t and
// the thread's last-error string.
#pragma once

#include <string>
#include <utility>

#include "weft/weft.h"

namespace weft {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(weftResult_t code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  bool isOk() const { return code_ == weftSuccess; }
  explicit operator bool() const { return isOk(); }
  weftResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  weftResult_t code_ = weftSuccess;
  std::string message_;
};

// Formats like printf into a Status with the given code.
Status makeError(weftResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace weft

#define WEFT_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::weft::Status weft_status_ = (expr);          \
    if (!weft_status_.isOk()) return weft_status_; \
  } while (0)
