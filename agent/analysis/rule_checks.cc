// Analyze: per-netns rule checks (duplicates, mixed backends, completeness and order, host
// enrollment, dataplane conflict, unreadable sources) plus the node-level host checks.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "analysis/analysis.h"
#include "analysis/checks.h"
#include "analysis/recognizer.h"

namespace ad {
namespace analysis {
namespace {

bool JumpsIntoIstioChain(const Rule& rule) {
  const Action& action = rule.sem.action;
  return (action.kind == ActionKind::kJump || action.kind == ActionKind::kGoto) &&
         istio::IsIstioChainName(action.text);
}

// iptables ambient and sidecar rules share ISTIO_OUTPUT and the built-in jumps; in that case the
// conflict is the finding, and per-rule checks would only restate it.
bool SharedWithSidecar(const NetnsClassification& classification, Backend backend) {
  return backend != Backend::kNft && classification.ambient_backends.contains(backend) &&
         classification.sidecar_backends.contains(backend);
}

std::string NetnsLabel(const NetnsSnapshot& netns) {
  return netns.netns.PrimaryPath() + " (inode " + std::to_string(netns.netns.inode) + ")";
}

void CheckReadability(const NetnsSnapshot& netns, std::vector<Finding>& findings) {
  if (netns.errors.empty() && !netns.unreadable) return;
  std::vector<std::string> evidence;
  std::set<SourceKind> kinds;
  for (const SourceError& error : netns.errors) {
    evidence.push_back(std::string(error.source()) + ": " + error.message);
    kinds.insert(error.kind);
  }
  std::string sources;
  for (SourceKind kind : kinds) {
    if (!sources.empty()) sources += ", ";
    sources += SourceKindName(kind);
  }
  // The failed sources are the subject: a changed errno text is an update, not a new finding.
  const std::string summary = netns.unreadable
                                  ? "network namespace could not be read"
                                  : "some sources of the network namespace failed: " + sources;
  findings.push_back(MakeFinding(FindingCode::kNetnsUnreadable, &netns,
                                 netns.unreadable ? "unreadable" : sources, summary,
                                 std::move(evidence)));
}

// One finding per backend holding repeated rules (a re-applied rule set repeats every rule: one
// finding, not seventy); the backend is the subject, the repeated rules are the evidence.
void CheckDuplicates(const NetnsSnapshot& netns, const NetnsClassification& classification,
                     std::vector<Finding>& findings) {
  std::map<Backend, std::vector<std::string>> evidence_by_backend;
  for (const Table& table : netns.netfilter.tables) {
    if (SharedWithSidecar(classification, table.backend)) continue;
    const bool nft = table.backend == Backend::kNft;
    if (nft && !table.name.starts_with("istio-")) continue;
    if (!nft && table.family != Family::kIpv4 && table.family != Family::kIpv6) continue;
    for (const Chain& chain : table.chains) {
      const bool istio_chain = nft || istio::IsIstioChainName(chain.name);
      std::vector<std::pair<RuleSemantics, const Rule*>> seen;
      std::map<size_t, size_t> repeats;  // index in seen -> occurrences
      for (const Rule& rule : chain.rules) {
        if (!istio_chain && !JumpsIntoIstioChain(rule)) continue;
        RuleSemantics key = SortedSemantics(rule.sem);
        auto it = std::find_if(seen.begin(), seen.end(),
                               [&key](const auto& entry) { return entry.first == key; });
        if (it == seen.end()) {
          seen.emplace_back(std::move(key), &rule);
        } else {
          const size_t index = static_cast<size_t>(it - seen.begin());
          repeats[index] = repeats.contains(index) ? repeats[index] + 1 : 2;
        }
      }
      for (const auto& [index, count] : repeats) {
        evidence_by_backend[table.backend].push_back(
            RuleEvidence(table.backend, table.family, table.name, chain.name, *seen[index].second) +
            " (" + std::to_string(count) + " times)");
      }
    }
  }
  for (auto& [backend, evidence] : evidence_by_backend) {
    findings.push_back(MakeFinding(FindingCode::kDuplicateRule, &netns,
                                   std::string(BackendName(backend)),
                                   "Istio rule repeated within one chain", std::move(evidence)));
  }
}

size_t CountIstioRules(const NetnsSnapshot& netns, const AmbientFit& fit) {
  size_t count = 0;
  for (const istio::ExpectedChain& chain : fit.expected->chains) {
    if (const Chain* seen = FindObservedChain(netns.netfilter, fit.backend, chain.family,
                                              chain.table, chain.chain)) {
      count += chain.owned ? seen->rules.size()
                           : static_cast<size_t>(std::count_if(
                                 seen->rules.begin(), seen->rules.end(), JumpsIntoIstioChain));
    }
  }
  return count;
}

// One evidence line per backend holding in-pod ambient rules: how many and which variant.
std::vector<std::string> AmbientRuleCounts(const NetnsSnapshot& netns,
                                           const NetnsIstioState& state) {
  std::vector<std::string> lines;
  for (const AmbientFit& fit : state.ambient) {
    lines.push_back(std::string(BackendName(fit.backend)) + ": " +
                    std::to_string(CountIstioRules(netns, fit)) + " Istio in-pod rules (variant " +
                    fit.variant.Describe() + ")");
  }
  return lines;
}

void CheckMixedBackends(const NetnsSnapshot& netns, const NetnsIstioState& state,
                        std::vector<Finding>& findings) {
  if (state.ambient.size() < 2) return;
  std::vector<std::string> evidence = AmbientRuleCounts(netns, state);
  findings.push_back(MakeFinding(
      FindingCode::kMixedBackend, &netns, BackendList(state.classification.ambient_backends),
      "Istio ambient rules present in more than one netfilter backend", std::move(evidence)));
}

std::string PolicyRuleText(const PolicyRule& rule) {
  char mark[64];
  std::snprintf(mark, sizeof(mark), "0x%x/0x%x", rule.fwmark, rule.fwmask);
  return std::string(rule.family == Family::kIpv6 ? "ip -6 rule " : "ip rule ") + "fwmark " + mark +
         " " + rule.action + " " + std::to_string(rule.table) + " pref " +
         std::to_string(rule.priority);
}

std::string RouteText(const RouteEntry& route) {
  return std::string(route.family == Family::kIpv6 ? "ip -6 route " : "ip route ") + route.type +
         " " + route.dst + " dev " + route.dev + " table " + std::to_string(route.table);
}

bool RoutesKnown(const NetnsSnapshot& netns) { return netns.reads.routes == ReadStatus::kOk; }

// Missing chains/rules and order violations of one backend against its best-fitting variant.
// Order is compared after dropping repeated rules, so a duplicate alone is only DUPLICATE_RULE.
void CollectRulesetGaps(const NetnsSnapshot& netns, const AmbientFit& fit,
                        std::vector<std::string>& evidence) {
  for (const istio::ExpectedChain& chain : fit.expected->chains) {
    const std::string prefix = ChainPrefix(fit.backend, chain.family, chain.table, chain.chain);
    const Chain* seen =
        FindObservedChain(netns.netfilter, fit.backend, chain.family, chain.table, chain.chain);
    if (seen == nullptr) {
      evidence.push_back(prefix + ": chain missing (Istio expects " +
                         std::to_string(chain.rules.size()) + " rules)");
      continue;
    }
    if (chain.is_base && (!seen->is_base || (!seen->hook.empty() && seen->hook != chain.hook))) {
      evidence.push_back(prefix + ": not attached to the " + chain.hook + " hook");
    }
    std::vector<RuleSemantics> wanted;
    for (const istio::ExpectedRule& rule : chain.rules) {
      wanted.push_back(SortedSemantics(rule.rule.sem));
    }
    std::vector<RuleSemantics> unique_seen;
    std::vector<std::pair<size_t, const Rule*>> positions;  // expected index, observed rule
    for (const Rule& rule : seen->rules) {
      RuleSemantics key = SortedSemantics(rule.sem);
      if (std::find(unique_seen.begin(), unique_seen.end(), key) != unique_seen.end()) continue;
      auto it = std::find(wanted.begin(), wanted.end(), key);
      if (it != wanted.end())
        positions.emplace_back(static_cast<size_t>(it - wanted.begin()), &rule);
      unique_seen.push_back(std::move(key));
    }
    for (size_t i = 0; i < chain.rules.size(); ++i) {
      if (std::find(unique_seen.begin(), unique_seen.end(), wanted[i]) == unique_seen.end()) {
        evidence.push_back(prefix + ": missing " +
                           RenderRule(fit.backend, chain.family, chain.chain, chain.rules[i].rule));
      }
    }
    for (size_t i = 1; i < positions.size(); ++i) {
      if (positions[i].first < positions[i - 1].first) {
        evidence.push_back(
            prefix + ": out of order: " +
            RenderRule(fit.backend, chain.family, chain.chain, *positions[i].second) +
            " must come before " +
            RenderRule(fit.backend, chain.family, chain.chain, *positions[i - 1].second));
        break;
      }
    }
  }
}

void CheckCompleteness(const NetnsSnapshot& netns, const NetnsIstioState& state,
                       std::vector<Finding>& findings) {
  const NetnsClassification& classification = state.classification;
  std::vector<std::string> evidence;
  for (const AmbientFit& fit : state.ambient) {
    if (SharedWithSidecar(classification, fit.backend)) continue;
    CollectRulesetGaps(netns, fit, evidence);
  }
  if (classification.variant && RoutesKnown(netns)) {
    const istio::ExpectedPolicyRouting routing =
        istio::BuildPolicyRouting(*classification.variant, netns.routing.ipv6_disabled);
    for (const PolicyRule& wanted : routing.rules) {
      const bool present = std::any_of(
          netns.routing.rules.begin(), netns.routing.rules.end(),
          [&wanted](const PolicyRule& seen) { return istio::PolicyRuleMatches(seen, wanted); });
      if (!present) evidence.push_back("policy routing: missing " + PolicyRuleText(wanted));
    }
    for (const RouteEntry& wanted : routing.routes) {
      const bool present = std::any_of(
          netns.routing.routes.begin(), netns.routing.routes.end(),
          [&wanted](const RouteEntry& seen) { return istio::RouteMatches(seen, wanted); });
      if (!present) evidence.push_back("policy routing: missing " + RouteText(wanted));
    }
  }
  if (evidence.empty()) return;
  // One finding per netns: which rules are missing is evidence, and may change while it is open.
  findings.push_back(MakeFinding(
      FindingCode::kIncompleteRuleset, &netns, BackendList(classification.ambient_backends),
      "Istio ambient redirection is incomplete or out of order (variant " +
          (classification.variant ? classification.variant->Describe() : std::string("?")) + ")",
      std::move(evidence)));
}

void CheckHostEnrollment(const NetnsSnapshot& netns, const NetnsIstioState& state,
                         std::vector<Finding>& findings) {
  std::vector<std::string> evidence = AmbientRuleCounts(netns, state);
  findings.push_back(MakeFinding(
      FindingCode::kHostNetnsEnrolled, &netns, BackendList(state.classification.ambient_backends),
      "in-pod ambient redirection chains in the host netns", std::move(evidence)));
}

void CheckDataplaneConflict(const NetnsSnapshot& netns, const NetnsClassification& classification,
                            std::vector<Finding>& findings) {
  if (classification.mode != DataplaneMode::kConflict) return;
  std::vector<std::string> evidence;
  for (Backend backend : classification.ambient_backends) {
    evidence.push_back(std::string(BackendName(backend)) + ": ambient in-pod rules");
  }
  for (Backend backend : classification.sidecar_backends) {
    evidence.push_back(std::string(BackendName(backend)) +
                       ": sidecar rules (ISTIO_INBOUND/ISTIO_REDIRECT or istio-proxy-* tables)");
  }
  findings.push_back(MakeFinding(FindingCode::kDataplaneConflict, &netns, "",
                                 "sidecar and ambient redirection in the same netns",
                                 std::move(evidence)));
}

void CheckNetns(const NetnsSnapshot& netns, const NetnsIstioState& state,
                std::vector<Finding>& findings) {
  CheckReadability(netns, findings);
  if (netns.unreadable) return;
  const NetnsClassification& classification = state.classification;
  if (classification.is_host && !classification.ambient_backends.empty()) {
    // The host is not a pod: completeness, duplicates and backends of in-pod rules are moot.
    CheckHostEnrollment(netns, state, findings);
    return;
  }
  CheckDuplicates(netns, classification, findings);
  if (classification.is_host) return;
  CheckMixedBackends(netns, state, findings);
  CheckDataplaneConflict(netns, classification, findings);
  if (!classification.ambient_backends.empty()) CheckCompleteness(netns, state, findings);
}

}  // namespace

std::string ChainPrefix(Backend backend, Family family, std::string_view table,
                        std::string_view chain) {
  std::string prefix(BackendName(backend));
  prefix += ' ';
  prefix += FamilyName(family);
  prefix += ' ';
  prefix += table;
  prefix += ' ';
  prefix += chain;
  return prefix;
}

std::string RuleEvidence(Backend backend, Family family, std::string_view table,
                         std::string_view chain, const Rule& rule) {
  return ChainPrefix(backend, family, table, chain) + ": " +
         RenderRule(backend, family, chain, rule);
}

std::string BackendList(const std::set<Backend>& backends) {
  std::string text;
  for (Backend backend : backends) {
    if (!text.empty()) text += ", ";
    text += BackendName(backend);
  }
  return text;
}

Finding MakeFinding(FindingCode code, const NetnsSnapshot* netns, std::string subject,
                    std::string summary, std::vector<std::string> evidence, std::string hint) {
  const FindingCodeInfo& info = FindingCodeDetails(code);
  Finding finding;
  finding.code = code;
  finding.severity = info.severity;
  finding.subject = std::move(subject);
  if (hint.empty()) hint = std::string(info.hint);
  if (netns != nullptr) {
    finding.netns_path = netns->netns.PrimaryPath();
    finding.netns_inode = netns->netns.inode;
    summary += ": netns " + NetnsLabel(*netns);
  }
  finding.summary = std::move(summary);
  finding.evidence = std::move(evidence);
  finding.hint = std::move(hint);
  return finding;
}

}  // namespace analysis

NodeAnalysis Analyze(const NodeSnapshot& snapshot, const AnalysisOptions& options) {
  return Analyze(snapshot, options, nullptr);
}

NodeAnalysis Analyze(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                     History* history) {
  NodeAnalysis result;
  std::vector<analysis::NetnsIstioState> states;
  states.reserve(snapshot.netns.size());
  for (const NetnsSnapshot& netns : snapshot.netns) {
    states.push_back(analysis::Recognize(netns, options));
    result.netns.push_back(states.back().classification);
  }
  for (size_t i = 0; i < snapshot.netns.size(); ++i) {
    analysis::CheckNetns(snapshot.netns[i], states[i], result.findings);
  }
  if (!snapshot.errors.empty()) {
    std::vector<std::string> evidence;
    for (const SourceError& error : snapshot.errors) {
      evidence.push_back(std::string(error.source()) + ": " + error.message);
    }
    result.findings.push_back(analysis::MakeFinding(
        FindingCode::kNetnsUnreadable, snapshot.Host(), "node-wide sources",
        "node-wide sources failed; some netns may be missing", std::move(evidence),
        "Run the agent with host PID and /proc, /run/netns mounted and CAP_SYS_ADMIN; results "
        "cover only the namespaces that could be found."));
  }
  analysis::CheckBackendDrift(snapshot, states, result.findings);
  analysis::CheckProbeSnat(snapshot, states, options, result.findings);

  // Without a caller's history every signal is first seen now (a one-shot report).
  History one_shot;
  History& ages = history != nullptr ? *history : one_shot;
  ages.BeginScan(snapshot.taken_at_unix_ms);
  if (snapshot.zds_collected) {
    analysis::CheckZds(snapshot, states, options, ages, result.netns, result.findings);
  }
  analysis::CheckProbePath(snapshot, states, options, ages, result.findings);
  ages.EndScan();
  analysis::CheckCniChain(snapshot, result.netns, options, result.findings);
  analysis::CheckNftUserspace(snapshot, result.netns, result.findings);
  analysis::AnnotatePods(snapshot, result.netns, result.findings);
  if (snapshot.zds_collected) {
    analysis::CheckZtunnelHealth(snapshot, options, result.netns, result.findings);
  }

  SortFindings(result.findings);
  return result;
}

}  // namespace ad
