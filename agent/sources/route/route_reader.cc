#include "sources/route/route_reader.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/socket.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "sources/unique_fd.h"

namespace ad {
namespace {

constexpr const char* kSource = "route";

struct SocketDeleter {
  void operator()(nl_sock* sock) const { nl_socket_free(sock); }
};
struct CacheDeleter {
  void operator()(nl_cache* cache) const { nl_cache_free(cache); }
};
using NlSocket = std::unique_ptr<nl_sock, SocketDeleter>;
using NlCache = std::unique_ptr<nl_cache, CacheDeleter>;

SourceError NlError(const std::string& what, int nl_error) {
  return SourceError{kSource, what + ": " + nl_geterror(nl_error), -nl_error};
}

Family FamilyOf(int af) { return af == AF_INET6 ? Family::kIpv6 : Family::kIpv4; }

std::string AddressText(nl_addr* addr) {
  if (addr == nullptr) {
    return "";
  }
  const int af = nl_addr_get_family(addr);
  const size_t size = af == AF_INET6 ? 16 : 4;
  std::array<uint8_t, 16> bytes{};
  if (nl_addr_get_len(addr) >= size) {
    std::memcpy(bytes.data(), nl_addr_get_binary_addr(addr), size);
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(af == AF_INET6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof(text)) ==
      nullptr) {
    return "?";
  }
  return text;
}

// "0.0.0.0/0" even when the kernel omits RTA_DST for a default route.
std::string PrefixText(nl_addr* dst, int af) {
  if (dst == nullptr || nl_addr_get_len(dst) == 0) {
    return af == AF_INET6 ? "::/0" : "0.0.0.0/0";
  }
  return AddressText(dst) + "/" + std::to_string(nl_addr_get_prefixlen(dst));
}

std::string RuleActionName(uint8_t action) {
  switch (action) {
    case FR_ACT_TO_TBL:
      return "lookup";
    case FR_ACT_GOTO:
      return "goto";
    case FR_ACT_NOP:
      return "nop";
    case FR_ACT_BLACKHOLE:
      return "blackhole";
    case FR_ACT_UNREACHABLE:
      return "unreachable";
    case FR_ACT_PROHIBIT:
      return "prohibit";
    default:
      return "action:" + std::to_string(action);
  }
}

std::string RouteTypeName(uint8_t type) {
  char buffer[32] = {};
  return nl_rtntype2str(type, buffer, sizeof(buffer));
}

// /proc/sys/net resolves against the netns of the thread that opens the file, so this reads the
// namespace NetnsGuard entered (checked by the route_reader integration test).
bool Ipv6DisabledOnLoopback() {
  UniqueFd fd(::open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return true;  // no IPv6 at all
  }
  char value = '0';
  return ::read(fd.get(), &value, 1) == 1 && value == '1';
}

}  // namespace

Result<RoutingState> ReadRouting(const std::vector<uint32_t>& tables) {
  // The netlink socket binds to the calling thread's current netns at creation.
  NlSocket sock(nl_socket_alloc());
  if (!sock) {
    return SourceError{kSource, "nl_socket_alloc: out of memory", ENOMEM};
  }
  if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
    return NlError("nl_connect(NETLINK_ROUTE)", err);
  }

  RoutingState state;
  nl_cache* raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock.get(), AF_UNSPEC, &raw); err < 0) {
    return NlError("RTM_GETLINK dump", err);
  }
  NlCache links(raw);

  if (int err = rtnl_rule_alloc_cache(sock.get(), AF_UNSPEC, &raw); err < 0) {
    return NlError("RTM_GETRULE dump", err);
  }
  NlCache rules(raw);
  for (nl_object* obj = nl_cache_get_first(rules.get()); obj; obj = nl_cache_get_next(obj)) {
    auto* rule = reinterpret_cast<rtnl_rule*>(obj);
    // Multicast routing (RTNL_FAMILY_IPMR/IP6MR) keeps rule tables of its own; not Istio's.
    const int af = rtnl_rule_get_family(rule);
    if (af != AF_INET && af != AF_INET6) continue;
    PolicyRule out;
    out.family = FamilyOf(af);
    out.priority = rtnl_rule_get_prio(rule);
    out.fwmark = rtnl_rule_get_mark(rule);
    out.fwmask = out.fwmark == 0 ? 0 : rtnl_rule_get_mask(rule);
    out.table = rtnl_rule_get_table(rule);
    out.action = RuleActionName(rtnl_rule_get_action(rule));
    state.rules.push_back(std::move(out));
  }

  if (int err = rtnl_route_alloc_cache(sock.get(), AF_UNSPEC, 0, &raw); err < 0) {
    return NlError("RTM_GETROUTE dump", err);
  }
  NlCache routes(raw);
  for (nl_object* obj = nl_cache_get_first(routes.get()); obj; obj = nl_cache_get_next(obj)) {
    auto* route = reinterpret_cast<rtnl_route*>(obj);
    const uint32_t table = rtnl_route_get_table(route);
    if (std::find(tables.begin(), tables.end(), table) == tables.end()) {
      continue;
    }
    const int af = rtnl_route_get_family(route);
    if (af != AF_INET && af != AF_INET6) {
      continue;
    }
    RouteEntry out;
    out.family = FamilyOf(af);
    out.table = table;
    out.type = RouteTypeName(rtnl_route_get_type(route));
    out.dst = PrefixText(rtnl_route_get_dst(route), af);
    if (rtnl_route_get_nnexthops(route) > 0) {
      const int ifindex = rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(route, 0));
      char name[IFNAMSIZ + 1] = {};
      if (rtnl_link_i2name(links.get(), ifindex, name, sizeof(name)) != nullptr) {
        out.dev = name;
      }
    }
    state.routes.push_back(std::move(out));
  }

  if (int err = rtnl_addr_alloc_cache(sock.get(), &raw); err < 0) {
    return NlError("RTM_GETADDR dump", err);
  }
  NlCache addrs(raw);
  for (nl_object* obj = nl_cache_get_first(addrs.get()); obj; obj = nl_cache_get_next(obj)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(obj);
    const int af = rtnl_addr_get_family(addr);
    if (af != AF_INET && af != AF_INET6) {
      continue;
    }
    InterfaceAddress out;
    char name[IFNAMSIZ + 1] = {};
    if (rtnl_link_i2name(links.get(), rtnl_addr_get_ifindex(addr), name, sizeof(name)) != nullptr) {
      out.ifname = name;
    }
    out.family = FamilyOf(af);
    out.address = AddressText(rtnl_addr_get_local(addr));
    out.prefix_len = static_cast<uint8_t>(rtnl_addr_get_prefixlen(addr));
    out.global_scope = rtnl_addr_get_scope(addr) == RT_SCOPE_UNIVERSE;
    state.addresses.push_back(std::move(out));
  }

  state.ipv6_disabled = Ipv6DisabledOnLoopback();
  return state;
}

}  // namespace ad
