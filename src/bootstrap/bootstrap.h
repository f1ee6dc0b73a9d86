// Rendezvous and out-of-band collectives for setting up a communicator.
//
// A unique id carries the root's address and a random secret. The root (a
// thread in the process that made the id, or in rank 0 when the address
// comes from the environment) collects one hello per rank and answers with
// the table of all ranks. The ranks then connect in a star around rank 0,
// which carries allgather and barrier. Every connection presents the
// secret; one that does not is dropped and logged.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "bootstrap/socket.h"
#include "weft/weft.h"

namespace weft {

struct PeerInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  uint64_t hostHash = 0;  // equal on ranks that share memory (host + netns)
  uint32_t addrLen = 0;
  uint8_t addr[28] = {};  // the rank's bootstrap listener
};

Status encodeUniqueId(const net::SockAddr& root, uint64_t secret, weftUniqueId* id);
Status decodeUniqueId(const weftUniqueId& id, net::SockAddr* root, uint64_t* secret);
uint64_t randomU64();
// Stable per host and network namespace (WEFT_HOSTID overrides).
uint64_t localHostHash();
// Milliseconds a rank keeps trying to reach the root (WEFT_BOOTSTRAP_TIMEOUT_MS).
int64_t bootstrapTimeoutMs();

// Starts a root in a background thread listening on `addr`; it serves one
// rendezvous and exits (or gives up after the bootstrap timeout).
Status startBootstrapRoot(const net::SockAddr& addr, uint64_t secret, net::SockAddr* bound);

class Bootstrap {
 public:
  static Status create(const net::SockAddr& root, uint64_t secret, int rank, int nranks,
                       std::unique_ptr<Bootstrap>* out);
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t secret() const { return secret_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

  // data holds nranks slots of `bytes`; this rank's slot is filled in.
  Status allGather(void* data, size_t bytes);
  Status barrier();
  // Every rank reports whether its part of a set-up `step` worked; a
  // failure anywhere fails all, naming the rank where it happened.
  Status agree(const Status& mine, const char* step);

  // Serves one more rendezvous (as startBootstrapRoot does) on this rank's
  // own listener, whose address every rank knows from peers(): how the
  // survivors of a failed communicator meet again without rank 0.
  Status serveRendezvous(uint64_t secret);
  // The address of `rank`'s listener.
  net::SockAddr listenerOf(int rank) const;

 private:
  Bootstrap() = default;
  Status connectStar(const net::Socket& listener);
  int rank_ = 0;
  int nranks_ = 0;
  uint64_t secret_ = 0;
  std::vector<PeerInfo> peers_;
  net::Socket listener_;            // kept open for serveRendezvous
  net::Socket toRoot_;              // ranks > 0: connection to rank 0
  std::vector<net::Socket> ranks_;  // rank 0: connection to each rank
};

}  // namespace weft
