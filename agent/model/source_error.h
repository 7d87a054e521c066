// A source that could not be read, as data (never an exception through the scan). The kind is
// typed so that analysis and the engine decide by kind, never by matching message text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ad {

// One per adapter (and, for ztunnel's admin, per endpoint). Names are stable: they appear in the
// JSON report, logs and metric labels.
enum class SourceKind : uint8_t {
  kNetns,              // "netns": discovery and entering a netns
  kProc,               // "proc": /proc/<pid>/fd inventory
  kNftables,           // "nft": nf_tables dump (native nft and iptables-nft)
  kLegacyIpv4,         // "iptables-legacy/ipv4": IPT_SO_GET_* and ip_tables_names
  kLegacyIpv6,         // "iptables-legacy/ipv6"
  kIpset,              // "ipset"
  kRoute,              // "route": ip rules, routes, addresses (rtnetlink)
  kSockDiag,           // "sockdiag": TCP listeners, the ZDS unix socket
  kZds,                // "zds": the ZDS socket path and hand-off sources
  kHttp,               // "http": the bounded HTTP client
  kZtunnel,            // "ztunnel": finding or reaching ztunnel's admin
  kZtunnelConfigDump,  // "ztunnel/config_dump"
  kZtunnelReadiness,   // "ztunnel/readiness"
  kZtunnelMetrics,     // "ztunnel/metrics"
  kCri,                // "cri": the container runtime
  kIptablesText,       // "iptables-text": offline iptables-save parser
  kNftText,            // "nft-text": offline nft text parser
  kApi,                // "api": the gRPC API server (its socket)
  kTracing,            // "tracing": the eBPF flow tracer (probe, load, ring buffer)
  kConntrack,          // "conntrack": ctnetlink dump of the host netns (kubelet probe path)
  kCniConfig,          // "cni-config": the CNI config directory (/etc/cni/net.d) and its files
  kNftProbe,           // "nft-probe": the host's nft userspace (version, JSON support, probe)
  kKubeApi,            // "kube-api": the Kubernetes API source (list + watch)
  kCapture,            // "capture": a capture file (reading or writing it)
  kLab,                // "lab": test and bench tooling (tests/sim, bench), never the agent
};
std::string_view SourceKindName(SourceKind kind);
inline constexpr int kSourceKindCount = static_cast<int>(SourceKind::kLab) + 1;

struct SourceError {
  SourceKind kind = SourceKind::kNetns;
  std::string message;  // names the syscall, the target and the errno text
  int error_number = 0;

  std::string_view source() const { return SourceKindName(kind); }

  bool operator==(const SourceError&) const = default;
};

}  // namespace ad
