// Renders the rules view of one netns (ambientdoctor.v1.NetnsRules: from api::BuildNetnsRules for
// a local read, or the daemon's GetNetnsRules answer), grouped by backend/family/table/chain, in a
// syntax close to iptables-save / nft list ruleset, or as JSON ("ambient-doctor.rules/v1": the
// RulesDocument message of proto/ambientdoctor/v1/documents.proto, written with protobuf's JSON
// printer).
#pragma once

#include <string>

#include "ambientdoctor/v1/ambient_doctor.pb.h"

namespace ad::cli {

inline constexpr const char* kRulesSchema = "ambient-doctor.rules/v1";

std::string RenderRulesText(const ::ambientdoctor::v1::NetnsRules& rules);
std::string RenderRulesJson(const ::ambientdoctor::v1::NetnsRules& rules);

}  // namespace ad::cli
