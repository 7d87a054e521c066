// Which alert of deploy/monitoring/prometheusrule.yaml pages for a finding, and its runbook
// (docs/runbooks/<alert>.md): the alert and runbook columns of the finding code table
// (model/finding.cc), where a code without a row fails the build. finding_alerts_test holds the
// table to the rule file and the runbooks, so a renamed alert or a dropped code cannot drift apart.
#pragma once

#include <string>
#include <string_view>

#include "model/finding.h"

namespace ad {

// The alert name ("AmbientZdsStall"), or "" when no alert pages for the code.
inline std::string_view AlertForFinding(FindingCode code) { return FindingCodeDetails(code).alert; }
// "docs/runbooks/AmbientZdsStall.md", or "" without an alert.
inline std::string RunbookForFinding(FindingCode code) {
  return std::string(FindingCodeDetails(code).runbook);
}

}  // namespace ad
