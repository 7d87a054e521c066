// Internal to analysis: the recognizer's detailed result, shared by Classify and the checks.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/istio_ruleset.h"

namespace ad::analysis {

// The best-fitting Istio ambient variant for the in-pod rules of one backend.
struct AmbientFit {
  Backend backend = Backend::kNft;
  AmbientVariant variant;
  istio::ProbeSnat snat;
  // Shared, never null: each variant's expected set is built once per process and reused.
  std::shared_ptr<const istio::ExpectedRuleset> expected;
  size_t missing = 0;     // expected rules (incl. jumps) absent
  size_t unexpected = 0;  // Istio-chain rules the variant does not produce
};

struct NetnsIstioState {
  NetnsClassification classification;
  std::vector<AmbientFit> ambient;  // one per backend in classification.ambient_backends
};

NetnsIstioState Recognize(const NetnsSnapshot& netns, const AnalysisOptions& options);

// The observed chain for an expected chain (family kInet for nft tables), or nullptr.
const Chain* FindObservedChain(const NetfilterState& netfilter, Backend backend, Family family,
                               std::string_view table, std::string_view chain);

// Matches sorted, so equality does not depend on the canonical order chosen by Canonicalize.
RuleSemantics SortedSemantics(const RuleSemantics& sem);

}  // namespace ad::analysis
