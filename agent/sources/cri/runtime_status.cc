#include "sources/cri/runtime_status.h"

#include <optional>

#include "model/json_reader.h"

namespace ad::cri {
namespace {

constexpr size_t kMaxNetworks = 64;
constexpr size_t kMaxNameBytes = 256;
// containerd's own loopback network (go-cni's WithLoNetwork), loaded before the pod network.
constexpr std::string_view kLoopbackNetwork = "cni-loopback";

// A usable directory: absolute, bounded, no NUL (the value becomes an opendir() path).
bool UsableDir(std::string_view dir) {
  return !dir.empty() && dir.front() == '/' && dir.size() <= kMaxConfDirBytes &&
         dir.find('\0') == std::string_view::npos;
}

std::string Bounded(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return std::string(text.substr(0, max_bytes)) + "...";
}

// config.cni.confDir of containerd's CRI config JSON.
std::string DirFromConfig(const rapidjson::Value& root) {
  const rapidjson::Value* cni = JsonMember(root, "cni");
  return cni == nullptr ? std::string() : std::string(JsonStringMember(*cni, "confDir"));
}

// go-cni's ConfigResult: PluginConfDir and the loaded networks.
void ReadCniConfigResult(const rapidjson::Value& root, RuntimeCniConfig& out, std::string& dir) {
  dir = std::string(JsonStringMember(root, "PluginConfDir"));
  const rapidjson::Value* networks = JsonMember(root, "Networks");
  if (networks == nullptr || !networks->IsArray()) return;
  for (const rapidjson::Value& network : networks->GetArray()) {
    if (out.networks.size() == kMaxNetworks) break;
    const rapidjson::Value* config = JsonMember(network, "Config");
    if (config == nullptr) continue;
    const std::string_view name = JsonStringMember(*config, "Name");
    if (name.empty() || name == kLoopbackNetwork) continue;
    out.networks.push_back(Bounded(name, kMaxNameBytes));
    if (JsonStringMember(network, "IFName") == "eth0" && out.pod_network.empty()) {
      out.pod_network = out.networks.back();
    }
  }
}

}  // namespace

Result<RuntimeCniConfig> ParseRuntimeCniConfig(std::string_view config_json,
                                               std::string_view cniconfig_json,
                                               std::string_view load_status) {
  RuntimeCniConfig out;
  out.last_load_status = Bounded(load_status, kMaxLoadStatusBytes);
  const JsonLimits limits{.max_bytes = kMaxRuntimeStatusBytes};
  std::string errors;
  auto note = [&errors](std::string_view key, const std::string& why) {
    errors += (errors.empty() ? "" : "; ") + std::string(key) + ": " + why;
  };

  std::string config_dir;
  if (!config_json.empty()) {
    rapidjson::Document root;
    const JsonStatus parsed = ParseJsonDocument(config_json, root, limits);
    if (!parsed.ok()) {
      note("config", parsed.error);
    } else {
      config_dir = DirFromConfig(root);
    }
  }
  std::string result_dir;
  if (!cniconfig_json.empty()) {
    rapidjson::Document root;
    const JsonStatus parsed = ParseJsonDocument(cniconfig_json, root, limits);
    if (!parsed.ok()) {
      note("cniconfig", parsed.error);
    } else {
      ReadCniConfigResult(root, out, result_dir);
    }
  }
  if (UsableDir(config_dir)) {
    out.conf_dir = config_dir;
    out.conf_dir_key = "config.cni.confDir";
  } else if (UsableDir(result_dir)) {
    out.conf_dir = result_dir;
    out.conf_dir_key = "cniconfig.PluginConfDir";
  } else if (!errors.empty()) {
    return SourceError{SourceKind::kCri, "Status info " + errors};
  }
  return out;
}

namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

// The string value after `key =` on `line`; nullopt when the line sets another key.
std::optional<Result<std::string>> StringValue(std::string_view line, std::string_view key) {
  if (!line.starts_with(key)) return std::nullopt;
  std::string_view rest = Trim(line.substr(key.size()));
  if (rest.empty() || rest.front() != '=') return std::nullopt;  // a longer key ("network_dirs")
  rest = Trim(rest.substr(1));
  auto bad = [&key](const std::string& why) -> Result<std::string> {
    return SourceError{SourceKind::kCri, "CRI-O config: " + std::string(key) + ": " + why};
  };
  if (rest.size() < 2 || (rest.front() != '"' && rest.front() != '\'')) {
    return bad("not a one-line string");
  }
  const char quote = rest.front();
  const size_t end = rest.find(quote, 1);
  if (end == std::string_view::npos) return bad("unterminated string");
  const std::string_view value = rest.substr(1, end - 1);
  if (quote == '"' && value.find('\\') != std::string_view::npos) return bad("escapes in the path");
  return std::string(value);
}

}  // namespace

Result<std::string> ParseCrioNetworkDir(std::string_view toml) {
  if (toml.size() > kMaxCrioConfigBytes) {
    return SourceError{SourceKind::kCri,
                       "CRI-O config: over " + std::to_string(kMaxCrioConfigBytes) + " bytes"};
  }
  std::string_view table;
  while (!toml.empty()) {
    const size_t newline = toml.find('\n');
    const std::string_view line = Trim(toml.substr(0, newline));
    toml = newline == std::string_view::npos ? std::string_view() : toml.substr(newline + 1);
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '[') {
      const size_t close = line.find(']');
      table =
          close == std::string_view::npos ? std::string_view() : Trim(line.substr(1, close - 1));
      continue;
    }
    if (table != "crio.network") continue;
    std::optional<Result<std::string>> value = StringValue(line, "network_dir");
    if (!value) continue;
    if (!value->ok()) return value->error();
    std::string dir = std::move(value->value());
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!UsableDir(dir)) {
      return SourceError{SourceKind::kCri, "CRI-O config: network_dir \"" +
                                               Bounded(dir, kMaxNameBytes) +
                                               "\" is not an absolute path"};
    }
    return dir;
  }
  return std::string();
}

}  // namespace ad::cri
