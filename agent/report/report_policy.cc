#include "report/report_policy.h"

#include <algorithm>

namespace ad {

int ReportExitCode(const std::vector<Finding>& findings) {
  const bool serious = std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.severity >= Severity::kWarning;
  });
  return serious ? kExitFindings : kExitHealthy;
}

int ReportExitCode(const ::ambientdoctor::v1::Report& report) {
  const bool serious = std::any_of(report.findings().begin(), report.findings().end(),
                                   [](const ::ambientdoctor::v1::Finding& f) {
                                     return f.severity() == SeverityName(Severity::kWarning) ||
                                            f.severity() == SeverityName(Severity::kCritical);
                                   });
  return serious ? kExitFindings : kExitHealthy;
}

int ReportExitCode(const ::ambientdoctor::v1::SeverityCounts& open_findings) {
  return open_findings.critical() + open_findings.warning() > 0 ? kExitFindings : kExitHealthy;
}

std::string NetnsStatus(const NodeAnalysis& analysis, uint64_t inode) {
  int worst = -1;
  for (const Finding& f : analysis.findings) {
    if (f.netns_inode == inode) worst = std::max(worst, static_cast<int>(f.severity));
  }
  return worst < 0 ? "ok" : std::string(SeverityName(static_cast<Severity>(worst)));
}

}  // namespace ad
