// What the istio-cni node agent writes, as data: the expected in-pod ambient rule sets, the
// in-pod policy routing and the host probe-SNAT rules, for both rule backends. Derived from
// shared/facts/istio-redirect-rules.md §2.1, §2.4, §3.2 and §4. Everything Istio-specific that
// analysis compares against lives here, so a new Istio release means editing one file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.h"
#include "model/istio_facts.h"
#include "model/rule.h"
#include "model/snapshot.h"

namespace ad::istio {

// The constants (ports, marks, masks, route table, probe SNAT, probe sets) are in
// model/istio_facts.h, shared with the sources and the engine.
// Stands for "any kubelet UID" in the expected nft host rule (the real UID is found at runtime).
inline constexpr uint32_t kAnyKubeletUid = 0xffffffff;

// iptables-legacy and iptables-nft receive identical restore input, so they share one rule set.
enum class RulesetBackend : uint8_t { kIptables, kNft };
RulesetBackend RulesetBackendFor(Backend backend);

// Chain roles: the same logical chain under each backend's naming.
enum class IstioTable : uint8_t { kMangle, kNat, kRaw };
enum class IstioHook : uint8_t { kPrerouting, kOutput, kPostrouting };
// "mangle" / "istio-ambient-mangle".
std::string_view TableName(RulesetBackend backend, IstioTable table);
// Istio's own chain: "ISTIO_PRERT" / "istio-prerouting", "ISTIO_POSTRT" / "postrouting" (the nft
// host rules live directly in the base chain).
std::string_view IstioChainName(RulesetBackend backend, IstioHook hook);
// Base chain the Istio chain is jumped from: "PREROUTING" / "prerouting".
std::string_view BaseChainName(RulesetBackend backend, IstioHook hook);

// In-pod iptables chain names; ISTIO_OUTPUT also exists in sidecar mode.
inline constexpr std::string_view kIptPrerouting = "ISTIO_PRERT";
inline constexpr std::string_view kIptOutput = "ISTIO_OUTPUT";
inline constexpr std::string_view kIptHostPostrouting = "ISTIO_POSTRT";
inline constexpr std::string_view kNftHostTable = "istio-ambient-nat";
inline constexpr std::string_view kNftHostChain = "postrouting";

bool IsAmbientNftTable(std::string_view table_name);  // istio-ambient-{nat,mangle,raw}
bool IsSidecarNftTable(std::string_view table_name);  // istio-proxy-*
bool IsSidecarIptablesChain(std::string_view chain);  // ISTIO_INBOUND, ISTIO_REDIRECT, ...
bool IsIstioChainName(std::string_view chain);        // ISTIO_* or istio-*
bool IsIstioIptablesTable(std::string_view table);    // mangle, nat, raw

struct ProbeSnat {
  std::string v4{kProbeSnatV4};
  std::string v6{kProbeSnatV6};
};

struct ExpectedRule {
  std::string id;  // row of the facts table: "N7", "M1", "VIF-redirect", "H1"
  Rule rule;       // canonicalized
};

struct ExpectedChain {
  Family family = Family::kInet;  // kIpv4/kIpv6 for iptables tables, kInet for nft
  std::string table;
  std::string chain;
  // True when Istio created the chain, so every rule in it is Istio's. False for the shared
  // iptables built-in chains, where only the jump rule is Istio's and other rules are ignored.
  bool owned = true;
  bool is_base = false;  // nft base chain (hooked); iptables built-ins are base but not owned
  std::string hook;      // nft base chains only
  std::string type;
  int32_t priority = 0;
  std::vector<ExpectedRule> rules;  // evaluation order
};

struct ExpectedRuleset {
  RulesetBackend backend = RulesetBackend::kIptables;
  std::vector<ExpectedChain> chains;

  const ExpectedChain* Find(Family family, std::string_view table, std::string_view chain) const;
};

// In-pod rules for one family: iptables kIpv4 or kIpv6 (ip6tables part), nft kInet (holds the ip6
// rules too when variant.ipv6). An iptables kIpv6 request with !variant.ipv6 yields nothing.
ExpectedRuleset BuildInpodRuleset(RulesetBackend backend, Family family,
                                  const AmbientVariant& variant, const ProbeSnat& snat);
// All families the variant uses (iptables: v4 and, with ipv6, v6; nft: inet).
ExpectedRuleset BuildInpodRuleset(RulesetBackend backend, const AmbientVariant& variant,
                                  const ProbeSnat& snat);

// Host netns probe SNAT (§4). iptables family kIpv4/kIpv6: nat POSTROUTING jump + ISTIO_POSTRT
// SNAT rule; nft kIpv4/kIpv6: the matching rule of inet istio-ambient-nat postrouting (skuid is
// kAnyKubeletUid; compare with SemanticsMatch).
ExpectedRuleset BuildHostRuleset(RulesetBackend backend, Family family, const ProbeSnat& snat);

struct ExpectedPolicyRouting {
  std::vector<PolicyRule> rules;
  std::vector<RouteEntry> routes;
};
// ip rule fwmark 0x111/0xfff lookup 100 pref 32764 + local default route dev lo table 100 for v4;
// the same for v6 when the variant has ipv6 and the netns has IPv6 enabled.
ExpectedPolicyRouting BuildPolicyRouting(const AmbientVariant& variant, bool ipv6_disabled);

// Observed-vs-expected rule equality. Order-insensitive over matches (so it does not depend on
// the exact canonical order) and honours the kAnyKubeletUid wildcard of the expected side.
bool SemanticsMatch(const RuleSemantics& observed, const RuleSemantics& expected);
// Policy rule equality; the priority is not compared (the agent ignores EEXIST, and a rule at
// another priority still steers the traffic).
bool PolicyRuleMatches(const PolicyRule& observed, const PolicyRule& expected);
bool RouteMatches(const RouteEntry& observed, const RouteEntry& expected);

// Prefix helpers: "169.254.7.127" -> "169.254.7.127/32", "::1" -> "::1/128".
std::string HostPrefix(std::string_view address);

}  // namespace ad::istio
