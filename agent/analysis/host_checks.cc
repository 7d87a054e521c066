// Node-level checks that relate pods to the host netns: backend drift and kubelet probe SNAT.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "analysis/checks.h"

namespace ad::analysis {
namespace {

const NetnsIstioState* HostState(const NodeSnapshot& snapshot,
                                 const std::vector<NetnsIstioState>& states) {
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    if (snapshot.netns[i].netns.is_host && !snapshot.netns[i].unreadable) return &states[i];
  }
  return nullptr;
}

bool IsEnrolledPod(const NetnsSnapshot& netns, const NetnsIstioState& state) {
  return !netns.netns.is_host && !netns.unreadable &&
         !state.classification.ambient_backends.empty();
}

std::string WithoutPrefixLength(std::string_view address) {
  return std::string(address.substr(0, address.find('/')));
}

// Whether the host reads behind the probe set of `host_backends` succeeded: ipsets for the
// iptables backends, nf_tables sets for nft (with no host rules at all, both).
bool ProbeSetsKnown(const NetnsSnapshot& host, const std::set<Backend>& host_backends) {
  const bool any = host_backends.empty();
  const bool want_ipset = any || host_backends.contains(Backend::kIptablesLegacy) ||
                          host_backends.contains(Backend::kIptablesNft);
  const bool want_nft = any || host_backends.contains(Backend::kNft);
  return (!want_ipset || host.reads.ipsets == ReadStatus::kOk) &&
         (!want_nft || host.reads.nftables == ReadStatus::kOk);
}

// Members of the host probe set of one family, or nullopt when the set does not exist. Looks in
// the place(s) the host backend uses; with no host rules at all, anywhere.
std::optional<std::vector<std::string>> ProbeSetMembers(const NetnsSnapshot& host,
                                                        const std::set<Backend>& host_backends,
                                                        std::string_view set_name) {
  const bool any = host_backends.empty();
  const bool want_ipset = any || host_backends.contains(Backend::kIptablesLegacy) ||
                          host_backends.contains(Backend::kIptablesNft);
  const bool want_nft = any || host_backends.contains(Backend::kNft);
  std::optional<std::vector<std::string>> members;
  auto add = [&members](const std::vector<std::string>& elements) {
    if (!members) members.emplace();
    for (const std::string& element : elements) members->push_back(WithoutPrefixLength(element));
  };
  if (want_ipset) {
    for (const IpSet& set : host.netfilter.ipsets) {
      if (set.name == set_name) add(set.members);
    }
  }
  if (want_nft) {
    for (const Table& table : host.netfilter.tables) {
      if (table.backend != Backend::kNft || table.name != istio::kNftHostTable) continue;
      for (const NftSet& set : table.sets) {
        if (set.name == set_name) add(set.elements);
      }
    }
  }
  return members;
}

void CheckHostRules(const NetnsSnapshot& host, Backend backend, Family family,
                    const AnalysisOptions& options, std::vector<Finding>& findings) {
  const istio::RulesetBackend ruleset = istio::RulesetBackendFor(backend);
  const std::vector<std::string>& addresses =
      family == Family::kIpv6 ? options.probe_snat_v6 : options.probe_snat_v4;
  std::vector<istio::ExpectedRuleset> candidates;
  for (const std::string& address : addresses) {
    istio::ProbeSnat snat;
    (family == Family::kIpv6 ? snat.v6 : snat.v4) = address;
    candidates.push_back(istio::BuildHostRuleset(ruleset, family, snat));
  }
  if (candidates.empty()) candidates.push_back(istio::BuildHostRuleset(ruleset, family, {}));

  std::vector<std::string> evidence;
  const istio::ExpectedRuleset& reference = candidates.front();
  for (size_t c = 0; c < reference.chains.size(); ++c) {
    const istio::ExpectedChain& chain = reference.chains[c];
    const std::string prefix = ChainPrefix(backend, chain.family, chain.table, chain.chain);
    const Chain* seen =
        FindObservedChain(host.netfilter, backend, chain.family, chain.table, chain.chain);
    if (seen == nullptr) {
      evidence.push_back(prefix + ": chain missing");
      continue;
    }
    for (size_t r = 0; r < chain.rules.size(); ++r) {
      const bool present = std::any_of(
          candidates.begin(), candidates.end(), [&](const istio::ExpectedRuleset& candidate) {
            const RuleSemantics& wanted = candidate.chains[c].rules[r].rule.sem;
            return std::any_of(seen->rules.begin(), seen->rules.end(), [&](const Rule& rule) {
              return istio::SemanticsMatch(rule.sem, wanted);
            });
          });
      if (!present) {
        evidence.push_back(prefix + ": missing " +
                           RenderRule(backend, chain.family, chain.chain, chain.rules[r].rule));
      }
    }
  }
  if (evidence.empty()) return;
  findings.push_back(MakeFinding(
      FindingCode::kProbeSnatMissing, &host,
      "host rules " + std::string(BackendName(backend)) + " " + std::string(FamilyName(family)),
      std::string("host probe SNAT rule incomplete (") + std::string(FamilyName(family)) + ")",
      std::move(evidence)));
}

}  // namespace

void CheckBackendDrift(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                       std::vector<Finding>& findings) {
  std::set<Backend> reference;
  std::string reference_source;
  const NetnsIstioState* host = HostState(snapshot, states);
  if (host != nullptr && !host->classification.host_backends.empty()) {
    reference = host->classification.host_backends;
    reference_source = "host probe-SNAT rules";
  } else {
    std::map<Backend, size_t> votes;
    for (size_t i = 0; i < snapshot.netns.size(); ++i) {
      const auto& backends = states[i].classification.ambient_backends;
      if (IsEnrolledPod(snapshot.netns[i], states[i]) && backends.size() == 1) {
        ++votes[*backends.begin()];
      }
    }
    size_t top = 0;
    size_t holders = 0;
    Backend winner = Backend::kNft;
    for (const auto& [backend, count] : votes) {
      if (count > top) {
        top = count;
        holders = 1;
        winner = backend;
      } else if (count == top) {
        ++holders;
      }
    }
    if (holders == 1) {  // a tie has no majority to drift from
      reference = {winner};
      reference_source = "most pods on the node";
    }
  }
  if (reference.empty()) return;

  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    const auto& backends = states[i].classification.ambient_backends;
    if (!IsEnrolledPod(snapshot.netns[i], states[i]) || backends.size() != 1) continue;
    if (reference.contains(*backends.begin())) continue;
    findings.push_back(
        MakeFinding(FindingCode::kBackendDrift, &snapshot.netns[i],
                    BackendList(backends) + " -> " + BackendList(reference),
                    "pod ambient rules use another backend than the node",
                    {"pod in-pod rules: " + BackendList(backends),
                     "node reference (" + reference_source + "): " + BackendList(reference)}));
  }
}

void CheckProbeSnat(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                    const AnalysisOptions& options, std::vector<Finding>& findings) {
  std::vector<size_t> pods;
  bool need_v6 = false;
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    if (!IsEnrolledPod(snapshot.netns[i], states[i])) continue;
    pods.push_back(i);
    const auto& variant = states[i].classification.variant;
    need_v6 = need_v6 || (variant && variant->ipv6);
  }
  const NetnsSnapshot* host = snapshot.Host();
  if (pods.empty() || host == nullptr || host->unreadable) return;
  // A failed host read proves nothing is missing: the host's NETNS_UNREADABLE says what failed.
  if (!host->reads.NetfilterComplete()) return;
  const NetnsIstioState* host_state = HostState(snapshot, states);
  const std::set<Backend> host_backends = host_state->classification.host_backends;

  std::vector<Family> families = {Family::kIpv4};
  if (need_v6) families.push_back(Family::kIpv6);

  if (host_backends.empty()) {
    findings.push_back(MakeFinding(
        FindingCode::kProbeSnatMissing, host, "host rules",
        "no Istio probe SNAT rule in the host netns",
        {std::to_string(pods.size()) + " enrolled pod netns",
         "expected iptables nat POSTROUTING -j ISTIO_POSTRT with the SNAT rule, or nft inet "
         "istio-ambient-nat postrouting with the snat rule"}));
  }
  if (!ProbeSetsKnown(*host, host_backends)) return;
  for (Backend backend : host_backends) {
    for (Family family : families) CheckHostRules(*host, backend, family, options, findings);
  }

  // Missing members are collected per pod so that one pod gets one finding listing every family.
  std::map<size_t, std::vector<std::string>> missing_by_pod;
  for (Family family : families) {
    const std::string_view set_name =
        family == Family::kIpv6 ? istio::kProbeSetV6 : istio::kProbeSetV4;
    const auto members = ProbeSetMembers(*host, host_backends, set_name);
    if (!members) {
      findings.push_back(
          MakeFinding(FindingCode::kProbeSnatMissing, host, "probe set " + std::string(set_name),
                      "probe set " + std::string(set_name) + " missing",
                      {"host netns has no ipset or nft set named " + std::string(set_name)}));
      continue;
    }
    for (size_t i : pods) {
      const NetnsSnapshot& pod = snapshot.netns[i];
      for (const InterfaceAddress& address : pod.routing.addresses) {
        if (address.family != family || !address.global_scope || address.ifname == "lo") continue;
        if (std::find(members->begin(), members->end(), address.address) != members->end()) {
          continue;
        }
        missing_by_pod[i].push_back("pod address " + address.address + " on " + address.ifname +
                                    " is not in " + std::string(set_name) + " (" +
                                    std::to_string(members->size()) + " members)");
      }
    }
  }
  for (auto& [index, evidence] : missing_by_pod) {
    const NetnsSnapshot& pod = snapshot.netns[index];
    const std::string summary =
        evidence.size() == 1
            ? "pod IP missing from the host probe set"
            : std::to_string(evidence.size()) + " pod IPs missing from the host probe sets";
    findings.push_back(MakeFinding(FindingCode::kProbeSnatMissing, &pod, "probe set membership",
                                   summary, std::move(evidence)));
  }
}

}  // namespace ad::analysis
