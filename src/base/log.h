// Logging: WEFT_DEBUG=WARN|INFO|TRACE picks the level, WEFT_DEBUG_SUBSYS a
// comma list of subsystems (INIT,COLL,P2P,SHM,BOOTSTRAP,ENV,TUNING,NET,ALL; a
// leading ^ excludes), WEFT_DEBUG_FILE a file name where %h is the host
// name and %p the pid. Lines look like "host:pid:tid [rank] WEFT INFO ...".
#pragma once

#include <cstdint>

namespace weft {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogP2P = 1u << 2,
  kLogShm = 1u << 3,
  kLogBootstrap = 1u << 4,
  kLogEnv = 1u << 5,
  kLogTuning = 1u << 6,
  kLogNet = 1u << 7,
  kLogAll = ~0u,
};

bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// The rank shown in log lines of this process (the last communicator made).
void setLogRank(int rank);

}  // namespace weft

#define WEFT_LOG(level, subsys, ...)                                                       \
  do {                                                                                     \
    if (::weft::logEnabled(level, subsys)) ::weft::logMessage(level, subsys, __VA_ARGS__); \
  } while (0)
#define WEFT_WARN(subsys, ...) WEFT_LOG(::weft::LogLevel::Warn, subsys, __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG(::weft::LogLevel::Info, subsys, __VA_ARGS__)
#define WEFT_TRACE(subsys, ...) WEFT_LOG(::weft::LogLevel::Trace, subsys, __VA_ARGS__)
