// Istio's numbers, once: the ports, marks, masks, routing table, probe SNAT addresses and paths
// that istio-cni and ztunnel use on a node. Every layer that needs one of them includes this file
// instead of spelling the number. Sources: istio/istio cni/pkg/config/config.go and
// cni/pkg/nodeagent/options.go, ztunnel's src/config.rs (shared/facts/istio-redirect-rules.md §1,
// shared/facts/zds-and-ztunnel.md §2, §5 and §6). A new Istio release that changes one of them
// means editing this file only.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ad::istio {

// ztunnel's in-pod listeners (inside each enrolled pod's netns).
inline constexpr uint16_t kZtunnelOutboundPort = 15001;          // outbound capture (REDIRECT)
inline constexpr uint16_t kZtunnelInboundPlaintextPort = 15006;  // inbound plaintext capture
inline constexpr uint16_t kZtunnelInboundPort = 15008;  // HBONE; never redirected, dialled directly
inline constexpr uint16_t kDnsCapturePort = 15053;      // DNS proxy (UDP and TCP)
// The three TCP listeners every in-pod proxy opens; the DNS proxy only with DNS capture on.
inline constexpr std::array<uint16_t, 3> kZtunnelInpodTcpPorts = {
    kZtunnelOutboundPort, kZtunnelInboundPlaintextPort, kZtunnelInboundPort};
// Every port ztunnel listens on in a pod's netns (TCP 15001/15006/15008/15053, UDP 15053).
inline constexpr std::array<uint16_t, 4> kZtunnelInpodPorts = {
    kZtunnelOutboundPort, kZtunnelInboundPlaintextPort, kZtunnelInboundPort, kDnsCapturePort};
inline constexpr bool IsZtunnelInpodPort(uint16_t port) {
  for (uint16_t p : kZtunnelInpodPorts) {
    if (p == port) return true;
  }
  return false;
}

// ztunnel's own ports (in its netns, usually the host's).
inline constexpr uint16_t kZtunnelAdminPort = 15000;      // /config_dump, localhost only
inline constexpr uint16_t kZtunnelStatsPort = 15020;      // /metrics
inline constexpr uint16_t kZtunnelReadinessPort = 15021;  // /healthz/ready

// Marks and masks (cni/pkg/config/config.go).
inline constexpr uint32_t kInpodMark = 0x539;  // SO_MARK of ztunnel's in-pod sockets (1337)
inline constexpr uint32_t kInpodMask = 0xfff;
inline constexpr uint32_t kInpodTproxyMark = 0x111;  // connmark of the return path
inline constexpr uint32_t kInpodTproxyMask = 0xfff;
inline constexpr uint32_t kInpodRestoreMask = 0xffffffff;
// In-pod policy routing: `ip rule add fwmark 0x111/0xfff pref 32764 lookup 100`.
inline constexpr uint32_t kRouteTableInbound = 100;
inline constexpr uint32_t kPolicyRulePriority = 32764;

// Kubelet probe SNAT on the host (HOST_PROBE_SNAT_IP / HOST_PROBE_SNAT_IPV6 defaults) and the host
// ipsets that hold the enrolled pods' IPs.
inline constexpr std::string_view kProbeSnatV4 = "169.254.7.127";
inline constexpr std::string_view kProbeSnatV6 = "fd16:9254:7127:1337:ffff:ffff:ffff:ffff";
// Istio's own unit tests (and so its in-pod *_ipv6.golden files) use this IPv6 SNAT address.
inline constexpr std::string_view kProbeSnatV6IstioTests =
    "e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164";
inline constexpr std::string_view kProbeSetV4 = "istio-inpod-probes-v4";
inline constexpr std::string_view kProbeSetV6 = "istio-inpod-probes-v6";

// The ZDS socket istio-cni listens on and ztunnel connects to (hostPath /var/run/ztunnel).
inline constexpr std::string_view kZdsSocketPath = "/var/run/ztunnel/ztunnel.sock";

}  // namespace ad::istio
