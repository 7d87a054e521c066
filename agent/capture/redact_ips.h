// --redact-ips: pod and node addresses replaced in a capture by stand-ins, the same stand-in for
// the same address wherever it occurs (interface addresses, routes, rules, sets, listeners, CRI,
// the Kubernetes objects, free text such as errors and evidence), so that pairing pods with their
// netns by IP, and every check, still judge the capture as they judged the node.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "ambientdoctor/v1/capture.pb.h"

namespace ad::capture {

// Kept as they are: unspecified, loopback, link-local, multicast and broadcast addresses, Istio's
// fixed addresses (the probe SNAT addresses), network prefixes shorter than a host (10.0.0.0/8),
// and the addresses in `keep` (those the scan flags name). IPv4 stand-ins are taken in order from
// 198.18.0.0/15 (RFC 2544, never a pod's), IPv6 ones from 2001:db8::/32 (RFC 3849). Returns how
// many distinct addresses were replaced.
size_t RedactIps(::ambientdoctor::v1::Capture& capture, const std::set<std::string>& keep);

// One text with the mapping of `state` applied (and extended); exposed for tests.
class IpRedactor {
 public:
  explicit IpRedactor(std::set<std::string> keep);
  std::string Redact(const std::string& text);
  size_t replaced() const { return v4_.size() + v6_.size(); }

 private:
  bool Keep(const std::string& canonical, bool v6) const;
  std::string StandIn(const std::string& canonical, bool v6);

  std::set<std::string> keep_;
  std::map<std::string, std::string> v4_;
  std::map<std::string, std::string> v6_;
};

}  // namespace ad::capture
