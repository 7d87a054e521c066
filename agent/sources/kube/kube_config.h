// Where the Kubernetes API is and how to authenticate to it: in-cluster (the service-account
// token and CA mounted into the pod, KUBERNETES_SERVICE_HOST/PORT), or a kubeconfig file for a
// node agent run outside a pod. Only the forms a node needs: a server URL, a CA (file or data),
// a bearer token (inline or a file) or a client certificate. The token itself is never logged;
// a token file is re-read before every request, since bound tokens rotate.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "model/kube.h"

namespace ad::kube {

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeApiConfig {
  std::string server;            // https://host:port
  std::string ca_file;           // PEM file of the CAs to trust; or
  std::string ca_pem;            // PEM text (kubeconfig certificate-authority-data)
  std::string token_file;        // re-read before every request; or
  std::string token;             // a fixed token (kubeconfig `token`)
  std::string client_cert_file;  // mutual TLS (kubeconfig client-certificate), with
  std::string client_key_file;
  std::string client_cert_pem;  // or inline (client-certificate-data / client-key-data)
  std::string client_key_pem;
  std::string node_name;  // whose pods to list (NODE_NAME or --node-name)
};

// A configuration, or why there is none (kNoCredentials, kBadConfig) in words.
struct KubeConfigResult {
  std::optional<KubeApiConfig> config;
  KubeApiReason reason = KubeApiReason::kNone;
  std::string message;
};

using GetEnv = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> ProcessEnv(const char* name);  // getenv

// In-cluster: KUBERNETES_SERVICE_HOST and _PORT both set (an IPv6 host is bracketed), the token
// file present in `sa_dir`; the CA is sa_dir/ca.crt. Node name from NODE_NAME unless given.
KubeConfigResult InClusterConfig(const GetEnv& env, const std::string& sa_dir,
                                 const std::string& node_name);

// A kubeconfig file (any YAML: block or flow style, comments, quotes, anchors; at most 1 MiB):
// the current context's cluster and user. Relative file paths in it are relative to the file's
// directory. Exec and auth-provider plugins are not run (kBadConfig names them); malformed YAML,
// a context naming a cluster or user the file lacks, or a field of the wrong type is kBadConfig
// naming the line or the entry.
KubeConfigResult KubeconfigFileConfig(const std::string& path, const GetEnv& env,
                                      const std::string& node_name);

// The same from the file's text; relative paths resolve against `base_dir`. Errors do not name
// a file (KubeconfigFileConfig prefixes its path).
KubeConfigResult KubeconfigTextConfig(const std::string& text, const std::string& base_dir,
                                      const GetEnv& env, const std::string& node_name);

// The bearer token to send now: the token file's content without surrounding whitespace, or the
// fixed token; "" when there is none or the file is unreadable.
std::string CurrentToken(const KubeApiConfig& config);

}  // namespace ad::kube
