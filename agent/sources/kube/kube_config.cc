#include "sources/kube/kube_config.h"

#include <yaml-cpp/binary.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ad::kube {
namespace {

// A kubeconfig with a few dozen contexts and their inline certificates stays well below this;
// the bound keeps a wrong --kubeconfig (a log, a device) from being read whole.
constexpr size_t kMaxKubeconfigBytes = 1u << 20;

// At most `limit` bytes of the file (a token, a kubeconfig), or nullopt when it cannot be opened.
std::optional<std::string> ReadSmallFile(const std::string& path, size_t limit = 64u << 10) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

KubeConfigResult Fail(KubeApiReason reason, std::string message) {
  return {std::nullopt, reason, std::move(message)};
}

// `text` without whitespace when it is padded standard base64 (as Go's encoding/base64, which
// kubectl uses, requires), else nullopt. yaml-cpp 0.7's DecodeBase64 must only see such input:
// it indexes its table with a sign-extended char, reading far out of bounds on a byte >= 0x80
// (jbeder/yaml-cpp#646, found by tests/fuzz/kubeconfig_fuzz), silently drops a truncated last
// group (#1398) and misreads padding split by whitespace (#1491).
std::optional<std::string> CanonicalBase64(std::string_view text) {
  std::string compact;
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    const bool alphabet = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '+' || c == '/';
    // Padding only at the end: nothing but more padding may follow an '='.
    if (!(alphabet || c == '=') || (!compact.empty() && compact.back() == '=' && c != '=')) {
      return std::nullopt;
    }
    compact += c;
  }
  const size_t padding = compact.size() - compact.find_last_not_of('=') - 1;
  if (compact.size() % 4 != 0 || padding > 2 || padding == compact.size()) return std::nullopt;
  return compact;
}

// Reads the string fields of one kubeconfig mapping (a cluster, a user, a context). A field that
// is absent or null reads as ""; one that is a list or a mapping where kubectl expects a string
// reads as "" too and is remembered, so the caller reports the first such field by name instead
// of a misleading "missing" later.
class Fields {
 public:
  Fields(YAML::Node map, std::string where) : map_(std::move(map)), where_(std::move(where)) {}

  bool Has(const char* key) const { return map_.IsMap() && map_[key].IsDefined(); }

  std::string Text(const char* key) {
    if (!map_.IsMap()) return "";
    const YAML::Node value = map_[key];
    if (!value.IsDefined() || value.IsNull()) return "";
    if (!value.IsScalar()) {
      if (error_.empty()) error_ = where_ + "." + key + " is not a string";
      return "";
    }
    return value.Scalar();
  }

  // A *-data field: base64 as kubectl writes it (whitespace of a wrapped value skipped); "" when
  // absent.
  std::string Data(const char* key) {
    const std::string text = Text(key);
    if (text.empty()) return "";
    const std::optional<std::string> base64 = CanonicalBase64(text);
    const std::vector<unsigned char> bytes =
        base64 ? YAML::DecodeBase64(*base64) : std::vector<unsigned char>();
    // DecodeBase64 answers an empty vector for input it cannot decode.
    if (bytes.empty() && error_.empty()) error_ = where_ + "." + key + " is not base64";
    return std::string(bytes.begin(), bytes.end());
  }

  const std::string& error() const { return error_; }

 private:
  const YAML::Node map_;  // const: a lookup of an absent key must not add it
  std::string where_;
  std::string error_;
};

// The entry of `list` (clusters, contexts, users) whose `name` is `name`: its inner mapping
// (`cluster:`, `context:`, `user:`), an empty mapping when the entry has none, or an undefined
// node when no entry has that name.
YAML::Node Named(const YAML::Node& root, const char* list, const char* inner,
                 const std::string& name) {
  const YAML::Node items = root[list];
  if (!items.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const YAML::Node& item : items) {
    if (!item.IsMap()) continue;
    const YAML::Node item_name = item["name"];
    if (!item_name.IsScalar() || item_name.Scalar() != name) continue;
    const YAML::Node body = item[inner];
    return body.IsMap() ? body : YAML::Node(YAML::NodeType::Map);
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// A path from the kubeconfig, relative to its directory.
std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(base_dir) / path).string();
}

// Fills the cluster's server and CA; "" or why it cannot be used.
std::string ApplyCluster(const YAML::Node& cluster, const std::string& name,
                         const std::string& base_dir, KubeApiConfig& config) {
  Fields fields(cluster, "clusters[" + name + "].cluster");
  config.server = fields.Text("server");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  config.ca_file = Resolve(base_dir, fields.Text("certificate-authority"));
  config.ca_pem = fields.Data("certificate-authority-data");
  if (!fields.error().empty()) return fields.error();
  if (config.server.empty()) return "cluster \"" + name + "\" has no server";
  return "";
}

// Fills the user's credentials; "" or the reason they cannot be used.
std::string ApplyUser(const YAML::Node& user, const std::string& name, const std::string& base_dir,
                      KubeApiConfig& config) {
  Fields fields(user, "users[" + name + "].user");
  if (fields.Has("exec") || fields.Has("auth-provider")) {
    return "credential plugins (exec, auth-provider) are not supported";
  }
  config.token = fields.Text("token");
  config.token_file = Resolve(base_dir, fields.Text("tokenFile"));
  config.client_cert_file = Resolve(base_dir, fields.Text("client-certificate"));
  config.client_key_file = Resolve(base_dir, fields.Text("client-key"));
  config.client_cert_pem = fields.Data("client-certificate-data");
  config.client_key_pem = fields.Data("client-key-data");
  return fields.error();
}

// The current context's cluster and user from a parsed kubeconfig; "" or what is wrong, naming
// the context, cluster or user at fault.
std::string ApplyKubeconfig(const YAML::Node& root, const std::string& base_dir,
                            KubeApiConfig& config) {
  if (!root.IsMap()) return "not a kubeconfig (no YAML mapping at the top)";
  Fields top(root, "kubeconfig");
  const std::string current = top.Text("current-context");
  if (!top.error().empty()) return top.error();
  const YAML::Node context = Named(root, "contexts", "context", current);
  if (!context.IsDefined()) return "no context \"" + current + "\" (current-context)";
  Fields refs(context, "contexts[" + current + "].context");
  const std::string cluster_name = refs.Text("cluster");
  const std::string user_name = refs.Text("user");
  if (!refs.error().empty()) return refs.error();
  const YAML::Node cluster = Named(root, "clusters", "cluster", cluster_name);
  if (!cluster.IsDefined()) {
    return "context \"" + current + "\" names cluster \"" + cluster_name +
           "\", which is not in clusters";
  }
  if (std::string why = ApplyCluster(cluster, cluster_name, base_dir, config); !why.empty()) {
    return why;
  }
  if (user_name.empty()) return "";  // no user: anonymous, refused below for lack of credentials
  const YAML::Node user = Named(root, "users", "user", user_name);
  if (!user.IsDefined()) {
    return "context \"" + current + "\" names user \"" + user_name + "\", which is not in users";
  }
  return ApplyUser(user, user_name, base_dir, config);
}

// yaml-cpp is the one library here that reports malformed input by throwing (YAML::Exception,
// with the line and column). This adapter is the only code that calls it, so the exception stops
// at this boundary and the caller gets the failure as a value like every other config error.
std::string ParseAndApply(const std::string& text, const std::string& base_dir,
                          KubeApiConfig& config) {
  try {
    return ApplyKubeconfig(YAML::Load(text), base_dir, config);
  } catch (const YAML::DeepRecursion& error) {  // its own what() says only "bad file"
    return "not valid YAML: nested deeper than " + std::to_string(error.depth()) + " levels";
  } catch (const YAML::Exception& error) {
    return std::string("not valid YAML: ") + error.what();
  }
}

// A kubeconfig's server, CA and credentials (node_name still empty), or why there are none.
KubeConfigResult CredentialsFromText(const std::string& text, const std::string& base_dir) {
  KubeApiConfig config;
  if (std::string why = ParseAndApply(text, base_dir, config); !why.empty()) {
    return Fail(KubeApiReason::kBadConfig, std::move(why));
  }
  if (config.token.empty() && config.token_file.empty() && config.client_cert_file.empty() &&
      config.client_cert_pem.empty()) {
    return Fail(KubeApiReason::kNoCredentials,
                "the current context's user has no token or client certificate");
  }
  return {std::move(config), KubeApiReason::kNone, ""};
}

KubeConfigResult WithNodeName(KubeConfigResult result, const GetEnv& env,
                              const std::string& node_name) {
  result.config->node_name = node_name.empty() ? env("NODE_NAME").value_or("") : node_name;
  if (result.config->node_name.empty()) {
    return Fail(KubeApiReason::kBadConfig, "node name unknown: set NODE_NAME or --node-name");
  }
  return result;
}

}  // namespace

std::optional<std::string> ProcessEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

KubeConfigResult InClusterConfig(const GetEnv& env, const std::string& sa_dir,
                                 const std::string& node_name) {
  const std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  const std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || !port || host->empty() || port->empty()) {
    return Fail(KubeApiReason::kNoCredentials,
                "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset");
  }
  KubeApiConfig config;
  const bool ipv6 = host->find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + *host + "]" : *host) + ":" + *port;
  config.token_file = sa_dir + "/token";
  config.ca_file = sa_dir + "/ca.crt";
  if (!ReadSmallFile(config.token_file)) {
    return Fail(KubeApiReason::kNoCredentials, "no service-account token at " + config.token_file +
                                                   " (automountServiceAccountToken off?)");
  }
  return WithNodeName({std::move(config), KubeApiReason::kNone, ""}, env, node_name);
}

KubeConfigResult KubeconfigFileConfig(const std::string& path, const GetEnv& env,
                                      const std::string& node_name) {
  const std::optional<std::string> text = ReadSmallFile(path, kMaxKubeconfigBytes + 1);
  if (!text) return Fail(KubeApiReason::kBadConfig, "cannot read kubeconfig " + path);
  if (text->size() > kMaxKubeconfigBytes) {
    return Fail(
        KubeApiReason::kBadConfig,
        path + ": larger than " + std::to_string(kMaxKubeconfigBytes >> 20) + " MiB, not read");
  }
  KubeConfigResult result =
      CredentialsFromText(*text, std::filesystem::path(path).parent_path().string());
  if (!result.config) return Fail(result.reason, path + ": " + result.message);
  return WithNodeName(std::move(result), env, node_name);
}

KubeConfigResult KubeconfigTextConfig(const std::string& text, const std::string& base_dir,
                                      const GetEnv& env, const std::string& node_name) {
  KubeConfigResult result = CredentialsFromText(text, base_dir);
  if (!result.config) return result;
  return WithNodeName(std::move(result), env, node_name);
}

std::string CurrentToken(const KubeApiConfig& config) {
  if (config.token_file.empty()) return config.token;
  const std::optional<std::string> text = ReadSmallFile(config.token_file);
  return text ? Trim(*text) : "";
}

}  // namespace ad::kube
