#include "scan/cri_node_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

#include "sources/cri/crio_config.h"
#include "sources/cri/runtime_status.h"
#include "sources/cri/sandbox_info.h"

namespace ad {
namespace {

constexpr SourceKind kSource = SourceKind::kCri;

// Inode of the nsfs file at `path`, or the errno text.
Result<uint64_t> NetnsInodeAt(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(kSource, "stat " + path);
  return static_cast<uint64_t>(st.st_ino);
}

std::string PodLabel(const PodIdentity& pod) {
  return pod.namespace_name + "/" + pod.name + " (sandbox " + pod.sandbox_id.substr(0, 13) + ")";
}

PodIdentity IdentityFromList(const runtime::v1::PodSandbox& sandbox) {
  PodIdentity pod;
  pod.sandbox_id = sandbox.id();
  pod.uid = sandbox.metadata().uid();
  pod.name = sandbox.metadata().name();
  pod.namespace_name = sandbox.metadata().namespace_();
  pod.created_at_unix_ms = sandbox.created_at() / 1000000;  // CRI: nanoseconds
  if (auto label = sandbox.labels().find("istio.io/dataplane-mode");
      label != sandbox.labels().end()) {
    pod.dataplane_mode_label = label->second;
  }
  return pod;
}

void ApplyStatus(const runtime::v1::PodSandboxStatus& status, PodIdentity& pod) {
  if (status.has_metadata()) {
    pod.uid = status.metadata().uid();
    pod.name = status.metadata().name();
    pod.namespace_name = status.metadata().namespace_();
  }
  pod.host_network = status.linux().namespaces().options().network() == runtime::v1::NODE;
  if (!status.network().ip().empty()) pod.ips.push_back(status.network().ip());
  for (const runtime::v1::PodIP& extra : status.network().additional_ips()) {
    if (!extra.ip().empty()) pod.ips.push_back(extra.ip());
  }
}

// CRI-O's network_dir from its own HTTP endpoint on the CRI socket (GET /config).
void ReadCrioNetworkDir(const cri::CriClient& client, CriState& state) {
  constexpr std::string_view kScheme = "unix://";
  const std::string& endpoint = client.endpoint();
  if (!endpoint.starts_with(kScheme)) return;
  Result<std::string> dir =
      cri::ReadCrioNetworkDir(endpoint.substr(kScheme.size()), std::chrono::milliseconds(2000));
  if (!dir.ok()) {
    state.cni_note = dir.error().message;
  } else if (dir->empty()) {
    state.cni_note = "CRI-O's GET /config has no [crio.network] network_dir";
  } else {
    state.cni_conf_dir = std::move(dir).value();
    state.cni_note = "CRI-O GET /config [crio.network] network_dir";
  }
}

// The runtime's CNI config directory from its verbose Status (containerd), or CRI-O's own config.
// Never an error of the source: a runtime that cannot say leaves the directory to the flag or the
// default, and the note says why.
void ReadRuntimeCniConfig(cri::CriClient& client, CriState& state) {
  if (client.version().runtime_name() == "cri-o") {
    ReadCrioNetworkDir(client, state);  // its Status has no CNI directories
    return;
  }
  Result<runtime::v1::StatusResponse> status = client.Status(true);
  if (!status.ok()) {
    state.cni_note = status.error().message;
    return;
  }
  auto info = [&status](const char* key) -> std::string_view {
    const auto it = status->info().find(key);
    return it == status->info().end() ? std::string_view() : std::string_view(it->second);
  };
  Result<cri::RuntimeCniConfig> parsed =
      cri::ParseRuntimeCniConfig(info("config"), info("cniconfig"), info("lastCNILoadStatus"));
  if (!parsed.ok()) {
    state.cni_note = parsed.error().message;
    return;
  }
  if (parsed->conf_dir.empty()) {
    state.cni_note = "its verbose Status reports no CNI config directory";
    return;
  }
  state.cni_conf_dir = parsed->conf_dir;
  state.cni_pod_network = parsed->pod_network;
  std::string networks;
  for (const std::string& name : parsed->networks)
    networks += (networks.empty() ? "" : ", ") + name;
  state.cni_note = "Status " + parsed->conf_dir_key +
                   "; networks loaded: " + (networks.empty() ? std::string("none") : networks);
  if (!parsed->last_load_status.empty()) {
    state.cni_note += "; last CNI load: " + parsed->last_load_status;
  }
}

}  // namespace

std::string ResolveNetnsInode(PodIdentity& pod, const std::string& host_root,
                              const std::string& proc_root) {
  if (pod.host_network) return {};  // the node's own netns; nothing pod-specific to resolve
  std::string why;
  if (!pod.netns_path.empty()) {
    Result<uint64_t> inode = NetnsInodeAt(host_root + pod.netns_path);
    if (inode.ok()) {
      pod.netns_inode = *inode;
      return {};
    }
    why = inode.error().message;
  }
  if (pod.pid > 0) {
    Result<uint64_t> inode = NetnsInodeAt(proc_root + "/" + std::to_string(pod.pid) + "/ns/net");
    if (inode.ok()) {
      pod.netns_inode = *inode;
      return {};
    }
    why += (why.empty() ? "" : "; ") + inode.error().message;
  }
  if (why.empty()) why = "the runtime reported neither a netns path nor a pid";
  return why;
}

void CriNodeSource::Collect(NodeSnapshot& snapshot) {
  std::set<uint64_t> netns;
  for (const NetnsSnapshot& ns : snapshot.netns) netns.insert(ns.netns.inode);
  const auto now = std::chrono::steady_clock::now();
  if (last_ && last_->available && netns == last_netns_ && now - last_at_ < options_.min_interval) {
    snapshot.cri = *last_;
    return;
  }
  Query(snapshot.cri);
  ++runtime_queries_;
  last_ = snapshot.cri;
  last_netns_ = std::move(netns);
  last_at_ = now;
}

void CriNodeSource::Query(CriState& state) {
  state = CriState{};
  std::vector<PodIdentity> pods;  // state.pods at the end (the early returns have none yet)
  Result<cri::CriClient> connected = cri::CriClient::Connect(options_.client);
  if (!connected.ok()) {
    state.errors.push_back(connected.error());
    return;
  }
  cri::CriClient& client = connected.value();
  client.set_deadline_cap(std::chrono::system_clock::now() + options_.total_timeout);
  state.available = true;
  state.endpoint = client.endpoint();
  state.runtime = client.RuntimeDescription();
  ReadRuntimeCniConfig(client, state);

  Result<std::vector<runtime::v1::PodSandbox>> sandboxes = client.ListPodSandbox(true);
  if (!sandboxes.ok()) {
    state.errors.push_back(sandboxes.error());
    return;
  }
  size_t not_inspected = 0;
  std::map<std::string, PodIdentity> inspected;  // this answer's complete identities
  for (const runtime::v1::PodSandbox& sandbox : *sandboxes) {
    // The filter asked for READY; a runtime that ignores filters must not leak stale pins.
    if (sandbox.state() != runtime::v1::SANDBOX_READY) continue;
    // What PodSandboxStatus adds (netns pin, pause pid, IPs, host network) is fixed for a
    // sandbox's life: a sandbox inspected completely before is not asked again.
    if (auto known = inspected_.find(sandbox.id()); known != inspected_.end()) {
      PodIdentity pod = IdentityFromList(sandbox);
      if (pod.uid == known->second.uid && pod.name == known->second.name &&
          pod.namespace_name == known->second.namespace_name) {
        inspected.emplace(sandbox.id(), known->second);
        pods.push_back(known->second);
        continue;
      }
    }
    PodIdentity pod = IdentityFromList(sandbox);
    if (not_inspected > 0) {  // the runtime already hung: keep the identity, skip the call
      ++not_inspected;
      pods.push_back(std::move(pod));
      continue;
    }
    ++status_calls_;
    Result<runtime::v1::PodSandboxStatusResponse> status =
        client.PodSandboxStatus(sandbox.id(), true);
    if (!status.ok()) {
      state.errors.push_back(status.error());
      // After a deadline the runtime is hung: stop instead of paying one deadline per pod.
      if (status.error().error_number == ETIMEDOUT) {
        not_inspected = 1;
      }
      pods.push_back(std::move(pod));
      continue;
    }
    ApplyStatus(status->status(), pod);
    bool info_usable = false;  // otherwise its error already explains the missing netns
    const auto info = status->info().find("info");
    if (info == status->info().end()) {
      if (!pod.host_network) {
        state.errors.push_back(
            {kSource, "PodSandboxStatus " + sandbox.id() + ": verbose info has no \"info\" entry"});
      }
    } else {
      Result<cri::SandboxInfo> parsed = cri::ParseSandboxInfo(info->second);
      if (parsed.ok()) {
        info_usable = true;
        pod.pid = parsed->pid;
        if (!pod.host_network) pod.netns_path = parsed->netns_path;
      } else {
        state.errors.push_back(
            {kSource, "PodSandboxStatus " + sandbox.id() + ": " + parsed.error().message});
      }
    }
    const std::string unresolved = ResolveNetnsInode(pod, options_.host_root, options_.proc_root);
    if (!unresolved.empty() && info_usable) {
      state.errors.push_back({kSource, "netns of " + PodLabel(pod) + " unresolved: " + unresolved});
    }
    if (info_usable && unresolved.empty()) inspected.emplace(sandbox.id(), pod);
    pods.push_back(std::move(pod));
  }
  inspected_ = std::move(inspected);  // sandboxes gone (or not READY) are forgotten
  if (not_inspected > 1) {
    state.errors.push_back(
        {kSource, "PodSandboxStatus skipped for " + std::to_string(not_inspected - 1) +
                      " more sandboxes after a deadline (identity from ListPodSandbox only)"});
  }
  std::sort(pods.begin(), pods.end(), [](const PodIdentity& a, const PodIdentity& b) {
    return std::tie(a.namespace_name, a.name, a.sandbox_id) <
           std::tie(b.namespace_name, b.name, b.sandbox_id);
  });
  state.pods = std::move(pods);
}

}  // namespace ad
