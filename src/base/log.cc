#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/env.h"

namespace weft {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::None;
  uint32_t subsys = kLogAll;
  FILE* out = stderr;
  char host[64] = {};
};

uint32_t parseSubsys(const std::string& spec) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {{"INIT", kLogInit},
                {"COLL", kLogColl},
                {"P2P", kLogP2P},
                {"SHM", kLogShm},
                {"BOOTSTRAP", kLogBootstrap},
                {"ENV", kLogEnv},
                {"TUNING", kLogTuning},
                {"NET", kLogNet},
                {"ALL", kLogAll}};
  bool exclude = !spec.empty() && spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    for (const auto& n : kNames)
      if (strcasecmp(item.c_str(), n.name) == 0) mask |= n.bit;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

std::string expandFileName(const std::string& pattern, const char* host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'h')
        out += host;
      else if (c == 'p')
        out += std::to_string(getpid());
      else if (c == '%')
        out += '%';
      else
        (out += '%') += c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    gethostname(c.host, sizeof c.host - 1);
    if (auto level = envString("DEBUG")) {
      if (strcasecmp(level->c_str(), "WARN") == 0)
        c.level = LogLevel::Warn;
      else if (strcasecmp(level->c_str(), "INFO") == 0)
        c.level = LogLevel::Info;
      else if (strcasecmp(level->c_str(), "TRACE") == 0)
        c.level = LogLevel::Trace;
    }
    if (auto subsys = envString("DEBUG_SUBSYS")) c.subsys = parseSubsys(*subsys);
    if (auto file = envString("DEBUG_FILE")) {
      if (FILE* f = std::fopen(expandFileName(*file, c.host).c_str(), "w")) {
        setvbuf(f, nullptr, _IOLBF, 0);
        c.out = f;
      }
    }
    return c;
  }();
  return cfg;
}

std::atomic<int> logRank{-1};
std::mutex logMutex;

}  // namespace

void setLogRank(int rank) {
  logRank.store(rank, std::memory_order_relaxed);
}

bool logEnabled(LogLevel level, uint32_t subsys) {
  const LogConfig& c = config();
  return level <= c.level && (c.subsys & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t subsys, const char* fmt, ...) {
  const LogConfig& c = config();
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  static const char* kLevelNames[] = {"", "WARN", "INFO", "TRACE"};
  std::lock_guard<std::mutex> lock(logMutex);
  std::fprintf(c.out, "%s:%d:%ld [%d] WEFT %s %s\n", c.host, getpid(),
               static_cast<long>(syscall(SYS_gettid)), logRank.load(std::memory_order_relaxed),
               kLevelNames[static_cast<int>(level)], body);
}

}  // namespace weft
