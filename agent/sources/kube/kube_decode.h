// Decoding of the Kubernetes API's JSON (core/v1 lists, watch events and Status bodies) into
// model/kube.h, streamed through RapidJSON's SAX reader: no document tree is built, and of each
// object only the fields the enrollment checks read are kept. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/kube.h"

namespace ad::kube {

enum class KubeKind { kPod, kNamespace, kNode };

// One decoded object of the watched kind (only the member of `kind` is filled).
struct KubeObject {
  KubeKind kind = KubeKind::kPod;
  KubePod pod;
  KubeNamespace ns;
  KubeNode node;
  const std::string& resource_version() const;
  std::string key() const;  // "namespace/name" (namespace "" for cluster-scoped objects)
};

// A metav1.Status (error bodies and the object of an ERROR event).
struct KubeStatus {
  int code = 0;
  std::string reason;  // "Expired", "Gone", "Forbidden", "TooManyRequests", ...
  std::string message;
  int retry_after_seconds = -1;  // details.retryAfterSeconds, -1 when absent
};

struct KubeList {
  std::string resource_version;  // metadata.resourceVersion
  std::string continue_token;    // metadata.continue ("" on the last page)
  std::vector<KubeObject> items;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  KubeObject object;                // ADDED, MODIFIED, DELETED, BOOKMARK (resource version only)
  KubeStatus status;                // ERROR
  bool initial_events_end = false;  // BOOKMARK annotated k8s.io/initial-events-end=true
};

// Each returns the value, or nullopt with `error` set ("offset 12: invalid value", "no type").
std::optional<KubeList> DecodeList(std::string_view text, KubeKind kind, std::string* error);
// One line of a watch stream (without or with its trailing newline).
std::optional<WatchEvent> DecodeWatchEvent(std::string_view line, KubeKind kind,
                                           std::string* error);
std::optional<KubeStatus> DecodeStatus(std::string_view text, std::string* error);
// One object (the answer to a GET of it).
std::optional<KubeObject> DecodeObject(std::string_view text, KubeKind kind, std::string* error);

// An RFC 3339 time ("2026-12-03T20:21:04Z", fractions and offsets allowed) as seconds since the
// epoch; nullopt when malformed.
std::optional<int64_t> ParseRfc3339(std::string_view text);

}  // namespace ad::kube
