// Renders the normalized rule set of one netns, grouped by backend/family/table/chain, in a syntax
// close to iptables-save / nft list ruleset, or as JSON ("ambient-doctor.rules/v1").
#pragma once

#include <string>

#include "model/finding.h"
#include "model/snapshot.h"

namespace ad::cli {

inline constexpr const char* kRulesSchema = "ambient-doctor.rules/v1";

std::string RenderRulesText(const NetnsSnapshot& netns, const NetnsClassification& classification);
std::string RenderRulesJson(const NetnsSnapshot& netns, const NetnsClassification& classification);

}  // namespace ad::cli
