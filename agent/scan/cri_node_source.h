// Pod identity from the container runtime: ListPodSandbox (READY only) plus a verbose
// PodSandboxStatus per sandbox give uid/name/namespace, IPs, the pause pid and the netns pin,
// which is resolved to its inode so pods can be joined with the scanned netns. A verbose Status
// per answer gives the runtime's CNI config directory (containerd), read by the CNI source. A
// missing or misbehaving runtime is reported in snapshot.cri (available=false / errors), never
// fatal.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "model/zds.h"
#include "scan/node_source.h"
#include "sources/cri/cri_client.h"

namespace ad {

struct CriSourceOptions {
  cri::CriClientOptions client;  // endpoints, host_root (socket probing), per-call deadline
  std::string host_root;         // prefix for netns pin paths reported by the runtime ("/host")
  std::string proc_root = "/proc";
  // Upper bound for the whole collection (one List plus one Status per sandbox).
  std::chrono::milliseconds total_timeout{15000};
  // Repeated collections within this time, over the same netns, reuse the last good answer.
  std::chrono::milliseconds min_interval{30000};
};

// Pod identity changes only when pods come and go, so repeated collections (watch, the daemon)
// reuse the last good answer until `min_interval` has passed or the node's set of netns changed;
// a failed collection is retried at once. A new answer lists the sandboxes (one call) and asks
// PodSandboxStatus only for sandboxes not inspected completely before (same id and identity).
class CriNodeSource : public NodeSource {
 public:
  explicit CriNodeSource(CriSourceOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "cri"; }
  void Collect(NodeSnapshot& snapshot) override;
  uint64_t runtime_queries() const { return runtime_queries_; }
  uint64_t status_calls() const { return status_calls_; }  // PodSandboxStatus calls made

 private:
  void Query(CriState& state);

  CriSourceOptions options_;
  std::optional<CriState> last_;
  std::set<uint64_t> last_netns_;
  std::chrono::steady_clock::time_point last_at_{};
  uint64_t runtime_queries_ = 0;
  uint64_t status_calls_ = 0;
  std::map<std::string, PodIdentity> inspected_;  // by sandbox id: complete PodSandboxStatus
};

// Fills netns_inode from stat(host_root + netns_path), else <proc_root>/<pid>/ns/net. Returns an
// explanation when neither resolves (empty when resolved or when there is nothing to resolve).
std::string ResolveNetnsInode(PodIdentity& pod, const std::string& host_root,
                              const std::string& proc_root);

}  // namespace ad
