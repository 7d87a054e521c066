#include "model/source_error.h"

namespace ad {

std::string_view SourceKindName(SourceKind kind) {
  switch (kind) {
    case SourceKind::kNetns:
      return "netns";
    case SourceKind::kProc:
      return "proc";
    case SourceKind::kNftables:
      return "nft";
    case SourceKind::kLegacyIpv4:
      return "iptables-legacy/ipv4";
    case SourceKind::kLegacyIpv6:
      return "iptables-legacy/ipv6";
    case SourceKind::kIpset:
      return "ipset";
    case SourceKind::kRoute:
      return "route";
    case SourceKind::kSockDiag:
      return "sockdiag";
    case SourceKind::kZds:
      return "zds";
    case SourceKind::kHttp:
      return "http";
    case SourceKind::kZtunnel:
      return "ztunnel";
    case SourceKind::kZtunnelConfigDump:
      return "ztunnel/config_dump";
    case SourceKind::kZtunnelReadiness:
      return "ztunnel/readiness";
    case SourceKind::kZtunnelMetrics:
      return "ztunnel/metrics";
    case SourceKind::kCri:
      return "cri";
    case SourceKind::kIptablesText:
      return "iptables-text";
    case SourceKind::kNftText:
      return "nft-text";
    case SourceKind::kApi:
      return "api";
    case SourceKind::kTracing:
      return "tracing";
    case SourceKind::kConntrack:
      return "conntrack";
    case SourceKind::kCniConfig:
      return "cni-config";
    case SourceKind::kNftProbe:
      return "nft-probe";
    case SourceKind::kKubeApi:
      return "kube-api";
    case SourceKind::kCapture:
      return "capture";
    case SourceKind::kLab:
      return "lab";
  }
  return "unknown";
}

}  // namespace ad
