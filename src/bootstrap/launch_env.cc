#include "bootstrap/launch_env.h"

#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/hash.h"

namespace weft {
namespace {

bool readInt(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  const long parsed = std::strtol(v, &end, 10);
  if (*end != '\0') return false;
  *out = static_cast<int>(parsed);
  return true;
}

std::string hostPort(const std::string& host, std::string_view port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::string(port);
}

const char* firstSet(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v != nullptr && *v != '\0') return v;
  }
  return nullptr;
}

}  // namespace

LaunchRank rankFromEnv() {
  static const char* kPairs[][2] = {{"WEFT_RANK", "WEFT_WORLD_SIZE"},
                                    {"RANK", "WORLD_SIZE"},
                                    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                    {"PMI_RANK", "PMI_SIZE"},
                                    {"SLURM_PROCID", "SLURM_NTASKS"}};
  LaunchRank r;
  for (const auto& pair : kPairs)
    if (readInt(pair[0], &r.rank) && readInt(pair[1], &r.size)) return r;
  return LaunchRank{};
}

std::optional<std::string> explicitAddressFromEnv() {
  if (auto addr = envString("ADDR")) return addr;
  const char* host = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (host != nullptr && port != nullptr) return hostPort(host, port);
  return std::nullopt;
}

std::optional<std::string> slurmAddressFromEnv(int rank, Status* error) {
  *error = Status::ok();
  const char* list = firstSet({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  const char* job = std::getenv("SLURM_JOB_ID");
  if (list == nullptr || job == nullptr) return std::nullopt;
  const std::string host = firstSlurmHost(list);
  if (host.empty()) {
    *error = makeError(weftInvalidArgument,
                       "cannot read the first node of the Slurm node list '%s': set "
                       "MASTER_ADDR and MASTER_PORT (or WEFT_ADDR) to rank 0's host and a port",
                       list);
    return std::nullopt;
  }
  const char* here = std::getenv("SLURMD_NODENAME");
  if (rank == 0 && here != nullptr && host != here) {
    *error = makeError(weftInvalidArgument,
                       "rank 0 runs on node %s, not on %s, the first of the step's nodes (%s), "
                       "where the other ranks look for it: launch with block distribution "
                       "(srun's default), srun --mpi=pmix, or set MASTER_ADDR and MASTER_PORT",
                       here, host.c_str(), list);
    return std::nullopt;
  }
  if (const char* port = std::getenv("MASTER_PORT")) return hostPort(host, port);
  const char* step = std::getenv("SLURM_STEP_ID");
  const std::string id = std::string(job) + "." + (step != nullptr ? step : "");
  return hostPort(host, std::to_string(portFromJobId(id)));
}

std::optional<std::string> localMpirunAddressFromEnv() {
  int localSize = -1, size = -1;
  if (!readInt("OMPI_COMM_WORLD_LOCAL_SIZE", &localSize) ||
      !readInt("OMPI_COMM_WORLD_SIZE", &size) || localSize != size)
    return std::nullopt;
  const char* job = firstSet({"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"});
  if (job == nullptr) return std::nullopt;
  return "127.0.0.1:" + std::to_string(portFromJobId(job));
}

std::string firstSlurmHost(std::string_view list) {
  // A host list is comma-separated entries, each a name with bracketed
  // ranges ("rack[1-2]-n[01-04]"); the first host of the first entry takes
  // the first value of each bracket, as written (zero padding kept).
  std::string host;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    const char c = list[i];
    if (c == ']') return {};
    if (c != '[') {
      host += c;
      ++i;
      continue;
    }
    const size_t close = list.find(']', i);
    if (close == std::string_view::npos) return {};
    const std::string_view inside = list.substr(i + 1, close - i - 1);
    const std::string_view first = inside.substr(0, inside.find_first_of(",-"));
    if (first.empty()) return {};
    for (char d : first)
      if (d < '0' || d > '9') return {};
    host += first;
    i = close + 1;
  }
  return host.find(' ') == std::string::npos ? host : std::string();
}

uint16_t portFromJobId(std::string_view jobId) {
  return static_cast<uint16_t>(20000 + fnv1a(jobId) % 20000);
}

}  // namespace weft
