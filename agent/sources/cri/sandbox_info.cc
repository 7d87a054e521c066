#include "sources/cri/sandbox_info.h"

#include <cmath>
#include <limits>

#include "model/json_reader.h"

namespace ad::cri {
namespace {

const rapidjson::Value* Path(const rapidjson::Value& root,
                             std::initializer_list<std::string_view> keys) {
  const rapidjson::Value* node = &root;
  for (std::string_view key : keys) {
    node = JsonMember(*node, key);
    if (node == nullptr) return nullptr;
  }
  return node;
}

std::string NetnsFromRuntimeSpec(const rapidjson::Value& root) {
  const rapidjson::Value* namespaces = Path(root, {"runtimeSpec", "linux", "namespaces"});
  if (namespaces == nullptr || !namespaces->IsArray()) return {};
  for (const rapidjson::Value& entry : namespaces->GetArray()) {
    if (JsonStringMember(entry, "type") == "network") {
      return std::string(JsonStringMember(entry, "path"));
    }
  }
  return {};
}

std::string NetnsFromSandboxMetadata(const rapidjson::Value& root) {
  const rapidjson::Value* metadata = Path(root, {"sandboxMetadata", "Metadata"});
  return metadata == nullptr ? std::string()
                             : std::string(JsonStringMember(*metadata, "NetNSPath"));
}

int PidOf(const rapidjson::Value& root) {
  const rapidjson::Value* pid = JsonMember(root, "pid");
  if (pid == nullptr || !pid->IsNumber()) return 0;
  const double value = pid->GetDouble();
  // Only whole, positive, int-sized numbers are pids; anything else means "unknown".
  if (!(value > 0) || value > std::numeric_limits<int>::max() || std::floor(value) != value) {
    return 0;
  }
  return static_cast<int>(value);
}

}  // namespace

Result<SandboxInfo> ParseSandboxInfo(std::string_view info_json) {
  rapidjson::Document root;
  const JsonStatus parsed =
      ParseJsonDocument(info_json, root, JsonLimits{.max_bytes = kMaxSandboxInfoBytes});
  if (!parsed.ok()) return SourceError{SourceKind::kCri, "info JSON: " + parsed.error};
  if (!root.IsObject()) return SourceError{SourceKind::kCri, "info JSON: not an object"};

  SandboxInfo info;
  info.pid = PidOf(root);
  info.runtime_type = JsonStringMember(root, "runtimeType");
  const rapidjson::Value* closed = JsonMember(root, "netNamespaceClosed");
  info.netns_closed = closed != nullptr && closed->IsBool() && closed->GetBool();
  if (!info.netns_closed) {
    info.netns_path = NetnsFromRuntimeSpec(root);
    if (info.netns_path.empty()) info.netns_path = NetnsFromSandboxMetadata(root);
  }
  return info;
}

}  // namespace ad::cri
