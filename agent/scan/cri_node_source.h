// Pod identity from the container runtime: ListPodSandbox (READY only) plus a verbose
// PodSandboxStatus per sandbox give uid/name/namespace, IPs, the pause pid and the netns pin,
// which is resolved to its inode so pods can be joined with the scanned netns. A missing or
// misbehaving runtime is reported in snapshot.cri (available=false / errors), never fatal.
#pragma once

#include <chrono>
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
};

class CriNodeSource : public NodeSource {
 public:
  explicit CriNodeSource(CriSourceOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "cri"; }
  void Collect(NodeSnapshot& snapshot) override;

 private:
  CriSourceOptions options_;
};

// Fills netns_inode from stat(host_root + netns_path), else <proc_root>/<pid>/ns/net. Returns an
// explanation when neither resolves (empty when resolved or when there is nothing to resolve).
std::string ResolveNetnsInode(PodIdentity& pod, const std::string& host_root,
                              const std::string& proc_root);

}  // namespace ad
