#include "engine/kube_link.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "scan/scanner.h"
#include "sources/kube/kube_api_source.h"
#include "sources/kube/kube_config.h"

namespace ad {
namespace {

kube::KubeConfigResult LoadConfig(const KubeSourceConfig& config) {
  const std::string node = ResolveNodeName(config.node_name);
  if (!config.kubeconfig.empty()) {
    return kube::KubeconfigFileConfig(config.kubeconfig, kube::ProcessEnv, node);
  }
  return kube::InClusterConfig(kube::ProcessEnv, config.service_account_dir, node);
}

}  // namespace

struct KubeLink::Impl {
  std::optional<kube::KubeApiConfig> config;  // for Locate; nullopt without one
  std::string config_error;
  std::unique_ptr<kube::KubeStateSource> source;
  mutable std::mutex mu;
  std::shared_ptr<const KubeSnapshot> view;
};

KubeLink::KubeLink(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeLink::~KubeLink() { Stop(); }

std::unique_ptr<KubeLink> KubeLink::Start(const KubeSourceConfig& config,
                                          std::function<void()> on_change) {
  auto impl = std::make_unique<Impl>();
  if (!config.enabled) {
    impl->config_error = "the Kubernetes API source is off (--no-kube-api)";
    impl->source =
        std::make_unique<kube::UnavailableKubeSource>(KubeApiReason::kDisabled, impl->config_error);
  } else {
    kube::KubeConfigResult loaded = LoadConfig(config);
    impl->config = loaded.config;
    impl->config_error = loaded.message;
    kube::KubeApiSourceOptions options;
    options.on_change = std::move(on_change);
    if (config.list_deadline.count() > 0) {
      options.connect_timeout = std::min(options.connect_timeout, config.list_deadline);
      options.list_limits.connect_timeout = options.connect_timeout;
      options.list_limits.total = config.list_deadline;
      options.list_limits.idle = config.list_deadline;
    }
    impl->source = kube::MakeKubeSource(std::move(loaded), std::move(options));
  }
  impl->source->Start();
  return std::unique_ptr<KubeLink>(new KubeLink(std::move(impl)));
}

std::shared_ptr<const KubeSnapshot> KubeLink::View() {
  std::lock_guard lock(impl_->mu);
  const uint64_t generation = impl_->source->generation();
  if (!impl_->view || impl_->view->generation != generation) {
    impl_->view = std::make_shared<const KubeSnapshot>(impl_->source->Snapshot());
  }
  return impl_->view;
}

bool KubeLink::WaitSynced(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto view = View();
    const KubeApiStatus& status = view->status;
    if (status.healthy()) return true;
    // A failure with a reason ends the wait: the report says why instead of waiting it out.
    if (!status.enabled || status.reason != KubeApiReason::kNone) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

PodLocation KubeLink::Locate(const std::string& namespace_name, const std::string& name) const {
  PodLocation location;
  if (!impl_->config) {
    location.error = impl_->config_error;
    return location;
  }
  const kube::PodLookup lookup = kube::FetchPod(*impl_->config, namespace_name, name);
  if (lookup.pod) {
    location.found = true;
    location.node_name = lookup.pod->node_name;
  } else if (lookup.not_found) {
    location.not_found = true;
  } else {
    location.error = lookup.message;
  }
  return location;
}

void KubeLink::Stop() {
  if (impl_ && impl_->source) impl_->source->Stop();
}

}  // namespace ad
