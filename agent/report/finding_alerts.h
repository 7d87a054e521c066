// Which alert of deploy/monitoring/prometheusrule.yaml pages for a finding, and its runbook
// (docs/runbooks/<alert>.md). Documentation data for `findings` and the README's findings table;
// a unit test holds it to the rule file, so a renamed alert or a dropped code cannot drift apart.
#pragma once

#include <string>
#include <string_view>

#include "model/finding.h"

namespace ad {

// The alert name ("AmbientZdsStall"), or "" when no alert pages for the code.
std::string_view AlertForFinding(FindingCode code);
// "docs/runbooks/AmbientZdsStall.md", or "" without an alert.
std::string RunbookForFinding(FindingCode code);

}  // namespace ad
