// The engine's link to the Kubernetes API source (sources/kube), kept behind this header so the
// commands above the engine never include libcurl's adapter: the source is built from a plain
// config, read as a shared, generation-cached KubeSnapshot, and asked for one pod anywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "model/kube.h"

namespace ad {

// How to reach the API (--no-kube-api, --kubeconfig, --node-name). Plain data.
struct KubeSourceConfig {
  bool enabled = true;
  std::string kubeconfig;  // empty: in-cluster (KUBERNETES_SERVICE_HOST/_PORT + service account)
  // The service account's files (token, ca.crt) in-cluster.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string node_name;  // whose pods to list; empty: $NODE_NAME, else the hostname
  // One-shot commands: a list that has not connected or answered within this long fails (hung,
  // unreachable) instead of outliving the command's wait. 0: the daemon's patient defaults.
  std::chrono::milliseconds list_deadline{0};
};

// Where a pod runs, by namespace and name (GET of one pod): for a pod not on this node.
struct PodLocation {
  bool found = false;
  bool not_found = false;  // the API answered 404
  std::string node_name;   // spec.nodeName when found ("" while unscheduled)
  std::string error;       // why there is no answer (neither found nor not_found)
};

class KubeLink {
 public:
  // Starts the source's threads (none when disabled or without credentials: the view then says
  // why). `on_change` is called from a source thread, no lock held, when the data or its health
  // changed.
  static std::unique_ptr<KubeLink> Start(const KubeSourceConfig& config,
                                         std::function<void()> on_change = {});
  ~KubeLink();
  KubeLink(const KubeLink&) = delete;
  KubeLink& operator=(const KubeLink&) = delete;

  // The source's data; the same pointer while its generation is unchanged, so a step can tell
  // that nothing changed by comparing pointers. Thread-safe.
  std::shared_ptr<const KubeSnapshot> View();
  // Waits until every collection synced or the source failed (one-shot commands), at most
  // `timeout`. True when synced.
  bool WaitSynced(std::chrono::milliseconds timeout);
  PodLocation Locate(const std::string& namespace_name, const std::string& name) const;
  void Stop();

 private:
  struct Impl;
  explicit KubeLink(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ad
