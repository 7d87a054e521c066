// A node capture: everything the analysis consumed on one node at one moment, as plain data, so
// that the same engine can judge it again anywhere (report --from FILE). The capture is an input
// source peer of the live kernel sources (Engine::Replay, engine/engine.h), not a second code path.
//
// On disk: a gzip stream (RFC 1952) of one protobuf message ambientdoctor.v1.Capture
// (proto/ambientdoctor/v1/capture.proto). The manifest names the format and its version first,
// so a foreign or newer file is refused with a clear message before anything else is trusted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/history.h"
#include "model/result.h"
#include "model/snapshot.h"

namespace ad::capture {

inline constexpr std::string_view kFormatName = "ambient-doctor.capture";
// Bumped only for a change an older reader would misread; fields are otherwise only added
// (protobuf ignores the ones it does not know), and every older version stays readable.
inline constexpr uint32_t kFormatVersion = 1;
// A decoded capture larger than this is refused (a gzip bomb, or not ours): a 1,000-pod node's
// capture is a few tens of MiB.
inline constexpr size_t kMaxDecodedBytes = size_t{512} << 20;
// A capture file larger than this is not read at all.
inline constexpr size_t kMaxFileBytes = size_t{128} << 20;

struct Manifest {
  std::string format{kFormatName};
  uint32_t version = kFormatVersion;
  std::string agent_version;  // of the agent that wrote it
  std::string node_name;
  int64_t taken_at_unix_ms = 0;  // the snapshot's
  std::string origin;            // "daemon" (its last scan and history) or "local" (one scan)
  std::vector<std::string> agent_flags;  // the scan flags the snapshot was taken with
  bool ips_redacted = false;             // --redact-ips: pod and node IPs mapped consistently
  // What the file holds, one line each ("42 network namespaces", "Kubernetes objects: 40 pods",
  // "ztunnel config_dump (certificates without keys)"), written by Encode from the data.
  std::vector<std::string> contents;
};

// What a daemon's engine remembers across scans (analysis/history.h), so that a replay ages
// conditions as it did.
using EngineMemory = HistoryMemory;

struct Capture {
  Manifest manifest;
  NodeSnapshot snapshot;  // snapshot.kube: the Kubernetes objects, when the API source was on
  EngineMemory memory;    // empty for a local (one-scan) capture
};

// The file's bytes (gzip). Fills manifest.contents from the data.
Result<std::string> Encode(Capture capture);
// Errors say what is wrong in words a user can act on: "not an ambient-doctor capture",
// "truncated", "corrupted (gzip: ...)", "written by a newer ambient-doctor (format version 3;
// this one reads up to 1)", "larger than 512 MiB decoded"; SourceKind::kCapture. Never throws,
// never crashes on any input.
Result<Capture> Decode(std::string_view bytes);

// The same with another bound on the decoded size than kMaxDecodedBytes (tests build a bomb over
// a small bound instead of allocating 512 MiB).
Result<Capture> Decode(std::string_view bytes, size_t max_decoded_bytes);

// The manifest's `contents` lines Encode writes for `capture`: one per part the data holds
// ("250 network namespaces (rules per backend, routes, listeners)", "CRI: 40 sandboxes").
std::vector<std::string> DescribeContents(const Capture& capture);

}  // namespace ad::capture
