// In-pod prerequisites of ztunnel's proxy: DNS_CAPTURE_BROKEN and INPOD_PROXY_BLOCKED.
// ztunnel's DNS proxy listens on TCP+UDP 15053 on localhost: 127.0.0.1, and ::1 when IPv6 is
// usable in the pod netns (zds-and-ztunnel §7.1). The port-53 REDIRECTs of Istio's DNS capture
// (istio-redirect-rules N8/N9) send a pod's DNS there; a missing listener or a half rule set
// breaks name resolution. A lo that is down or lacks ::1 makes the bind fail with EADDRNOTAVAIL,
// so ztunnel never starts the pod's proxy (istio#52858, ztunnel#1272, ztunnel#1611).
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/checks.h"
#include "analysis/istio_ruleset.h"

namespace ad::analysis {
namespace {

constexpr uint8_t kTcpProtocol = 6;
constexpr uint8_t kUdpProtocol = 17;

struct DnsPath {
  Family family = Family::kIpv4;  // kIpv4 / kIpv6
  uint8_t protocol = kUdpProtocol;
  auto operator<=>(const DnsPath&) const = default;
};

std::string DnsPathText(const DnsPath& path) {
  return std::string(path.protocol == kUdpProtocol ? "udp" : "tcp") + "/" +
         (path.family == Family::kIpv6 ? "ipv6" : "ipv4");
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string text;
  for (const std::string& part : parts) {
    if (!text.empty()) text += separator;
    text += part;
  }
  return text;
}

// The port-53 -> 15053 REDIRECTs of the netns's ambient nat tables, by family and protocol. An
// nft inet rule without an address match acts on both families.
std::set<DnsPath> DnsRedirects(const NetnsSnapshot& netns,
                               const NetnsClassification& classification) {
  std::set<DnsPath> paths;
  for (const Table& table : netns.netfilter.tables) {
    if (!classification.ambient_backends.contains(table.backend)) continue;
    const bool nft = table.backend == Backend::kNft;
    if (nft ? table.name != "istio-ambient-nat" : table.name != "nat") continue;
    for (const Chain& chain : table.chains) {
      if (!nft && !istio::IsIstioChainName(chain.name)) continue;
      for (const Rule& rule : chain.rules) {
        const Action& action = rule.sem.action;
        if (action.kind != ActionKind::kRedirect || action.value != istio::kDnsCapturePort) {
          continue;
        }
        uint8_t protocol = 0;
        std::set<Family> families;
        for (const Match& match : rule.sem.matches) {
          if (match.kind == MatchKind::kProtocol && !match.negated) {
            protocol = static_cast<uint8_t>(match.value);
          }
          if (match.kind == MatchKind::kDstAddr || match.kind == MatchKind::kSrcAddr) {
            families.insert(match.text.find(':') != std::string::npos ? Family::kIpv6
                                                                      : Family::kIpv4);
          }
        }
        if (protocol != kTcpProtocol && protocol != kUdpProtocol) continue;
        if (table.family == Family::kIpv4 || table.family == Family::kIpv6) {
          families = {table.family};
        } else if (families.empty()) {
          families = {Family::kIpv4, Family::kIpv6};
        }
        for (Family family : families) paths.insert({family, protocol});
      }
    }
  }
  return paths;
}

// A socket on 15053 that receives what REDIRECT sends to the loopback address of `family`.
bool Accepts(const ListeningSocket& socket, const DnsPath& path) {
  if (socket.port != istio::kDnsCapturePort || socket.protocol != path.protocol) return false;
  if (path.family == Family::kIpv4) {
    if (socket.family == Family::kIpv4) {
      return socket.address == "127.0.0.1" || socket.address == "0.0.0.0";
    }
    return socket.address == "::";  // dual stack (v6only is not visible to sock_diag)
  }
  return socket.family == Family::kIpv6 && (socket.address == "::1" || socket.address == "::");
}

std::string LoopbackAddress(Family family) {
  return family == Family::kIpv6 ? "[::1]" : "127.0.0.1";
}

bool LoopbackHas(const RoutingState& routing, std::string_view address) {
  return std::any_of(
      routing.addresses.begin(), routing.addresses.end(),
      [address](const InterfaceAddress& a) { return a.ifname == "lo" && a.address == address; });
}

}  // namespace

std::vector<Finding> CheckInpodPrerequisites(const InpodContext& context) {
  std::vector<Finding> findings;
  const NetnsSnapshot& netns = *context.netns;
  const NetnsClassification& classification = *context.classification;
  if (netns.unreadable || classification.mode != DataplaneMode::kAmbient) return findings;
  auto make = [&](FindingCode code, std::string subject, std::string summary,
                  std::vector<std::string> evidence, std::string hint = {}) {
    Finding finding = MakeFinding(code, &netns, std::move(subject), std::move(summary),
                                  std::move(evidence), std::move(hint));
    finding.pod = context.pod_label;
    return finding;
  };

  // INPOD_PROXY_BLOCKED: the proxy is pending or absent, and the netns lacks what ztunnel binds.
  const bool listeners_known = netns.reads.listeners == ReadStatus::kOk;
  const bool proxy_absent = listeners_known && context.served_ports.empty();
  const RoutingState& routing = netns.routing;
  // Judged only from a routing read that reported lo (hand-built snapshots may not say).
  if ((context.handoff_pending || proxy_absent) && netns.reads.routes == ReadStatus::kOk &&
      routing.loopback.known) {
    std::vector<std::string> missing;   // short: the subject
    std::vector<std::string> evidence;  // as a user would quote it
    if (routing.loopback.known && !routing.loopback.found) {
      missing.push_back("no lo");
      evidence.push_back("the netns has no lo link: ztunnel cannot bind 127.0.0.1:15053");
    } else if (routing.loopback.found && !routing.loopback.up) {
      missing.push_back("lo down");
      char flags[16];
      std::snprintf(flags, sizeof(flags), "0x%x", routing.loopback.flags);
      evidence.push_back(std::string("lo is down (link flags ") + flags +
                         ", no IFF_UP): ztunnel cannot bind 127.0.0.1:15053 or [::1]:15053 "
                         "(EADDRNOTAVAIL)");
    }
    if (routing.loopback.found && routing.loopback.up && !LoopbackHas(routing, "127.0.0.1")) {
      missing.push_back("no 127.0.0.1 on lo");
      evidence.push_back("lo has no 127.0.0.1: ztunnel cannot bind 127.0.0.1:15053");
    }
    if (!routing.ipv6_disabled && !LoopbackHas(routing, "::1") &&
        !(routing.loopback.found && !routing.loopback.up)) {
      missing.push_back("no ::1 on lo");
      evidence.push_back(
          "lo has no ::1 while IPv6 is enabled in the netns (disable_ipv6 = 0 on lo): ztunnel "
          "binds its DNS proxy on [::1]:15053 too, which fails with EADDRNOTAVAIL (\"failed to "
          "bind to address [::1]:15053: Cannot assign requested address\"; istio#52858, "
          "ztunnel#1272)");
    }
    if (!missing.empty()) {
      evidence.insert(evidence.end(), context.symptoms.begin(), context.symptoms.end());
      findings.push_back(make(
          FindingCode::kInpodProxyBlocked, Join(missing, ", "),
          "ztunnel cannot start the pod's in-pod proxy: " + Join(missing, ", "),
          std::move(evidence),
          missing.front() == "no ::1 on lo"
              ? "Something removed ::1 from the pod's lo (an init container, a CNI plugin, a "
                "sysctl profile). Re-add it (`ip -6 addr add ::1/128 dev lo` in the pod netns) or "
                "disable IPv6 in the pod netns consistently (net.ipv6.conf.all.disable_ipv6=1, "
                "ztunnel#1611); ztunnel retries every 5 s and starts the proxy by itself."
              : std::string()));
    }
  }

  // DNS_CAPTURE_BROKEN: rules half present, or ztunnel serves the netns without its DNS listener.
  if (!classification.variant) return findings;
  const std::set<DnsPath> redirects = DnsRedirects(netns, classification);
  if (!classification.variant->dns_capture && redirects.empty()) return findings;
  std::vector<Family> families = {Family::kIpv4};
  if (classification.variant->ipv6) families.push_back(Family::kIpv6);
  if (netns.reads.NetfilterComplete()) {
    std::vector<std::string> present;
    std::vector<std::string> absent;
    for (Family family : families) {
      for (uint8_t protocol : {kUdpProtocol, kTcpProtocol}) {
        const DnsPath path{family, protocol};
        (redirects.contains(path) ? present : absent).push_back(DnsPathText(path));
      }
    }
    if (!absent.empty()) {
      std::vector<std::string> evidence = {
          "DNS capture rules (nat port 53 -> REDIRECT 15053, variant " +
              classification.variant->Describe() + "): present for " +
              (present.empty() ? std::string("none") : Join(present, ", ")) + "; missing for " +
              Join(absent, ", "),
          "a pod DNS query over a path without its rule bypasses ztunnel's DNS proxy, one with "
          "the rule but no listener fails"};
      findings.push_back(make(FindingCode::kDnsCaptureBroken, "rules",
                              "DNS capture rules half present: missing " + Join(absent, ", "),
                              std::move(evidence)));
    }
  }
  // Listeners: only where ztunnel serves the netns on all of 15001/15006/15008 (otherwise
  // ZTUNNEL_LISTENERS_MISSING or a pending hand-off already says it) and both reads worked.
  if (context.handoff_pending || !listeners_known || netns.reads.dns_udp != ReadStatus::kOk ||
      context.served_ports.size() < 3) {
    return findings;
  }
  std::vector<std::string> missing;
  std::vector<std::string> present;
  for (const DnsPath& path : redirects) {
    if (path.family == Family::kIpv6 && (routing.ipv6_disabled || !classification.variant->ipv6)) {
      continue;  // no IPv6 DNS leaves the pod
    }
    const std::string name = std::string(path.protocol == kUdpProtocol ? "UDP " : "TCP ") +
                             LoopbackAddress(path.family) + ":15053";
    const bool found = std::any_of(
        netns.listeners.begin(), netns.listeners.end(), [&](const ListeningSocket& socket) {
          return Accepts(socket, path) && context.is_ztunnel_socket(socket);
        });
    (found ? present : missing).push_back(name);
  }
  if (missing.empty()) return findings;
  std::vector<std::string> evidence = {
      "DNS capture rules redirect port 53 to 15053 (" +
          [&] {
            std::vector<std::string> parts;
            for (const DnsPath& path : redirects) parts.push_back(DnsPathText(path));
            return Join(parts, ", ");
          }() +
          ")",
      "ztunnel's in-pod listeners 15001/15006/15008 are present, but no ztunnel socket listens "
      "on " +
          Join(missing, ", "),
      "ztunnel DNS listeners present: " +
          (present.empty() ? std::string("none") : Join(present, ", "))};
  evidence.insert(evidence.end(), context.symptoms.begin(), context.symptoms.end());
  findings.push_back(make(
      FindingCode::kDnsCaptureBroken, "listeners",
      "DNS is redirected to ztunnel but its DNS proxy does not listen on " + Join(missing, ", "),
      std::move(evidence)));
  return findings;
}

}  // namespace ad::analysis
