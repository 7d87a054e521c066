#include "lab/rules.h"

#include <algorithm>
#include <string_view>

namespace ad::lab {
namespace {

// When a template rule applies (facts §2.1 "Cond."); VIF rules are expanded separately.
enum class When : uint8_t { kAlways, kNotIngress, kDns };

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

std::string Substitute(std::string_view text, std::string_view key, std::string_view value) {
  std::string out(text);
  for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + value.size())) {
    out.replace(at, key.size(), value);
  }
  return out;
}

// ---- iptables (facts §2.1); rows are in emission order, which is evaluation order per chain.

struct IptablesJump {
  std::string_view table;
  std::string_view chain;
  std::string_view target;
  When when;
};

constexpr IptablesJump kInpodJumps[] = {
    {"mangle", "PREROUTING", "ISTIO_PRERT", When::kAlways},
    {"mangle", "OUTPUT", "ISTIO_OUTPUT", When::kAlways},
    {"nat", "OUTPUT", "ISTIO_OUTPUT", When::kAlways},
    {"nat", "PREROUTING", "ISTIO_PRERT", When::kAlways},
    {"raw", "PREROUTING", "ISTIO_PRERT", When::kDns},
    {"raw", "OUTPUT", "ISTIO_OUTPUT", When::kDns},
};

struct IptablesRule {
  std::string_view table;
  std::string_view chain;
  std::string_view spec;  // {snat} = probe SNAT address, {lo} = loopback /32 or /128
  When when;
  bool outbound_redirect = false;
};

constexpr IptablesRule kInpodRules[] = {
    {"mangle", "ISTIO_PRERT", "-m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff",
     When::kAlways},
    {"mangle", "ISTIO_OUTPUT",
     "-m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask "
     "0xffffffff",
     When::kAlways},
    {"nat", "ISTIO_PRERT", "-s {snat} -p tcp -m tcp -j ACCEPT", When::kNotIngress},
    {"nat", "ISTIO_OUTPUT", "-d {snat} -p tcp -m tcp -j ACCEPT", When::kAlways},
    {"nat", "ISTIO_PRERT",
     "! -d {lo} -p tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006",
     When::kNotIngress},
    {"nat", "ISTIO_OUTPUT",
     "! -o lo -p udp -m mark ! --mark 0x539/0xfff -m udp --dport 53 -j REDIRECT --to-port 15053",
     When::kDns},
    {"nat", "ISTIO_OUTPUT",
     "! -d {lo} -p tcp --dport 53 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15053",
     When::kDns},
    {"nat", "ISTIO_OUTPUT", "-p tcp -m mark --mark 0x111/0xfff -j ACCEPT", When::kAlways},
    {"nat", "ISTIO_OUTPUT", "! -d {lo} -o lo -j ACCEPT", When::kAlways},
    {"nat", "ISTIO_OUTPUT",
     "! -d {lo} -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001", When::kAlways,
     true},
    {"raw", "ISTIO_OUTPUT", "-p udp -m mark --mark 0x539/0xfff -m udp --dport 53 -j CT --zone 1",
     When::kDns},
    {"raw", "ISTIO_PRERT", "-p udp -m mark ! --mark 0x539/0xfff -m udp --sport 53 -j CT --zone 1",
     When::kDns},
};

constexpr std::string_view kVifRedirect = "-i {vif} -p tcp -j REDIRECT --to-ports 15001";
constexpr std::string_view kVifReturn = "-i {vif} -p tcp -j RETURN";

struct ChainRule {
  std::string chain;
  std::string spec;
};

void AddChainOnce(std::vector<std::string>& chains, std::string_view chain) {
  if (std::find(chains.begin(), chains.end(), chain) == chains.end()) chains.emplace_back(chain);
}

// One `* table` block. Istio's builder declares chains that hold rules in order of their first
// rule, then chains that are only jump targets (so an empty nat ISTIO_PRERT still exists).
void AppendIptablesTable(std::string& out, std::string_view table,
                         const std::vector<ChainRule>& jumps, const std::vector<ChainRule>& rules,
                         const std::vector<ChainRule>& trailing_jumps) {
  std::vector<std::string> declared;
  for (const ChainRule& rule : rules) AddChainOnce(declared, rule.chain);
  for (const ChainRule& jump : jumps) AddChainOnce(declared, jump.spec.substr(3));  // "-j X"
  out += "* ";
  out += table;
  out += '\n';
  for (const std::string& chain : declared) out += "-N " + chain + "\n";
  for (const auto* list : {&jumps, &rules, &trailing_jumps}) {
    for (const ChainRule& rule : *list) out += "-A " + rule.chain + " " + rule.spec + "\n";
  }
  out += "COMMIT\n";
}

// ---- native nft (facts §3.1, §3.2).

struct NftTable {
  std::string_view name;  // suffix of istio-ambient-<name>
  std::string_view prerouting_decl;
  std::string_view output_decl;
  bool output_jump_first;
  When when;
};

constexpr NftTable kNftTables[] = {
    {"nat", "{ type nat hook prerouting priority -100 ; }",
     "{ type nat hook output priority -100 ; }", true, When::kAlways},
    {"mangle", "{ type filter hook prerouting priority -150 ; }",
     "{ type route hook output priority -150 ; }", false, When::kAlways},
    {"raw", "{ type filter hook prerouting priority -300 ; }",
     "{ type filter hook output priority -300 ; }", false, When::kDns},
};

struct NftRule {
  std::string_view table;
  std::string_view chain;
  std::string_view v4;  // {snat4}
  std::string_view v6;  // ip6 twin ({snat6}); empty when the rule is family-neutral
  When when;
  bool outbound_redirect = false;
};

// The double space in the IPv4 15006 rule and in the ct mark rule is Istio's; nft accepts it.
constexpr NftRule kNftRules[] = {
    {"nat", "istio-prerouting", "meta l4proto tcp ip saddr {snat4} counter accept",
     "meta l4proto tcp ip6 saddr {snat6} counter accept", When::kNotIngress},
    {"nat", "istio-output", "meta l4proto tcp ip daddr {snat4} counter accept",
     "meta l4proto tcp ip6 daddr {snat6} counter accept", When::kAlways},
    {"nat", "istio-prerouting",
     "ip daddr != 127.0.0.1/32 tcp dport != 15008 mark and 0xfff  != 0x539 counter redirect to "
     ":15006",
     "ip6 daddr != ::1/128 tcp dport != 15008 mark and 0xfff != 0x539 counter redirect to :15006",
     When::kNotIngress},
    {"nat", "istio-output",
     "oifname != lo mark and 0xfff != 0x539 udp dport 53 counter redirect to :15053", "",
     When::kDns},
    {"nat", "istio-output",
     "ip daddr != 127.0.0.1/32 tcp dport 53 mark and 0xfff != 0x539 counter redirect to :15053",
     "ip6 daddr != ::1/128 tcp dport 53 mark and 0xfff != 0x539 counter redirect to :15053",
     When::kDns},
    {"nat", "istio-output", "meta l4proto tcp mark and 0xfff == 0x111 counter accept", "",
     When::kAlways},
    {"nat", "istio-output", "oifname lo ip daddr != 127.0.0.1/32 counter accept",
     "oifname lo ip6 daddr != ::1/128 counter accept", When::kAlways},
    {"nat", "istio-output",
     "meta l4proto tcp ip daddr != 127.0.0.1/32 mark and 0xfff != 0x539 counter redirect to :15001",
     "meta l4proto tcp ip6 daddr != ::1/128 mark and 0xfff != 0x539 counter redirect to :15001",
     When::kAlways, true},
    {"mangle", "istio-prerouting",
     "meta mark & 0xfff == 0x539 counter ct mark set ct mark & 0xfffff000 |  0x111", "",
     When::kAlways},
    {"mangle", "istio-output", "ct mark and 0xfff == 0x111 counter meta mark set ct mark", "",
     When::kAlways},
    {"raw", "istio-output", "udp dport 53 meta mark and 0xfff == 0x539 counter ct zone set 1", "",
     When::kDns},
    {"raw", "istio-prerouting", "udp sport 53 meta mark and 0xfff != 0x539 counter ct zone set 1",
     "", When::kDns},
};

constexpr std::string_view kNftVifRedirect =
    "iifname {vif} meta l4proto tcp counter redirect to :15001";
constexpr std::string_view kNftVifReturn = "iifname {vif} meta l4proto tcp counter return";

std::string NftSnat(std::string_view spec, const SnatConfig& snat) {
  return Substitute(Substitute(spec, "{snat4}", snat.ipv4), "{snat6}", snat.ipv6);
}

}  // namespace

std::string IptablesInpodRestore(const AmbientVariant& variant, Family family,
                                 const SnatConfig& snat, const RuleTweaks& tweaks) {
  const bool v6 = family == Family::kIpv6;
  const std::string_view snat_address = v6 ? snat.ipv6 : snat.ipv4;
  const std::string_view loopback = v6 ? "::1/128" : "127.0.0.1/32";
  std::string out;
  for (std::string_view table : {"mangle", "nat", "raw"}) {
    std::vector<ChainRule> jumps;
    for (const IptablesJump& jump : kInpodJumps) {
      if (jump.table == table && Applies(jump.when, variant)) {
        jumps.push_back({std::string(jump.chain), "-j " + std::string(jump.target)});
      }
    }
    if (jumps.empty()) continue;
    std::vector<ChainRule> rules;
    if (table == "nat") {
      for (const std::string& vif : variant.virtual_interfaces) {
        rules.push_back({"ISTIO_PRERT", Substitute(kVifRedirect, "{vif}", vif)});
        rules.push_back({"ISTIO_PRERT", Substitute(kVifReturn, "{vif}", vif)});
      }
    }
    for (const IptablesRule& rule : kInpodRules) {
      if (rule.table != table || !Applies(rule.when, variant)) continue;
      if (rule.outbound_redirect && tweaks.omit_outbound_redirect) continue;
      rules.push_back(
          {std::string(rule.chain),
           Substitute(Substitute(rule.spec, "{snat}", snat_address), "{lo}", loopback)});
    }
    std::vector<ChainRule> extra;
    if (table == "nat") {
      for (int i = 0; i < tweaks.extra_output_jumps; ++i)
        extra.push_back({"OUTPUT", "-j ISTIO_OUTPUT"});
    }
    AppendIptablesTable(out, table, jumps, rules, extra);
  }
  return out;
}

std::string IptablesHostRestore(Family family, const SnatConfig& snat) {
  const bool v6 = family == Family::kIpv6;
  std::string out = "* nat\n-N ISTIO_POSTRT\n-I POSTROUTING 1 -j ISTIO_POSTRT\n";
  out += "-A ISTIO_POSTRT -m owner --socket-exists -p tcp -m set --match-set ";
  out += v6 ? kProbeSetV6 : kProbeSetV4;
  out += " dst -j SNAT --to-source ";
  out += v6 ? snat.ipv6 : snat.ipv4;
  out += "\nCOMMIT\n";
  return out;
}

std::string NftInpodScript(const AmbientVariant& variant, const SnatConfig& snat,
                           const RuleTweaks& tweaks) {
  std::string out;
  for (const NftTable& table : kNftTables) {
    if (!Applies(table.when, variant)) continue;
    const std::string name = "inet istio-ambient-" + std::string(table.name);
    const std::string add_rule = "add rule " + name + " ";
    out += "add table " + name + "\n";
    if (tweaks.flush_tables) out += "flush table " + name + "\n";
    out += "add chain " + name + " prerouting " + std::string(table.prerouting_decl) + "\n";
    out += "add chain " + name + " output " + std::string(table.output_decl) + "\n";
    out += "add chain " + name + " istio-prerouting\n";
    out += "add chain " + name + " istio-output\n";
    const std::string output_jump = add_rule + "output jump istio-output\n";
    const std::string prerouting_jump = add_rule + "prerouting jump istio-prerouting\n";
    out += table.output_jump_first ? output_jump + prerouting_jump : prerouting_jump + output_jump;
    if (table.name == "nat") {
      for (const std::string& vif : variant.virtual_interfaces) {
        out += add_rule + "istio-prerouting " + Substitute(kNftVifRedirect, "{vif}", vif) + "\n";
        out += add_rule + "istio-prerouting " + Substitute(kNftVifReturn, "{vif}", vif) + "\n";
      }
    }
    for (const NftRule& rule : kNftRules) {
      if (rule.table != table.name || !Applies(rule.when, variant)) continue;
      if (rule.outbound_redirect && tweaks.omit_outbound_redirect) continue;
      const std::string prefix = add_rule + std::string(rule.chain) + " ";
      out += prefix + NftSnat(rule.v4, snat) + "\n";
      if (variant.ipv6 && !rule.v6.empty()) out += prefix + NftSnat(rule.v6, snat) + "\n";
    }
    if (table.name == "nat") {
      for (int i = 0; i < tweaks.extra_output_jumps; ++i) out += output_jump;
    }
  }
  return out;
}

std::string NftHostScript(bool ipv6, const SnatConfig& snat) {
  const std::string uid = std::to_string(snat.kubelet_uid);
  std::string out =
      "add table inet istio-ambient-nat\n"
      "flush table inet istio-ambient-nat\n"
      "add chain inet istio-ambient-nat postrouting { type nat hook postrouting priority 100 ; }\n";
  const std::string rule = "add rule inet istio-ambient-nat postrouting meta l4proto tcp skuid ";
  out += rule + uid + " ip daddr @" + kProbeSetV4 + " counter snat to " + snat.ipv4 + "\n";
  if (ipv6)
    out += rule + uid + " ip6 daddr @" + kProbeSetV6 + " counter snat to " + snat.ipv6 + "\n";
  return out;
}

std::string NftProbeSetsScript(bool ipv6, const std::vector<ProbeMember>& v4_members,
                               const std::vector<ProbeMember>& v6_members) {
  std::string out = "add table inet istio-ambient-nat\n";
  auto add_set = [&out](std::string_view name, std::string_view type,
                        const std::vector<ProbeMember>& members) {
    out += "add set inet istio-ambient-nat " + std::string(name) + " { type " + std::string(type) +
           "; comment \"UUID of the pods that are part of ambient mesh\"; }\n";
    if (members.empty()) return;
    out += "add element inet istio-ambient-nat " + std::string(name) + " { ";
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) out += ", ";
      out += members[i].ip + " comment \"" + members[i].pod_uid + "\"";
    }
    out += " }\n";
  };
  add_set(kProbeSetV4, "ipv4_addr", v4_members);
  if (ipv6) add_set(kProbeSetV6, "ipv6_addr", v6_members);
  return out;
}

std::string IpsetProbeRestore(Family family, const std::vector<ProbeMember>& members) {
  const bool v6 = family == Family::kIpv6;
  const std::string name = v6 ? kProbeSetV6 : kProbeSetV4;
  std::string out = "create " + name + " hash:ip family " + (v6 ? "inet6" : "inet") + " comment\n";
  for (const ProbeMember& member : members) {
    out += "add " + name + " " + member.ip + " comment \"" + member.pod_uid + "\"\n";
  }
  return out;
}

std::string NftSidecarScript() {
  constexpr std::string_view kTable = "inet istio-proxy-nat";
  constexpr std::string_view kLines[] = {
      "add table {t}",
      "flush table {t}",
      "add chain {t} prerouting { type nat hook prerouting priority -100 ; }",
      "add chain {t} output { type nat hook output priority -100 ; }",
      "add chain {t} istio-inbound",
      "add chain {t} istio-redirect",
      "add chain {t} istio-in-redirect",
      "add chain {t} istio-output",
      "add rule {t} prerouting meta l4proto tcp counter jump istio-inbound",
      "add rule {t} istio-inbound meta l4proto tcp tcp dport 15008 counter return",
      "add rule {t} istio-inbound meta l4proto tcp counter jump istio-in-redirect",
      "add rule {t} istio-redirect meta l4proto tcp counter redirect to :15001",
      "add rule {t} istio-in-redirect meta l4proto tcp counter redirect to :15006",
      "add rule {t} output counter jump istio-output",
      "add rule {t} istio-output oifname lo ip saddr 127.0.0.6/32 counter return",
      "add rule {t} istio-output skuid 1337 counter return",
      "add rule {t} istio-output ip daddr 127.0.0.1/32 counter return",
      "add rule {t} istio-output counter jump istio-redirect",
  };
  std::string out;
  for (std::string_view line : kLines) out += Substitute(line, "{t}", kTable) + "\n";
  return out;
}

}  // namespace ad::lab
