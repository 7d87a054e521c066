// Internal to analysis: finding construction shared by the check files.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/history.h"
#include "analysis/recognizer.h"

namespace ad::analysis {

// "2026-12-01T14:02:11Z" (UTC, seconds) for evidence lines; "<n> ms" when out of range.
std::string FormatUnixMs(int64_t unix_ms);

// Severity and, unless a sharper one is given, the hint come from the code table; summary gets
// the netns path and inode appended. `subject` is the finding's identity within its netns.
Finding MakeFinding(FindingCode code, const NetnsSnapshot* netns, std::string subject,
                    std::string summary, std::vector<std::string> evidence, std::string hint = {});

// "iptables-legacy, nft"
std::string BackendList(const std::set<Backend>& backends);

// "iptables-legacy ipv4 nat ISTIO_OUTPUT: -A ISTIO_OUTPUT ..."
std::string ChainPrefix(Backend backend, Family family, std::string_view table,
                        std::string_view chain);
std::string RuleEvidence(Backend backend, Family family, std::string_view table,
                         std::string_view chain, const Rule& rule);

// PROBE_SNAT_MISSING: host rules, probe sets and pod membership (host_checks.cc).
void CheckProbeSnat(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                    const AnalysisOptions& options, std::vector<Finding>& findings);
// BACKEND_DRIFT: pods whose only ambient backend differs from the node's (host_checks.cc).
void CheckBackendDrift(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                       std::vector<Finding>& findings);

// Joins CRI pods to netns by inode: fills classification pod/pod_uid and the pod of findings that
// name such a netns (zds_checks.cc). Harmless without CRI data.
void AnnotatePods(const NodeSnapshot& snapshot, std::vector<NetnsClassification>& netns,
                  std::vector<Finding>& findings);
// The ZDS hand-off checks (zds_checks.cc); only call when snapshot.zds_collected. Fills the ZDS
// columns of `netns` and ages signals in `history`.
void CheckZds(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
              const AnalysisOptions& options, History& history,
              std::vector<NetnsClassification>& netns, std::vector<Finding>& findings);

// What the ZDS checks know about one netns that the in-pod prerequisite checks need.
struct InpodContext {
  const NetnsSnapshot* netns = nullptr;
  const NetnsClassification* classification = nullptr;
  std::string pod_label;
  bool handoff_pending = false;     // ZDS hand-off pending or stalled (ZDS_PENDING / ZDS_STALL)
  std::set<uint16_t> served_ports;  // of 15001/15006/15008: ztunnel's or unattributable listeners
  std::function<bool(const ListeningSocket&)> is_ztunnel_socket;  // owned by ztunnel, or unknown
  std::vector<std::string> symptoms;  // the hand-off / listener state, as evidence lines
};
// DNS_CAPTURE_BROKEN and INPOD_PROXY_BLOCKED for one ambient netns (inpod_checks.cc).
std::vector<Finding> CheckInpodPrerequisites(const InpodContext& context);
// PROBE_PATH_BROKEN (probe_path_checks.cc): unreplied probe connections in the host conntrack
// per enrolled pod, aged in `history`; skipped where PROBE_SNAT_MISSING (already in `findings`)
// explains them.
void CheckProbePath(const NodeSnapshot& snapshot, const std::vector<NetnsIstioState>& states,
                    const AnalysisOptions& options, History& history,
                    std::vector<Finding>& findings);
// CNI chain group (cni_checks.cc): CNI_CHAIN_BROKEN from snapshot.cni, after the ZDS
// columns of `netns` are filled.
void CheckCniChain(const NodeSnapshot& snapshot, const std::vector<NetnsClassification>& netns,
                   const AnalysisOptions& options, std::vector<Finding>& findings);
// NFT_BACKEND_UNUSABLE from snapshot.nft_userspace (cni_checks.cc).
void CheckNftUserspace(const NodeSnapshot& snapshot, const std::vector<NetnsClassification>& netns,
                       std::vector<Finding>& findings);
// ZTUNNEL_RESOURCE_PRESSURE and ZTUNNEL_CERT_UNHEALTHY (ztunnel_health_checks.cc); after CheckZds
// and AnnotatePods, whose pod joins (`netns[i].pod_uid`) scope the certificate findings.
void CheckZtunnelHealth(const NodeSnapshot& snapshot, const AnalysisOptions& options,
                        const std::vector<NetnsClassification>& netns,
                        std::vector<Finding>& findings);

}  // namespace ad::analysis
