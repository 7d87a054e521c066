// Helpers for tests over Istio's golden rule files (shared/corpus/istio-golden): loading,
// splitting the v4/v6 restore inputs, mapping chains to roles and comparing tables.
#pragma once

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/rule.h"
#include "shared_corpus.h"

namespace ad::golden {

// Callers check corpus::HaveCorpus() first.
inline std::string AmbientDir(std::string_view backend) {
  return corpus::CorpusPath("istio-golden/cni/pkg/" + std::string(backend) + "/testdata/").string();
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

constexpr std::array<std::string_view, 7> kAmbientCases = {"default",
                                                           "ingress",
                                                           "virtual_interfaces",
                                                           "ingress_and_virtual_interfaces",
                                                           "dns_pod_enabled_and_off_globally",
                                                           "dns_pod_disabled_and_on_globally",
                                                           "hostprobe"};

// Every case name with and without the _ipv6 suffix (14 per backend).
inline std::vector<std::string> AllAmbientCases() {
  std::vector<std::string> out;
  for (auto c : kAmbientCases) {
    out.emplace_back(c);
    out.push_back(std::string(c) + "_ipv6");
  }
  return out;
}

// An _ipv6 iptables golden holds two restore inputs: the second starts where the first table
// header ("* mangle", "* nat") appears again. Returns (v4 part, v6 part; empty when absent).
inline std::pair<std::string, std::string> SplitIptablesGolden(const std::string& text) {
  size_t pos = 0;
  std::string first_header;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line[0] == '*') {
      if (first_header.empty()) {
        first_header = line;
      } else if (line == first_header) {
        return {text.substr(0, pos), text.substr(pos)};
      }
    }
    pos = end + 1;
  }
  return {text, ""};
}

// Chain role shared by both backends: "nat/prert", "mangle/base-output", ...
inline std::string ChainRole(std::string_view table, std::string_view chain) {
  std::string t(table);
  if (t.starts_with("istio-ambient-")) t = t.substr(14);
  std::string c(chain);
  if (c == "ISTIO_PRERT" || c == "istio-prerouting") {
    c = "prert";
  } else if (c == "ISTIO_OUTPUT" || c == "istio-output") {
    c = "output";
  } else if (c == "ISTIO_POSTRT") {
    c = "postrt";
  } else {
    std::transform(c.begin(), c.end(), c.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    c = "base-" + c;
  }
  return t + "/" + c;
}

enum class AddrFilter { kAll, kNoIpv6, kNoIpv4 };

inline bool HasAddressOfFamily(const RuleSemantics& sem, bool ipv6) {
  return std::any_of(sem.matches.begin(), sem.matches.end(), [&](const Match& m) {
    if (m.kind != MatchKind::kSrcAddr && m.kind != MatchKind::kDstAddr) return false;
    return (m.text.find(':') != std::string::npos) == ipv6;
  });
}

// role -> sorted rule semantics (jump targets rewritten to roles), empty roles left out.
using RoleRules = std::map<std::string, std::vector<RuleSemantics>>;

inline RoleRules ByRole(const std::vector<Table>& tables, AddrFilter filter) {
  RoleRules out;
  for (const auto& table : tables) {
    for (const auto& chain : table.chains) {
      for (const auto& rule : chain.rules) {
        if (filter == AddrFilter::kNoIpv6 && HasAddressOfFamily(rule.sem, true)) continue;
        if (filter == AddrFilter::kNoIpv4 && HasAddressOfFamily(rule.sem, false)) continue;
        RuleSemantics sem = rule.sem;
        if (sem.action.kind == ActionKind::kJump || sem.action.kind == ActionKind::kGoto) {
          sem.action.text = ChainRole(table.name, sem.action.text);
        }
        out[ChainRole(table.name, chain.name)].push_back(std::move(sem));
      }
    }
  }
  for (auto& [role, rules] : out) std::sort(rules.begin(), rules.end());
  return out;
}

inline bool RulesEqual(const Rule& a, const Rule& b) {
  return a.sem == b.sem && a.comment == b.comment && a.handle == b.handle &&
         a.has_counter == b.has_counter;
}

inline bool ChainsEqual(const Chain& a, const Chain& b) {
  return a.name == b.name && a.is_base == b.is_base && a.hook == b.hook &&
         a.priority == b.priority && a.type == b.type && a.policy == b.policy &&
         std::equal(a.rules.begin(), a.rules.end(), b.rules.begin(), b.rules.end(), RulesEqual);
}

inline bool SetsEqual(const NftSet& a, const NftSet& b) {
  return a.name == b.name && a.key_type == b.key_type && a.comment == b.comment &&
         a.elements == b.elements;
}

// Structural equality, tables matched by (family, name) whatever their order; backend ignored.
inline bool TablesEqual(const std::vector<Table>& a, const std::vector<Table>& b,
                        std::string* why = nullptr) {
  if (a.size() != b.size()) {
    if (why) *why = "table count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (const auto& ta : a) {
    const auto tb = std::find_if(b.begin(), b.end(), [&](const Table& t) {
      return t.name == ta.name && t.family == ta.family;
    });
    if (tb == b.end()) {
      if (why) *why = "table " + ta.name + " missing";
      return false;
    }
    if (!std::equal(ta.chains.begin(), ta.chains.end(), tb->chains.begin(), tb->chains.end(),
                    ChainsEqual)) {
      if (why) *why = "chains of table " + ta.name + " differ";
      return false;
    }
    if (!std::equal(ta.sets.begin(), ta.sets.end(), tb->sets.begin(), tb->sets.end(), SetsEqual)) {
      if (why) *why = "sets of table " + ta.name + " differ";
      return false;
    }
  }
  return true;
}

inline bool AnyUnknown(const std::vector<Table>& tables, std::string* where = nullptr) {
  for (const auto& table : tables) {
    for (const auto& chain : table.chains) {
      for (const auto& rule : chain.rules) {
        const bool unknown_match =
            std::any_of(rule.sem.matches.begin(), rule.sem.matches.end(),
                        [](const Match& m) { return m.kind == MatchKind::kUnknown; });
        if (unknown_match || rule.sem.action.kind == ActionKind::kUnknown) {
          if (where) {
            *where = table.name + "/" + chain.name + ": " +
                     RenderRule(table.backend, table.family, chain.name, rule);
          }
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace ad::golden
