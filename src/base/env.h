// Environment settings. Every setting is read as WEFT_<NAME>; when the
// library runs as libnccl.so.2 (enableNcclEnvAliases), NCCL_<NAME> is read
// too, with WEFT_<NAME> taking precedence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft {

void enableNcclEnvAliases();
// The value of WEFT_<name> (or NCCL_<name>), if set and non-empty.
std::optional<std::string> envString(const char* name);
// An integer setting; `fallback` when unset. A value that does not parse is
// reported (warning) and ignored.
int64_t envInt(const char* name, int64_t fallback);
// A byte size with an optional K/M/G/T suffix (powers of 1024).
uint64_t envBytes(const char* name, uint64_t fallback);
// Parses "123", "4K", "16M", "1G"; nullopt if malformed.
std::optional<uint64_t> parseBytes(const std::string& text);

}  // namespace weft
