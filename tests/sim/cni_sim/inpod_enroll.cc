#include "cni_sim/inpod_enroll.h"

#include <sstream>

#include "lab/exec.h"
#include "lab/rules.h"

namespace ad::sim {
namespace {

constexpr SourceKind kSource = SourceKind::kLab;

using Status = Result<std::monostate>;
const Status kOk = std::monostate{};

SourceError EnrollError(std::string message) {
  return SourceError{kSource, std::move(message), EINVAL};
}

Status Run(const std::string& netns_path, std::vector<std::string> argv, std::string input = {}) {
  Result<lab::CommandOutput> result =
      lab::RunChecked({std::move(argv), std::move(input), netns_path});
  if (!result.ok()) return result.error();
  return kOk;
}

bool IsNft(const PodEnrollment& pod) { return pod.backend == "nft"; }
bool IsLegacy(const PodEnrollment& pod) { return pod.backend == "legacy"; }

AmbientVariant VariantOf(const PodEnrollment& pod) {
  return {.dns_capture = pod.dns_capture, .ipv6 = pod.ipv6};
}

constexpr char kPolicyRule[] = "rule add fwmark 0x111/0xfff pref 32764 lookup 100\n";

}  // namespace

bool operator==(const PodEnrollment& a, const PodEnrollment& b) {
  return a.backend == b.backend && a.dns_capture == b.dns_capture && a.ipv6 == b.ipv6 &&
         a.host_netns_path == b.host_netns_path && a.ipv4 == b.ipv4 &&
         a.ipv6_address == b.ipv6_address;
}

std::string EnrollmentFields(const PodEnrollment& enrollment) {
  std::string out = "backend=" + enrollment.backend +
                    " dns=" + (enrollment.dns_capture ? "1" : "0") +
                    " ipv6=" + (enrollment.ipv6 ? "1" : "0") +
                    " host=" + enrollment.host_netns_path + " ip=" + enrollment.ipv4;
  if (!enrollment.ipv6_address.empty()) out += " ip6=" + enrollment.ipv6_address;
  return out;
}

Result<PodEnrollment> ParseEnrollmentFields(const std::vector<std::string>& fields) {
  PodEnrollment enrollment;
  auto flag = [](const std::string& value, bool& out) {
    if (value != "0" && value != "1") return false;
    out = value == "1";
    return true;
  };
  for (const std::string& field : fields) {
    const size_t equals = field.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == field.size()) {
      return EnrollError("enrollment field '" + field + "' is not key=value");
    }
    const std::string key = field.substr(0, equals);
    const std::string value = field.substr(equals + 1);
    bool ok = true;
    if (key == "backend") {
      ok = value == "iptables-nft" || value == "legacy" || value == "nft";
      enrollment.backend = value;
    } else if (key == "dns") {
      ok = flag(value, enrollment.dns_capture);
    } else if (key == "ipv6") {
      ok = flag(value, enrollment.ipv6);
    } else if (key == "host") {
      enrollment.host_netns_path = value;
    } else if (key == "ip") {
      enrollment.ipv4 = value;
    } else if (key == "ip6") {
      enrollment.ipv6_address = value;
    } else {
      return EnrollError("unknown enrollment field '" + key +
                         "' (backend, dns, ipv6, host, ip, ip6)");
    }
    if (!ok) return EnrollError("bad value in enrollment field '" + field + "'");
  }
  if (enrollment.host_netns_path.empty() || enrollment.ipv4.empty()) {
    return EnrollError("enrollment info needs host=NETNS-PATH and ip=ADDRESS");
  }
  if (enrollment.ipv6 && enrollment.ipv6_address.empty()) {
    return EnrollError("enrollment with ipv6=1 needs ip6=ADDRESS");
  }
  return enrollment;
}

Status CreateInpodRules(const std::string& netns_path, const PodEnrollment& pod) {
  // Policy routes first: Istio's CreateInpodRules adds them next to the netfilter rules.
  if (Status status =
          Run(netns_path, {"ip", "-batch", "-"},
              std::string(kPolicyRule) + "route add local 0.0.0.0/0 dev lo table 100\n");
      !status.ok()) {
    return status;
  }
  if (pod.ipv6) {
    if (Status status = Run(netns_path, {"ip", "-6", "-batch", "-"},
                            std::string(kPolicyRule) + "route add local ::/0 dev lo table 100\n");
        !status.ok()) {
      return status;
    }
  }
  const lab::SnatConfig snat;
  const AmbientVariant variant = VariantOf(pod);
  if (IsNft(pod)) return Run(netns_path, {"nft", "-f", "-"}, lab::NftInpodScript(variant, snat));
  const bool legacy = IsLegacy(pod);
  std::vector<std::string> argv = {legacy ? "iptables-legacy-restore" : "iptables-nft-restore",
                                   "--noflush"};
  if (legacy) argv.emplace_back("--wait=30");
  if (Status status =
          Run(netns_path, argv, lab::IptablesInpodRestore(variant, Family::kIpv4, snat));
      !status.ok()) {
    return status;
  }
  if (!pod.ipv6) return kOk;
  argv[0] = legacy ? "ip6tables-legacy-restore" : "ip6tables-nft-restore";
  return Run(netns_path, argv, lab::IptablesInpodRestore(variant, Family::kIpv6, snat));
}

std::string IptablesIstioDeleteScript(std::string_view save_output) {
  std::string out;
  std::string table;
  std::vector<std::string> deletes;
  std::vector<std::string> chains;
  auto is_istio = [](std::string_view chain) { return chain.rfind("ISTIO_", 0) == 0; };
  std::istringstream lines{std::string(save_output)};
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '*') {
      table = line.substr(1);
      deletes.clear();
      chains.clear();
    } else if (line[0] == ':') {
      const std::string chain = line.substr(1, line.find(' ') - 1);
      if (is_istio(chain)) chains.push_back(chain);
    } else if (line.rfind("-A ", 0) == 0) {
      const std::string chain = line.substr(3, line.find(' ', 3) - 3);
      if (!is_istio(chain) && (line.find(" -j ISTIO_") != std::string::npos ||
                               line.find(" -g ISTIO_") != std::string::npos)) {
        deletes.push_back("-D " + line.substr(3));
      }
    } else if (line == "COMMIT" && (!deletes.empty() || !chains.empty())) {
      out += "*" + table + "\n";
      for (const std::string& d : deletes) out += d + "\n";
      for (const std::string& c : chains) out += "-F " + c + "\n";
      for (const std::string& c : chains) out += "-X " + c + "\n";
      out += "COMMIT\n";
    }
  }
  return out;
}

Status DeleteInpodRules(const std::string& netns_path, const PodEnrollment& pod) {
  std::string first_error;
  auto note = [&first_error](const Status& status) {
    if (!status.ok() && first_error.empty()) first_error = status.error().message;
  };
  if (IsNft(pod)) {
    Result<lab::CommandOutput> tables =
        lab::RunChecked({{"nft", "list", "tables"}, {}, netns_path});
    if (!tables.ok()) {
      note(tables.error());
    } else {
      std::string script;
      std::istringstream lines(tables->out);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("table ", 0) == 0 && line.find(" istio-ambient-") != std::string::npos) {
          script += "delete " + line + "\n";
        }
      }
      if (!script.empty()) note(Run(netns_path, {"nft", "-f", "-"}, script));
    }
  } else {
    const bool legacy = IsLegacy(pod);
    for (const bool v6 : {false, true}) {
      if (v6 && !pod.ipv6) continue;
      const std::string tool =
          std::string(v6 ? "ip6tables" : "iptables") + (legacy ? "-legacy" : "-nft");
      Result<lab::CommandOutput> saved = lab::RunChecked({{tool + "-save"}, {}, netns_path});
      if (!saved.ok()) {
        note(saved.error());
        continue;
      }
      const std::string script = IptablesIstioDeleteScript(saved->out);
      if (script.empty()) continue;
      std::vector<std::string> argv = {tool + "-restore", "--noflush"};
      if (legacy) argv.emplace_back("--wait=30");
      note(Run(netns_path, argv, script));
    }
  }
  // The policy routes; a missing one is not an error (already gone).
  for (const bool v6 : {false, true}) {
    if (v6 && !pod.ipv6) continue;
    std::vector<std::string> argv = {"ip"};
    if (v6) argv.emplace_back("-6");
    std::vector<std::string> rule = argv;
    rule.insert(rule.end(),
                {"rule", "del", "fwmark", "0x111/0xfff", "pref", "32764", "lookup", "100"});
    (void)lab::RunCommand({rule, {}, netns_path});
    argv.insert(argv.end(), {"route", "flush", "table", "100"});
    (void)lab::RunCommand({argv, {}, netns_path});
  }
  if (!first_error.empty()) return EnrollError("delete in-pod rules: " + first_error);
  return kOk;
}

Status AddToHostProbeSet(const std::string& pod_uid, const PodEnrollment& pod) {
  if (IsNft(pod)) {
    std::string script = std::string("add element inet istio-ambient-nat ") + lab::kProbeSetV4 +
                         " { " + pod.ipv4 + " comment \"" + pod_uid + "\" }\n";
    if (pod.ipv6) {
      script += std::string("add element inet istio-ambient-nat ") + lab::kProbeSetV6 + " { " +
                pod.ipv6_address + " comment \"" + pod_uid + "\" }\n";
    }
    return Run(pod.host_netns_path, {"nft", "-f", "-"}, script);
  }
  std::string script =
      std::string("add ") + lab::kProbeSetV4 + " " + pod.ipv4 + " comment \"" + pod_uid + "\"\n";
  if (pod.ipv6) {
    script += std::string("add ") + lab::kProbeSetV6 + " " + pod.ipv6_address + " comment \"" +
              pod_uid + "\"\n";
  }
  return Run(pod.host_netns_path, {"ipset", "-exist", "restore"}, script);
}

Status RemoveFromHostProbeSet(const PodEnrollment& pod) {
  if (IsNft(pod)) {
    std::string script = std::string("delete element inet istio-ambient-nat ") + lab::kProbeSetV4 +
                         " { " + pod.ipv4 + " }\n";
    if (pod.ipv6) {
      script += std::string("delete element inet istio-ambient-nat ") + lab::kProbeSetV6 + " { " +
                pod.ipv6_address + " }\n";
    }
    return Run(pod.host_netns_path, {"nft", "-f", "-"}, script);
  }
  std::string script = std::string("del ") + lab::kProbeSetV4 + " " + pod.ipv4 + "\n";
  if (pod.ipv6) script += std::string("del ") + lab::kProbeSetV6 + " " + pod.ipv6_address + "\n";
  return Run(pod.host_netns_path, {"ipset", "-exist", "restore"}, script);
}

}  // namespace ad::sim
