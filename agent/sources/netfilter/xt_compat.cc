#include "sources/netfilter/xt_compat.h"

// netinet/in.h must come before the linux uapi headers so their in.h/in6.h definitions yield.
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/xt_CONNMARK.h>
#include <linux/netfilter/xt_CT.h>
#include <linux/netfilter/xt_MARK.h>
#include <linux/netfilter/xt_TPROXY.h>
#include <linux/netfilter/xt_addrtype.h>
#include <linux/netfilter/xt_comment.h>
#include <linux/netfilter/xt_connmark.h>
#include <linux/netfilter/xt_conntrack.h>
#include <linux/netfilter/xt_mark.h>
#include <linux/netfilter/xt_multiport.h>
#include <linux/netfilter/xt_owner.h>
#include <linux/netfilter/xt_set.h>
#include <linux/netfilter/xt_state.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <netinet/in.h>

#include <array>
#include <cstring>
#include <optional>

namespace ad::xt {
namespace {

// Copies a payload into a struct only when it is long enough; the kernel pads payloads to
// XT_ALIGN, so a longer payload is fine, a shorter one is corrupt or a different revision.
template <typename T>
std::optional<T> ReadStruct(std::span<const uint8_t> payload) {
  if (payload.size() < sizeof(T)) {
    return std::nullopt;
  }
  T value;
  std::memcpy(&value, payload.data(), sizeof(T));
  return value;
}

Match UnknownMatch(std::string text) {
  Match m;
  m.kind = MatchKind::kUnknown;
  m.text = std::move(text);
  return m;
}

Action UnknownAction(std::string text) {
  Action a;
  a.kind = ActionKind::kUnknown;
  a.text = std::move(text);
  return a;
}

std::string Describe(std::string_view what, std::string_view name, uint32_t revision,
                     std::string_view detail) {
  std::string text = "xt ";
  text += what;
  text += ' ';
  text += name;
  text += " rev ";
  text += std::to_string(revision);
  if (!detail.empty()) {
    text += ": ";
    text += detail;
  }
  return text;
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

Match PortMatch(MatchKind kind, uint16_t lo, uint16_t hi, bool negated) {
  Match m;
  m.kind = kind;
  m.value = lo;
  m.value2 = hi;
  m.negated = negated;
  return m;
}

// Port ranges in xt_tcp/xt_udp; the default 0:65535 range matches everything and is omitted.
void AppendPortRanges(const uint16_t (&spts)[2], const uint16_t (&dpts)[2], bool inv_src,
                      bool inv_dst, std::vector<Match>* matches) {
  if (!(spts[0] == 0 && spts[1] == 0xffff) || inv_src) {
    matches->push_back(PortMatch(MatchKind::kSrcPort, spts[0], spts[1], inv_src));
  }
  if (!(dpts[0] == 0 && dpts[1] == 0xffff) || inv_dst) {
    matches->push_back(PortMatch(MatchKind::kDstPort, dpts[0], dpts[1], inv_dst));
  }
}

void DecodeTcp(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
               std::vector<Match>* matches) {
  auto tcp = ReadStruct<xt_tcp>(payload);
  if (!tcp) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "short payload")));
    return;
  }
  AppendPortRanges(tcp->spts, tcp->dpts, tcp->invflags & XT_TCP_INV_SRCPT,
                   tcp->invflags & XT_TCP_INV_DSTPT, matches);
  if (tcp->option != 0 || tcp->flg_mask != 0 ||
      (tcp->invflags & (XT_TCP_INV_FLAGS | XT_TCP_INV_OPTION))) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "tcp flags/option")));
  }
}

void DecodeUdp(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
               std::vector<Match>* matches) {
  auto udp = ReadStruct<xt_udp>(payload);
  if (!udp) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "short payload")));
    return;
  }
  AppendPortRanges(udp->spts, udp->dpts, udp->invflags & XT_UDP_INV_SRCPT,
                   udp->invflags & XT_UDP_INV_DSTPT, matches);
}

template <typename Info>
void DecodeMarkLike(MatchKind kind, std::string_view name, uint32_t rev,
                    std::span<const uint8_t> payload, std::vector<Match>* matches) {
  auto info = ReadStruct<Info>(payload);
  if (!info) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "short payload")));
    return;
  }
  Match m;
  m.kind = kind;
  m.value = info->mark;
  m.value2 = info->mask;
  m.negated = info->invert != 0;
  matches->push_back(m);
}

void DecodeOwner(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
                 std::vector<Match>* matches) {
  auto info = ReadStruct<xt_owner_match_info>(payload);
  if (!info || rev != 1) {
    matches->push_back(
        UnknownMatch(Describe("match", name, rev, info ? "unsupported revision" : "short")));
    return;
  }
  if (info->match & XT_OWNER_SOCKET) {
    Match m;
    m.kind = MatchKind::kSocketExists;
    m.negated = info->invert & XT_OWNER_SOCKET;
    matches->push_back(m);
  }
  if (info->match & XT_OWNER_UID) {
    if (info->uid_min != info->uid_max) {
      matches->push_back(UnknownMatch(Describe("match", name, rev, "uid range")));
    } else {
      Match m;
      m.kind = MatchKind::kSocketUid;
      m.value = info->uid_min;
      m.negated = info->invert & XT_OWNER_UID;
      matches->push_back(m);
    }
  }
  if (info->match & XT_OWNER_GID) {
    if (info->gid_min != info->gid_max || (info->match & XT_OWNER_SUPPL_GROUPS)) {
      matches->push_back(UnknownMatch(Describe("match", name, rev, "gid range/suppl groups")));
    } else {
      Match m;
      m.kind = MatchKind::kSocketGid;
      m.value = info->gid_min;
      m.negated = info->invert & XT_OWNER_GID;
      matches->push_back(m);
    }
  }
}

void DecodeSet(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
               const SetNameResolver& resolve_set, std::vector<Match>* matches) {
  // Revisions 1..4 all start with struct xt_set_info (index, dim, flags); revision 0 differs.
  auto info = ReadStruct<xt_set_info>(payload);
  if (rev < 1 || rev > 4 || !info) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "unsupported layout")));
    return;
  }
  size_t expected = rev <= 2   ? sizeof(xt_set_info_match_v1)
                    : rev == 3 ? sizeof(xt_set_info_match_v3)
                               : sizeof(xt_set_info_match_v4);
  if (payload.size() < expected) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "short payload")));
    return;
  }
  if (info->dim < 1 || info->dim > IPSET_DIM_MAX) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "bad dimension")));
    return;
  }
  std::string set_name = resolve_set ? resolve_set(info->index) : std::string();
  if (set_name.empty()) {
    set_name = "index:" + std::to_string(info->index);
  }
  std::string dirs;
  for (int dim = 1; dim <= info->dim; ++dim) {
    if (!dirs.empty()) {
      dirs += ',';
    }
    dirs += (info->flags & (1 << dim)) ? "src" : "dst";
  }
  Match m;
  m.kind = MatchKind::kSet;
  m.text = set_name + " " + dirs;
  m.negated = info->flags & IPSET_INV_MATCH;
  matches->push_back(m);
}

void AppendCtState(uint32_t state_mask, bool negated, std::vector<Match>* matches) {
  Match m;
  m.kind = MatchKind::kCtState;
  m.value = state_mask;
  m.negated = negated;
  matches->push_back(m);
}

void DecodeConntrack(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
                     std::vector<Match>* matches) {
  uint16_t match_flags = 0;
  uint16_t invert_flags = 0;
  uint32_t state_mask = 0;
  if (rev == 1) {
    auto info = ReadStruct<xt_conntrack_mtinfo1>(payload);
    if (info) {
      match_flags = info->match_flags;
      invert_flags = info->invert_flags;
      state_mask = info->state_mask;
    } else {
      rev = 0xffff;  // fall through to "short payload"
    }
  } else if (rev == 2 || rev == 3) {
    std::optional<xt_conntrack_mtinfo2> info;
    if (rev == 3 && payload.size() < sizeof(xt_conntrack_mtinfo3)) {
      info.reset();
    } else {
      info = ReadStruct<xt_conntrack_mtinfo2>(payload);  // mtinfo3 extends mtinfo2
    }
    if (info) {
      match_flags = info->match_flags;
      invert_flags = info->invert_flags;
      state_mask = info->state_mask;
    } else {
      rev = 0xffff;
    }
  }
  if (rev != 1 && rev != 2 && rev != 3) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "unsupported layout")));
    return;
  }
  if (match_flags & XT_CONNTRACK_STATE) {
    AppendCtState(state_mask, invert_flags & XT_CONNTRACK_STATE, matches);
  }
  uint16_t rest = match_flags & ~(XT_CONNTRACK_STATE | XT_CONNTRACK_STATE_ALIAS);
  if (rest != 0) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "flags " + Hex(rest))));
  }
}

void DecodeMultiport(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
                     std::vector<Match>* matches) {
  auto info = ReadStruct<xt_multiport_v1>(payload);
  if (rev != 1 || !info || info->count > XT_MULTI_PORTS) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "unsupported layout")));
    return;
  }
  MatchKind kind = info->flags == XT_MULTIPORT_SOURCE        ? MatchKind::kSrcPort
                   : info->flags == XT_MULTIPORT_DESTINATION ? MatchKind::kDstPort
                                                             : MatchKind::kUnknown;
  bool single_port = info->count == 1;
  bool single_range = info->count == 2 && info->pflags[0] != 0;
  if (kind != MatchKind::kUnknown && (single_port || single_range)) {
    matches->push_back(
        PortMatch(kind, info->ports[0], info->ports[single_port ? 0 : 1], info->invert != 0));
    return;
  }
  std::string text = info->flags == XT_MULTIPORT_SOURCE        ? "sports "
                     : info->flags == XT_MULTIPORT_DESTINATION ? "dports "
                                                               : "ports ";
  for (uint8_t i = 0; i < info->count; ++i) {
    text += std::to_string(info->ports[i]);
    if (i + 1 < info->count) {
      text += (info->pflags[i] != 0) ? ':' : ',';
    }
  }
  if (info->invert) {
    text = "! " + text;
  }
  matches->push_back(UnknownMatch(Describe("match", name, rev, text)));
}

std::string AddrTypeNames(uint16_t mask) {
  static constexpr std::array<std::string_view, 12> kNames = {
      "UNSPEC",    "UNICAST",     "LOCAL",    "BROADCAST", "ANYCAST", "MULTICAST",
      "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW",     "NAT",     "XRESOLVE"};
  std::string text;
  for (size_t bit = 0; bit < kNames.size(); ++bit) {
    if (mask & (1u << bit)) {
      if (!text.empty()) {
        text += ',';
      }
      text += kNames[bit];
    }
  }
  return text;
}

void DecodeAddrType(std::string_view name, uint32_t rev, std::span<const uint8_t> payload,
                    std::vector<Match>* matches) {
  auto info = ReadStruct<xt_addrtype_info_v1>(payload);
  if (rev != 1 || !info) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "unsupported layout")));
    return;
  }
  if (info->source != 0) {
    Match m;
    m.kind = MatchKind::kAddrType;
    m.text = "src " + AddrTypeNames(info->source);
    m.negated = info->flags & XT_ADDRTYPE_INVERT_SOURCE;
    matches->push_back(m);
  }
  if (info->dest != 0) {
    Match m;
    m.kind = MatchKind::kAddrType;
    m.text = "dst " + AddrTypeNames(info->dest);
    m.negated = info->flags & XT_ADDRTYPE_INVERT_DEST;
    matches->push_back(m);
  }
  if (info->flags & (XT_ADDRTYPE_LIMIT_IFACE_IN | XT_ADDRTYPE_LIMIT_IFACE_OUT)) {
    matches->push_back(UnknownMatch(Describe("match", name, rev, "limit-iface")));
  }
}

// The NAT range of REDIRECT/DNAT/SNAT/MASQUERADE, whatever struct the revision uses.
struct NatRange {
  uint32_t flags = 0;
  std::array<uint8_t, 16> min_addr{};
  std::array<uint8_t, 16> max_addr{};
  uint16_t min_port = 0;  // host order
  uint16_t max_port = 0;
};

std::optional<NatRange> ReadNatRange(Family family, uint32_t rev,
                                     std::span<const uint8_t> payload) {
  NatRange range;
  // IPv4 revision 0 uses the old multi-range struct; IPv6 revision 0 already uses nf_nat_range.
  if (rev == 0 && family != Family::kIpv6) {
    auto compat = ReadStruct<nf_nat_ipv4_multi_range_compat>(payload);
    if (!compat || compat->rangesize != 1) {
      return std::nullopt;
    }
    const nf_nat_ipv4_range& r = compat->range[0];
    range.flags = r.flags;
    std::memcpy(range.min_addr.data(), &r.min_ip, 4);
    std::memcpy(range.max_addr.data(), &r.max_ip, 4);
    range.min_port = ntohs(r.min.all);
    range.max_port = ntohs(r.max.all);
    return range;
  }
  std::optional<nf_nat_range> r;
  if (rev == 0 || rev == 1) {
    r = ReadStruct<nf_nat_range>(payload);
  } else if (rev == 2 && payload.size() >= sizeof(nf_nat_range2)) {
    r = ReadStruct<nf_nat_range>(payload);  // range2 only appends base_proto
  }
  if (!r) {
    return std::nullopt;
  }
  range.flags = r->flags;
  std::memcpy(range.min_addr.data(), &r->min_addr, 16);
  std::memcpy(range.max_addr.data(), &r->max_addr, 16);
  range.min_port = ntohs(r->min_proto.all);
  range.max_port = ntohs(r->max_proto.all);
  return range;
}

Action DecodeNat(Family family, std::string_view name, uint32_t rev,
                 std::span<const uint8_t> payload) {
  auto range = ReadNatRange(family, rev, payload);
  if (!range) {
    return UnknownAction(Describe("target", name, rev, "unsupported layout"));
  }
  bool has_port = range->flags & NF_NAT_RANGE_PROTO_SPECIFIED;
  Action a;
  if (name == "REDIRECT") {
    a.kind = ActionKind::kRedirect;
    if (has_port) {
      a.value = range->min_port;
      a.value2 = range->max_port;
    }
    return a;
  }
  if (name == "MASQUERADE") {
    a.kind = ActionKind::kMasquerade;
    return a;
  }
  a.kind = name == "DNAT" ? ActionKind::kDnat : ActionKind::kSnat;
  a.text = NatTargetText(family, range->min_addr.data(), range->max_addr.data(),
                         range->flags & NF_NAT_RANGE_MAP_IPS, range->min_port, range->max_port,
                         has_port);
  return a;
}

Action DecodeConnmarkTarget(std::string_view name, uint32_t rev, std::span<const uint8_t> payload) {
  uint32_t ctmark = 0;
  uint32_t ctmask = 0;
  uint32_t nfmask = 0;
  uint8_t mode = 0;
  if (rev == 1) {
    auto info = ReadStruct<xt_connmark_tginfo1>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    ctmark = info->ctmark;
    ctmask = info->ctmask;
    nfmask = info->nfmask;
    mode = info->mode;
  } else if (rev == 2) {
    auto info = ReadStruct<xt_connmark_tginfo2>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    if (info->shift_bits != 0) {
      return UnknownAction(Describe("target", name, rev, "shifted mark"));
    }
    ctmark = info->ctmark;
    ctmask = info->ctmask;
    nfmask = info->nfmask;
    mode = info->mode;
  } else {
    return UnknownAction(Describe("target", name, rev, "unsupported revision"));
  }
  Action a;
  switch (mode) {
    case XT_CONNMARK_SET:
      a.kind = ActionKind::kSetConnmark;
      a.value = ctmark;
      a.value2 = ctmask;
      return a;
    case XT_CONNMARK_SAVE:
      a.kind = ActionKind::kSaveConnmark;
      a.value = nfmask;
      a.value2 = ctmask;
      return a;
    case XT_CONNMARK_RESTORE:
      a.kind = ActionKind::kRestoreConnmark;
      a.value = nfmask;
      a.value2 = ctmask;
      return a;
    default:
      return UnknownAction(Describe("target", name, rev, "mode " + std::to_string(mode)));
  }
}

template <typename Info>
Action CtFromInfo(const Info& info, std::string_view name, uint32_t rev, bool has_timeout) {
  Action a;
  if (info.flags & (XT_CT_NOTRACK | XT_CT_NOTRACK_ALIAS)) {
    a.kind = ActionKind::kNotrack;
    return a;
  }
  bool plain_zone = info.flags == 0 && info.ct_events == 0 && info.exp_events == 0 &&
                    info.helper[0] == '\0' && !has_timeout;
  if (!plain_zone) {
    return UnknownAction(Describe("target", name, rev, "flags " + Hex(info.flags)));
  }
  a.kind = ActionKind::kCtZone;
  a.value = info.zone;
  return a;
}

Action DecodeCt(std::string_view name, uint32_t rev, std::span<const uint8_t> payload) {
  if (rev == 0) {
    auto info = ReadStruct<xt_ct_target_info>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    return CtFromInfo(*info, name, rev, false);
  }
  if (rev == 1 || rev == 2) {
    auto info = ReadStruct<xt_ct_target_info_v1>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    return CtFromInfo(*info, name, rev, info->timeout[0] != '\0');
  }
  return UnknownAction(Describe("target", name, rev, "unsupported revision"));
}

Action DecodeTproxy(Family family, std::string_view name, uint32_t rev,
                    std::span<const uint8_t> payload) {
  Action a;
  a.kind = ActionKind::kTproxy;
  if (rev == 0 && family != Family::kIpv6) {
    auto info = ReadStruct<xt_tproxy_target_info>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    a.value = ntohs(info->lport);
    a.value2 = info->mark_value;
    a.value3 = info->mark_mask;
    return a;
  }
  if (rev == 1) {
    auto info = ReadStruct<xt_tproxy_target_info_v1>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, rev, "short payload"));
    }
    a.value = ntohs(info->lport);
    a.value2 = info->mark_value;
    a.value3 = info->mark_mask;
    return a;
  }
  return UnknownAction(Describe("target", name, rev, "unsupported revision"));
}

}  // namespace

std::string AddressText(Family family, const uint8_t* bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  int af = family == Family::kIpv6 ? AF_INET6 : AF_INET;
  if (inet_ntop(af, bytes, buf, sizeof(buf)) == nullptr) {
    return "?";
  }
  return buf;
}

std::string PrefixText(Family family, const uint8_t* addr, const uint8_t* mask) {
  size_t size = family == Family::kIpv6 ? 16 : 4;
  int prefix = 0;
  bool contiguous = true;
  bool seen_zero = false;
  for (size_t i = 0; i < size * 8; ++i) {
    bool bit = mask == nullptr || (mask[i / 8] & (0x80 >> (i % 8)));
    if (bit && seen_zero) {
      contiguous = false;
    }
    if (bit) {
      ++prefix;
    } else {
      seen_zero = true;
    }
  }
  std::array<uint8_t, 16> masked{};
  for (size_t i = 0; i < size; ++i) {
    masked[i] = addr[i] & (mask ? mask[i] : 0xff);
  }
  if (!contiguous) {
    return AddressText(family, masked.data()) + "/" + AddressText(family, mask);
  }
  return AddressText(family, masked.data()) + "/" + std::to_string(prefix);
}

std::string NatTargetText(Family family, const uint8_t* min_addr, const uint8_t* max_addr,
                          bool has_addr, uint16_t min_port, uint16_t max_port, bool has_port) {
  size_t size = family == Family::kIpv6 ? 16 : 4;
  std::string text;
  if (has_addr) {
    text = AddressText(family, min_addr);
    if (std::memcmp(min_addr, max_addr, size) != 0) {
      text += "-" + AddressText(family, max_addr);
    }
    if (has_port && family == Family::kIpv6) {
      text = "[" + text + "]";
    }
  }
  if (has_port) {
    text += ":" + std::to_string(min_port);
    if (max_port != min_port) {
      text += "-" + std::to_string(max_port);
    }
  }
  return text;
}

void DecodeMatch(Family family, std::string_view name, uint32_t revision,
                 std::span<const uint8_t> payload, const SetNameResolver& resolve_set,
                 std::vector<Match>* matches, std::string* comment) {
  (void)family;
  if (name == "tcp") {
    DecodeTcp(name, revision, payload, matches);
  } else if (name == "udp") {
    DecodeUdp(name, revision, payload, matches);
  } else if (name == "mark" && revision == 1) {
    DecodeMarkLike<xt_mark_mtinfo1>(MatchKind::kMark, name, revision, payload, matches);
  } else if (name == "connmark" && revision == 1) {
    DecodeMarkLike<xt_connmark_mtinfo1>(MatchKind::kConnmark, name, revision, payload, matches);
  } else if (name == "comment") {
    auto info = ReadStruct<xt_comment_info>(payload);
    if (!info) {
      matches->push_back(UnknownMatch(Describe("match", name, revision, "short payload")));
      return;
    }
    // The kernel does not guarantee NUL termination of user-supplied bytes.
    *comment = std::string(info->comment, strnlen(info->comment, sizeof(info->comment)));
  } else if (name == "owner") {
    DecodeOwner(name, revision, payload, matches);
  } else if (name == "set") {
    DecodeSet(name, revision, payload, resolve_set, matches);
  } else if (name == "conntrack") {
    DecodeConntrack(name, revision, payload, matches);
  } else if (name == "state") {
    auto info = ReadStruct<xt_state_info>(payload);
    if (!info) {
      matches->push_back(UnknownMatch(Describe("match", name, revision, "short payload")));
      return;
    }
    AppendCtState(info->statemask, false, matches);
  } else if (name == "multiport") {
    DecodeMultiport(name, revision, payload, matches);
  } else if (name == "addrtype") {
    DecodeAddrType(name, revision, payload, matches);
  } else {
    matches->push_back(UnknownMatch(Describe("match", name, revision, "")));
  }
}

Action DecodeTarget(Family family, std::string_view name, uint32_t revision,
                    std::span<const uint8_t> payload) {
  if (name == "REDIRECT" || name == "DNAT" || name == "SNAT" || name == "MASQUERADE") {
    return DecodeNat(family, name, revision, payload);
  }
  if (name == "CONNMARK") {
    return DecodeConnmarkTarget(name, revision, payload);
  }
  if (name == "MARK") {
    if (revision != 2) {
      return UnknownAction(Describe("target", name, revision, "unsupported revision"));
    }
    auto info = ReadStruct<xt_mark_tginfo2>(payload);
    if (!info) {
      return UnknownAction(Describe("target", name, revision, "short payload"));
    }
    Action a;
    a.kind = ActionKind::kSetMark;
    a.value = info->mark;
    a.value2 = info->mask;
    return a;
  }
  if (name == "CT") {
    return DecodeCt(name, revision, payload);
  }
  if (name == "NOTRACK") {
    Action a;
    a.kind = ActionKind::kNotrack;
    return a;
  }
  if (name == "TPROXY") {
    return DecodeTproxy(family, name, revision, payload);
  }
  if (name == "LOG" || name == "NFLOG") {
    Action a;
    a.kind = ActionKind::kLog;
    return a;
  }
  if (name == "REJECT") {
    Action a;
    a.kind = ActionKind::kReject;
    return a;
  }
  return UnknownAction(Describe("target", name, revision, ""));
}

}  // namespace ad::xt
