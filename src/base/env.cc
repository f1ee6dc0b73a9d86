#include "base/env.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/log.h"

namespace weft {
namespace {
std::atomic<bool> ncclAliases{false};

const char* lookup(const char* name) {
  std::string key = std::string("WEFT_") + name;
  const char* v = std::getenv(key.c_str());
  if ((v == nullptr || *v == '\0') && ncclAliases.load(std::memory_order_relaxed)) {
    key = std::string("NCCL_") + name;
    v = std::getenv(key.c_str());
  }
  return (v != nullptr && *v != '\0') ? v : nullptr;
}
}  // namespace

void enableNcclEnvAliases() {
  ncclAliases.store(true);
}

std::optional<std::string> envString(const char* name) {
  const char* v = lookup(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* v = lookup(name);
  if (v == nullptr) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(v, &end, 0);
  if (errno != 0 || end == v || *end != '\0') {
    WEFT_WARN(kLogEnv, "WEFT_%s=%s is not an integer; using %lld", name, v,
              static_cast<long long>(fallback));
    return fallback;
  }
  return parsed;
}

std::optional<uint64_t> parseBytes(const std::string& text) {
  // Digits first: strtoull would also take blanks and a sign (" -1" wraps
  // around to a huge size), and c_str() would stop at an embedded NUL.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      text.find('\0') != std::string::npos)
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long base = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || text[0] == '-') return std::nullopt;
  uint64_t mult = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      mult = 1ull << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1ull << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1ull << 30;
      ++end;
      break;
    case 't':
    case 'T':
      mult = 1ull << 40;
      ++end;
      break;
    default:
      return std::nullopt;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return std::nullopt;
  if (base != 0 && mult > UINT64_MAX / base) return std::nullopt;
  return base * mult;
}

uint64_t envBytes(const char* name, uint64_t fallback) {
  const char* v = lookup(name);
  if (v == nullptr) return fallback;
  const auto parsed = parseBytes(v);
  if (!parsed) {
    WEFT_WARN(kLogEnv, "WEFT_%s=%s is not a byte size; using %llu", name, v,
              static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return *parsed;
}

}  // namespace weft
