// ReadRouting: plain rtnetlink dumps over one NETLINK_ROUTE socket (libmnl). The kernel filters
// routes by table (strict dump checking), and interface names come from SIOCGIFNAME for the few
// ifindexes seen instead of a full RTM_GETLINK dump, whose per-link attributes (stats, IPv6
// devconf) cost more to format than everything else here together.

#include "sources/route/route_reader.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/ipv6.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/unique_fd.h"
#include "sources/netfilter/nft_reader_netlink.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kRoute;
constexpr int kMaxAttempts = 3;  // re-reads when a dump was interrupted by a change

using nl::MnlSocket;

// Routes and addresses are dumped per family: an AF_UNSPEC dump runs the kernel's all-family
// dumper under the global RTNL mutex, which serialises the scan workers (and every other RTNL
// user on the node); the per-family IPv4/IPv6 dumpers run under RCU. Same order as AF_UNSPEC.
constexpr std::array<int, 2> kDumpFamilies = {AF_INET, AF_INET6};

Family FamilyOf(int af) { return af == AF_INET6 ? Family::kIpv6 : Family::kIpv4; }

// Text of an address attribute; zeros when it is shorter than the family's address (what the
// libnl-based reader printed), "" when absent.
std::string AddressText(int af, const nlattr* attr) {
  if (attr == nullptr) {
    return "";
  }
  const size_t size = af == AF_INET6 ? 16 : 4;
  std::array<uint8_t, 16> bytes{};
  if (mnl_attr_get_payload_len(attr) >= size) {
    std::memcpy(bytes.data(), mnl_attr_get_payload(attr), size);
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(af == AF_INET6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof(text)) ==
      nullptr) {
    return "?";
  }
  return text;
}

// "0.0.0.0/0" even when the kernel omits RTA_DST for a default route.
std::string PrefixText(const nlattr* dst, int af, uint8_t prefix_len) {
  if (dst == nullptr || mnl_attr_get_payload_len(dst) == 0) {
    return af == AF_INET6 ? "::/0" : "0.0.0.0/0";
  }
  return AddressText(af, dst) + "/" + std::to_string(prefix_len);
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

// The names `ip route` and libnl print for rtm_type; "0x<hex>" for types the kernel adds later.
std::string RouteTypeName(uint8_t type) {
  static constexpr std::array<const char*, RTN_XRESOLVE + 1> kNames = {
      "unspec",    "unicast",     "local",    "broadcast", "anycast", "multicast",
      "blackhole", "unreachable", "prohibit", "throw",     "nat",     "xresolve"};
  if (type < kNames.size()) return kNames[type];
  char buffer[8] = {};
  std::snprintf(buffer, sizeof(buffer), "0x%x", type);
  return buffer;
}

// Fallback only: a /proc/sys lookup walks one dentry hash chain shared by every netns, so its
// cost grows with the node's netns count. /proc/sys/net resolves against the netns of the
// thread that opens the file, i.e. the one NetnsGuard entered.
bool Ipv6DisabledOnLoopbackSysctl() {
  UniqueFd fd(::open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return true;  // no IPv6 at all
  }
  char value = '0';
  return ::read(fd.get(), &value, 1) == 1 && value == '1';
}

// Attribute table of one message: index = attribute type, only types below N are kept.
template <size_t N>
std::array<const nlattr*, N> ParseAttrs(const nlmsghdr* message, size_t header_size) {
  std::array<const nlattr*, N> table{};
  const auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(message, header_size));
  const auto* end = static_cast<const char*>(mnl_nlmsg_get_payload_tail(message));
  while (mnl_attr_ok(attr, static_cast<int>(end - reinterpret_cast<const char*>(attr)))) {
    const uint16_t type = mnl_attr_get_type(attr);
    if (type < N) {
      table[type] = attr;
    }
    attr = mnl_attr_next(attr);
  }
  return table;
}

// The attribute of `type` directly inside `nest`, or nullptr.
const nlattr* NestedAttr(const nlattr* nest, uint16_t type) {
  const auto* attr = static_cast<const nlattr*>(mnl_attr_get_payload(nest));
  int remaining = static_cast<int>(mnl_attr_get_payload_len(nest));
  while (mnl_attr_ok(attr, remaining)) {
    if (mnl_attr_get_type(attr) == type) return attr;
    remaining -= static_cast<int>(MNL_ALIGN(attr->nla_len));
    attr = mnl_attr_next(attr);
  }
  return nullptr;
}

std::optional<uint32_t> U32Attr(const nlattr* attr) {
  if (attr == nullptr || mnl_attr_get_payload_len(attr) < sizeof(uint32_t)) {
    return std::nullopt;
  }
  return mnl_attr_get_u32(attr);
}

// Output interface of a route: the first nexthop of RTA_MULTIPATH, else RTA_OIF (0: none).
int RouteIfindex(const nlattr* multipath, const nlattr* oif) {
  if (multipath != nullptr && mnl_attr_get_payload_len(multipath) >= sizeof(rtnexthop)) {
    return static_cast<const rtnexthop*>(mnl_attr_get_payload(multipath))->rtnh_ifindex;
  }
  return static_cast<int>(U32Attr(oif).value_or(0));
}

// What libnl's route cache used as a route's identity (family, tos, table, dst, priority). The
// libnl-based reader kept only the first route per identity (e.g. of two `ip route append`
// routes that differ only in the device); this keeps that output unchanged.
struct RouteIdentity {
  uint8_t family = 0;
  uint8_t tos = 0;
  uint32_t table = 0;
  uint32_t priority = 0;
  uint8_t dst_len = 0;
  std::array<uint8_t, 16> dst{};
  size_t dst_size = 0;

  bool operator==(const RouteIdentity&) const = default;
};

class RtnlReader {
 public:
  explicit RtnlReader(MnlSocket socket) : socket_(std::move(socket)) {}

  // Sends one dump request and hands every reply message to `handle` (the shared libmnl loop;
  // an interrupted dump, NLM_F_DUMP_INTR, comes back as EINTR).
  template <typename Fill, typename Handle>
  Status Dump(uint16_t type, const char* what, Fill fill, Handle handle) {
    std::array<char, 256> request_buffer{};
    nlmsghdr* request = mnl_nlmsg_put_header(request_buffer.data());
    request->nlmsg_type = type;
    request->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    fill(request);
    return nl::RunRequest(socket_.get(), request, kSource, what, [&](const nlmsghdr* message) {
      handle(message);
      return nl::Next::kContinue;
    });
  }

  // Interface name by index, resolved in the socket's netns (SIOCGIFNAME works on any socket
  // and answers for the namespace the socket belongs to). "" when it is gone.
  const std::string& InterfaceName(int ifindex) {
    static const std::string kNone;
    if (ifindex <= 0) {
      return kNone;
    }
    auto [it, inserted] = names_.try_emplace(ifindex);
    if (inserted) {
      ifreq request{};
      request.ifr_ifindex = ifindex;
      if (::ioctl(mnl_socket_get_fd(socket_.get()), SIOCGIFNAME, &request) == 0) {
        it->second.assign(request.ifr_name, ::strnlen(request.ifr_name, IFNAMSIZ));
      }
    }
    return it->second;
  }

  Result<RoutingState> Read(const std::vector<uint32_t>& tables) {
    RoutingState state;
    if (Status read = ReadRules(state); !read.ok()) return read.error();
    // One requested table (Istio's 100): let the kernel filter. Several: one unfiltered dump, so
    // the order stays the kernel's dump order.
    const std::optional<uint32_t> kernel_filter =
        tables.size() == 1 ? std::optional(tables.front()) : std::nullopt;
    if (!tables.empty()) {
      if (Status read = ReadRoutes(kernel_filter, tables, state); !read.ok()) return read.error();
    }
    if (Status read = ReadAddresses(state); !read.ok()) return read.error();
    // Disabling IPv6 on a device removes its IPv6 addresses and refuses new ones, so an IPv6
    // address on lo already answers; only without one is the devconf asked.
    const bool lo_has_ipv6 = std::any_of(
        state.addresses.begin(), state.addresses.end(),
        [](const InterfaceAddress& a) { return a.family == Family::kIpv6 && a.ifname == "lo"; });
    state.ipv6_disabled = !lo_has_ipv6 && Ipv6DisabledOnLoopback();
    state.loopback = ReadLoopbackLink();
    return state;
  }

  // lo's link flags. SIOCGIFFLAGS answers dev_get_flags(), the value RTM_GETLINK reports as
  // ifi_flags, without the kernel formatting lo's stats and IPv6 devconf for a link message.
  LoopbackLink ReadLoopbackLink() const {
    LoopbackLink link;
    ifreq request{};
    std::memcpy(request.ifr_name, "lo", 3);
    if (::ioctl(mnl_socket_get_fd(socket_.get()), SIOCGIFFLAGS, &request) == 0) {
      link.known = true;
      link.found = true;
      link.flags = static_cast<uint16_t>(request.ifr_flags);
      link.up = (link.flags & IFF_UP) != 0;
    } else if (errno == ENODEV) {
      link.known = true;  // the netns has no lo (a kernel never lets lo go; a fake or odd netns)
    }
    return link;
  }

 private:
  Status ReadRules(RoutingState& state) {
    auto fill = [](nlmsghdr* request) {
      auto* header =
          static_cast<fib_rule_hdr*>(mnl_nlmsg_put_extra_header(request, sizeof(fib_rule_hdr)));
      header->family = AF_UNSPEC;
    };
    return Dump(RTM_GETRULE, "RTM_GETRULE dump", fill, [&state](const nlmsghdr* message) {
      if (message->nlmsg_type != RTM_NEWRULE ||
          mnl_nlmsg_get_payload_len(message) < sizeof(fib_rule_hdr)) {
        return;
      }
      const auto* header = static_cast<const fib_rule_hdr*>(mnl_nlmsg_get_payload(message));
      // Multicast routing (RTNL_FAMILY_IPMR/IP6MR) keeps rule tables of its own; not Istio's.
      if (header->family != AF_INET && header->family != AF_INET6) {
        return;
      }
      const auto attrs = ParseAttrs<FRA_FWMASK + 1>(message, sizeof(fib_rule_hdr));
      PolicyRule out;
      out.family = FamilyOf(header->family);
      out.priority = U32Attr(attrs[FRA_PRIORITY]).value_or(0);
      out.fwmark = U32Attr(attrs[FRA_FWMARK]).value_or(0);
      out.fwmask = out.fwmark == 0 ? 0 : U32Attr(attrs[FRA_FWMASK]).value_or(0);
      out.table = U32Attr(attrs[FRA_TABLE]).value_or(header->table);
      out.action = RuleActionName(header->action);
      state.rules.push_back(std::move(out));
    });
  }

  // `kernel_filter`: rtm_table + RTA_TABLE, applied by the kernel with NETLINK_GET_STRICT_CHK
  // (an AF_UNSPEC dump of a table that does not exist is empty, not ENOENT). The table check
  // below stays for kernels that ignore the filter.
  Status ReadRoutes(std::optional<uint32_t> kernel_filter, const std::vector<uint32_t>& tables,
                    RoutingState& state) {
    for (int family : kDumpFamilies) {
      if (Status read = ReadRoutes(family, kernel_filter, tables, state); !read.ok()) return read;
    }
    return OkStatus();
  }

  Status ReadRoutes(int family, std::optional<uint32_t> kernel_filter,
                    const std::vector<uint32_t>& tables, RoutingState& state) {
    auto fill = [family, kernel_filter](nlmsghdr* request) {
      auto* header = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(request, sizeof(rtmsg)));
      header->rtm_family = static_cast<uint8_t>(family);
      if (kernel_filter) {
        header->rtm_table = *kernel_filter < 256 ? static_cast<uint8_t>(*kernel_filter) : 0;
        mnl_attr_put_u32(request, RTA_TABLE, *kernel_filter);
      }
    };
    return Dump(RTM_GETROUTE, "RTM_GETROUTE dump", fill, [&](const nlmsghdr* message) {
      if (message->nlmsg_type != RTM_NEWROUTE ||
          mnl_nlmsg_get_payload_len(message) < sizeof(rtmsg)) {
        return;
      }
      const auto* header = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(message));
      const int af = header->rtm_family;
      if (af != family) {
        return;  // a kernel without this family answers with the all-family dump
      }
      const auto attrs = ParseAttrs<RTA_TABLE + 1>(message, sizeof(rtmsg));
      const uint32_t route_table = U32Attr(attrs[RTA_TABLE]).value_or(header->rtm_table);
      if (std::find(tables.begin(), tables.end(), route_table) == tables.end()) {
        return;
      }
      RouteIdentity identity{header->rtm_family, header->rtm_tos, route_table,
                             U32Attr(attrs[RTA_PRIORITY]).value_or(0), header->rtm_dst_len};
      if (const nlattr* dst = attrs[RTA_DST]) {
        identity.dst_size = std::min<size_t>(mnl_attr_get_payload_len(dst), identity.dst.size());
        std::memcpy(identity.dst.data(), mnl_attr_get_payload(dst), identity.dst_size);
      }
      if (std::find(seen_routes_.begin(), seen_routes_.end(), identity) != seen_routes_.end()) {
        return;
      }
      seen_routes_.push_back(identity);
      RouteEntry out;
      out.family = FamilyOf(af);
      out.table = route_table;
      out.type = RouteTypeName(header->rtm_type);
      out.dst = PrefixText(attrs[RTA_DST], af, header->rtm_dst_len);
      out.dev = InterfaceName(RouteIfindex(attrs[RTA_MULTIPATH], attrs[RTA_OIF]));
      state.routes.push_back(std::move(out));
    });
  }

  Status ReadAddresses(RoutingState& state) {
    for (int family : kDumpFamilies) {
      if (Status read = ReadAddresses(family, state); !read.ok()) return read;
    }
    return OkStatus();
  }

  Status ReadAddresses(int family, RoutingState& state) {
    auto fill = [family](nlmsghdr* request) {
      auto* header =
          static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(request, sizeof(ifaddrmsg)));
      header->ifa_family = static_cast<uint8_t>(family);
    };
    return Dump(RTM_GETADDR, "RTM_GETADDR dump", fill, [&](const nlmsghdr* message) {
      if (message->nlmsg_type != RTM_NEWADDR ||
          mnl_nlmsg_get_payload_len(message) < sizeof(ifaddrmsg)) {
        return;
      }
      const auto* header = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(message));
      const int af = header->ifa_family;
      if (af != family) {
        return;
      }
      const auto attrs = ParseAttrs<IFA_LOCAL + 1>(message, sizeof(ifaddrmsg));
      InterfaceAddress out;
      out.ifname = InterfaceName(static_cast<int>(header->ifa_index));
      out.family = FamilyOf(af);
      // IPv6 sends only IFA_ADDRESS; IPv4 sends IFA_LOCAL (+ IFA_ADDRESS = peer when different).
      out.address = AddressText(af, attrs[IFA_LOCAL] ? attrs[IFA_LOCAL] : attrs[IFA_ADDRESS]);
      out.prefix_len = header->ifa_prefixlen;
      out.global_scope = header->ifa_scope == RT_SCOPE_UNIVERSE;
      state.addresses.push_back(std::move(out));
    });
  }

  // disable_ipv6 of lo from its IPv6 devconf (RTM_GETLINK for lo alone, stats skipped): the same
  // value as /proc/sys/net/ipv6/conf/lo/disable_ipv6 at a cost independent of the netns count.
  bool Ipv6DisabledOnLoopback() {
    std::array<char, 256> request_buffer{};
    nlmsghdr* request = mnl_nlmsg_put_header(request_buffer.data());
    request->nlmsg_type = RTM_GETLINK;
    request->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    auto* header = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(request, sizeof(ifinfomsg)));
    header->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(request, IFLA_IFNAME, "lo");
    mnl_attr_put_u32(request, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    std::optional<bool> disabled;
    Status asked = nl::RunRequest(socket_.get(), request, kSource, "RTM_GETLINK lo",
                                  [&disabled](const nlmsghdr* message) {
                                    if (message->nlmsg_type == RTM_NEWLINK &&
                                        mnl_nlmsg_get_payload_len(message) >= sizeof(ifinfomsg)) {
                                      disabled = LinkIpv6Disabled(message);
                                    }
                                    return nl::Next::kContinue;
                                  });
    if (!asked.ok() || !disabled) return Ipv6DisabledOnLoopbackSysctl();
    return *disabled;
  }

  // True when the link has no IPv6 device state (no IPv6 at all) or its devconf says disabled.
  static bool LinkIpv6Disabled(const nlmsghdr* message) {
    const auto attrs = ParseAttrs<IFLA_AF_SPEC + 1>(message, sizeof(ifinfomsg));
    if (attrs[IFLA_AF_SPEC] == nullptr) return true;
    const nlattr* inet6 = NestedAttr(attrs[IFLA_AF_SPEC], AF_INET6);
    if (inet6 == nullptr) return true;
    const nlattr* conf = NestedAttr(inet6, IFLA_INET6_CONF);
    constexpr size_t kOffset = DEVCONF_DISABLE_IPV6 * sizeof(int32_t);
    if (conf == nullptr || mnl_attr_get_payload_len(conf) < kOffset + sizeof(int32_t)) {
      return true;
    }
    int32_t value = 0;
    std::memcpy(&value, static_cast<const char*>(mnl_attr_get_payload(conf)) + kOffset,
                sizeof(value));
    return value != 0;
  }

  MnlSocket socket_;
  // A node's host netns can have thousands of interfaces (one veth per pod).
  std::unordered_map<int, std::string> names_;
  std::vector<RouteIdentity> seen_routes_;  // only the requested tables: a short list
};

Result<MnlSocket> OpenRouteSocket() {
  // The socket binds to the calling thread's current netns at creation.
  MnlSocket socket(mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC));
  if (!socket) {
    return ErrnoError(kSource, "mnl_socket_open(NETLINK_ROUTE)");
  }
  if (mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0) {
    return ErrnoError(kSource, "mnl_socket_bind(NETLINK_ROUTE)");
  }
  // Lets the kernel apply the route table filter; without it (pre-4.20) the dump is unfiltered
  // and ReadRoutes filters by itself.
  const int on = 1;
  ::setsockopt(mnl_socket_get_fd(socket.get()), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &on,
               sizeof(on));
  return socket;
}

}  // namespace

Result<RoutingState> ReadRouting(const std::vector<uint32_t>& tables) {
  std::optional<SourceError> last_error;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto socket = OpenRouteSocket();
    if (!socket) {
      return socket.error();
    }
    RtnlReader reader(std::move(*socket));
    auto state = reader.Read(tables);
    if (!state) {
      if (state.error().error_number == EINTR) {
        last_error = state.error();
        continue;  // routing changed during a dump
      }
      return state.error();
    }
    return state;
  }
  return *last_error;
}

}  // namespace ad
