// Encode/Decode of a capture file: model -> ambientdoctor.v1.Capture -> gzip, and back, with the
// checks that turn any foreign, damaged or newer file into a clear error (capture.h).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/capture.h"
#include "capture/capture_proto.h"
#include "capture/gzip.h"
#include "capture/redact_ips.h"

namespace ad::capture {
namespace {

using google::protobuf::io::CodedInputStream;

constexpr std::string_view kNotCapture = "not an ambient-doctor capture";

SourceError CaptureError(std::string message) {
  return SourceError{SourceKind::kCapture, std::move(message)};
}

std::string Count(size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// Skips one field of the given wire type; false on a malformed or group field.
bool SkipField(CodedInputStream& in, uint32_t wire_type) {
  uint64_t varint = 0;
  uint32_t length = 0;
  switch (wire_type) {
    case 0:
      return in.ReadVarint64(&varint);
    case 1:
      return in.Skip(8);
    case 2:
      return in.ReadVarint32(&length) && length <= INT_MAX && in.Skip(static_cast<int>(length));
    case 5:
      return in.Skip(4);
    default:
      return false;  // groups are not ours; 6 and 7 are no wire type at all
  }
}

// The manifest (field 1 of Capture) without parsing the rest: Encode writes it first, so a
// foreign file is refused after a few bytes. nullopt when the payload is no such message.
std::optional<pb::CaptureManifest> ReadManifest(std::string_view payload) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(payload.data()),
                      static_cast<int>(payload.size()));
  while (uint32_t tag = in.ReadTag()) {
    const uint32_t field = tag >> 3;
    const uint32_t wire_type = tag & 7;
    if (field == 1 && wire_type == 2) {
      uint32_t length = 0;
      const void* data = nullptr;
      int available = 0;
      if (!in.ReadVarint32(&length) || !in.GetDirectBufferPointer(&data, &available) ||
          length > static_cast<uint32_t>(available)) {
        return std::nullopt;
      }
      pb::CaptureManifest manifest;
      if (!manifest.ParseFromArray(data, static_cast<int>(length))) return std::nullopt;
      return manifest;
    }
    if (!SkipField(in, wire_type)) return std::nullopt;
  }
  return std::nullopt;
}

// Whether this reader may trust the rest of a file with this manifest.
std::optional<SourceError> CheckManifest(const pb::CaptureManifest& manifest) {
  if (manifest.format() != kFormatName) return CaptureError(std::string(kNotCapture));
  if (manifest.version() > kFormatVersion) {
    return CaptureError("written by a newer ambient-doctor (format version " +
                        std::to_string(manifest.version()) + "; this one reads up to " +
                        std::to_string(kFormatVersion) + ")");
  }
  if (manifest.version() == 0) return CaptureError("corrupted (no format version)");
  return std::nullopt;
}

}  // namespace

Result<Capture> DecodePayload(std::string_view payload) {
  if (payload.size() > static_cast<size_t>(INT_MAX)) {
    return CaptureError("larger than " + SizeText(size_t{INT_MAX}) + " decoded");
  }
  std::optional<pb::CaptureManifest> manifest = ReadManifest(payload);
  if (!manifest) return CaptureError(std::string(kNotCapture) + " (no capture manifest)");
  if (auto refused = CheckManifest(*manifest)) return *refused;
  pb::Capture message;
  if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return CaptureError("corrupted (not a capture message)");
  }
  // A second manifest field later in the payload would merge into the first: judge the result.
  if (auto refused = CheckManifest(message.manifest())) return *refused;
  return GetCapture(message);
}

std::vector<std::string> DescribeContents(const Capture& capture) {
  const NodeSnapshot& snapshot = capture.snapshot;
  std::vector<std::string> lines;
  if (!snapshot.netns.empty()) {
    lines.push_back(Count(snapshot.netns.size(), "network namespace", "network namespaces") +
                    " (rules per backend, routes, listeners)");
  }
  if (!snapshot.errors.empty()) {
    lines.push_back(
        Count(snapshot.errors.size(), "node-wide source error", "node-wide source errors"));
  }
  if (snapshot.zds_collected) lines.push_back("ZDS socket observation");
  if (!snapshot.processes.empty()) {
    lines.push_back("fd inventory: " + Count(snapshot.processes.size(), "process", "processes"));
  }
  if (!snapshot.ztunnels.empty()) {
    lines.push_back("ztunnel admin: " + std::to_string(snapshot.ztunnels.size()) +
                    " (readiness, config_dump; certificate states without keys)");
  }
  if (!snapshot.ztunnel_resources.empty()) {
    lines.push_back("ztunnel resource usage: " + std::to_string(snapshot.ztunnel_resources.size()));
  }
  const CriState& cri = snapshot.cri;
  if (cri.available || !cri.pods.empty() || !cri.errors.empty()) {
    lines.push_back("CRI: " + Count(cri.pods.size(), "sandbox", "sandboxes"));
  }
  if (snapshot.probe_conntrack.collected) {
    lines.push_back("kubelet probe conntrack: " + Count(snapshot.probe_conntrack.entries.size(),
                                                        "unreplied entry", "unreplied entries"));
  }
  if (snapshot.cni.collected) {
    lines.push_back("CNI config: " + Count(snapshot.cni.files.size(), "file", "files") +
                    (snapshot.cni.dir.empty() ? "" : " in " + snapshot.cni.dir));
  }
  if (snapshot.nft_userspace.collected) {
    const std::string& version = snapshot.nft_userspace.version;
    lines.push_back("nftables userspace: " +
                    (version.empty() ? "version unknown" : "nft " + version));
  }
  if (snapshot.kube) {
    lines.push_back("Kubernetes objects: " + Count(snapshot.kube->pods.size(), "pod", "pods") +
                    ", " + Count(snapshot.kube->namespaces.size(), "namespace", "namespaces") +
                    (snapshot.kube->node ? ", node" : ""));
  }
  const EngineMemory& memory = capture.memory;
  const size_t remembered = memory.signal_first_seen.size() + memory.desired_first_seen.size() +
                            memory.finding_first_seen.size();
  if (remembered > 0) {
    lines.push_back("engine memory: " + Count(remembered, "aged condition", "aged conditions"));
  }
  return lines;
}

Result<std::string> Encode(Capture capture) {
  Manifest& manifest = capture.manifest;
  manifest.format = std::string(kFormatName);
  manifest.version = kFormatVersion;
  if (manifest.node_name.empty()) manifest.node_name = capture.snapshot.node_name;
  if (manifest.taken_at_unix_ms == 0) manifest.taken_at_unix_ms = capture.snapshot.taken_at_unix_ms;
  manifest.contents = DescribeContents(capture);
  pb::Capture message;
  PutCapture(capture, &message);
  if (manifest.ips_redacted) RedactIps(message, {});
  if (message.ByteSizeLong() > std::min(kMaxDecodedBytes, static_cast<size_t>(INT_MAX))) {
    return CaptureError("too large to write (over " + SizeText(kMaxDecodedBytes) + " decoded)");
  }
  std::string payload;
  {
    // Deterministic: the same capture gives the same bytes.
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) {
      return CaptureError("cannot serialise the capture message");
    }
  }
  return Gzip(payload);
}

Result<Capture> Decode(std::string_view bytes) { return Decode(bytes, kMaxDecodedBytes); }

Result<Capture> Decode(std::string_view bytes, size_t max_decoded_bytes) {
  if (bytes.empty()) return CaptureError(std::string(kNotCapture) + " (empty)");
  if (bytes.size() < 2 || bytes[0] != '\x1f' || bytes[1] != '\x8b') {
    return CaptureError(std::string(kNotCapture) + " (not gzip)");
  }
  Result<std::string> payload =
      Gunzip(bytes, std::min(max_decoded_bytes, static_cast<size_t>(INT_MAX)));
  if (!payload) return payload.error();
  return DecodePayload(*payload);
}

}  // namespace ad::capture
