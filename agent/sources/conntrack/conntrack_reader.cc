#include "sources/conntrack/conntrack_reader.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "base/unique_fd.h"
#include "sources/netfilter/nft_reader_netlink.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kConntrack;

// The kernel's CTA_FILTER_F_* bits (net/netfilter/nf_conntrack_netlink.c; not in the uapi
// headers): which fields of the CTA_TUPLE_REPLY given in the request must match (CTA_IP_DST would
// be 1 << 1; it takes one address per dump, and every dump walks the whole table).
constexpr uint32_t kFilterProtoNum = 1u << 3;

struct Address {
  int af = AF_INET;
  std::array<uint8_t, 16> bytes{};
  size_t size() const { return af == AF_INET6 ? 16 : 4; }
};

std::optional<Address> ParseAddress(int af, const std::string& text) {
  Address address;
  address.af = af;
  if (::inet_pton(af, text.c_str(), address.bytes.data()) != 1) return std::nullopt;
  return address;
}

std::string AddressText(int af, const void* bytes) {
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(af, bytes, text, sizeof(text)) == nullptr) return "?";
  return text;
}

// Attribute table of a nest (or of a message's payload): index = type, later duplicates win.
template <size_t N>
std::array<const nlattr*, N> Table(const void* payload, size_t length) {
  std::array<const nlattr*, N> table{};
  const auto* attr = static_cast<const nlattr*>(payload);
  int remaining = static_cast<int>(length);
  while (mnl_attr_ok(attr, remaining)) {
    const uint16_t type = mnl_attr_get_type(attr);
    if (type < N) table[type] = attr;
    remaining -= static_cast<int>(MNL_ALIGN(attr->nla_len));
    attr = mnl_attr_next(attr);
  }
  return table;
}

template <size_t N>
std::array<const nlattr*, N> NestTable(const nlattr* nest) {
  if (nest == nullptr) return {};
  return Table<N>(mnl_attr_get_payload(nest), mnl_attr_get_payload_len(nest));
}

std::optional<uint32_t> Be32(const nlattr* attr) {
  if (attr == nullptr || mnl_attr_get_payload_len(attr) < 4) return std::nullopt;
  return ntohl(mnl_attr_get_u32(attr));
}

uint16_t Be16(const nlattr* attr) {
  if (attr == nullptr || mnl_attr_get_payload_len(attr) < 2) return 0;
  return ntohs(mnl_attr_get_u16(attr));
}

struct Tuple {
  std::string src;
  std::string dst;
  std::array<uint8_t, 16> dst_bytes{};
  uint8_t protonum = 0;
  uint16_t sport = 0;
  uint16_t dport = 0;
};

std::optional<Tuple> ParseTuple(int af, const nlattr* nest) {
  if (nest == nullptr) return std::nullopt;
  const auto tuple = NestTable<CTA_TUPLE_MAX + 1>(nest);
  const auto ip = NestTable<CTA_IP_MAX + 1>(tuple[CTA_TUPLE_IP]);
  const auto proto = NestTable<CTA_PROTO_MAX + 1>(tuple[CTA_TUPLE_PROTO]);
  const size_t size = af == AF_INET6 ? 16 : 4;
  const nlattr* src = ip[af == AF_INET6 ? CTA_IP_V6_SRC : CTA_IP_V4_SRC];
  const nlattr* dst = ip[af == AF_INET6 ? CTA_IP_V6_DST : CTA_IP_V4_DST];
  if (src == nullptr || dst == nullptr || mnl_attr_get_payload_len(src) < size ||
      mnl_attr_get_payload_len(dst) < size) {
    return std::nullopt;
  }
  Tuple out;
  out.src = AddressText(af, mnl_attr_get_payload(src));
  out.dst = AddressText(af, mnl_attr_get_payload(dst));
  std::memcpy(out.dst_bytes.data(), mnl_attr_get_payload(dst), size);
  if (proto[CTA_PROTO_NUM] != nullptr && mnl_attr_get_payload_len(proto[CTA_PROTO_NUM]) >= 1) {
    out.protonum = mnl_attr_get_u8(proto[CTA_PROTO_NUM]);
  }
  out.sport = Be16(proto[CTA_PROTO_SRC_PORT]);
  out.dport = Be16(proto[CTA_PROTO_DST_PORT]);
  return out;
}

// One dump: every message is examined (counted against the bound), the matching ones kept.
class Dump {
 public:
  Dump(const ProbeConntrackOptions& options, ProbeConntrackState& state,
       std::vector<Address> wanted)
      : options_(options), state_(state), wanted_(std::move(wanted)) {}

  // False when the kernel handed back something the filter should have dropped.
  bool kernel_filtered() const { return kernel_filtered_; }

  nl::Next OnMessage(const nlmsghdr* message, int af) {
    if (state_.examined >= options_.max_examined) {
      state_.truncated = true;
      return nl::Next::kStop;
    }
    ++state_.examined;
    const size_t header = MNL_ALIGN(sizeof(nfgenmsg));
    const size_t payload = mnl_nlmsg_get_payload_len(message);
    const auto attrs = Table<CTA_MAX + 1>(mnl_nlmsg_get_payload_offset(message, sizeof(nfgenmsg)),
                                          payload - std::min(payload, header));
    const std::optional<Tuple> orig = ParseTuple(af, attrs[CTA_TUPLE_ORIG]);
    const std::optional<Tuple> reply = ParseTuple(af, attrs[CTA_TUPLE_REPLY]);
    const uint32_t status = Be32(attrs[CTA_STATUS]).value_or(0);
    if (!orig || !reply) return nl::Next::kContinue;  // neither IPv4 nor IPv6, or malformed
    if ((status & IPS_SEEN_REPLY) != 0) {
      kernel_filtered_ = false;  // what the kernel's status filter would have dropped
      return nl::Next::kContinue;
    }
    if (reply->protonum != IPPROTO_TCP) return nl::Next::kContinue;
    const bool to_snat = std::any_of(wanted_.begin(), wanted_.end(), [&](const Address& address) {
      return address.af == af &&
             std::memcmp(address.bytes.data(), reply->dst_bytes.data(), address.size()) == 0;
    });
    if (!to_snat) return nl::Next::kContinue;
    ++state_.matched;
    if (state_.entries.size() >= options_.max_entries) {
      state_.truncated = true;
      return nl::Next::kContinue;  // counted, not kept
    }
    ProbeConntrackEntry& entry = state_.entries.emplace_back();
    entry.family = af == AF_INET6 ? Family::kIpv6 : Family::kIpv4;
    entry.orig_src = orig->src;
    entry.orig_dst = orig->dst;
    entry.orig_sport = orig->sport;
    entry.orig_dport = orig->dport;
    entry.reply_src = reply->src;
    entry.reply_dst = reply->dst;
    entry.reply_sport = reply->sport;
    entry.reply_dport = reply->dport;
    entry.status = status;
    entry.timeout_s = Be32(attrs[CTA_TIMEOUT]).value_or(0);
    entry.id = Be32(attrs[CTA_ID]).value_or(0);
    const auto protoinfo = NestTable<CTA_PROTOINFO_MAX + 1>(attrs[CTA_PROTOINFO]);
    const auto tcp = NestTable<CTA_PROTOINFO_TCP_MAX + 1>(protoinfo[CTA_PROTOINFO_TCP]);
    if (const nlattr* state = tcp[CTA_PROTOINFO_TCP_STATE];
        state != nullptr && mnl_attr_get_payload_len(state) >= 1) {
      entry.tcp_state = mnl_attr_get_u8(state);
    }
    const auto timestamp = NestTable<CTA_TIMESTAMP_MAX + 1>(attrs[CTA_TIMESTAMP]);
    if (const nlattr* start = timestamp[CTA_TIMESTAMP_START];
        start != nullptr && mnl_attr_get_payload_len(start) >= 8) {
      uint64_t ns = 0;
      std::memcpy(&ns, mnl_attr_get_payload(start), sizeof(ns));
      entry.start_unix_ms = static_cast<int64_t>(be64toh(ns) / 1000000);
    }
    return nl::Next::kContinue;
  }

 private:
  const ProbeConntrackOptions& options_;
  ProbeConntrackState& state_;
  std::vector<Address> wanted_;
  bool kernel_filtered_ = true;
};

enum class KernelFilter : uint8_t {
  kNone,
  kUnreplied,     // CTA_STATUS 0 under CTA_STATUS_MASK IPS_SEEN_REPLY
  kUnrepliedTcp,  // and the reply tuple's protocol (CTA_FILTER: needs a family)
};

// Sends one IPCTNL_MSG_CT_GET dump of family `af` (AF_UNSPEC: every family), filtered in the
// kernel as asked. The SNAT address (and, without kUnrepliedTcp, the protocol) is checked here:
// every dump walks the kernel's whole conntrack hash (all netns share it), and that walk, not
// the few entries returned, is what a dump costs, so one walk serves every family and address.
Status RunDump(int af, KernelFilter filter, Dump& dump) {
  Result<nl::MnlSocket> socket = nl::OpenNetfilterSocket(kSource);
  if (!socket.ok()) return socket.error();
  std::array<char, 256> buffer{};
  nlmsghdr* request = mnl_nlmsg_put_header(buffer.data());
  request->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
  request->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* header = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(request, sizeof(nfgenmsg)));
  header->nfgen_family = static_cast<uint8_t>(af);
  header->version = NFNETLINK_V0;
  header->res_id = 0;
  if (filter == KernelFilter::kUnrepliedTcp) {
    nlattr* reply = mnl_attr_nest_start(request, CTA_TUPLE_REPLY);
    nlattr* proto = mnl_attr_nest_start(request, CTA_TUPLE_PROTO);
    mnl_attr_put_u8(request, CTA_PROTO_NUM, IPPROTO_TCP);
    mnl_attr_nest_end(request, proto);
    mnl_attr_nest_end(request, reply);
    nlattr* flags = mnl_attr_nest_start(request, CTA_FILTER);
    mnl_attr_put_u32(request, CTA_FILTER_REPLY_FLAGS, kFilterProtoNum);
    mnl_attr_nest_end(request, flags);
  }
  if (filter != KernelFilter::kNone) {
    // (status & IPS_SEEN_REPLY) == 0: unreplied only.
    mnl_attr_put_u32(request, CTA_STATUS, htonl(0));
    mnl_attr_put_u32(request, CTA_STATUS_MASK, htonl(IPS_SEEN_REPLY));
  }
  const std::string what = std::string("ctnetlink dump (") +
                           (af == AF_UNSPEC  ? "all families"
                            : af == AF_INET6 ? "ipv6"
                                             : "ipv4") +
                           (filter != KernelFilter::kNone ? ", kernel filter" : "") + ")";
  return nl::RunRequest(socket->get(), request, kSource, what, [&dump](const nlmsghdr* message) {
    if (message->nlmsg_type != ((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW) ||
        mnl_nlmsg_get_payload_len(message) < sizeof(nfgenmsg)) {
      return nl::Next::kContinue;
    }
    const auto* family = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(message));
    return dump.OnMessage(message, family->nfgen_family);
  });
}

SourceError Unavailable(const SourceError& error) {
  SourceError out = error;
  if (error.error_number == EOPNOTSUPP || error.error_number == EPROTONOSUPPORT ||
      error.error_number == ENOENT) {
    out.message += " (ctnetlink unavailable: is nf_conntrack_netlink loaded in this kernel?)";
  } else if (error.error_number == EPERM || error.error_number == EACCES) {
    out.message += " (ctnetlink needs CAP_NET_ADMIN in the host netns)";
  }
  return out;
}

}  // namespace

namespace {

// A small decimal sysctl of the calling thread's netns (/proc/sys/net resolves against the netns
// of the thread that opens the file); nullopt when unreadable.
std::optional<uint64_t> ReadNetSysctl(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::array<char, 32> text{};
  const ssize_t n = ::read(fd.get(), text.data(), text.size() - 1);
  if (n <= 0 || text[0] < '0' || text[0] > '9') return std::nullopt;
  uint64_t value = 0;
  for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; ++i) {
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    if (value > (uint64_t{1} << 40)) return std::nullopt;
  }
  return value;
}

}  // namespace

uint32_t ReadSynSentTimeout() {
  const std::optional<uint64_t> value =
      ReadNetSysctl("/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_syn_sent");
  return value && *value <= 86400u * 365 ? static_cast<uint32_t>(*value) : 0;
}

Result<ProbeConntrackState> ReadProbeConntrack(const ProbeConntrackOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  ProbeConntrackState state;
  state.collected = true;
  std::vector<Address> v4;
  std::vector<Address> v6;
  for (const std::string& text : options.snat_v4) {
    auto address = ParseAddress(AF_INET, text);
    if (!address) return SourceError{kSource, "bad IPv4 probe SNAT address '" + text + "'", EINVAL};
    v4.push_back(*address);
    state.snat_addresses.push_back(text);
  }
  for (const std::string& text : options.snat_v6) {
    auto address = ParseAddress(AF_INET6, text);
    if (!address) return SourceError{kSource, "bad IPv6 probe SNAT address '" + text + "'", EINVAL};
    v6.push_back(*address);
    state.snat_addresses.push_back(text);
  }

  std::vector<Address> wanted = v4;
  wanted.insert(wanted.end(), v6.begin(), v6.end());
  if (wanted.empty()) return state;
  // Every dump walks the whole (shared) conntrack hash; a netns without a single entry has no
  // unreplied probe either, and its per-netns count says so for the price of a read.
  if (ReadNetSysctl("/proc/sys/net/netfilter/nf_conntrack_count") == uint64_t{0}) {
    state.filter = "empty";
    state.syn_sent_timeout_s = ReadSynSentTimeout();
    return state;
  }
  // Kernel filter first: per family with addresses to look for, unreplied TCP only (CTA_FILTER
  // needs a family: a walk each); a kernel refusing CTA_FILTER gets one walk of every family with
  // the status filter alone; one refusing both gets the plain dump, parsed here.
  struct Attempt {
    int af;
    KernelFilter filter;
  };
  std::vector<std::vector<Attempt>> plans;
  if (!options.force_user_space) {
    std::vector<Attempt> per_family;
    if (!v4.empty()) per_family.push_back({AF_INET, KernelFilter::kUnrepliedTcp});
    if (!v6.empty()) per_family.push_back({AF_INET6, KernelFilter::kUnrepliedTcp});
    plans.push_back(per_family);
    plans.push_back({{AF_UNSPEC, KernelFilter::kUnreplied}});
  }
  plans.push_back({{AF_UNSPEC, KernelFilter::kNone}});
  Status last = OkStatus();
  for (const std::vector<Attempt>& plan : plans) {
    state.entries.clear();
    state.matched = 0;
    state.examined = 0;
    state.truncated = false;
    last = OkStatus();
    bool kernel_filtered = true;
    for (const Attempt& attempt : plan) {
      Dump dump(options, state, wanted);
      last = RunDump(attempt.af, attempt.filter, dump);
      if (!last.ok()) break;
      kernel_filtered =
          kernel_filtered && attempt.filter != KernelFilter::kNone && dump.kernel_filtered();
    }
    if (last.ok()) {
      // A kernel that ignores CTA_FILTER returns the whole table: the user-space check did it.
      state.filter = kernel_filtered ? "kernel" : "user-space";
      break;
    }
    // A refused filter (EOPNOTSUPP/EINVAL) tries the next plan; anything else is the answer.
    if (last.error().error_number != EOPNOTSUPP && last.error().error_number != EINVAL) break;
  }
  if (!last.ok()) return Unavailable(last.error());
  std::sort(state.entries.begin(), state.entries.end(),
            [](const ProbeConntrackEntry& a, const ProbeConntrackEntry& b) {
              return std::tie(a.orig_dst, a.orig_dport, a.orig_src, a.orig_sport) <
                     std::tie(b.orig_dst, b.orig_dport, b.orig_src, b.orig_sport);
            });
  state.syn_sent_timeout_s = ReadSynSentTimeout();
  state.dump_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return state;
}

}  // namespace ad
