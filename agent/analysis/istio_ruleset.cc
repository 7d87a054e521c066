#include "analysis/istio_ruleset.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

namespace ad::istio {
namespace {

// The templates are RuleSemantics built directly, not rule text parsed at runtime: the model is
// the contract both rule backends are normalised to, so one template serves iptables and nft,
// and a diagnostic agent should not depend on its own parser succeeding on built-in data. The
// golden-corpus test checks that these semantics equal the parsed Istio goldens.

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;
constexpr uint32_t kDnsPort = 53;

Match Proto(uint8_t protocol) { return Match{MatchKind::kProtocol, false, protocol, 0, {}}; }
Match DstPort(uint32_t port, bool negated = false) {
  return Match{MatchKind::kDstPort, negated, port, port, {}};
}
Match SrcPort(uint32_t port) { return Match{MatchKind::kSrcPort, false, port, port, {}}; }
Match Mark(uint32_t mark, uint32_t mask, bool negated = false) {
  return Match{MatchKind::kMark, negated, mark, mask, {}};
}
Match Connmark(uint32_t mark, uint32_t mask) {
  return Match{MatchKind::kConnmark, false, mark, mask, {}};
}
Match OutIface(std::string name, bool negated = false) {
  return Match{MatchKind::kOutIface, negated, 0, 0, std::move(name)};
}
Match InIface(std::string name) { return Match{MatchKind::kInIface, false, 0, 0, std::move(name)}; }

Action Verdict(ActionKind kind) { return Action{kind, 0, 0, 0, {}}; }
Action RedirectTo(uint32_t port) { return Action{ActionKind::kRedirect, port, port, 0, {}}; }
Action Jump(std::string_view chain) {
  return Action{ActionKind::kJump, 0, 0, 0, std::string(chain)};
}

// When a template row is emitted (facts §2.1 "Cond.").
enum class When : uint8_t { kAlways, kNotIngress, kDns };

// The one match that differs between the IPv4 and IPv6 twin of a rule.
enum class AddressSlot : uint8_t {
  kNone,            // family-neutral rule: nft emits it once, iptables once per family table
  kSnatSource,      // -s <probe SNAT>
  kSnatDest,        // -d <probe SNAT>
  kNotLoopbackDest  // ! -d 127.0.0.1/32 | ! -d ::1/128
};

struct RuleTemplate {
  std::string_view id;
  IstioTable table;
  IstioHook chain;
  When when;
  AddressSlot address;
  std::vector<Match> matches;
  Action action;
};

// Facts §2.1 / §3.2, in evaluation order within each chain. Virtual-interface rules are added in
// front of nat prerouting separately (they repeat per interface).
const std::vector<RuleTemplate>& InpodTemplates() {
  static const std::vector<RuleTemplate> templates = {
      {"M3",
       IstioTable::kMangle,
       IstioHook::kPrerouting,
       When::kAlways,
       AddressSlot::kNone,
       {Mark(kInpodMark, kInpodMask)},
       Action{ActionKind::kSetConnmark, kInpodTproxyMark, kInpodTproxyMask, 0, {}}},
      {"M4",
       IstioTable::kMangle,
       IstioHook::kOutput,
       When::kAlways,
       AddressSlot::kNone,
       {Connmark(kInpodTproxyMark, kInpodTproxyMask)},
       Action{ActionKind::kRestoreConnmark, kInpodRestoreMask, kInpodRestoreMask, 0, {}}},
      {"N5",
       IstioTable::kNat,
       IstioHook::kPrerouting,
       When::kNotIngress,
       AddressSlot::kSnatSource,
       {Proto(kTcp)},
       Verdict(ActionKind::kAccept)},
      {"N7",
       IstioTable::kNat,
       IstioHook::kPrerouting,
       When::kNotIngress,
       AddressSlot::kNotLoopbackDest,
       {Proto(kTcp), DstPort(kZtunnelInboundPort, true), Mark(kInpodMark, kInpodMask, true)},
       RedirectTo(kZtunnelInboundPlaintextPort)},
      {"N6",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kAlways,
       AddressSlot::kSnatDest,
       {Proto(kTcp)},
       Verdict(ActionKind::kAccept)},
      {"N8",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kDns,
       AddressSlot::kNone,
       {OutIface("lo", true), Proto(kUdp), Mark(kInpodMark, kInpodMask, true), DstPort(kDnsPort)},
       RedirectTo(kDnsCapturePort)},
      {"N9",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kDns,
       AddressSlot::kNotLoopbackDest,
       {Proto(kTcp), DstPort(kDnsPort), Mark(kInpodMark, kInpodMask, true)},
       RedirectTo(kDnsCapturePort)},
      {"N10",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kAlways,
       AddressSlot::kNone,
       {Proto(kTcp), Mark(kInpodTproxyMark, kInpodTproxyMask)},
       Verdict(ActionKind::kAccept)},
      {"N11",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kAlways,
       AddressSlot::kNotLoopbackDest,
       {OutIface("lo")},
       Verdict(ActionKind::kAccept)},
      {"N12",
       IstioTable::kNat,
       IstioHook::kOutput,
       When::kAlways,
       AddressSlot::kNotLoopbackDest,
       {Proto(kTcp), Mark(kInpodMark, kInpodMask, true)},
       RedirectTo(kZtunnelOutboundPort)},
      {"R3",
       IstioTable::kRaw,
       IstioHook::kOutput,
       When::kDns,
       AddressSlot::kNone,
       {Proto(kUdp), Mark(kInpodMark, kInpodMask), DstPort(kDnsPort)},
       Action{ActionKind::kCtZone, 1, 0, 0, {}}},
      {"R4",
       IstioTable::kRaw,
       IstioHook::kPrerouting,
       When::kDns,
       AddressSlot::kNone,
       {Proto(kUdp), Mark(kInpodMark, kInpodMask, true), SrcPort(kDnsPort)},
       Action{ActionKind::kCtZone, 1, 0, 0, {}}},
  };
  return templates;
}

bool Applies(When when, const AmbientVariant& variant) {
  switch (when) {
    case When::kAlways:
      return true;
    case When::kNotIngress:
      return !variant.ingress_mode;
    case When::kDns:
      return variant.dns_capture;
  }
  return false;
}

std::string_view FamilyTag(Family family) { return family == Family::kIpv6 ? "v6" : "v4"; }

std::optional<Match> AddressMatch(AddressSlot slot, Family family, const ProbeSnat& snat) {
  const bool v6 = family == Family::kIpv6;
  switch (slot) {
    case AddressSlot::kNone:
      return std::nullopt;
    case AddressSlot::kSnatSource:
      return Match{MatchKind::kSrcAddr, false, 0, 0, HostPrefix(v6 ? snat.v6 : snat.v4)};
    case AddressSlot::kSnatDest:
      return Match{MatchKind::kDstAddr, false, 0, 0, HostPrefix(v6 ? snat.v6 : snat.v4)};
    case AddressSlot::kNotLoopbackDest:
      return Match{MatchKind::kDstAddr, true, 0, 0, v6 ? "::1/128" : "127.0.0.1/32"};
  }
  return std::nullopt;
}

ExpectedRule MakeRule(std::string id, std::vector<Match> matches, Action action) {
  ExpectedRule expected{std::move(id), Rule{}};
  expected.rule.sem.matches = std::move(matches);
  expected.rule.sem.action = std::move(action);
  Canonicalize(expected.rule.sem);
  return expected;
}

ExpectedRule FromTemplate(const RuleTemplate& row, Family address_family, const ProbeSnat& snat) {
  std::vector<Match> matches = row.matches;
  std::string id(row.id);
  if (auto address = AddressMatch(row.address, address_family, snat)) {
    matches.push_back(*std::move(address));
    id += "/";
    id += FamilyTag(address_family);
  }
  return MakeRule(std::move(id), std::move(matches), row.action);
}

struct NftBaseChainSpec {
  std::string_view type;
  int32_t priority;
};

// Facts §3.1: base chain type and priority as written by the agent.
NftBaseChainSpec NftBaseChain(IstioTable table, IstioHook hook) {
  switch (table) {
    case IstioTable::kNat:
      return {"nat", -100};
    case IstioTable::kMangle:
      return {hook == IstioHook::kOutput ? "route" : "filter", -150};
    case IstioTable::kRaw:
      return {"filter", -300};
  }
  return {"filter", 0};
}

std::string_view HookName(IstioHook hook) {
  switch (hook) {
    case IstioHook::kPrerouting:
      return "prerouting";
    case IstioHook::kOutput:
      return "output";
    case IstioHook::kPostrouting:
      return "postrouting";
  }
  return "";
}

void AppendInpodTable(ExpectedRuleset& ruleset, Family family, IstioTable table,
                      const AmbientVariant& variant, const ProbeSnat& snat) {
  const RulesetBackend backend = ruleset.backend;
  const bool nft = backend == RulesetBackend::kNft;
  const std::string table_name(TableName(backend, table));
  constexpr std::array<IstioHook, 2> kHooks = {IstioHook::kPrerouting, IstioHook::kOutput};

  for (IstioHook hook : kHooks) {
    ExpectedChain base;
    base.family = family;
    base.table = table_name;
    base.chain = std::string(BaseChainName(backend, hook));
    base.owned = nft;
    base.is_base = nft;
    if (nft) {
      const NftBaseChainSpec spec = NftBaseChain(table, hook);
      base.hook = std::string(HookName(hook));
      base.type = std::string(spec.type);
      base.priority = spec.priority;
    }
    base.rules.push_back(
        MakeRule(std::string(hook == IstioHook::kPrerouting ? "jump-prerouting" : "jump-output"),
                 {}, Jump(IstioChainName(backend, hook))));
    ruleset.chains.push_back(std::move(base));
  }

  for (IstioHook hook : kHooks) {
    ExpectedChain chain;
    chain.family = family;
    chain.table = table_name;
    chain.chain = std::string(IstioChainName(backend, hook));
    if (table == IstioTable::kNat && hook == IstioHook::kPrerouting) {
      for (const std::string& vif : variant.virtual_interfaces) {
        chain.rules.push_back(
            MakeRule("N3:" + vif, {InIface(vif), Proto(kTcp)}, RedirectTo(kZtunnelOutboundPort)));
        chain.rules.push_back(
            MakeRule("N4:" + vif, {InIface(vif), Proto(kTcp)}, Verdict(ActionKind::kReturn)));
      }
    }
    for (const RuleTemplate& row : InpodTemplates()) {
      if (row.table != table || row.chain != hook || !Applies(row.when, variant)) continue;
      if (!nft) {
        chain.rules.push_back(FromTemplate(row, family, snat));
        continue;
      }
      // nft inet: one rule for family-neutral rows; the ip6 twin directly follows the ip rule.
      chain.rules.push_back(FromTemplate(row, Family::kIpv4, snat));
      if (row.address != AddressSlot::kNone && variant.ipv6) {
        chain.rules.push_back(FromTemplate(row, Family::kIpv6, snat));
      }
    }
    ruleset.chains.push_back(std::move(chain));
  }
}

}  // namespace

RulesetBackend RulesetBackendFor(Backend backend) {
  return backend == Backend::kNft ? RulesetBackend::kNft : RulesetBackend::kIptables;
}

std::string_view TableName(RulesetBackend backend, IstioTable table) {
  const bool nft = backend == RulesetBackend::kNft;
  switch (table) {
    case IstioTable::kMangle:
      return nft ? "istio-ambient-mangle" : "mangle";
    case IstioTable::kNat:
      return nft ? "istio-ambient-nat" : "nat";
    case IstioTable::kRaw:
      return nft ? "istio-ambient-raw" : "raw";
  }
  return "";
}

std::string_view IstioChainName(RulesetBackend backend, IstioHook hook) {
  const bool nft = backend == RulesetBackend::kNft;
  switch (hook) {
    case IstioHook::kPrerouting:
      return nft ? "istio-prerouting" : kIptPrerouting;
    case IstioHook::kOutput:
      return nft ? "istio-output" : kIptOutput;
    case IstioHook::kPostrouting:
      return nft ? kNftHostChain : kIptHostPostrouting;
  }
  return "";
}

std::string_view BaseChainName(RulesetBackend backend, IstioHook hook) {
  const bool nft = backend == RulesetBackend::kNft;
  switch (hook) {
    case IstioHook::kPrerouting:
      return nft ? "prerouting" : "PREROUTING";
    case IstioHook::kOutput:
      return nft ? "output" : "OUTPUT";
    case IstioHook::kPostrouting:
      return nft ? "postrouting" : "POSTROUTING";
  }
  return "";
}

bool IsAmbientNftTable(std::string_view table_name) {
  return table_name == "istio-ambient-nat" || table_name == "istio-ambient-mangle" ||
         table_name == "istio-ambient-raw";
}

bool IsSidecarNftTable(std::string_view table_name) {
  return table_name.starts_with("istio-proxy-");
}

bool IsSidecarIptablesChain(std::string_view chain) {
  // Sidecar-only chains; ISTIO_OUTPUT is deliberately absent (ambient uses it too).
  return chain == "ISTIO_INBOUND" || chain == "ISTIO_REDIRECT" || chain == "ISTIO_IN_REDIRECT" ||
         chain == "ISTIO_DIVERT" || chain == "ISTIO_TPROXY";
}

bool IsIstioChainName(std::string_view chain) {
  return chain.starts_with("ISTIO_") || chain.starts_with("istio-");
}

bool IsIstioIptablesTable(std::string_view table) {
  return table == "mangle" || table == "nat" || table == "raw";
}

const ExpectedChain* ExpectedRuleset::Find(Family family, std::string_view table,
                                           std::string_view chain) const {
  for (const ExpectedChain& candidate : chains) {
    if (candidate.family == family && candidate.table == table && candidate.chain == chain) {
      return &candidate;
    }
  }
  return nullptr;
}

ExpectedRuleset BuildInpodRuleset(RulesetBackend backend, Family family,
                                  const AmbientVariant& variant, const ProbeSnat& snat) {
  ExpectedRuleset ruleset;
  ruleset.backend = backend;
  if (backend == RulesetBackend::kNft && family != Family::kInet) return ruleset;
  if (backend == RulesetBackend::kIptables) {
    if (family != Family::kIpv4 && family != Family::kIpv6) return ruleset;
    if (family == Family::kIpv6 && !variant.ipv6) return ruleset;
  }
  // Restore order mangle, nat, raw; raw only carries DNS rules.
  AppendInpodTable(ruleset, family, IstioTable::kMangle, variant, snat);
  AppendInpodTable(ruleset, family, IstioTable::kNat, variant, snat);
  if (variant.dns_capture) AppendInpodTable(ruleset, family, IstioTable::kRaw, variant, snat);
  return ruleset;
}

ExpectedRuleset BuildInpodRuleset(RulesetBackend backend, const AmbientVariant& variant,
                                  const ProbeSnat& snat) {
  if (backend == RulesetBackend::kNft) {
    return BuildInpodRuleset(backend, Family::kInet, variant, snat);
  }
  ExpectedRuleset ruleset = BuildInpodRuleset(backend, Family::kIpv4, variant, snat);
  ExpectedRuleset v6 = BuildInpodRuleset(backend, Family::kIpv6, variant, snat);
  for (ExpectedChain& chain : v6.chains) ruleset.chains.push_back(std::move(chain));
  return ruleset;
}

ExpectedRuleset BuildHostRuleset(RulesetBackend backend, Family family, const ProbeSnat& snat) {
  ExpectedRuleset ruleset;
  ruleset.backend = backend;
  if (family != Family::kIpv4 && family != Family::kIpv6) return ruleset;
  const bool v6 = family == Family::kIpv6;
  const std::string set_match = std::string(v6 ? kProbeSetV6 : kProbeSetV4) + " dst";
  const Action snat_action{ActionKind::kSnat, 0, 0, 0, v6 ? snat.v6 : snat.v4};
  const Match set{MatchKind::kSet, false, 0, 0, set_match};

  if (backend == RulesetBackend::kNft) {
    // The nft host rules sit in one inet table; the caller asks per family for the SNAT rule.
    ExpectedChain chain;
    chain.family = Family::kInet;
    chain.table = std::string(kNftHostTable);
    chain.chain = std::string(kNftHostChain);
    chain.is_base = true;
    chain.hook = "postrouting";
    chain.type = "nat";
    chain.priority = 100;
    const Match any_kubelet{MatchKind::kSocketUid, false, kAnyKubeletUid, 0, {}};
    chain.rules.push_back(
        MakeRule(v6 ? "H-nft/v6" : "H-nft/v4", {Proto(kTcp), any_kubelet, set}, snat_action));
    ruleset.chains.push_back(std::move(chain));
    return ruleset;
  }

  ExpectedChain postrouting;
  postrouting.family = family;
  postrouting.table = "nat";
  postrouting.chain = "POSTROUTING";
  postrouting.owned = false;
  postrouting.rules.push_back(MakeRule("H-jump", {}, Jump(kIptHostPostrouting)));
  ruleset.chains.push_back(std::move(postrouting));

  ExpectedChain istio_postrouting;
  istio_postrouting.family = family;
  istio_postrouting.table = "nat";
  istio_postrouting.chain = std::string(kIptHostPostrouting);
  const Match socket_exists{MatchKind::kSocketExists, false, 0, 0, {}};
  istio_postrouting.rules.push_back(
      MakeRule(v6 ? "H-snat/v6" : "H-snat/v4", {socket_exists, Proto(kTcp), set}, snat_action));
  ruleset.chains.push_back(std::move(istio_postrouting));
  return ruleset;
}

ExpectedPolicyRouting BuildPolicyRouting(const AmbientVariant& variant, bool ipv6_disabled) {
  ExpectedPolicyRouting routing;
  auto add_family = [&routing](Family family, std::string default_prefix) {
    routing.rules.push_back(PolicyRule{family, kPolicyRulePriority, kInpodTproxyMark,
                                       kInpodTproxyMask, kRouteTableInbound, "lookup"});
    routing.routes.push_back(
        RouteEntry{family, kRouteTableInbound, "local", std::move(default_prefix), "lo"});
  };
  add_family(Family::kIpv4, "0.0.0.0/0");
  if (variant.ipv6 && !ipv6_disabled) add_family(Family::kIpv6, "::/0");
  return routing;
}

bool SemanticsMatch(const RuleSemantics& observed, const RuleSemantics& expected) {
  if (observed.action != expected.action) return false;
  if (observed.matches.size() != expected.matches.size()) return false;
  const bool any_uid = std::any_of(
      expected.matches.begin(), expected.matches.end(),
      [](const Match& m) { return m.kind == MatchKind::kSocketUid && m.value == kAnyKubeletUid; });
  std::vector<Match> left = observed.matches;
  std::vector<Match> right = expected.matches;
  if (any_uid) {
    for (Match& m : left) {
      if (m.kind == MatchKind::kSocketUid && !m.negated) m.value = kAnyKubeletUid;
    }
  }
  std::sort(left.begin(), left.end());
  std::sort(right.begin(), right.end());
  return left == right;
}

bool PolicyRuleMatches(const PolicyRule& observed, const PolicyRule& expected) {
  return observed.family == expected.family && observed.fwmark == expected.fwmark &&
         observed.fwmask == expected.fwmask && observed.table == expected.table &&
         observed.action == expected.action;
}

bool RouteMatches(const RouteEntry& observed, const RouteEntry& expected) {
  return observed.family == expected.family && observed.table == expected.table &&
         observed.type == expected.type && observed.dst == expected.dst &&
         observed.dev == expected.dev;
}

std::string HostPrefix(std::string_view address) {
  if (address.find('/') != std::string_view::npos) return std::string(address);
  const bool v6 = address.find(':') != std::string_view::npos;
  return std::string(address) + (v6 ? "/128" : "/32");
}

}  // namespace ad::istio
