// Network namespaces for multi-host tests: each namespace stands for a host,
// with its own interfaces and addresses that exist only inside the test.
//
//   NetnsLab lab({.namespaces = 2});
//   if (!lab.ok()) GTEST_SKIP() << lab.error();
//   runRanksInNetns(lab, {0, 0, 1, 1}, body);   // two "hosts", two ranks each
//
// Layout: a hub namespace holds a bridge per network; namespace k gets eth0
// (network A: 10.77.0.(k+1)/24, fd00:77::(k+1)/64) and, with secondNet,
// eth1 (network B: 10.78.0.(k+1)/24, fd00:78::(k+1)/64), each a veth whose
// other end sits on the hub's bridge. Nothing is created in the test's own
// namespace, so parallel runs do not collide; names carry the pid and a
// counter. The destructor deletes every namespace (the kernel then removes
// the veths and bridges); namespaces left by a crashed run are removed by the
// next lab once their pid is gone.
#pragma once

#include <string>
#include <vector>

#include "harness/multirank.h"

namespace weft::test {

class NetnsLab {
 public:
  struct Options {
    int namespaces = 2;
    bool secondNet = false;  // add eth1 on network B
  };
  // Why labs cannot run here (not root, no `ip`, no netns support), or "".
  static std::string unavailable();

  explicit NetnsLab(Options options);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int size() const { return options_.namespaces; }
  const std::string& name(int k) const { return names_[k]; }
  static std::string ipv4(int k, int net = 0);
  static std::string ipv6(int k, int net = 0);
  // Moves the calling process (a forked child) into namespace k.
  bool enter(int k) const;
  // Runs `ip` with these arguments; false (and error text) on failure.
  static bool ip(const std::string& args, std::string* err = nullptr);

 private:
  Options options_;
  std::string hub_;
  std::vector<std::string> names_;
  std::string error_;
};

struct NetnsRun {
  std::vector<int> placement;  // namespace of each rank
  bool ipv6 = false;           // rendezvous (and so the transport) over IPv6
};

// runRanks with rank r inside namespace placement[r]; ranks rendezvous through
// WEFT_RANK/WEFT_WORLD_SIZE/WEFT_ADDR at rank 0's address on network A.
void runRanksInNetns(const NetnsLab& lab, const NetnsRun& run, const RankBody& body,
                     RunOptions opts = {});
// As runRanksRaw: the body initialises (ctx.initComm) inside its namespace.
void runRanksInNetnsRaw(const NetnsLab& lab, const NetnsRun& run, const RawBody& body,
                        RunOptions opts = {});

}  // namespace weft::test
