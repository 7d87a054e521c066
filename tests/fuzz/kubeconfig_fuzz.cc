// Fuzz target: a --kubeconfig file's text (sources/kube/kube_config.h), read with yaml-cpp. Any
// bytes give a configuration or an error text, never a crash or an exception out of the
// adapter; a configuration that is accepted has what the API client needs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "sources/kube/kube_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto no_env = [](const char*) { return std::optional<std::string>(); };
  const ad::kube::KubeConfigResult result =
      ad::kube::KubeconfigTextConfig(text, "/etc/kubernetes", no_env, "node-a");
  if (!result.config) {
    if (result.message.empty() || result.reason == ad::KubeApiReason::kNone) std::abort();
    return 0;
  }
  const ad::kube::KubeApiConfig& config = *result.config;
  if (config.server.empty() || config.server.back() == '/') std::abort();
  if (config.token.empty() && config.token_file.empty() && config.client_cert_file.empty() &&
      config.client_cert_pem.empty()) {
    std::abort();
  }
  for (const std::string* path :
       {&config.token_file, &config.client_cert_file, &config.client_key_file, &config.ca_file}) {
    if (!path->empty() && path->front() != '/') std::abort();  // resolved against the base dir
  }
  if (config.node_name != "node-a") std::abort();
  return 0;
}
