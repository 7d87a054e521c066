#include "sources/kube/kube_decode.h"

#include <algorithm>
#include <ctime>
#include <initializer_list>

#include "model/json_reader.h"

namespace ad::kube {
namespace {

// Bounds: one watch event is one object; a list page holds up to `limit` of them.
constexpr JsonLimits kEventLimits{16u << 20, 64};
constexpr JsonLimits kListLimits{512u << 20, 64};

// Every field of any kind we keep, filled from the paths below the object's root; converted to
// the model type of the watched kind at the end.
struct Fields {
  std::string kind;
  KubePod pod;  // metadata and pod fields (name, namespace, uid, resourceVersion, ...)
  std::vector<KubeTaint> taints;
  KubeStatus status;
  bool initial_events_end = false;
  std::string pod_ip;  // status.podIP, used when status.podIPs is absent
  bool has_pod_ips = false;
  std::string condition_type, condition_status;
};

using Path = std::vector<std::string>;

// True when `path` from `from` on is exactly `expected`.
bool At(const Path& path, size_t from, std::initializer_list<std::string_view> expected) {
  if (path.size() != from + expected.size()) return false;
  size_t i = from;
  for (std::string_view part : expected) {
    if (path[i++] != part) return false;
  }
  return true;
}

// SAX handler tracking the path of every value ("" for the root, member names, "[]" for array
// elements). The objects live at `object_root` (list: "", "items", "[]"; event: "", "object";
// a bare object: ""); everything else is the envelope.
class Decoder {
 public:
  explicit Decoder(Path object_root) : root_(std::move(object_root)) {}

  std::vector<Fields> objects;
  std::string envelope_rv, envelope_continue, event_type;

  bool Null() { return true; }
  bool Bool(bool b) {
    Leaf();
    if (InObject() && At(path_, root_.size(), {"spec", "hostNetwork"})) {
      current_.pod.host_network = b;
    }
    Pop();
    return true;
  }
  bool Int(int i) { return Number(i); }
  bool Uint(unsigned u) { return Number(static_cast<int64_t>(u)); }
  bool Int64(int64_t i) { return Number(i); }
  bool Uint64(uint64_t u) { return Number(static_cast<int64_t>(u)); }
  bool Double(double) { return true; }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return true; }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    Leaf();
    OnString(std::string_view(s, n));
    Pop();
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    key_.assign(s, n);
    return true;
  }
  bool StartObject() {
    Leaf();
    if (path_ == root_) current_ = Fields{};
    if (InObject() && At(path_, root_.size(), {"spec", "taints", "[]"})) {
      current_.taints.emplace_back();
    }
    if (InObject() && At(path_, root_.size(), {"status", "conditions", "[]"})) {
      current_.condition_type.clear();
      current_.condition_status.clear();
    }
    containers_.push_back(false);
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    containers_.pop_back();
    if (path_ == root_) objects.push_back(std::move(current_));
    if (InObject() && At(path_, root_.size(), {"status", "conditions", "[]"}) &&
        current_.condition_type == "Ready") {
      current_.pod.ready = current_.condition_status == "True";
    }
    Pop();
    return true;
  }
  bool StartArray() {
    Leaf();
    containers_.push_back(true);
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    containers_.pop_back();
    Pop();
    return true;
  }

 private:
  // Pushes the name of the value about to be read: the pending key, or "[]" in an array.
  bool Leaf() {
    path_.push_back(containers_.empty() ? "" : containers_.back() ? "[]" : key_);
    return true;
  }
  void Pop() { path_.pop_back(); }
  // Inside the current object (below its root).
  bool InObject() const {
    return path_.size() > root_.size() && std::equal(root_.begin(), root_.end(), path_.begin());
  }
  bool Number(int64_t value) {
    Leaf();
    if (InObject()) {
      const size_t at = root_.size();
      if (At(path_, at, {"code"})) current_.status.code = static_cast<int>(value);
      if (At(path_, at, {"details", "retryAfterSeconds"})) {
        current_.status.retry_after_seconds = static_cast<int>(value);
      }
    }
    Pop();
    return true;
  }
  void OnString(std::string_view value) {
    if (!InObject()) {
      OnEnvelope(value);
      return;
    }
    const size_t at = root_.size();
    Fields& f = current_;
    KubePod& pod = f.pod;
    if (path_.size() == at + 1) {
      const std::string& name = path_[at];
      if (name == "kind") f.kind = value;
      if (name == "reason") f.status.reason = value;
      if (name == "message") f.status.message = value;
    } else if (path_[at] == "metadata") {
      OnMetadata(value, at + 1);
    } else if (At(path_, at, {"spec", "nodeName"})) {
      pod.node_name = value;
    } else if (At(path_, at, {"status", "phase"})) {
      pod.phase = value;
    } else if (At(path_, at, {"status", "podIP"})) {
      f.pod_ip = value;
    } else if (At(path_, at, {"status", "podIPs", "[]", "ip"})) {
      f.has_pod_ips = true;
      pod.pod_ips.emplace_back(value);
    } else if (At(path_, at, {"status", "conditions", "[]", "type"})) {
      f.condition_type = value;
    } else if (At(path_, at, {"status", "conditions", "[]", "status"})) {
      f.condition_status = value;
    } else if (path_.size() == at + 4 && path_[at] == "spec" && path_[at + 1] == "taints" &&
               path_[at + 2] == "[]" && !f.taints.empty()) {
      KubeTaint& taint = f.taints.back();
      const std::string& name = path_.back();
      if (name == "key") taint.key = value;
      if (name == "value") taint.value = value;
      if (name == "effect") taint.effect = value;
    }
  }
  void OnMetadata(std::string_view value, size_t at) {
    KubePod& pod = current_.pod;
    if (path_.size() == at + 1) {
      const std::string& name = path_[at];
      if (name == "name") pod.name = value;
      if (name == "namespace") pod.namespace_name = value;
      if (name == "uid") pod.uid = value;
      if (name == "resourceVersion") pod.resource_version = value;
      if (name == "creationTimestamp") pod.creation_unix_s = ParseRfc3339(value).value_or(0);
      if (name == "deletionTimestamp") pod.deletion_unix_s = ParseRfc3339(value);
    } else if (path_.size() == at + 2 && path_[at] == "labels") {
      const std::string& label = path_[at + 1];
      if (label == kLabelDataplaneMode) pod.dataplane_mode = std::string(value);
      if (label == "app") pod.app_label = value;
      if (label == "k8s-app") pod.k8s_app_label = value;
    } else if (path_.size() == at + 2 && path_[at] == "annotations") {
      const std::string& annotation = path_[at + 1];
      if (annotation == kAnnotationRedirection) pod.redirection = std::string(value);
      if (annotation == kAnnotationSidecarStatus) pod.has_sidecar_status = true;
      if (annotation == "k8s.io/initial-events-end") current_.initial_events_end = value == "true";
    }
  }
  void OnEnvelope(std::string_view value) {
    if (At(path_, 0, {"", "metadata", "resourceVersion"})) envelope_rv = value;
    if (At(path_, 0, {"", "metadata", "continue"})) envelope_continue = value;
    if (At(path_, 0, {"", "type"})) event_type = value;
  }

  Path root_;
  Path path_;
  std::vector<bool> containers_;  // true: array
  std::string key_;
  Fields current_;
};

KubeObject ToObject(Fields&& fields, KubeKind kind) {
  KubeObject object;
  object.kind = kind;
  KubePod& pod = fields.pod;
  switch (kind) {
    case KubeKind::kPod:
      if (!fields.has_pod_ips && !fields.pod_ip.empty()) pod.pod_ips.push_back(fields.pod_ip);
      object.pod = std::move(pod);
      break;
    case KubeKind::kNamespace:
      object.ns = {std::move(pod.name), std::move(pod.resource_version),
                   std::move(pod.dataplane_mode)};
      break;
    case KubeKind::kNode:
      object.node = {std::move(pod.name), std::move(pod.resource_version),
                     std::move(fields.taints)};
      break;
  }
  return object;
}

std::optional<WatchEventType> EventType(std::string_view type) {
  if (type == "ADDED") return WatchEventType::kAdded;
  if (type == "MODIFIED") return WatchEventType::kModified;
  if (type == "DELETED") return WatchEventType::kDeleted;
  if (type == "BOOKMARK") return WatchEventType::kBookmark;
  if (type == "ERROR") return WatchEventType::kError;
  return std::nullopt;
}

}  // namespace

const std::string& KubeObject::resource_version() const {
  switch (kind) {
    case KubeKind::kNamespace:
      return ns.resource_version;
    case KubeKind::kNode:
      return node.resource_version;
    case KubeKind::kPod:
      break;
  }
  return pod.resource_version;
}

std::string KubeObject::key() const {
  switch (kind) {
    case KubeKind::kNamespace:
      return "/" + ns.name;
    case KubeKind::kNode:
      return "/" + node.name;
    case KubeKind::kPod:
      break;
  }
  return pod.namespace_name + "/" + pod.name;
}

std::optional<KubeList> DecodeList(std::string_view text, KubeKind kind, std::string* error) {
  Decoder decoder({"", "items", "[]"});
  const JsonStatus status = ReadJson(text, decoder, kListLimits);
  if (!status.ok()) {
    *error = status.error;
    return std::nullopt;
  }
  if (decoder.envelope_rv.empty()) {
    *error = "a list without metadata.resourceVersion";
    return std::nullopt;
  }
  KubeList list{std::move(decoder.envelope_rv), std::move(decoder.envelope_continue), {}};
  list.items.reserve(decoder.objects.size());
  for (Fields& fields : decoder.objects) list.items.push_back(ToObject(std::move(fields), kind));
  return list;
}

std::optional<WatchEvent> DecodeWatchEvent(std::string_view line, KubeKind kind,
                                           std::string* error) {
  Decoder decoder({"", "object"});
  const JsonStatus status = ReadJson(line, decoder, kEventLimits);
  if (!status.ok()) {
    *error = status.error;
    return std::nullopt;
  }
  const std::optional<WatchEventType> type = EventType(decoder.event_type);
  if (!type || decoder.objects.size() != 1) {
    *error = type ? "an event without one object"
                  : "an event of unknown type \"" + decoder.event_type.substr(0, 32) + "\"";
    return std::nullopt;
  }
  WatchEvent event;
  event.type = *type;
  event.initial_events_end = decoder.objects[0].initial_events_end;
  event.status = decoder.objects[0].status;
  event.object = ToObject(std::move(decoder.objects[0]), kind);
  return event;
}

std::optional<KubeStatus> DecodeStatus(std::string_view text, std::string* error) {
  Decoder decoder({""});
  const JsonStatus status = ReadJson(text, decoder, kEventLimits);
  if (!status.ok()) {
    *error = status.error;
    return std::nullopt;
  }
  if (decoder.objects.size() != 1 || decoder.objects[0].kind != "Status") {
    *error = "not a Status";
    return std::nullopt;
  }
  return decoder.objects[0].status;
}

std::optional<KubeObject> DecodeObject(std::string_view text, KubeKind kind, std::string* error) {
  Decoder decoder({""});
  const JsonStatus status = ReadJson(text, decoder, kEventLimits);
  if (!status.ok()) {
    *error = status.error;
    return std::nullopt;
  }
  if (decoder.objects.size() != 1 || decoder.objects[0].kind == "Status") {
    *error = "not an object";
    return std::nullopt;
  }
  return ToObject(std::move(decoder.objects[0]), kind);
}

std::optional<int64_t> ParseRfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  auto digits = [&](size_t at, size_t n) -> int {
    if (at + n > text.size()) return -1;
    int value = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  std::tm tm{};
  const int year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  const int hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 60) {
    return std::nullopt;
  }
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    do ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9');
  }
  int64_t offset = 0;
  if (at + 1 == text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    offset = 0;
  } else if (at + 6 == text.size() && (text[at] == '+' || text[at] == '-') && text[at + 3] == ':' &&
             digits(at + 1, 2) >= 0 && digits(at + 4, 2) >= 0) {
    offset = (digits(at + 1, 2) * 3600 + digits(at + 4, 2) * 60) * (text[at] == '-' ? -1 : 1);
  } else {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<int64_t>(::timegm(&tm)) - offset;
}

}  // namespace ad::kube
