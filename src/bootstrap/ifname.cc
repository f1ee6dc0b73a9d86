#include "bootstrap/ifname.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

#include "base/env.h"

namespace weft::net {

bool IfaceFilter::matches(std::string_view ifname) const {
  bool hit = false;
  for (const std::string& n : names) {
    if (exact ? ifname == n : ifname.substr(0, n.size()) == n) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

Status parseIfaceFilter(std::string_view spec, IfaceFilter* out) {
  IfaceFilter f;
  if (!spec.empty() && spec[0] == '^') {
    f.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec[0] == '=') {
    f.exact = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    if (item.size() >= IF_NAMESIZE)
      return makeError(weftInvalidArgument,
                       "WEFT_SOCKET_IFNAME: '%.*s' is longer than an interface name can be",
                       static_cast<int>(item.size()), item.data());
    f.names.emplace_back(item);
  }
  if (f.names.empty())
    return Status(weftInvalidArgument,
                  "WEFT_SOCKET_IFNAME names no interface: use e.g. 'eth0', 'eth,ib', '=eth0' or "
                  "'^docker,lo'");
  *out = std::move(f);
  return Status::ok();
}

Status parseFamily(std::string_view text, int* family) {
  auto is = [&](std::initializer_list<std::string_view> words) {
    for (std::string_view w : words)
      if (text.size() == w.size() &&
          std::equal(text.begin(), text.end(), w.begin(),
                     [](char a, char b) { return (a | 0x20) == (b | 0x20); }))
        return true;
    return false;
  };
  if (text.empty()) {
    *family = AF_UNSPEC;
  } else if (is({"AF_INET", "inet", "4", "ipv4"})) {
    *family = AF_INET;
  } else if (is({"AF_INET6", "inet6", "6", "ipv6"})) {
    *family = AF_INET6;
  } else {
    return makeError(weftInvalidArgument, "WEFT_SOCKET_FAMILY is '%.*s': use AF_INET or AF_INET6",
                     static_cast<int>(text.size()), text.data());
  }
  return Status::ok();
}

std::vector<IfaceAddr> findInterfaces(const IfaceFilter* filter, int family) {
  std::vector<IfaceAddr> found, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (int pass : {AF_INET, AF_INET6}) {
    if (family != AF_UNSPEC && family != pass) continue;
    for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
      if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != pass) continue;
      if ((ifa->ifa_flags & IFF_UP) == 0) continue;
      IfaceAddr a;
      a.name = ifa->ifa_name;
      if (pass == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
        std::memcpy(&a.addr.storage, in6, sizeof(sockaddr_in6));
        a.addr.len = sizeof(sockaddr_in6);
      } else {
        std::memcpy(&a.addr.storage, ifa->ifa_addr, sizeof(sockaddr_in));
        a.addr.len = sizeof(sockaddr_in);
      }
      a.addr.setPort(0);
      if (filter != nullptr) {
        if (filter->matches(a.name)) found.push_back(a);
      } else if ((ifa->ifa_flags & IFF_LOOPBACK) != 0) {
        loopback.push_back(a);
      } else {
        found.push_back(a);
      }
    }
  }
  freeifaddrs(list);
  return found.empty() ? loopback : found;
}

const IfaceAddr* preferredInterface(const std::vector<IfaceAddr>& found) {
  for (const IfaceAddr& a : found) {
    const std::string_view name = a.name;
    if (!name.starts_with("docker") && !name.starts_with("virbr")) return &a;
  }
  return found.empty() ? nullptr : &found.front();
}

Status addressFromSocketEnv(SockAddr* out, bool* chosen) {
  *chosen = false;
  const auto ifname = envString("SOCKET_IFNAME");
  const auto familyText = envString("SOCKET_FAMILY");
  if (!ifname && !familyText) return Status::ok();
  int family = AF_UNSPEC;
  if (familyText) WEFT_RETURN_IF_ERROR(parseFamily(*familyText, &family));
  IfaceFilter filter;
  if (ifname) WEFT_RETURN_IF_ERROR(parseIfaceFilter(*ifname, &filter));
  const auto found = findInterfaces(ifname ? &filter : nullptr, family);
  if (found.empty())
    return makeError(weftSystemError,
                     "no interface that is up matches WEFT_SOCKET_IFNAME='%s' with "
                     "WEFT_SOCKET_FAMILY='%s' (see `ip addr`)",
                     ifname ? ifname->c_str() : "", familyText ? familyText->c_str() : "");
  *out = found.front().addr;
  *chosen = true;
  return Status::ok();
}

}  // namespace weft::net
