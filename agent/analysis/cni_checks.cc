// CNI_CHAIN_BROKEN: the CNI config the runtime uses must chain istio-cni while ambient pods exist
// on the node, and istio-cni's kubeconfig must be usable; pods whose sandbox started while the
// chain lacked istio-cni were never handed to istio-cni (istio#55968). Evidence carries absolute
// times only, so it stays equal from one scan to the next while nothing changes.
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "analysis/checks.h"
#include "model/version.h"

namespace ad::analysis {
namespace {

constexpr FindingCode kCode = FindingCode::kCniChainBroken;
constexpr size_t kMaxPodsInEvidence = 20;

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (const std::string& item : items) {
    if (!text.empty()) text += separator;
    text += item;
  }
  return text;
}

std::string DescribeChain(const CniConfigState& cni) {
  if (cni.active_file.empty()) return "no usable CNI config";
  return cni.active_file + " chains " +
         (cni.plugin_types.empty() ? std::string("nothing") : Join(cni.plugin_types, " -> "));
}

// Files before the active one that the runtime could not load.
void AddSkipped(const CniConfigState& cni, std::vector<std::string>& evidence) {
  for (const CniConfFile& file : cni.files) {
    if (file.name == cni.active_file) break;
    if (file.error.empty()) continue;
    evidence.push_back(cni.dir + "/" + file.name + ": " + file.error +
                       " (CRI-O and the kubelet skip it; containerd refuses the whole directory)");
  }
  if (cni.files_omitted > 0) {
    evidence.push_back(std::to_string(cni.files_omitted) + " more config files not read (bound)");
  }
}

// Where the directory came from; a given one that is not the runtime's is named as such.
void AddDirOrigin(const CniConfigState& cni, std::vector<std::string>& evidence) {
  const std::string runtime = cni.runtime.empty() ? std::string("the runtime") : cni.runtime;
  switch (cni.dir_origin) {
    case CniDirOrigin::kRuntime:
      evidence.push_back("the directory " + runtime + " reports (CRI Status)");
      break;
    case CniDirOrigin::kFlag:
      if (!cni.runtime_dir.empty() && cni.host_root + cni.runtime_dir != cni.dir) {
        evidence.push_back("given with --cni-conf-dir, but " + runtime +
                           " reports its CNI config directory as " + cni.runtime_dir);
      }
      break;
    case CniDirOrigin::kDefault:
      evidence.push_back("the default directory (the runtime does not report its own)");
      break;
    case CniDirOrigin::kNone:
      break;
  }
}

struct SandboxStart {
  int64_t started_unix_ms = 0;
  std::string pod;  // "namespace/name", empty without CRI
  std::string how;  // "CRI created_at" | "pause process <pid> started"
};

// The gap that contains `t` (start <= t, and t < end when closed).
const CniChainGap* GapAt(const std::vector<CniChainGap>& gaps, int64_t t) {
  for (const CniChainGap& gap : gaps) {
    if (t >= gap.start_unix_ms && (gap.end_unix_ms == 0 || t < gap.end_unix_ms)) return &gap;
  }
  return nullptr;
}

std::string DescribeGap(const CniChainGap& gap) {
  return "from " + FormatUnixMs(gap.start_unix_ms) + " to " +
         (gap.end_unix_ms == 0 ? std::string("now") : FormatUnixMs(gap.end_unix_ms)) + " (" +
         (gap.file.empty() ? std::string("no usable config") : gap.file) + ")";
}

}  // namespace

void CheckCniChain(const NodeSnapshot& snapshot, const std::vector<NetnsClassification>& netns,
                   const AnalysisOptions& options, std::vector<Finding>& findings) {
  const CniConfigState& cni = snapshot.cni;
  // No directory known to be the runtime's: nothing to judge (the report says why).
  if (!cni.collected || !cni.not_judged.empty()) return;
  const NetnsSnapshot* host = snapshot.Host();
  size_t ambient_pods = 0;
  for (const NetnsClassification& c : netns) {
    if (c.is_host) continue;
    if (c.mode == DataplaneMode::kAmbient || c.mode == DataplaneMode::kConflict ||
        c.zds_state != ZdsState::kNotApplicable) {
      ++ambient_pods;
    }
  }
  const std::string pods_text = std::to_string(ambient_pods) + " ambient pod netns on the node";

  if (!cni.dir_readable && !cni.errors.empty()) {
    if (ambient_pods == 0) return;
    std::vector<std::string> evidence;
    for (const SourceError& error : cni.errors) evidence.push_back(error.message);
    evidence.push_back(pods_text);
    Finding finding = MakeFinding(
        kCode, host, "unreadable",
        "the CNI config directory " + cni.dir + " could not be read: the CNI chain was not checked",
        std::move(evidence),
        "Mount the node's CNI config directory into the agent (read-only) and pass its host root "
        "with --host-root; --cni-conf-dir off turns the check off.");
    finding.severity = Severity::kWarning;  // unknown, not known broken
    findings.push_back(std::move(finding));
    return;
  }

  const bool one_shot = !options.history_known;
  const std::string one_shot_note =
      "one-shot report: judges the current state only; the daemon (serve) watches the directory "
      "and names the pods whose sandbox started while the chain lacked istio-cni";

  // Sandboxes by netns inode: CRI created_at, else the pause process's start.
  std::map<uint64_t, SandboxStart> starts;
  for (const PodIdentity& pod : snapshot.cri.pods) {
    if (pod.netns_inode == 0 || pod.host_network || pod.created_at_unix_ms == 0) continue;
    if (pod.dataplane_mode_label == "none") continue;  // opted out: never captured by design
    starts[pod.netns_inode] = {pod.created_at_unix_ms, pod.namespace_name + "/" + pod.name,
                               "CRI created_at"};
  }
  for (const NetnsStart& start : cni.netns_starts) {
    starts.emplace(start.netns_inode,
                   SandboxStart{start.started_unix_ms, "",
                                "pause process " + std::to_string(start.pid) + " started"});
  }
  // Pods started in a gap whose netns has no redirect rules and is not known to ztunnel.
  struct Uncaptured {
    const NetnsClassification* netns;
    const NetnsSnapshot* snapshot;
    SandboxStart start;
    const CniChainGap* gap;
  };
  std::vector<Uncaptured> uncaptured;
  if (!one_shot && !cni.gaps.empty()) {
    for (size_t i = 0; i < netns.size() && i < snapshot.netns.size(); ++i) {
      const NetnsClassification& c = netns[i];
      if (c.is_host || c.mode != DataplaneMode::kNone || c.zds_state != ZdsState::kNotApplicable)
        continue;
      auto start = starts.find(c.netns_inode);
      if (start == starts.end()) continue;
      const CniChainGap* gap = GapAt(cni.gaps, start->second.started_unix_ms);
      if (gap == nullptr) continue;
      uncaptured.push_back({&c, &snapshot.netns[i], start->second, gap});
    }
  }

  const bool chain_broken = !cni.istio_cni_chained;
  if (chain_broken && (ambient_pods > 0 || !uncaptured.empty())) {
    std::vector<std::string> evidence;
    if (!cni.dir_readable) {
      evidence.push_back(cni.dir + " does not exist: the runtime has no CNI config at all");
    } else if (cni.active_file.empty()) {
      evidence.push_back(cni.dir + ": no .conflist, .conf or .json file loads (" +
                         std::to_string(cni.files.size()) + " candidates)");
    } else {
      evidence.push_back(cni.dir + "/" + cni.active_file + " (network \"" + cni.network_name +
                         "\", modified " + FormatUnixMs(cni.active_mtime_unix_ms) + ") chains: " +
                         Join(cni.plugin_types, " -> ") + "; no plugin of \"type\": \"istio-cni\"");
    }
    AddSkipped(cni, evidence);
    AddDirOrigin(cni, evidence);
    evidence.push_back(pods_text);
    if (one_shot) {
      evidence.push_back(one_shot_note);
    } else if (!cni.gaps.empty() && cni.gaps.back().end_unix_ms == 0) {
      evidence.push_back("chain without istio-cni since " +
                         FormatUnixMs(cni.gaps.back().start_unix_ms));
      std::vector<std::string> names;
      for (const Uncaptured& u : uncaptured) {
        if (u.gap != &cni.gaps.back()) continue;
        names.push_back(u.start.pod.empty() ? u.snapshot->netns.PrimaryPath() : u.start.pod);
      }
      if (!names.empty()) {
        const size_t total = names.size();
        if (names.size() > kMaxPodsInEvidence) names.resize(kMaxPodsInEvidence);
        evidence.push_back(
            "pods started since (never handed to istio-cni): " + Join(names, ", ") +
            (total > names.size() ? " and " + std::to_string(total - names.size()) + " more" : ""));
      }
    }
    Finding finding = MakeFinding(
        kCode, host, "chain",
        "the CNI chain the runtime uses (" + DescribeChain(cni) +
            ") lacks istio-cni: new pods are not captured by the mesh",
        std::move(evidence),
        "The primary CNI rewrote its config and dropped istio-cni (istio#55968; Cilium needs "
        "cni.exclusive=false). Make the primary CNI leave other plugins in its conflist, then "
        "restart the istio-cni node agent so it re-inserts itself; pods started meanwhile must be "
        "restarted (deleted) to be captured.");
    findings.push_back(std::move(finding));
  }

  if (cni.istio_cni_chained && !cni.kubeconfig_error.empty()) {
    std::vector<std::string> evidence = {
        cni.dir + "/" + cni.active_file +
        " chains istio-cni, but its kubeconfig is not usable: " + cni.kubeconfig_error};
    if (!cni.kubeconfig_path.empty()) {
      evidence.push_back("kubeconfig " + cni.kubeconfig_path + " (under host root \"" +
                         cni.host_root + "\")");
    }
    findings.push_back(MakeFinding(
        kCode, host, "kubeconfig",
        "the istio-cni plugin's kubeconfig is missing or unreadable: CNI ADD fails for new pods",
        std::move(evidence),
        "The istio-cni node agent writes this kubeconfig (ZZZ-istio-cni-kubeconfig) at start and "
        "when its token rotates; restart istio-cni on the node, and check that nothing else "
        "cleans the CNI config directory (istio#57438)."));
  }

  for (const Uncaptured& u : uncaptured) {
    std::vector<std::string> evidence = {
        "sandbox started " + FormatUnixMs(u.start.started_unix_ms) + " (" + u.start.how + ")",
        "the CNI chain lacked istio-cni " + DescribeGap(*u.gap),
        "no Istio redirect rules in the netns and no ZDS hand-off: the pod was never captured",
        "if the pod is not meant to be in the mesh (its namespace not labelled "
        "istio.io/dataplane-mode=ambient), ignore it"};
    Finding finding =
        MakeFinding(kCode, u.snapshot, "uncaptured",
                    "pod sandbox started while the CNI chain lacked istio-cni: never captured",
                    std::move(evidence),
                    "Delete the pod (its controller re-creates it) now that istio-cni is back in "
                    "the chain; the istio-cni agent only reconciles pods at its own start.");
    finding.pod = u.start.pod;
    finding.severity = Severity::kWarning;  // the chain itself is the critical page
    findings.push_back(std::move(finding));
  }
}

namespace {

constexpr size_t kMaxTableGroupsInEvidence = 8;

// Istio's nf_tables tables: inet istio-ambient-{nat,mangle,raw}, istio-proxy-* (sidecar).
bool IsIstioTable(const Table& table) {
  return table.backend == Backend::kNft && table.name.starts_with("istio-");
}

// Istio's tables written by a newer nft than the node's (each table records its creator in its
// userdata, nftables since 2025), or whose userdata a newer nft would refuse. Grouped by table
// and creator so a node of 250 pods gives a few lines.
void CheckNftCreatorVersions(const NodeSnapshot& snapshot, std::vector<Finding>& findings) {
  const NftUserspaceState& nft = snapshot.nft_userspace;
  struct Group {
    size_t netns = 0;
    std::string example;  // the first netns's path
  };
  std::map<std::string, Group> newer;      // "table inet istio-ambient-nat created by nft 1.1.1"
  std::map<std::string, Group> undecoded;  // "table inet istio-ambient-nat: <why>"
  std::string newest_creator;
  for (const NetnsSnapshot& ns : snapshot.netns) {
    for (const Table& table : ns.netfilter.tables) {
      if (!IsIstioTable(table)) continue;
      const std::string name =
          "table " + std::string(NftFamilyKeyword(table.family)) + " " + table.name;
      const NftTableUserdata& userdata = table.userdata;
      Group* group = nullptr;
      if (!userdata.error.empty()) {
        group = &undecoded[name + ": " + userdata.error];
      } else if (!userdata.creator_version.empty() && !nft.version.empty() &&
                 CompareVersions(userdata.creator_version, nft.version).value_or(0) > 0) {
        group = &newer[name + " created by nft " + userdata.creator_version];
        if (newest_creator.empty() ||
            CompareVersions(userdata.creator_version, newest_creator).value_or(0) > 0) {
          newest_creator = userdata.creator_version;
        }
      }
      if (group == nullptr) continue;
      if (group->netns++ == 0) group->example = ns.netns.PrimaryPath();
    }
  }
  const std::string node_nft = "node nft " + nft.version + " (" + nft.version_source + ")";
  auto lines = [&](const std::map<std::string, Group>& groups, bool with_node_version) {
    std::vector<std::string> evidence;
    for (const auto& [what, group] : groups) {
      if (evidence.size() == kMaxTableGroupsInEvidence) {
        evidence.push_back("... " + std::to_string(groups.size() - kMaxTableGroupsInEvidence) +
                           " more");
        break;
      }
      evidence.push_back(what + (with_node_version ? ", " + node_nft : std::string()) + ": " +
                         (group.netns == 1
                              ? group.example
                              : std::to_string(group.netns) + " netns, e.g. " + group.example));
    }
    return evidence;
  };
  const NetnsSnapshot* host = snapshot.Host();
  if (!newer.empty()) {
    std::vector<std::string> evidence = lines(newer, true);
    evidence.push_back(
        "an nft older than the table's creator may not know every expression the rules use; "
        "newer nft prints \"was created by a newer version of nftables? Content may be "
        "incomplete!\"");
    findings.push_back(MakeFinding(
        FindingCode::kNftBackendUnusable, host, "version",
        "Istio's nft tables were created by nft " + newest_creator +
            ", newer than the node's nft " + nft.version,
        std::move(evidence),
        "The node's nft may list or save these tables incompletely: inspect or repair them with "
        "an nft at least as new as istio-cni's (the one in its image), or upgrade the node's "
        "nftables package; the rules in the kernel are not affected."));
  }
  if (!undecoded.empty()) {
    std::vector<std::string> evidence = lines(undecoded, false);
    evidence.push_back(
        "nft releases that record their version in table userdata reject such userdata "
        "(\"Cannot parse userdata\") and leave the table out of `nft list ruleset`");
    findings.push_back(MakeFinding(
        FindingCode::kNftBackendUnusable, host, "userdata",
        "an Istio nft table's userdata is malformed", std::move(evidence),
        "Something other than nft wrote the table (or its userdata was corrupted): newer nft "
        "cannot list it. Recreate the pod (istio-cni rewrites its tables) and check which tool "
        "writes Istio's tables on this node."));
  }
}

}  // namespace

void CheckNftUserspace(const NodeSnapshot& snapshot, const std::vector<NetnsClassification>& netns,
                       std::vector<Finding>& findings) {
  const NftUserspaceState& nft = snapshot.nft_userspace;
  if (!nft.collected) return;
  CheckNftCreatorVersions(snapshot, findings);
  std::map<Backend, size_t> pods_by_backend;
  bool istio_present = false;
  for (const NetnsClassification& c : netns) {
    istio_present = istio_present || c.host_rules_present || !c.ambient_backends.empty();
    if (c.is_host) continue;
    for (Backend backend : c.ambient_backends) ++pods_by_backend[backend];
  }
  if (!istio_present) return;  // no Istio on this node: which backend it would use is moot
  std::string backends;
  for (const auto& [backend, count] : pods_by_backend) {
    if (!backends.empty()) backends += ", ";
    backends += std::string(BackendName(backend)) + " " + std::to_string(count);
  }
  if (backends.empty()) backends = "none";
  const std::string version = nft.version.empty()
                                  ? "version unknown"
                                  : "version " + nft.version + " (" + nft.version_source + ")";
  const NetnsSnapshot* host = snapshot.Host();
  if (nft.binary.empty()) {
    if (!pods_by_backend.contains(Backend::kNft)) return;
    findings.push_back(MakeFinding(
        FindingCode::kNftBackendUnusable, host, "absent",
        "native nft ambient rules exist but the node has no nft binary",
        {nft.probe_result, "pods' ambient rules by backend: " + backends},
        "Install nftables on the node to inspect or repair the rules istio-cni wrote (istio-cni "
        "itself uses the nft of its own image)."));
    return;
  }
  if (nft.json_support.has_value() && !*nft.json_support) {
    std::vector<std::string> evidence = {nft.binary + ", " + version, nft.json_evidence};
    if (!nft.probe_result.empty() && nft.json_evidence.find(nft.probe_result) == std::string::npos)
      evidence.push_back("probe: " + nft.probe_result);
    evidence.push_back("pods' ambient rules by backend: " + backends);
    evidence.push_back(
        "istio-cni 1.31 in nft mode needs `nft -j`; without it it falls back to iptables");
    findings.push_back(MakeFinding(FindingCode::kNftBackendUnusable, host, "json",
                                   "the node's nft cannot print JSON (" + nft.binary + ")",
                                   std::move(evidence)));
  }
}

}  // namespace ad::analysis
