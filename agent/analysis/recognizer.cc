// Recognizes Istio state in one netns: in-pod ambient rules per backend (with the best-fitting
// variant), sidecar rules and host probe-SNAT rules.
#include "analysis/recognizer.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace ad {
namespace analysis {
namespace {

using istio::RulesetBackend;

constexpr std::array<Backend, 3> kAllBackends = {Backend::kIptablesLegacy, Backend::kIptablesNft,
                                                 Backend::kNft};

bool IsIptablesBackend(Backend backend) { return backend != Backend::kNft; }

bool IsInpodIptablesChain(std::string_view chain) {
  return chain == istio::kIptPrerouting || chain == istio::kIptOutput;
}

bool JumpsTo(const Rule& rule, std::string_view chain) {
  const Action& action = rule.sem.action;
  return (action.kind == ActionKind::kJump || action.kind == ActionKind::kGoto) &&
         action.text == chain;
}

std::optional<std::string_view> JumpTarget(const Rule& rule) {
  const Action& action = rule.sem.action;
  if (action.kind == ActionKind::kJump || action.kind == ActionKind::kGoto) return action.text;
  return std::nullopt;
}

// A rule's comparison key (semantics with sorted matches) with its hash, so most unequal pairs
// differ in one integer compare. `sem` points at the rule itself when its matches are already
// sorted (every reader canonicalizes), else at a sorted copy owned elsewhere.
struct KeyedRule {
  size_t hash = 0;
  const RuleSemantics* sem = nullptr;

  bool operator==(const KeyedRule& other) const { return hash == other.hash && *sem == *other.sem; }
};

size_t HashSemantics(const RuleSemantics& sem) {
  size_t hash = sem.matches.size();
  auto mix = [&hash](size_t value) {
    hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  };
  for (const Match& match : sem.matches) {
    mix(static_cast<size_t>(match.kind) << 1 | static_cast<size_t>(match.negated));
    mix(match.value);
    mix(match.value2);
    mix(std::hash<std::string>{}(match.text));
  }
  mix(static_cast<size_t>(sem.action.kind));
  mix(sem.action.value);
  mix(sem.action.value2);
  mix(sem.action.value3);
  mix(std::hash<std::string>{}(sem.action.text));
  return hash;
}

// `storage` keeps the sorted copies that unsorted rules need (deque: stable addresses).
KeyedRule KeyOf(const RuleSemantics& sem, std::deque<RuleSemantics>& storage) {
  const RuleSemantics* key = &sem;
  if (!std::is_sorted(sem.matches.begin(), sem.matches.end())) {
    key = &storage.emplace_back(SortedSemantics(sem));
  }
  return KeyedRule{HashSemantics(*key), key};
}

// One observed chain that belongs to Istio's in-pod ambient state. For the shared iptables
// built-in chains only the jumps into ISTIO_PRERT / ISTIO_OUTPUT are Istio's.
struct ObservedChain {
  Family family;
  const Table* table;
  const Chain* chain;
  bool owned;
  std::vector<KeyedRule> keys;  // one per rule; filled by FitVariant only
  int chain_id = -1;            // ChainId(); -1 when no expected chain has this identity
};

std::vector<ObservedChain> InpodChains(const NetfilterState& netfilter, Backend backend) {
  std::vector<ObservedChain> chains;
  for (const Table& table : netfilter.tables) {
    if (table.backend != backend) continue;
    if (IsIptablesBackend(backend)) {
      if (table.family != Family::kIpv4 && table.family != Family::kIpv6) continue;
      if (!istio::IsIstioIptablesTable(table.name)) continue;
      for (const Chain& chain : table.chains) {
        if (IsInpodIptablesChain(chain.name)) {
          chains.push_back({table.family, &table, &chain, true, {}});
        } else if (chain.name == "PREROUTING" || chain.name == "OUTPUT") {
          chains.push_back({table.family, &table, &chain, false, {}});
        }
      }
    } else {
      if (table.family != Family::kInet || !istio::IsAmbientNftTable(table.name)) continue;
      for (const Chain& chain : table.chains) {
        // The host's probe-SNAT chain shares the table name; it is not in-pod state.
        if (chain.name == istio::kNftHostChain) continue;
        chains.push_back({Family::kInet, &table, &chain, true, {}});
      }
    }
  }
  return chains;
}

bool IsIstioRuleIn(const ObservedChain& observed, const Rule& rule) {
  if (observed.owned) return true;
  const auto target = JumpTarget(rule);
  return target && IsInpodIptablesChain(*target);
}

// Small integer per (family, table, chain) identity of an expected chain, shared by every
// variant, so scoring matches chains with an integer compare. `add` = false only looks up.
using ChainKey = std::tuple<Family, std::string, std::string>;
using ChainKeyView = std::tuple<Family, std::string_view, std::string_view>;

// Compares stored keys with looked-up views without building strings. Spelt out because
// std::less<> on tuple<string> vs tuple<string_view> does not compile with clang and
// libstdc++ 12 (the fuzz build).
struct ChainKeyLess {
  using is_transparent = void;
  static ChainKeyView View(const ChainKey& key) {
    return {std::get<0>(key), std::get<1>(key), std::get<2>(key)};
  }
  static ChainKeyView View(const ChainKeyView& key) { return key; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return View(a) < View(b);
  }
};

int ChainId(Family family, std::string_view table, std::string_view chain, bool add) {
  static std::mutex mutex;
  static std::map<ChainKey, int, ChainKeyLess> ids;
  const ChainKeyView key{family, table, chain};
  std::lock_guard lock(mutex);
  if (auto found = ids.find(key); found != ids.end()) return found->second;
  if (!add) return -1;
  const int id = static_cast<int>(ids.size());
  ids.emplace(ChainKey{family, table, chain}, id);
  return id;
}

// One variant's expected rule set with the comparison key of every rule (same chain and rule
// order), built once per process: every netns is scored against a dozen candidate variants.
struct VariantRuleset {
  istio::ExpectedRuleset ruleset;
  std::vector<std::vector<KeyedRule>> keys;  // point into ruleset or sorted_copies
  std::vector<int> chain_ids;                // ChainId() of each chain
  std::deque<RuleSemantics> sorted_copies;
};

struct VariantKey {
  RulesetBackend backend;
  const AmbientVariant& variant;
  std::string_view snat_v4;
  std::string_view snat_v6;

  auto Tie() const { return std::tie(backend, variant, snat_v4, snat_v6); }
};

struct StoredVariantKey {
  RulesetBackend backend;
  AmbientVariant variant;
  std::string snat_v4;
  std::string snat_v6;

  auto Tie() const {
    return std::tuple<RulesetBackend, const AmbientVariant&, std::string_view, std::string_view>(
        backend, variant, snat_v4, snat_v6);
  }
};

struct VariantKeyLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.Tie() < b.Tie();
  }
};

// Interface names make the key space open-ended, so the cache is bounded; entries in use stay
// alive through their shared_ptr when it is cleared.
constexpr size_t kMaxCachedVariants = 1024;

std::shared_ptr<const VariantRuleset> ExpectedFor(RulesetBackend backend,
                                                  const AmbientVariant& variant,
                                                  const istio::ProbeSnat& snat) {
  static std::mutex mutex;
  static std::map<StoredVariantKey, std::shared_ptr<const VariantRuleset>, VariantKeyLess> cache;
  const VariantKey key{backend, variant, snat.v4, snat.v6};
  {
    std::lock_guard lock(mutex);
    if (auto found = cache.find(key); found != cache.end()) return found->second;
  }
  auto built = std::make_shared<VariantRuleset>();
  built->ruleset = istio::BuildInpodRuleset(backend, variant, snat);
  built->keys.reserve(built->ruleset.chains.size());
  for (const istio::ExpectedChain& chain : built->ruleset.chains) {
    built->chain_ids.push_back(ChainId(chain.family, chain.table, chain.chain, /*add=*/true));
    std::vector<KeyedRule>& chain_keys = built->keys.emplace_back();
    chain_keys.reserve(chain.rules.size());
    for (const istio::ExpectedRule& rule : chain.rules) {
      chain_keys.push_back(KeyOf(rule.rule.sem, built->sorted_copies));
    }
  }
  std::lock_guard lock(mutex);
  if (cache.size() >= kMaxCachedVariants) cache.clear();
  auto [entry, inserted] =
      cache.try_emplace(StoredVariantKey{backend, variant, snat.v4, snat.v6}, std::move(built));
  return entry->second;
}

bool ContainsKey(const std::vector<KeyedRule>& keys, const KeyedRule& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Whether `key` is a non-jump in-pod rule some variant produces for this backend: recognises
// ambient ISTIO_OUTPUT content even when ISTIO_PRERT is gone (sidecar mode has ISTIO_OUTPUT too).
bool InAmbientRuleUniverse(RulesetBackend backend, const AnalysisOptions& options,
                           const RuleSemantics& sem) {
  std::deque<RuleSemantics> storage;
  const KeyedRule key = KeyOf(sem, storage);
  const AmbientVariant widest{true, false, {}, true};
  istio::ProbeSnat snat;
  const size_t count = std::max(options.probe_snat_v4.size(), options.probe_snat_v6.size());
  for (size_t i = 0; i < std::max<size_t>(count, 1); ++i) {
    if (i < options.probe_snat_v4.size()) snat.v4 = options.probe_snat_v4[i];
    if (i < options.probe_snat_v6.size()) snat.v6 = options.probe_snat_v6[i];
    const std::shared_ptr<const VariantRuleset> expected = ExpectedFor(backend, widest, snat);
    for (size_t c = 0; c < expected->ruleset.chains.size(); ++c) {
      const std::vector<istio::ExpectedRule>& rules = expected->ruleset.chains[c].rules;
      for (size_t r = 0; r < rules.size(); ++r) {
        if (rules[r].rule.sem.action.kind == ActionKind::kJump) continue;
        if (expected->keys[c][r] == key) return true;
      }
    }
  }
  return false;
}

// Families (iptables) in which this backend holds in-pod ambient state; empty when none.
std::set<Family> AmbientFamilies(const NetfilterState& netfilter, Backend backend,
                                 const AnalysisOptions& options) {
  std::set<Family> families;
  const std::vector<ObservedChain> chains = InpodChains(netfilter, backend);
  if (backend == Backend::kNft) {
    if (!chains.empty()) families = {Family::kIpv4, Family::kIpv6};  // inet covers both
    return families;
  }
  for (const ObservedChain& observed : chains) {
    if (families.contains(observed.family)) continue;
    if (observed.chain->name == istio::kIptPrerouting) {
      families.insert(observed.family);
      continue;
    }
    for (const Rule& rule : observed.chain->rules) {
      if (!observed.owned) {
        if (JumpsTo(rule, istio::kIptPrerouting)) families.insert(observed.family);
        continue;
      }
      if (InAmbientRuleUniverse(RulesetBackend::kIptables, options, rule.sem)) {
        families.insert(observed.family);
        break;
      }
    }
  }
  return families;
}

bool HasSidecarState(const NetfilterState& netfilter, Backend backend) {
  for (const Table& table : netfilter.tables) {
    if (table.backend != backend) continue;
    if (backend == Backend::kNft) {
      if (istio::IsSidecarNftTable(table.name)) return true;
      continue;
    }
    for (const Chain& chain : table.chains) {
      if (istio::IsSidecarIptablesChain(chain.name)) return true;
      for (const Rule& rule : chain.rules) {
        const auto target = JumpTarget(rule);
        if (target && istio::IsSidecarIptablesChain(*target)) return true;
      }
    }
  }
  return false;
}

bool HasHostRules(const NetfilterState& netfilter, Backend backend) {
  for (const Table& table : netfilter.tables) {
    if (table.backend != backend) continue;
    if (backend == Backend::kNft) {
      if (table.family == Family::kInet && table.name == istio::kNftHostTable &&
          table.FindChain(istio::kNftHostChain) != nullptr) {
        return true;
      }
      continue;
    }
    if (table.name != "nat") continue;
    if (table.FindChain(istio::kIptHostPostrouting) != nullptr) return true;
    if (const Chain* postrouting = table.FindChain("POSTROUTING")) {
      for (const Rule& rule : postrouting->rules) {
        if (JumpsTo(rule, istio::kIptHostPostrouting)) return true;
      }
    }
  }
  return false;
}

// Interfaces of the virtual-interface REDIRECT/RETURN pairs, in order of first appearance.
std::vector<std::string> ObservedVirtualInterfaces(const std::vector<ObservedChain>& chains,
                                                   Backend backend) {
  const RulesetBackend ruleset = istio::RulesetBackendFor(backend);
  const std::string_view nat = istio::TableName(ruleset, istio::IstioTable::kNat);
  const std::string_view prerouting = istio::IstioChainName(ruleset, istio::IstioHook::kPrerouting);
  std::vector<std::string> interfaces;
  for (const ObservedChain& observed : chains) {
    if (observed.table->name != nat || observed.chain->name != prerouting) continue;
    for (const Rule& rule : observed.chain->rules) {
      const Action& action = rule.sem.action;
      const bool vif_action =
          action.kind == ActionKind::kReturn ||
          (action.kind == ActionKind::kRedirect && action.value == istio::kZtunnelOutboundPort);
      if (!vif_action) continue;
      for (const Match& match : rule.sem.matches) {
        if (match.kind != MatchKind::kInIface || match.negated) continue;
        if (std::find(interfaces.begin(), interfaces.end(), match.text) == interfaces.end()) {
          interfaces.push_back(match.text);
        }
      }
    }
  }
  return interfaces;
}

struct Score {
  size_t missing = 0;
  size_t unexpected = 0;
};

// Every expected chain the kernel can hold is among `observed` (InpodChains keeps all of
// Istio's in-pod chain names), so lookups stay within it.
Score ScoreFit(const VariantRuleset& expected, const std::vector<ObservedChain>& observed) {
  Score score;
  static const std::vector<KeyedRule> kNoKeys;
  for (size_t c = 0; c < expected.ruleset.chains.size(); ++c) {
    const auto seen = std::find_if(
        observed.begin(), observed.end(),
        [id = expected.chain_ids[c]](const ObservedChain& chain) { return chain.chain_id == id; });
    const std::vector<KeyedRule>& seen_keys = seen != observed.end() ? seen->keys : kNoKeys;
    for (const KeyedRule& key : expected.keys[c]) {
      if (!ContainsKey(seen_keys, key)) ++score.missing;
    }
  }
  std::vector<const KeyedRule*> counted;  // duplicates are DUPLICATE_RULE's business, not ours
  for (const ObservedChain& chain : observed) {
    const std::vector<KeyedRule>* wanted_keys = &kNoKeys;
    for (size_t c = 0; chain.chain_id >= 0 && c < expected.chain_ids.size(); ++c) {
      if (expected.chain_ids[c] == chain.chain_id) {
        wanted_keys = &expected.keys[c];
        break;
      }
    }
    counted.clear();
    for (size_t r = 0; r < chain.chain->rules.size(); ++r) {
      if (!IsIstioRuleIn(chain, chain.chain->rules[r])) continue;
      const KeyedRule& key = chain.keys[r];
      if (ContainsKey(*wanted_keys, key)) continue;
      if (std::any_of(counted.begin(), counted.end(),
                      [&key](const KeyedRule* other) { return *other == key; })) {
        continue;
      }
      counted.push_back(&key);
      ++score.unexpected;
    }
  }
  return score;
}

bool Better(const Score& candidate, const Score& best) {
  const size_t candidate_total = candidate.missing + candidate.unexpected;
  const size_t best_total = best.missing + best.unexpected;
  if (candidate_total != best_total) return candidate_total < best_total;
  // On a tie a missing rule is the likelier story than a rule nobody would have added.
  return candidate.unexpected < best.unexpected;
}

struct Candidate {
  AmbientVariant variant;
  istio::ProbeSnat snat;
  std::shared_ptr<const VariantRuleset> expected;
};

AmbientFit FitVariant(const NetnsSnapshot& netns, Backend backend, const AnalysisOptions& options) {
  std::deque<RuleSemantics> sorted_copies;  // outlives `observed`, whose keys point into it
  std::vector<ObservedChain> observed = InpodChains(netns.netfilter, backend);
  const RulesetBackend ruleset = istio::RulesetBackendFor(backend);
  const std::vector<std::string> interfaces = ObservedVirtualInterfaces(observed, backend);

  std::vector<std::string> snat_v4 = options.probe_snat_v4;
  std::vector<std::string> snat_v6 = options.probe_snat_v6;
  if (snat_v4.empty()) snat_v4.push_back(istio::ProbeSnat{}.v4);
  if (snat_v6.empty()) snat_v6.push_back(istio::ProbeSnat{}.v6);

  // Enumeration order encodes the preference on full ties: Istio's defaults first.
  std::vector<Candidate> candidates;
  for (bool dns : {true, false}) {
    for (bool ingress : {false, true}) {
      for (bool ipv6 : {false, true}) {
        for (const std::string& v4 : snat_v4) {
          for (const std::string& v6 : snat_v6) {
            Candidate& candidate = candidates.emplace_back(
                Candidate{AmbientVariant{dns, ingress, interfaces, ipv6}, {v4, v6}, nullptr});
            candidate.expected = ExpectedFor(ruleset, candidate.variant, candidate.snat);
            if (!ipv6) break;  // the v6 address is irrelevant without IPv6 rules
          }
        }
      }
    }
  }
  // After the candidates exist, every expected chain identity has its id.
  for (ObservedChain& chain : observed) {
    chain.chain_id = ChainId(chain.family, chain.table->name, chain.chain->name, /*add=*/false);
    chain.keys.reserve(chain.chain->rules.size());
    for (const Rule& rule : chain.chain->rules) {
      chain.keys.push_back(KeyOf(rule.sem, sorted_copies));
    }
  }

  const Candidate* best = nullptr;
  Score best_score;
  for (const Candidate& candidate : candidates) {
    const Score score = ScoreFit(*candidate.expected, observed);
    if (best == nullptr || Better(score, best_score)) {
      best = &candidate;
      best_score = score;
    }
  }
  AmbientFit fit;
  fit.backend = backend;
  fit.variant = best->variant;
  fit.snat = best->snat;
  fit.missing = best_score.missing;
  fit.unexpected = best_score.unexpected;
  // Aliasing: the fit points at the rule set and keeps the whole cache entry alive.
  fit.expected =
      std::shared_ptr<const istio::ExpectedRuleset>(best->expected, &best->expected->ruleset);
  return fit;
}

}  // namespace

RuleSemantics SortedSemantics(const RuleSemantics& sem) {
  RuleSemantics sorted = sem;
  std::sort(sorted.matches.begin(), sorted.matches.end());
  return sorted;
}

const Chain* FindObservedChain(const NetfilterState& netfilter, Backend backend, Family family,
                               std::string_view table, std::string_view chain) {
  for (const Table& candidate : netfilter.tables) {
    if (candidate.backend != backend || candidate.family != family) continue;
    if (candidate.name != table) continue;
    if (const Chain* found = candidate.FindChain(chain)) return found;
  }
  return nullptr;
}

NetnsIstioState Recognize(const NetnsSnapshot& netns, const AnalysisOptions& options) {
  NetnsIstioState state;
  NetnsClassification& result = state.classification;
  result.netns_inode = netns.netns.inode;
  result.netns_path = netns.netns.PrimaryPath();
  result.is_host = netns.netns.is_host;

  for (Backend backend : kAllBackends) {
    const std::set<Family> families = AmbientFamilies(netns.netfilter, backend, options);
    if (!families.empty()) {
      result.ambient_backends.insert(backend);
      result.families.insert(families.begin(), families.end());
      state.ambient.push_back(FitVariant(netns, backend, options));
    }
    if (HasSidecarState(netns.netfilter, backend)) result.sidecar_backends.insert(backend);
    if (HasHostRules(netns.netfilter, backend)) result.host_backends.insert(backend);
  }
  result.host_rules_present = !result.host_backends.empty();

  if (!state.ambient.empty()) {
    const auto best = std::min_element(
        state.ambient.begin(), state.ambient.end(), [](const AmbientFit& a, const AmbientFit& b) {
          return Better({a.missing, a.unexpected}, {b.missing, b.unexpected});
        });
    result.variant = best->variant;
  }

  const bool ambient = !result.ambient_backends.empty();
  const bool sidecar = !result.sidecar_backends.empty();
  if (ambient && sidecar) {
    result.mode = DataplaneMode::kConflict;
  } else if (ambient) {
    result.mode = DataplaneMode::kAmbient;
  } else if (sidecar) {
    result.mode = DataplaneMode::kSidecar;
  }
  return state;
}

}  // namespace analysis

NetnsClassification Classify(const NetnsSnapshot& netns, const AnalysisOptions& options) {
  return analysis::Recognize(netns, options).classification;
}

}  // namespace ad
