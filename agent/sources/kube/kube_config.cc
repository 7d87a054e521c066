#include "sources/kube/kube_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace ad::kube {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(64u << 10, '\0');
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

std::string Unquote(std::string value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const int value = sextet(c);
    if (value < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    if (++count == 4) {
      out += static_cast<char>(bits >> 16);
      out += static_cast<char>((bits >> 8) & 0xff);
      out += static_cast<char>(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) return std::nullopt;
  if (count == 2) out += static_cast<char>(bits >> 4);
  if (count == 3) {
    out += static_cast<char>(bits >> 10);
    out += static_cast<char>((bits >> 2) & 0xff);
  }
  return out;
}

using Item = std::map<std::string, std::string>;  // leaf key -> value, flattened

// The kubeconfig as kubectl writes it: top-level `current-context: X` and the lists `clusters`,
// `contexts`, `users`, whose items ("- ") are flattened to their leaf keys (a context's
// `cluster`/`user`, a cluster's `server`, a user's `token`, ...). Comments and blank lines are
// skipped; flow style ({...}) and anchors are not read.
struct Kubeconfig {
  std::string current_context;
  std::map<std::string, std::vector<Item>> lists;
};

Kubeconfig ParseKubeconfig(const std::string& text) {
  Kubeconfig config;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    const bool top = line[0] != ' ' && line[0] != '-';
    std::string entry = trimmed;
    const bool new_item = entry.rfind("- ", 0) == 0 || entry == "-";
    if (new_item) entry = Trim(entry.substr(1));
    const size_t colon = entry.find(':');
    const std::string key = Trim(entry.substr(0, colon));
    const std::string value =
        colon == std::string::npos ? "" : Unquote(Trim(entry.substr(colon + 1)));
    if (top) {
      section = key;
      if (key == "current-context") config.current_context = value;
      continue;
    }
    auto& items = config.lists[section];
    if (new_item || items.empty()) items.emplace_back();
    if (!key.empty()) items.back()[key] = value;
  }
  return config;
}

const Item* Named(const Kubeconfig& config, const std::string& list, const std::string& name) {
  auto it = config.lists.find(list);
  if (it == config.lists.end()) return nullptr;
  for (const Item& item : it->second) {
    auto found = item.find("name");
    if (found != item.end() && found->second == name) return &item;
  }
  return nullptr;
}

std::string Get(const Item& item, const std::string& key) {
  auto it = item.find(key);
  return it == item.end() ? "" : it->second;
}

KubeConfigResult Fail(KubeApiReason reason, std::string message) {
  return {std::nullopt, reason, std::move(message)};
}

// A path from the kubeconfig, relative to its directory.
std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(base_dir) / path).string();
}

// Fills the user's credentials; "" or the reason they cannot be used.
std::string ApplyUser(const Item& user, const std::string& base_dir, KubeApiConfig& config) {
  if (user.count("exec") != 0 || user.count("auth-provider") != 0) {
    return "credential plugins (exec, auth-provider) are not supported";
  }
  config.token = Get(user, "token");
  config.token_file = Resolve(base_dir, Get(user, "tokenFile"));
  config.client_cert_file = Resolve(base_dir, Get(user, "client-certificate"));
  config.client_key_file = Resolve(base_dir, Get(user, "client-key"));
  for (const auto& [key, target] : {std::pair{"client-certificate-data", &config.client_cert_pem},
                                    std::pair{"client-key-data", &config.client_key_pem}}) {
    const std::string data = Get(user, key);
    if (data.empty()) continue;
    std::optional<std::string> decoded = Base64Decode(data);
    if (!decoded) return std::string(key) + " is not base64";
    *target = std::move(*decoded);
  }
  return "";
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
  config.node_name = node_name.empty() ? env("NODE_NAME").value_or("") : node_name;
  if (config.node_name.empty()) {
    return Fail(KubeApiReason::kBadConfig, "node name unknown: set NODE_NAME or --node-name");
  }
  return {std::move(config), KubeApiReason::kNone, ""};
}

KubeConfigResult KubeconfigFileConfig(const std::string& path, const GetEnv& env,
                                      const std::string& node_name) {
  const std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return Fail(KubeApiReason::kBadConfig, "cannot read kubeconfig " + path);
  const Kubeconfig parsed = ParseKubeconfig(*text);
  const Item* context = Named(parsed, "contexts", parsed.current_context);
  if (context == nullptr) {
    return Fail(KubeApiReason::kBadConfig,
                path + ": no context \"" + parsed.current_context + "\" (current-context)");
  }
  const Item* cluster = Named(parsed, "clusters", Get(*context, "cluster"));
  const Item* user = Named(parsed, "users", Get(*context, "user"));
  if (cluster == nullptr || Get(*cluster, "server").empty()) {
    return Fail(KubeApiReason::kBadConfig, path + ": the current context's cluster has no server");
  }
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  KubeApiConfig config;
  config.server = Get(*cluster, "server");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  config.ca_file = Resolve(base_dir, Get(*cluster, "certificate-authority"));
  if (const std::string data = Get(*cluster, "certificate-authority-data"); !data.empty()) {
    std::optional<std::string> pem = Base64Decode(data);
    if (!pem) return Fail(KubeApiReason::kBadConfig, path + ": certificate-authority-data");
    config.ca_pem = std::move(*pem);
  }
  if (user != nullptr) {
    if (std::string why = ApplyUser(*user, base_dir, config); !why.empty()) {
      return Fail(KubeApiReason::kBadConfig, path + ": " + why);
    }
  }
  if (config.token.empty() && config.token_file.empty() && config.client_cert_file.empty() &&
      config.client_cert_pem.empty()) {
    return Fail(KubeApiReason::kNoCredentials, path +
                                                   ": the current context's user has no "
                                                   "token or client certificate");
  }
  config.node_name = node_name.empty() ? env("NODE_NAME").value_or("") : node_name;
  if (config.node_name.empty()) {
    return Fail(KubeApiReason::kBadConfig, "node name unknown: set NODE_NAME or --node-name");
  }
  return {std::move(config), KubeApiReason::kNone, ""};
}

std::string CurrentToken(const KubeApiConfig& config) {
  if (config.token_file.empty()) return config.token;
  const std::optional<std::string> text = ReadSmallFile(config.token_file);
  return text ? Trim(*text) : "";
}

}  // namespace ad::kube
