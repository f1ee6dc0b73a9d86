// What a launcher leaves in a process's environment: its rank, the job's
// size, and where rank 0's bootstrap listens. weftCommInitFromEnv reads
// these; the parsers are pure functions, tested on their own.
//
// Where rank 0 listens, first found wins:
//   WEFT_ADDR=host:port                  set by hand or by weftrun
//   MASTER_ADDR and MASTER_PORT          torchrun
//   the launcher's PMIx server           mpirun, srun --mpi=pmix (core/comm.cc)
//   the Slurm step's first node          srun: SLURM_STEP_NODELIST, port from
//                                        MASTER_PORT or the job and step ids
//   127.0.0.1, port from the job id      mpirun with every rank on one host
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace weft {

struct LaunchRank {
  int rank = -1;
  int size = -1;
};

// WEFT_RANK/WEFT_WORLD_SIZE, RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*,
// SLURM_PROCID/SLURM_NTASKS: the first pair that is set.
LaunchRank rankFromEnv();

// WEFT_ADDR, or MASTER_ADDR and MASTER_PORT, as host:port.
std::optional<std::string> explicitAddressFromEnv();

// Under srun without PMIx: the step's first node (where block distribution
// puts rank 0) and a port every task derives alike. Fails where rank 0 finds
// itself on another node (SLURMD_NODENAME), which would make the others
// wait for a listener that is not there.
std::optional<std::string> slurmAddressFromEnv(int rank, Status* error);

// mpirun with every rank on one host: 127.0.0.1 and a port from the job id.
std::optional<std::string> localMpirunAddressFromEnv();

// The first host of a Slurm host list: "node[07-09,12],gpu1" -> "node07".
// Empty for an empty or malformed list.
std::string firstSlurmHost(std::string_view nodelist);

// A port in [20000, 40000) from a job's identity, the same on every task.
uint16_t portFromJobId(std::string_view jobId);

}  // namespace weft
