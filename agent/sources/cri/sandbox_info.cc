#include "sources/cri/sandbox_info.h"

#include <cmath>
#include <limits>

#include "model/json_parse.h"

namespace ad::cri {
namespace {

const JsonValue* Path(const JsonValue& root, std::initializer_list<std::string_view> keys) {
  const JsonValue* node = &root;
  for (std::string_view key : keys) {
    node = node->Get(key);
    if (node == nullptr) return nullptr;
  }
  return node;
}

std::string NetnsFromRuntimeSpec(const JsonValue& root) {
  const JsonValue* namespaces = Path(root, {"runtimeSpec", "linux", "namespaces"});
  if (namespaces == nullptr) return {};
  for (const JsonValue& entry : namespaces->items()) {
    if (entry.GetString("type") == "network") return entry.GetString("path");
  }
  return {};
}

std::string NetnsFromSandboxMetadata(const JsonValue& root) {
  const JsonValue* metadata = Path(root, {"sandboxMetadata", "Metadata"});
  return metadata == nullptr ? std::string() : metadata->GetString("NetNSPath");
}

int PidOf(const JsonValue& root) {
  const JsonValue* pid = root.Get("pid");
  if (pid == nullptr) return 0;
  const double value = pid->AsNumber(0);
  // Only whole, positive, int-sized numbers are pids; anything else means "unknown".
  if (!(value > 0) || value > std::numeric_limits<int>::max() || std::floor(value) != value) {
    return 0;
  }
  return static_cast<int>(value);
}

}  // namespace

Result<SandboxInfo> ParseSandboxInfo(std::string_view info_json) {
  JsonParseResult parsed = ParseJson(info_json, JsonLimits{.max_bytes = kMaxSandboxInfoBytes});
  if (!parsed.value) return SourceError{SourceKind::kCri, "info JSON: " + parsed.error};
  const JsonValue& root = *parsed.value;
  if (!root.is_object()) return SourceError{SourceKind::kCri, "info JSON: not an object"};

  SandboxInfo info;
  info.pid = PidOf(root);
  info.runtime_type = root.GetString("runtimeType");
  const JsonValue* closed = root.Get("netNamespaceClosed");
  info.netns_closed = closed != nullptr && closed->AsBool(false);
  if (!info.netns_closed) {
    info.netns_path = NetnsFromRuntimeSpec(root);
    if (info.netns_path.empty()) info.netns_path = NetnsFromSandboxMetadata(root);
  }
  return info;
}

}  // namespace ad::cri
