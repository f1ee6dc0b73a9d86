// The order of the ring that the ring and chain algorithms follow.
//
// Rank order is the launcher's: a round-robin host file, srun's cyclic
// distribution or mpirun --map-by socket put consecutive ranks on different
// hosts or sockets, and a ring in rank order then crosses a host or socket
// boundary at every hop. Ordered by host, then by the package and the
// last-level cache of each rank's lowest allowed CPU, it crosses each
// boundary once per round; ranks keep rank order within a cache.
//
// The order does not group ranks that share one CPU: on 2 CPUs, a ring
// 0 2 1 3 of 4 ranks placed on CPU i mod 2 kept half the hops on one CPU's
// caches but ran each of those hops one rank after the other, and was 2-14%
// slower than rank order from 64 KiB to 1 MiB (reduce-scatter and allreduce,
// 7 alternating runs).
#pragma once

#include <span>
#include <vector>

#include "algorithms/tuner.h"

namespace weft {

// Fills where `rec`'s lowest allowed CPU sits (package, last-level cache and
// its size) from sysfs; fields it cannot read stay unknown.
void readCpuPlacement(CpuRecord* rec);

// Ranks in ring order: each host's ranks together (hosts in the order of
// their index), and within a host by package and last-level cache, then by
// rank. Every rank computes the same order from the same records; unbound
// ranks on one host keep rank order.
std::vector<int> ringOrderFor(std::span<const CpuRecord> ranks, std::span<const int> hostOf);

}  // namespace weft
