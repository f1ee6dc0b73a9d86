// Interface selection with NCCL_SOCKET_IFNAME's syntax, and the address
// family choice (WEFT_SOCKET_FAMILY).
//
//   "eth,ib"      interfaces whose name starts with eth or ib
//   "=eth0"       exactly eth0 (a list after '=' is exact names)
//   "^docker,lo"  every interface except those starting with docker or lo
//   "^=docker0"   every interface except exactly docker0
//
// parseIfaceFilter and parseFamily are pure functions (fuzzed, unit-tested);
// findInterfaces applies them to the host's interfaces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bootstrap/socket.h"

namespace weft::net {

struct IfaceFilter {
  bool exclude = false;  // '^': names select what to skip
  bool exact = false;    // '=': whole names, not prefixes
  std::vector<std::string> names;
  bool matches(std::string_view ifname) const;
};

// Parses a WEFT_SOCKET_IFNAME value. Empty items are ignored; a value with no
// names at all (or names longer than an interface name can be) is an error.
Status parseIfaceFilter(std::string_view spec, IfaceFilter* out);
// "AF_INET", "inet", "4", "ipv4" -> AF_INET; the same for 6; "" -> AF_UNSPEC.
Status parseFamily(std::string_view text, int* family);

struct IfaceAddr {
  std::string name;
  SockAddr addr;  // port 0
};

// Interfaces that are up and have an address of `family` (AF_UNSPEC: either)
// and pass `filter` (nullptr: every interface but loopback, which is used only
// when nothing else exists). IPv6 link-local addresses are skipped. Order:
// as the kernel lists them, IPv4 before IPv6 when the family is open.
std::vector<IfaceAddr> findInterfaces(const IfaceFilter* filter, int family);

// The interface to advertise where no variable names one: the first of
// `found` (findInterfaces' order) that is not a container or VM bridge
// (docker*, virbr*: NCCL's default skips docker too), whose addresses other
// hosts cannot reach; else the first; nullptr when `found` is empty.
const IfaceAddr* preferredInterface(const std::vector<IfaceAddr>& found);

// The address to listen on chosen from WEFT_SOCKET_IFNAME/WEFT_SOCKET_FAMILY.
// *chosen is false when neither is set (the caller keeps its own default).
Status addressFromSocketEnv(SockAddr* out, bool* chosen);

}  // namespace weft::net
