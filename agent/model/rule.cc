#include "model/rule.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace ad {

namespace {

constexpr uint32_t kFullMask = 0xffffffff;

std::string Hex(uint32_t v) {
  std::array<char, 16> buf{};
  std::snprintf(buf.data(), buf.size(), "0x%x", v);
  return buf.data();
}

// nft lists marks zero-padded to 8 digits; we mirror that so output diffs cleanly against it.
std::string Hex8(uint32_t v) {
  std::array<char, 16> buf{};
  std::snprintf(buf.data(), buf.size(), "0x%08x", v);
  return buf.data();
}

std::string ProtocolName(uint32_t proto) {
  switch (proto) {
    case 1:
      return "icmp";
    case 6:
      return "tcp";
    case 17:
      return "udp";
    case 58:
      return "ipv6-icmp";
    case 132:
      return "sctp";
    default:
      return std::to_string(proto);
  }
}

std::string PortText(const Match& m, char range_sep) {
  if (m.value == m.value2) return std::to_string(m.value);
  return std::to_string(m.value) + range_sep + std::to_string(m.value2);
}

// Bit order of the conntrack state mask (see MatchKind::kCtState).
struct CtStateName {
  uint32_t bit;
  const char* iptables;
  const char* nft;
};
constexpr std::array<CtStateName, 5> kCtStates = {{{1, "INVALID", "invalid"},
                                                   {8, "NEW", "new"},
                                                   {4, "RELATED", "related"},
                                                   {2, "ESTABLISHED", "established"},
                                                   {64, "UNTRACKED", "untracked"}}};

std::string CtStateText(uint32_t mask, bool nft) {
  std::string out;
  for (const auto& s : kCtStates) {
    if ((mask & s.bit) == 0) continue;
    if (!out.empty()) out += ',';
    out += nft ? s.nft : s.iptables;
  }
  return out;
}

bool IsIpv6Text(std::string_view addr) { return addr.find(':') != std::string_view::npos; }

// nft lists host prefixes without their length.
std::string NftAddress(std::string_view prefix) {
  std::string out(prefix);
  if (out.ends_with("/32") && !IsIpv6Text(out)) out.resize(out.size() - 3);
  if (out.ends_with("/128") && IsIpv6Text(out)) out.resize(out.size() - 4);
  return out;
}

std::string Bang(bool negated) { return negated ? "! " : ""; }
std::string NftOp(bool negated) { return negated ? "!= " : ""; }

// nft expression for a mark write: new = (old & ~mask) ^ value, where `old` is `source`.
std::string NftMarkWrite(std::string_view source, uint32_t value, uint32_t mask) {
  if (mask == kFullMask) return Hex8(value);
  // Setting, toggling or clearing bits, as nft prints them (kube-proxy's masquerade mark).
  if (mask == value) return std::string(source) + " | " + Hex8(value);
  if (mask == 0) return std::string(source) + " ^ " + Hex8(value);
  if (value == 0) return std::string(source) + " & " + Hex8(~mask);
  const std::string keep = Hex8(~mask);
  if ((value & ~mask) == 0) return std::string(source) + " & " + keep + " | " + Hex8(value);
  return std::string(source) + " & " + keep + " ^ " + Hex8(value);
}

// Effective address family of a rule in an inet table: the first address match decides.
Family RuleFamily(Family table_family, const RuleSemantics& sem) {
  if (table_family != Family::kInet) return table_family;
  for (const auto& m : sem.matches) {
    if (m.kind == MatchKind::kSrcAddr || m.kind == MatchKind::kDstAddr) {
      return IsIpv6Text(m.text) ? Family::kIpv6 : Family::kIpv4;
    }
  }
  return Family::kInet;
}

// What renders one nft rule needs beyond the rule itself.
struct NftContext {
  Family family = Family::kInet;  // the rule's effective family (see RuleFamily)
  Family table_family = Family::kInet;
  uint32_t port_protocol = 0;  // tcp/udp/sctp when port fields take its name ("tcp dport")
  const std::vector<NftSet>* sets = nullptr;  // the table's named sets, when known
};

std::string PortProtocol(const NftContext& ctx) {
  return ctx.port_protocol == 0 ? "th" : ProtocolName(ctx.port_protocol);
}

std::vector<std::string_view> SplitOn(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + separator.size();
  }
}

// Whether address field `index` of a lookup key is IPv6. The table family decides in ip/ip6
// tables; in inet tables the set's contents or key type, the rule's other address matches, and
// last the "-v6" naming convention.
bool KeyFieldIsIpv6(const NftContext& ctx, const SetLookup& lookup,
                    const std::vector<std::string>& elements, size_t index) {
  if (ctx.family == Family::kIpv4) return false;
  if (ctx.family == Family::kIpv6) return true;
  if (!elements.empty()) {
    const std::string_view element = elements.front();
    const std::string_view key = element.substr(0, element.find(" : "));
    const auto fields = SplitOn(key, " . ");
    if (index < fields.size()) return IsIpv6Text(fields[index]);
  }
  if (ctx.sets != nullptr) {
    for (const NftSet& set : *ctx.sets) {
      if (set.name != lookup.set) continue;
      const auto types = SplitOn(set.key_type, " . ");
      if (index < types.size() && types[index] == "ipv6_addr") return true;
      if (index < types.size() && types[index] == "ipv4_addr") return false;
    }
  }
  return lookup.set.ends_with("v6");
}

// One key field in nft's spelling (see "Set lookups" in rule.h).
std::string NftKeyField(const NftContext& ctx, std::string_view field, bool ipv6) {
  if (field == "src" || field == "dst") {
    return std::string(ipv6 ? "ip6 " : "ip ") + (field == "src" ? "saddr" : "daddr");
  }
  if (field == "sport" || field == "dport") return PortProtocol(ctx) + " " + std::string(field);
  if (field == "l4proto" || field == "nfproto" || field == "mark" || field == "skuid" ||
      field == "skgid") {
    return "meta " + std::string(field);
  }
  if (field == "ctmark") return "ct mark";
  if (field.starts_with("numgen-")) {
    // numgen-<type>-mod-<n>[-<offset>]
    const auto parts = SplitOn(field, "-");
    std::string out = "numgen";
    for (size_t i = 1; i < parts.size() && i < 4; ++i) out += " " + std::string(parts[i]);
    if (parts.size() > 4) out += " offset " + std::string(parts[4]);
    return out;
  }
  return std::string(field);  // iif oif iifname oifname, and anything newer: as nft spells it
}

std::string NftKeyText(const NftContext& ctx, const SetLookup& lookup,
                       const std::vector<std::string>& elements) {
  std::string out;
  const auto fields = SplitOn(lookup.key, ".");
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += " . ";
    out += NftKeyField(ctx, fields[i], KeyFieldIsIpv6(ctx, lookup, elements, i));
  }
  return out;
}

std::string NftSetRef(std::string_view set, const std::vector<std::string>& elements) {
  if (set != kInlineSet) return "@" + std::string(set);
  std::string out = "{ ";
  for (size_t i = 0; i < elements.size(); ++i) out += (i ? ", " : "") + elements[i];
  return out + " }";
}

bool KeyHasPort(std::string_view text) {
  for (std::string_view field : SplitOn(ParseSetLookup(text).key, ".")) {
    if (field == "sport" || field == "dport") return true;
  }
  return false;
}

std::string IptablesMatch(const Match& m) {
  const std::string bang = Bang(m.negated);
  switch (m.kind) {
    case MatchKind::kProtocol:
      return bang + "-p " + ProtocolName(m.value);
    case MatchKind::kSrcAddr:
      return bang + "-s " + m.text;
    case MatchKind::kDstAddr:
      return bang + "-d " + m.text;
    case MatchKind::kSrcPort:
      return bang + "--sport " + PortText(m, ':');
    case MatchKind::kDstPort:
      return bang + "--dport " + PortText(m, ':');
    case MatchKind::kInIface:
      return bang + "-i " + m.text;
    case MatchKind::kOutIface:
      return bang + "-o " + m.text;
    case MatchKind::kMark:
    case MatchKind::kConnmark: {
      std::string out = m.kind == MatchKind::kMark ? "-m mark " : "-m connmark ";
      out += bang + "--mark " + Hex(m.value);
      if (m.value2 != kFullMask) out += "/" + Hex(m.value2);
      return out;
    }
    case MatchKind::kSet:
      return "-m set " + bang + "--match-set " + m.text;
    case MatchKind::kSocketExists:
      return "-m owner " + bang + "--socket-exists";
    case MatchKind::kSocketUid:
      return "-m owner " + bang + "--uid-owner " + std::to_string(m.value);
    case MatchKind::kSocketGid:
      return "-m owner " + bang + "--gid-owner " + std::to_string(m.value);
    case MatchKind::kCtState:
      return "-m conntrack " + bang + "--ctstate " + CtStateText(m.value, false);
    case MatchKind::kAddrType: {
      const auto space = m.text.find(' ');
      const std::string dir = m.text.substr(0, space);
      const std::string types = space == std::string::npos ? "" : m.text.substr(space + 1);
      return "-m addrtype " + bang + "--" + dir + "-type " + types;
    }
    case MatchKind::kUnknown:
      return bang + m.text;
  }
  return m.text;
}

std::string NftMatch(const NftContext& ctx, const Match& m) {
  const std::string op = NftOp(m.negated);
  switch (m.kind) {
    case MatchKind::kProtocol:
      return "meta l4proto " + op + ProtocolName(m.value);
    case MatchKind::kSrcAddr:
    case MatchKind::kDstAddr: {
      const char* l3 = IsIpv6Text(m.text) ? "ip6 " : "ip ";
      const char* dir = m.kind == MatchKind::kSrcAddr ? "saddr " : "daddr ";
      return l3 + std::string(dir) + op + NftAddress(m.text);
    }
    case MatchKind::kSrcPort:
      return PortProtocol(ctx) + " sport " + op + PortText(m, '-');
    case MatchKind::kDstPort:
      return PortProtocol(ctx) + " dport " + op + PortText(m, '-');
    case MatchKind::kInIface:
    case MatchKind::kOutIface: {
      std::string name = m.text;
      if (name.ends_with('+')) name.back() = '*';
      return (m.kind == MatchKind::kInIface ? "iifname " : "oifname ") + op + "\"" + name + "\"";
    }
    case MatchKind::kMark:
    case MatchKind::kConnmark: {
      std::string out = m.kind == MatchKind::kMark ? "meta mark " : "ct mark ";
      if (m.value2 != kFullMask)
        out += "& " + Hex8(m.value2) + (m.negated ? " != " : " == ");
      else
        out += op;
      return out + Hex8(m.value);
    }
    case MatchKind::kSet: {
      const SetLookup lookup = ParseSetLookup(m.text);
      return NftKeyText(ctx, lookup, m.elements) + " " + op + NftSetRef(lookup.set, m.elements);
    }
    case MatchKind::kSocketExists:
      // nft has no socket-exists test; print what nft itself shows for the xt match.
      return std::string("xt match owner ") + (m.negated ? "! " : "") + "--socket-exists";
    case MatchKind::kSocketUid:
      return "meta skuid " + op + std::to_string(m.value);
    case MatchKind::kSocketGid:
      return "meta skgid " + op + std::to_string(m.value);
    case MatchKind::kCtState:
      return "ct state " + op + CtStateText(m.value, true);
    case MatchKind::kAddrType: {
      std::string lower = m.text;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const auto space = lower.find(' ');
      const std::string dir = lower.substr(0, space) == "src" ? "saddr" : "daddr";
      const std::string types = space == std::string::npos ? "" : lower.substr(space + 1);
      return "fib " + dir + " type " + op + types;
    }
    case MatchKind::kUnknown:
      return m.text;
  }
  return m.text;
}

std::string IptablesAction(const Action& a) {
  switch (a.kind) {
    case ActionKind::kContinue:
      return "";
    case ActionKind::kAccept:
      return "-j ACCEPT";
    case ActionKind::kDrop:
      return "-j DROP";
    case ActionKind::kReject:
      return a.text.empty() ? "-j REJECT" : "-j REJECT --reject-with " + a.text;
    case ActionKind::kReturn:
      return "-j RETURN";
    case ActionKind::kJump:
      return "-j " + a.text;
    case ActionKind::kGoto:
      return "-g " + a.text;
    case ActionKind::kRedirect:
    case ActionKind::kMasquerade: {
      std::string out = a.kind == ActionKind::kRedirect ? "-j REDIRECT" : "-j MASQUERADE";
      if (a.value != 0) {
        out += " --to-ports " + std::to_string(a.value);
        if (a.value2 != a.value) out += "-" + std::to_string(a.value2);
      }
      return out;
    }
    case ActionKind::kDnat:
      return "-j DNAT --to-destination " + a.text;
    case ActionKind::kSnat:
      return "-j SNAT --to-source " + a.text;
    case ActionKind::kTproxy: {
      std::string out = "-j TPROXY --on-port " + std::to_string(a.value);
      if (!a.text.empty()) out += " --on-ip " + a.text;
      if (a.value3 != 0) out += " --tproxy-mark " + Hex(a.value2) + "/" + Hex(a.value3);
      return out;
    }
    case ActionKind::kSetMark:
      return "-j MARK --set-xmark " + Hex(a.value) + "/" + Hex(a.value2);
    case ActionKind::kSetConnmark:
      return "-j CONNMARK --set-xmark " + Hex(a.value) + "/" + Hex(a.value2);
    case ActionKind::kRestoreConnmark:
    case ActionKind::kSaveConnmark:
      return std::string("-j CONNMARK ") +
             (a.kind == ActionKind::kRestoreConnmark ? "--restore-mark" : "--save-mark") +
             " --nfmask " + Hex(a.value) + " --ctmask " + Hex(a.value2);
    case ActionKind::kCtZone:
      return "-j CT --zone " + std::to_string(a.value);
    case ActionKind::kNotrack:
      return "-j CT --notrack";
    case ActionKind::kLog:
      return a.text.empty() ? "-j LOG" : "-j LOG --log-prefix \"" + a.text + "\"";
    case ActionKind::kVerdictMap:
      // x_tables has no verdict maps; only a native nft rule carries one.
      return "vmap " + a.text;
    case ActionKind::kUnknown:
      return a.text;
  }
  return a.text;
}

std::string NftAction(const NftContext& ctx, const Action& a) {
  // An inet table needs the NAT address family spelled out; ip/ip6 tables imply it, and nft
  // lists it only in inet tables.
  const auto nat_family = [&ctx](std::string_view addr) -> std::string {
    if (ctx.table_family == Family::kIpv4 || ctx.table_family == Family::kIpv6) return "";
    if (addr.empty() || addr.front() == ':') return "";
    return IsIpv6Text(addr) && addr.front() != '[' ? "ip6 " : "ip ";
  };
  switch (a.kind) {
    case ActionKind::kContinue:
      return "";
    case ActionKind::kAccept:
      return "accept";
    case ActionKind::kDrop:
      return "drop";
    case ActionKind::kReject:
      return "reject";
    case ActionKind::kReturn:
      return "return";
    case ActionKind::kJump:
      return "jump " + a.text;
    case ActionKind::kGoto:
      return "goto " + a.text;
    case ActionKind::kRedirect:
    case ActionKind::kMasquerade: {
      std::string out = a.kind == ActionKind::kRedirect ? "redirect" : "masquerade";
      if (a.value != 0) {
        out += " to :" + std::to_string(a.value);
        if (a.value2 != a.value) out += "-" + std::to_string(a.value2);
      }
      return out;
    }
    case ActionKind::kDnat:
      return "dnat " + nat_family(a.text) + "to " + a.text;
    case ActionKind::kSnat:
      return "snat " + nat_family(a.text) + "to " + a.text;
    case ActionKind::kTproxy: {
      std::string out = "tproxy ";
      if (!a.text.empty()) {
        out += (IsIpv6Text(a.text) ? "ip6 to [" + a.text + "]" : "ip to " + a.text);
      } else {
        out += "to ";
      }
      out += ":" + std::to_string(a.value);
      if (a.value3 != 0) out += " meta mark set " + NftMarkWrite("meta mark", a.value2, a.value3);
      return out + " accept";
    }
    case ActionKind::kSetMark:
      return "meta mark set " + NftMarkWrite("meta mark", a.value, a.value2);
    case ActionKind::kSetConnmark:
      return "ct mark set " + NftMarkWrite("ct mark", a.value, a.value2);
    case ActionKind::kRestoreConnmark:
      if (a.value == kFullMask && a.value2 == kFullMask) return "meta mark set ct mark";
      return "xt target CONNMARK --restore-mark --nfmask " + Hex(a.value) + " --ctmask " +
             Hex(a.value2);
    case ActionKind::kSaveConnmark:
      if (a.value == kFullMask && a.value2 == kFullMask) return "ct mark set meta mark";
      return "xt target CONNMARK --save-mark --nfmask " + Hex(a.value) + " --ctmask " +
             Hex(a.value2);
    case ActionKind::kCtZone:
      return "ct zone set " + std::to_string(a.value);
    case ActionKind::kNotrack:
      return "notrack";
    case ActionKind::kLog:
      return a.text.empty() ? "log" : "log prefix \"" + a.text + "\"";
    case ActionKind::kVerdictMap: {
      const SetLookup lookup = ParseSetLookup(a.text);
      return NftKeyText(ctx, lookup, a.elements) + " vmap " + NftSetRef(lookup.set, a.elements);
    }
    case ActionKind::kUnknown:
      return a.text;
  }
  return a.text;
}

// Position of a match in an iptables-save line: generic options first (as iptables-save prints
// them), then extension matches.
int IptablesOrder(MatchKind kind) {
  switch (kind) {
    case MatchKind::kSrcAddr:
      return 0;
    case MatchKind::kDstAddr:
      return 1;
    case MatchKind::kInIface:
      return 2;
    case MatchKind::kOutIface:
      return 3;
    case MatchKind::kProtocol:
      return 4;
    case MatchKind::kSrcPort:
    case MatchKind::kDstPort:
      return 5;
    default:
      return 6;
  }
}

void AppendWord(std::string& line, std::string_view word) {
  if (word.empty()) return;
  if (!line.empty()) line += ' ';
  line += word;
}

std::string QuoteComment(std::string_view comment) {
  std::string out = "\"";
  for (char c : comment) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string RenderIptablesRule(std::string_view chain, const Rule& rule) {
  std::vector<const Match*> ordered;
  ordered.reserve(rule.sem.matches.size());
  for (const auto& m : rule.sem.matches) ordered.push_back(&m);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Match* a, const Match* b) {
    return IptablesOrder(a->kind) < IptablesOrder(b->kind);
  });
  uint32_t proto = 0;
  for (const auto& m : rule.sem.matches) {
    if (m.kind == MatchKind::kProtocol && !m.negated) proto = m.value;
  }
  std::string line;
  if (!chain.empty()) line = "-A " + std::string(chain);
  bool port_module_open = false;
  for (const Match* m : ordered) {
    const bool is_port = m->kind == MatchKind::kSrcPort || m->kind == MatchKind::kDstPort;
    if (is_port && !port_module_open) {
      AppendWord(line, "-m " + ProtocolName(proto));
      port_module_open = true;
    }
    AppendWord(line, IptablesMatch(*m));
  }
  if (!rule.comment.empty()) AppendWord(line, "-m comment --comment " + QuoteComment(rule.comment));
  AppendWord(line, IptablesAction(rule.sem.action));
  return line;
}

std::string RenderNftRule(Family family, const std::vector<NftSet>* sets, const Rule& rule) {
  NftContext ctx;
  ctx.family = RuleFamily(family, rule.sem);
  ctx.table_family = family;
  ctx.sets = sets;
  // A tcp/udp port match implies its protocol; print "tcp dport" instead of "meta l4proto tcp".
  uint32_t port_proto = 0;
  bool has_port = false;
  for (const auto& m : rule.sem.matches) {
    if (m.kind == MatchKind::kProtocol && !m.negated) port_proto = m.value;
    if (m.kind == MatchKind::kSrcPort || m.kind == MatchKind::kDstPort) has_port = true;
    if (m.kind == MatchKind::kSet && KeyHasPort(m.text)) has_port = true;
  }
  if (rule.sem.action.kind == ActionKind::kVerdictMap && KeyHasPort(rule.sem.action.text)) {
    has_port = true;
  }
  const bool fold_protocol = has_port && (port_proto == 6 || port_proto == 17 || port_proto == 132);
  if (fold_protocol) ctx.port_protocol = port_proto;
  std::string line;
  for (const auto& m : rule.sem.matches) {
    if (fold_protocol && m.kind == MatchKind::kProtocol && !m.negated) continue;
    AppendWord(line, NftMatch(ctx, m));
  }
  if (rule.has_counter) AppendWord(line, "counter");
  AppendWord(line, NftAction(ctx, rule.sem.action));
  if (!rule.comment.empty()) AppendWord(line, "comment " + QuoteComment(rule.comment));
  return line;
}

}  // namespace

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kIptablesLegacy:
      return "iptables-legacy";
    case Backend::kIptablesNft:
      return "iptables-nft";
    case Backend::kNft:
      return "nft";
  }
  return "unknown";
}

std::string_view NftFamilyKeyword(Family f) {
  switch (f) {
    case Family::kIpv4:
      return "ip";
    case Family::kIpv6:
      return "ip6";
    case Family::kInet:
      return "inet";
    case Family::kOther:
      return "";
  }
  return "";
}

std::string_view FamilyName(Family f) {
  switch (f) {
    case Family::kIpv4:
      return "ipv4";
    case Family::kIpv6:
      return "ipv6";
    case Family::kInet:
      return "inet";
    case Family::kOther:
      return "other";
  }
  return "unknown";
}

// Canonical order is the defaulted Match ordering, i.e. (kind, negated, value, value2, text):
// MatchKind's declaration order puts protocol and addresses first, which also reads naturally.
// Dropped as no-ops: exact duplicates (an AND of the same test twice, e.g. "meta l4proto tcp"
// next to the implied protocol of "tcp dport") and mark/connmark tests with a zero mask and
// zero value, which every packet passes.
void Canonicalize(RuleSemantics& sem) {
  auto& ms = sem.matches;
  std::erase_if(ms, [](const Match& m) {
    return (m.kind == MatchKind::kMark || m.kind == MatchKind::kConnmark) && !m.negated &&
           m.value2 == 0 && m.value == 0;
  });
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
}

const Chain* Table::FindChain(std::string_view chain_name) const {
  for (const auto& chain : chains) {
    if (chain.name == chain_name) return &chain;
  }
  return nullptr;
}

std::string RenderMatch(Backend backend, Family family, const Match& m) {
  if (backend == Backend::kNft) return NftMatch(NftContext{family, family, 0, nullptr}, m);
  return IptablesMatch(m);
}

// Actions print the same in every family: NAT and TPROXY addresses carry their own family.
std::string RenderAction(Backend backend, Family family, const Action& a) {
  if (backend == Backend::kNft) return NftAction(NftContext{family, family, 0, nullptr}, a);
  return IptablesAction(a);
}

std::string RenderRule(Backend backend, Family family, std::string_view chain, const Rule& rule) {
  if (backend == Backend::kNft) return RenderNftRule(family, nullptr, rule);
  return RenderIptablesRule(chain, rule);
}

std::string RenderRule(const Table& table, std::string_view chain, const Rule& rule) {
  if (table.backend == Backend::kNft) return RenderNftRule(table.family, &table.sets, rule);
  return RenderIptablesRule(chain, rule);
}

SetLookup ParseSetLookup(std::string_view text) {
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return {text, {}};
  return {text.substr(0, space), text.substr(space + 1)};
}

}  // namespace ad
