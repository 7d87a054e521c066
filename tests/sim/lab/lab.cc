#include "lab/lab.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cni_sim/cni_server.h"
#include "lab/emulators.h"
#include "lab/exec.h"
#include "lab/kube_objects.h"

namespace ad::lab {
namespace {

namespace fs = std::filesystem;

constexpr SourceKind kSource = SourceKind::kLab;
constexpr char kNetnsDir[] = "/run/netns";
constexpr char kManifestDir[] = "/run/ambient-lab";
constexpr int kMaxPods = 60000;  // pod addresses come from one /16

// Pods reach the host through one gateway address on the lab host's lo (the kernel has no dummy
// driver everywhere); ARP for it is answered on every veth, proxy ARP covers pod-to-pod traffic.
constexpr char kGatewayV4[] = "10.244.0.1";
constexpr char kGatewayV6[] = "fd00:ad::1";
constexpr char kLinkLocalGatewayV6[] = "fe80::1";
const std::vector<std::string> kLabVirtualInterfaces = {"vif0", "vif1"};

using Status = Result<std::monostate>;
const Status kOk = std::monostate{};

SourceError LabError(std::string message) { return SourceError{kSource, std::move(message), 0}; }

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool ValidPrefix(std::string_view prefix) {
  if (prefix.empty() || prefix.size() > 24 || prefix.front() == '-') return false;
  return std::all_of(prefix.begin(), prefix.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string PodNetnsName(const std::string& prefix, int index, int width) {
  std::string digits = std::to_string(index);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
  return prefix + "-pod-" + digits;
}

std::string PodIpv4(int index) {
  const int host = index + 2;  // .0.0 is the network, .0.1 the gateway
  return "10.244." + std::to_string(host >> 8) + "." + std::to_string(host & 0xff);
}

std::string PodIpv6(int index) {
  std::array<char, 16> hex{};
  std::snprintf(hex.data(), hex.size(), "%x", index + 2);
  return std::string("fd00:ad::") + hex.data();
}

std::string FakePodUid(const std::string& prefix, int index) {
  uint32_t hash = 2166136261u;  // FNV-1a keeps UIDs stable per prefix and distinct across labs
  for (char c : prefix) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  std::array<char, 40> uid{};
  std::snprintf(uid.data(), uid.size(), "%08x-1ab0-4000-8000-%012x", hash,
                static_cast<unsigned>(index));
  return uid.data();
}

std::string VariantText(const AmbientVariant& variant) {
  std::string text;
  auto add = [&text](std::string_view part) {
    text += (text.empty() ? "" : ",") + std::string(part);
  };
  if (variant.dns_capture) add("dns");
  if (variant.ingress_mode) add("ingress");
  if (!variant.virtual_interfaces.empty()) {
    std::string vifs = "vif=";
    for (size_t i = 0; i < variant.virtual_interfaces.size(); ++i) {
      vifs += (i ? "+" : "") + variant.virtual_interfaces[i];
    }
    add(vifs);
  }
  if (variant.ipv6) add("ipv6");
  return text.empty() ? "base" : text;
}

std::string FaultDescription(FaultKind kind, LabBackend backend, const LabPod* pod, bool ipv6) {
  const bool nft = backend == LabBackend::kNft;
  switch (kind) {
    case FaultKind::kFlip:
      return "full in-pod rule sets in both iptables-legacy and iptables-nft (backend flip)";
    case FaultKind::kDupJump:
      return nft ? "inet istio-ambient-nat output: 'jump istio-output' twice"
                 : "nat OUTPUT: '-j ISTIO_OUTPUT' appended twice";
    case FaultKind::kDeleteRule:
      return nft ? "inet istio-ambient-nat istio-output: 'redirect to :15001' missing"
                 : "nat ISTIO_OUTPUT: 'REDIRECT --to-ports 15001' missing";
    case FaultKind::kNoPolicyRoute:
      return "no 'fwmark 0x111/0xfff lookup 100' rule and no local route in table 100";
    case FaultKind::kSidecar:
      return "sidecar rules in native nft table inet istio-proxy-nat";
    case FaultKind::kHostEnrolled:
      return std::string("ambient in-pod rules in the host netns (") +
             std::string(LabBackendName(backend)) + ")";
    case FaultKind::kNoProbeMember:
      return "pod IP " + (pod ? pod->ipv4 : std::string("?")) + " missing from " + kProbeSetV4 +
             (ipv6 && pod ? " (and " + pod->ipv6 + " from " + kProbeSetV6 + ")" : "");
    case FaultKind::kZdsDeadlock:
      return "cni-sim accepts ztunnel but never reads its hello (pre-1.29.6 ZDS deadlock)";
    case FaultKind::kZdsSlowAck:
      return "cni-sim delays every ZDS request";
    case FaultKind::kZdsDropAdds:
      return "cni-sim never sends this pod's AddWorkload (pod has rules, no ztunnel proxy)";
    case FaultKind::kZtunnelNoListeners:
      return "ztunnel-sim acks the Add but opens no in-pod listeners";
    case FaultKind::kZtunnelNack:
      return "ztunnel-sim NACKs the Add ('failure to start proxy'); Pending, not ready";
    case FaultKind::kZtunnelCrash:
      return "ztunnel-sim exits after the snapshot; in-pod listeners gone";
    case FaultKind::kStaleWorkload:
      return "pod netns deleted after hand-off without a Del; ztunnel-sim still holds it";
    case FaultKind::kRedirectMissing:
      return "no Istio in-pod rules, but the pod is handed off and served by ztunnel-sim";
    case FaultKind::kDnsNoListener:
      return "ztunnel-sim opens 15001/15006/15008 but no DNS listener on 15053";
    case FaultKind::kNoLoV6:
      return "::1 deleted from the pod's lo (IPv6 enabled): ztunnel-sim fails to bind "
             "[::1]:15053, NACKs the Add, Pending";
    case FaultKind::kProbeUnreplied:
      return "blackhole route to the probe SNAT address in the pod: kubelet-prober's probes to " +
             (pod ? pod->ipv4 : std::string("?")) + " stay SYN_SENT/UNREPLIED in the host";
    case FaultKind::kCniChainMissing:
      return "the host's CNI conflist chains ptp -> portmap only: istio-cni dropped";
    case FaultKind::kZtunnelFdPressure:
      return "ztunnel-sim keeps 90 % of its soft RLIMIT_NOFILE open";
    case FaultKind::kCertUnavailable:
      return "the pod's own service account; ztunnel-sim's certificate for it is Unavailable";
    case FaultKind::kNotEnrolled:
      return "no Istio rules, but the pod is in the ambient-labelled namespace (API)";
    case FaultKind::kAnnotationStale:
      return "no Istio rules, but the API shows ambient.istio.io/redirection=enabled";
    case FaultKind::kOptedOut:
      return "Istio rules, but the API shows the pod label istio.io/dataplane-mode=none";
  }
  return {};
}

bool HasFault(const LabPod& pod, FaultKind kind) {
  return std::find(pod.faults.begin(), pod.faults.end(), FaultName(kind)) != pod.faults.end();
}

// Runs work(i) for i in [0, count) on a few threads; stops handing out work after the first error.
Status ForEachParallel(size_t count, int workers, const std::function<Status(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::optional<SourceError> first_error;
  {
    std::vector<std::jthread> threads;
    const size_t thread_count = std::min<size_t>(std::max(workers, 1), std::max<size_t>(count, 1));
    for (size_t t = 0; t < thread_count; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < count && !failed; i = next++) {
          Status status = work(i);
          if (!status.ok()) {
            std::lock_guard lock(error_mutex);
            if (!first_error) first_error = status.error();
            failed = true;
          }
        }
      });
    }
  }
  if (first_error) return *first_error;
  return kOk;
}

Status Run(Command command) {
  Result<CommandOutput> result = RunChecked(command);
  if (!result.ok()) return result.error();
  return kOk;
}

Status RunInNetns(const std::string& netns_path, std::vector<std::string> argv, std::string input) {
  return Run(Command{std::move(argv), std::move(input), netns_path});
}

struct IptablesTools {
  std::string v4;
  std::string v6;
  std::vector<std::string> extra_args;
};

IptablesTools RestoreTools(LabBackend backend) {
  if (backend == LabBackend::kLegacy) {
    // x_tables has one lock per machine; wait for it instead of failing under parallel setup.
    return {"iptables-legacy-restore", "ip6tables-legacy-restore", {"--noflush", "--wait=30"}};
  }
  return {"iptables-nft-restore", "ip6tables-nft-restore", {"--noflush"}};
}

Status ApplyIptables(const std::string& netns_path, LabBackend backend, const std::string& v4_text,
                     const std::string& v6_text) {
  const IptablesTools tools = RestoreTools(backend);
  std::vector<std::string> argv = {tools.v4};
  argv.insert(argv.end(), tools.extra_args.begin(), tools.extra_args.end());
  if (Status status = RunInNetns(netns_path, argv, v4_text); !status.ok()) return status;
  if (v6_text.empty()) return kOk;
  argv[0] = tools.v6;
  return RunInNetns(netns_path, argv, v6_text);
}

// The in-pod ambient rules for one netns, in the given backend.
Status ApplyInpodRules(const std::string& netns_path, LabBackend backend,
                       const AmbientVariant& variant, const SnatConfig& snat,
                       const RuleTweaks& tweaks) {
  if (backend == LabBackend::kNft) {
    return RunInNetns(netns_path, {"nft", "-f", "-"}, NftInpodScript(variant, snat, tweaks));
  }
  const std::string v6 =
      variant.ipv6 ? IptablesInpodRestore(variant, Family::kIpv6, snat, tweaks) : std::string();
  return ApplyIptables(netns_path, backend,
                       IptablesInpodRestore(variant, Family::kIpv4, snat, tweaks), v6);
}

Status SetUpPod(const LabNode& node, const LabPod& pod) {
  const bool policy_route = pod.meshed && !HasFault(pod, FaultKind::kNoPolicyRoute);
  std::string links = "link set lo up\n";
  for (const std::string& vif : pod.variant.virtual_interfaces) {
    // A bridge, like KubeVirt's k6t-* devices; the rules only need the name to exist.
    links += "link add " + vif + " type bridge\nlink set " + vif + " up\n";
  }
  links += "link set eth0 up\naddr add " + pod.ipv4 + "/16 dev eth0\n";
  links += std::string("route add default via ") + kGatewayV4 + " dev eth0\n";
  if (node.ipv6) {
    links += "addr add " + pod.ipv6 + "/64 dev eth0 nodad\n";
    links += std::string("route add default via ") + kLinkLocalGatewayV6 + " dev eth0\n";
  }
  if (policy_route) {
    links += "rule add fwmark 0x111/0xfff pref 32764 lookup 100\n";
    links += "route add local 0.0.0.0/0 dev lo table 100\n";
  }
  // Plain `ip` in a setns'd child: `ip -n` also unshares the mount namespace, which copies every
  // /run/netns bind mount and makes large labs quadratic.
  if (Status status = RunInNetns(pod.netns_path, {"ip", "-batch", "-"}, links); !status.ok()) {
    return status;
  }
  if (HasFault(pod, FaultKind::kNoLoV6)) {
    // lo stays up with 127.0.0.1; only the ::1 that bringing it up added goes.
    if (Status status =
            RunInNetns(pod.netns_path, {"ip", "-6", "addr", "del", "::1/128", "dev", "lo"}, "");
        !status.ok()) {
      return status;
    }
  }
  if (node.ipv6 && policy_route) {
    // `ip rule` in batch mode has no per-line family; a second batch carries -6.
    const std::string v6_policy =
        "rule add fwmark 0x111/0xfff pref 32764 lookup 100\nroute add local ::/0 dev lo table "
        "100\n";
    if (Status status = RunInNetns(pod.netns_path, {"ip", "-6", "-batch", "-"}, v6_policy);
        !status.ok()) {
      return status;
    }
  }
  if (HasFault(pod, FaultKind::kProbeUnreplied)) {
    // The datapath drops what the pod sends to the probe address (its SYN-ACK or RST), the way
    // an eBPF CNI's host firewall or a security group does: the host's entry stays unreplied.
    std::string drop = "route add blackhole " + node.snat.ipv4 + "/32\n";
    if (node.ipv6) drop += "route add blackhole " + node.snat.ipv6 + "/128\n";
    if (Status status = RunInNetns(pod.netns_path, {"ip", "-batch", "-"}, drop); !status.ok()) {
      return status;
    }
  }
  if (!pod.meshed || HasFault(pod, FaultKind::kRedirectMissing)) return kOk;

  RuleTweaks tweaks;
  if (HasFault(pod, FaultKind::kDupJump)) tweaks.extra_output_jumps = 1;
  tweaks.omit_outbound_redirect = HasFault(pod, FaultKind::kDeleteRule);
  if (Status status = ApplyInpodRules(pod.netns_path, pod.backend, pod.variant, node.snat, tweaks);
      !status.ok()) {
    return status;
  }
  if (HasFault(pod, FaultKind::kFlip)) {
    const LabBackend other =
        pod.backend == LabBackend::kLegacy ? LabBackend::kIptablesNft : LabBackend::kLegacy;
    if (Status status = ApplyInpodRules(pod.netns_path, other, pod.variant, node.snat, tweaks);
        !status.ok()) {
      return status;
    }
  }
  if (HasFault(pod, FaultKind::kSidecar)) {
    return RunInNetns(pod.netns_path, {"nft", "-f", "-"}, NftSidecarScript());
  }
  return kOk;
}

Status SetUpHostLinks(const LabNode& node) {
  std::vector<std::string> sysctl = {"sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
                                     "net.ipv4.conf.all.proxy_arp=1"};
  if (node.ipv6) sysctl.push_back("net.ipv6.conf.all.forwarding=1");
  if (Status status = RunInNetns(node.host_netns_path, sysctl, ""); !status.ok()) return status;

  std::string batch = "link set lo up\n";
  batch += std::string("addr add ") + kGatewayV4 + "/32 dev lo\n";
  if (node.ipv6) batch += std::string("addr add ") + kGatewayV6 + "/128 dev lo nodad\n";
  for (const LabPod& pod : node.pods) {
    const std::string veth = "veth" + std::to_string(pod.index);  // IFNAMSIZ: at most 15 chars
    batch += "link add " + veth + " type veth peer name eth0 netns " + pod.netns_name + "\n";
    batch += "link set " + veth + " up\n";
    batch += "route add " + pod.ipv4 + "/32 dev " + veth + "\n";
    if (node.ipv6) {
      batch += "addr add " + std::string(kLinkLocalGatewayV6) + "/64 dev " + veth + " nodad\n";
      batch += "route add " + pod.ipv6 + "/128 dev " + veth + "\n";
    }
  }
  return Run({{"ip", "-n", node.host_netns_name, "-batch", "-"}, batch});
}

Status SetUpHostRules(const LabNode& node, const LabOptions& options) {
  std::vector<ProbeMember> v4_members;
  std::vector<ProbeMember> v6_members;
  for (const LabPod& pod : node.pods) {
    if (!pod.meshed || HasFault(pod, FaultKind::kNoProbeMember)) continue;
    v4_members.push_back({pod.ipv4, pod.pod_uid});
    if (node.ipv6) v6_members.push_back({pod.ipv6, pod.pod_uid});
  }
  const bool host_enrolled =
      std::any_of(node.faults.begin(), node.faults.end(),
                  [](const InjectedFault& f) { return f.kind == FaultKind::kHostEnrolled; });
  const AmbientVariant host_variant{.dns_capture = options.dns_capture, .ipv6 = node.ipv6};
  const std::string& host = node.host_netns_path;

  if (node.backend == LabBackend::kNft) {
    std::string script = NftProbeSetsScript(node.ipv6, v4_members, v6_members);
    script += NftHostScript(node.ipv6, node.snat);
    // Same table name as the host's: add the in-pod chains without flushing the host chain.
    if (host_enrolled) script += NftInpodScript(host_variant, node.snat, {.flush_tables = false});
    return RunInNetns(host, {"nft", "-f", "-"}, script);
  }

  std::string sets = IpsetProbeRestore(Family::kIpv4, v4_members);
  if (node.ipv6) sets += IpsetProbeRestore(Family::kIpv6, v6_members);
  if (Status status = RunInNetns(host, {"ipset", "restore"}, sets); !status.ok()) return status;
  const std::string v6 = node.ipv6 ? IptablesHostRestore(Family::kIpv6, node.snat) : std::string();
  if (Status status =
          ApplyIptables(host, node.backend, IptablesHostRestore(Family::kIpv4, node.snat), v6);
      !status.ok()) {
    return status;
  }
  if (!host_enrolled) return kOk;
  return ApplyInpodRules(host, node.backend, host_variant, node.snat, {});
}

Status CreateNetns(const LabNode& node) {
  std::string batch = "netns add " + node.host_netns_name + "\n";
  for (const LabPod& pod : node.pods) batch += "netns add " + pod.netns_name + "\n";
  if (node.zds.enabled) batch += "netns add " + node.zds.ztunnel_netns_name + "\n";
  return Run({{"ip", "-batch", "-"}, batch});
}

void WriteManifest(const LabNode& node) {
  std::error_code ignored;
  fs::create_directories(kManifestDir, ignored);
  std::ofstream(LabManifestPath(node.prefix)) << node.Describe();
  std::ofstream(LabAgentFlagsPath(node.prefix)) << LabAgentFlags(node);
}

bool IsLabNetnsName(const std::string& prefix, const std::string& name) {
  if (name == prefix + "-host" || name == prefix + "-ztunnel") return true;
  const std::string pod_prefix = prefix + "-pod-";
  if (name.size() <= pod_prefix.size() || name.compare(0, pod_prefix.size(), pod_prefix) != 0) {
    return false;
  }
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(pod_prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// ---- ZDS emulators ----------------------------------------------------------------------------

constexpr char kCniSim[] = "cni-sim";
constexpr char kZtunnelSim[] = "ztunnel-sim";
constexpr char kCriSim[] = "cri-sim";
constexpr char kKubeApiSim[] = "kube-api-sim";
constexpr char kKubeletProber[] = "kubelet-prober";

std::string PidFilePath(const std::string& run_dir, const std::string& name) {
  return run_dir + "/" + name + ".pid";
}

int ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  int pid = 0;
  in >> pid;
  return pid;
}

// Readers (cni-sim on SIGHUP) never see a half-written file.
Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) return LabError("cannot write " + temporary);
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) return LabError("rename " + temporary + ": " + error.message());
  return kOk;
}

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string tail;
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i) {
    tail += "\n    " + lines[i];
  }
  return tail.empty() ? " (log empty)" : tail;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bool NodeHasFault(const LabNode& node, FaultKind kind) {
  return std::any_of(node.faults.begin(), node.faults.end(),
                     [kind](const InjectedFault& f) { return f.kind == kind; });
}

std::vector<const LabPod*> PodsWithFault(const LabNode& node, FaultKind kind) {
  std::vector<const LabPod*> pods;
  for (const LabPod& pod : node.pods) {
    if (pod.meshed && HasFault(pod, kind)) pods.push_back(&pod);
  }
  return pods;
}

// The pod as the CNI's cache knows it; the pod name is the netns name so reports line up.
std::string ZdsPodLine(const LabPod& pod) {
  // A cert-unavailable pod has an identity of its own, so only its certificate is affected.
  const std::string service_account =
      HasFault(pod, FaultKind::kCertUnavailable) ? pod.netns_name : "default";
  return sim::PodsFileLine({pod.pod_uid, pod.netns_name, "lab", service_account, pod.netns_path});
}

std::string PodsFileText(const LabNode& node, const std::function<bool(const LabPod&)>& include) {
  std::string text = "# uid name namespace service-account netns-path (cni-sim re-reads on HUP)\n";
  for (const LabPod& pod : node.pods) {
    if (pod.meshed && include(pod)) text += ZdsPodLine(pod) + "\n";
  }
  return text;
}

Status StartCniSim(LabNode& node, const LabOptions& options) {
  LabZds& zds = node.zds;
  const std::string program = SimBinaryPath(kCniSim);
  if (program.empty()) return LabError("cni-sim executable not found (build target cni-sim)");
  std::vector<std::string> argv = {program,       "--socket",     zds.socket_path, "--pods-file",
                                   zds.pods_file, "--stats-file", zds.stats_file};
  if (NodeHasFault(node, FaultKind::kZdsDeadlock)) {
    argv.insert(argv.end(), {"--fault", "deadlock"});
  } else if (NodeHasFault(node, FaultKind::kZdsSlowAck)) {
    argv.insert(argv.end(),
                {"--fault", "slow-ack:" + std::to_string(std::max(options.slow_ack_seconds, 0))});
  }
  for (const LabPod* pod : PodsWithFault(node, FaultKind::kZdsDropAdds)) {
    argv.insert(argv.end(), {"--drop-add", pod->pod_uid});
  }
  for (const LabPod* pod : PodsWithFault(node, FaultKind::kStaleWorkload)) {
    argv.insert(argv.end(), {"--drop-del", pod->pod_uid});
  }
  Result<int> pid = SpawnDaemon({argv, node.host_netns_path, zds.cni_log});
  if (!pid.ok()) return pid.error();
  zds.cni_sim_pid = *pid;
  if (Status status =
          WriteFileAtomically(PidFilePath(zds.run_dir, kCniSim), std::to_string(*pid) + "\n");
      !status.ok()) {
    return status;
  }
  const bool listening = WaitUntil(
      [&] { return fs::exists(zds.socket_path) || !DaemonRunning(zds.cni_sim_pid, kCniSim); },
      std::chrono::seconds(5));
  if (!listening || !DaemonRunning(zds.cni_sim_pid, kCniSim)) {
    return LabError("cni-sim did not start listening on " + zds.socket_path + LogTail(zds.cni_log));
  }
  return kOk;
}

// The pods cri-sim lists. Without --kube, cni-sim's pods file (meshed pods, following add-pod and
// del-pod). With it, every pod, plain ones too, in the namespace the API shows, so the agent pairs
// each API pod with its sandbox as on a real node (a file of its own: add-pod does not reach it).
bool CriListsPod(const LabNode& node, const LabPod& pod) { return pod.meshed || node.kube.enabled; }

std::string CriPodsFileText(const LabNode& node) {
  std::string text = "# uid name namespace service-account netns-path (cri-sim, --kube lab)\n";
  for (const LabPod& pod : node.pods) {
    text += sim::PodsFileLine({pod.pod_uid, pod.netns_name, std::string(LabKubeNamespace(pod)),
                               "default", pod.netns_path}) +
            "\n";
  }
  return text;
}

// The addresses of the pods cri-sim lists, for its PodSandboxStatus (network.ip).
std::string PodIpsFileText(const LabNode& node) {
  std::string text = "# uid ipv4 [ipv6] (cri-sim reads per request)\n";
  for (const LabPod& pod : node.pods) {
    if (!CriListsPod(node, pod)) continue;
    text += pod.pod_uid + " " + pod.ipv4 + (pod.ipv6.empty() ? "" : " " + pod.ipv6) + "\n";
  }
  return text;
}

// cri-sim serves the pods file over CRI; a unix socket server only, so the root netns will do.
Status StartCriSim(LabNode& node) {
  LabZds& zds = node.zds;
  const std::string program = SimBinaryPath(kCriSim);
  if (program.empty()) return LabError("cri-sim executable not found (build target cri-sim)");
  if (Status status = WriteFileAtomically(zds.pod_ips_file, PodIpsFileText(node)); !status.ok()) {
    return status;
  }
  std::string pods_file = zds.pods_file;
  if (node.kube.enabled) {
    pods_file = zds.run_dir + "/cri-pods.txt";
    if (Status status = WriteFileAtomically(pods_file, CriPodsFileText(node)); !status.ok()) {
      return status;
    }
  }
  std::vector<std::string> argv = {program,   "--socket",   zds.cri_socket_path, "--pods-file",
                                   pods_file, "--ips-file", zds.pod_ips_file};
  Result<int> pid = SpawnDaemon({argv, "", zds.cri_log});
  if (!pid.ok()) return pid.error();
  zds.cri_sim_pid = *pid;
  if (Status status =
          WriteFileAtomically(PidFilePath(zds.run_dir, kCriSim), std::to_string(*pid) + "\n");
      !status.ok()) {
    return status;
  }
  const bool listening = WaitUntil(
      [&] { return fs::exists(zds.cri_socket_path) || !DaemonRunning(zds.cri_sim_pid, kCriSim); },
      std::chrono::seconds(5));
  if (!listening || !DaemonRunning(zds.cri_sim_pid, kCriSim)) {
    return LabError("cri-sim did not start listening on " + zds.cri_socket_path +
                    LogTail(zds.cri_log));
  }
  return kOk;
}

Status StartZtunnelSim(LabNode& node) {
  LabZds& zds = node.zds;
  const std::string program = SimBinaryPath(kZtunnelSim);
  if (program.empty()) return LabError("ztunnel-sim executable not found (build ztunnel-sim)");
  if (Status status = RunInNetns(zds.ztunnel_netns_path, {"ip", "link", "set", "lo", "up"}, "");
      !status.ok()) {
    return status;
  }
  std::vector<std::string> argv = {program, "--zds", zds.socket_path, "--node",
                                   node.prefix + "-node"};
  if (node.ipv6) argv.emplace_back("--ipv6");
  // no-lo-v6 needs no flag: ztunnel-sim's bind of [::1]:15053 fails there by itself.
  for (const auto& [kind, flag] : {std::pair{FaultKind::kZtunnelNoListeners, "no-listeners"},
                                   std::pair{FaultKind::kZtunnelNack, "nack"},
                                   std::pair{FaultKind::kDnsNoListener, "no-dns-listener"}}) {
    const std::vector<const LabPod*> pods = PodsWithFault(node, kind);
    if (pods.empty()) continue;
    argv.insert(argv.end(), {"--fault", flag});
    for (const LabPod* pod : pods) argv.insert(argv.end(), {"--fault-uid", pod->pod_uid});
  }
  if (NodeHasFault(node, FaultKind::kZtunnelCrash)) argv.insert(argv.end(), {"--fault", "crash"});
  for (const LabPod* pod : PodsWithFault(node, FaultKind::kCertUnavailable)) {
    argv.insert(argv.end(), {"--cert-unavailable-uid", pod->pod_uid});
  }
  if (NodeHasFault(node, FaultKind::kZtunnelFdPressure)) {
    // Room for the in-pod sockets of every pod (about 6 fds each) below the 90 % held.
    const size_t limit = 1024 + 8 * node.pods.size();
    argv.insert(argv.end(), {"--nofile", std::to_string(limit), "--fd-pressure", "90"});
  }
  Result<int> pid = SpawnDaemon({argv, zds.ztunnel_netns_path, zds.ztunnel_log});
  if (!pid.ok()) return pid.error();
  zds.ztunnel_sim_pid = *pid;
  return WriteFileAtomically(PidFilePath(zds.run_dir, kZtunnelSim), std::to_string(*pid) + "\n");
}

// Tells cni-sim to re-read its pods file and waits until its counters show the effect.
Status ReloadPods(const LabNode& node, const std::string& pods_text,
                  const std::function<bool(const std::map<std::string, uint64_t>&)>& done) {
  if (Status status = WriteFileAtomically(node.zds.pods_file, pods_text); !status.ok()) {
    return status;
  }
  ::kill(node.zds.cni_sim_pid, SIGHUP);
  if (!WaitUntil([&] { return done(ReadStatsFile(node.zds.stats_file)); },
                 std::chrono::seconds(10))) {
    return LabError("cni-sim did not apply the new pods file" + LogTail(node.zds.cni_log));
  }
  return kOk;
}

// cni-sim in the host netns, ztunnel-sim in <prefix>-ztunnel, every meshed pod handed off: in the
// snapshot, or (zds-drop-adds pods) as steady-state Adds afterwards. Then the after-hand-off
// faults are applied.
Status StartZds(LabNode& node, const LabOptions& options) {
  LabZds& zds = node.zds;
  std::error_code error;
  fs::remove_all(zds.run_dir, error);
  fs::create_directories(zds.run_dir, error);
  if (error) return LabError("create " + zds.run_dir + ": " + error.message());
  const auto in_snapshot = [](const LabPod& pod) {
    return !HasFault(pod, FaultKind::kZdsDropAdds);
  };
  if (Status status = WriteFileAtomically(zds.pods_file, PodsFileText(node, in_snapshot));
      !status.ok()) {
    return status;
  }
  if (Status status = StartCniSim(node, options); !status.ok()) return status;
  if (Status status = StartCriSim(node); !status.ok()) return status;
  if (Status status = StartZtunnelSim(node); !status.ok()) return status;

  auto stat = [&zds](const char* key) { return ReadStatsFile(zds.stats_file)[key]; };
  if (NodeHasFault(node, FaultKind::kZdsDeadlock)) {
    // Nothing will ever be handed off; wait only until ztunnel-sim is stuck on the socket.
    if (!WaitUntil([&] { return stat("accepted_connections") >= 1; }, std::chrono::seconds(10))) {
      return LabError("ztunnel-sim never connected" + LogTail(zds.ztunnel_log));
    }
    return kOk;
  }
  const bool needs_snapshot = !PodsWithFault(node, FaultKind::kZdsDropAdds).empty() ||
                              !PodsWithFault(node, FaultKind::kStaleWorkload).empty() ||
                              !NodeHasFault(node, FaultKind::kZdsSlowAck);
  if (!needs_snapshot) {
    // zds-slow-ack alone: leave the hand-off in progress for the agent to see.
    if (!WaitUntil([&] { return stat("hellos_read") >= 1; }, std::chrono::seconds(10))) {
      return LabError("ztunnel-sim never said hello" + LogTail(zds.ztunnel_log));
    }
    return kOk;
  }
  int meshed = 0;
  for (const LabPod& pod : node.pods) meshed += pod.meshed ? 1 : 0;
  const auto snapshot_timeout = std::chrono::seconds(15) +
                                (NodeHasFault(node, FaultKind::kZdsSlowAck)
                                     ? std::chrono::seconds(options.slow_ack_seconds) * (meshed + 1)
                                     : std::chrono::seconds(0));
  if (!WaitUntil([&] { return stat("snapshots_completed") >= 1; }, snapshot_timeout)) {
    return LabError("ZDS snapshot did not complete" + LogTail(zds.cni_log) +
                    LogTail(zds.ztunnel_log));
  }
  if (NodeHasFault(node, FaultKind::kZtunnelCrash) &&
      !WaitUntil([&] { return !DaemonRunning(zds.ztunnel_sim_pid, kZtunnelSim); },
                 std::chrono::seconds(5))) {
    return LabError("ztunnel-sim did not exit after the snapshot (fault ztunnel-crash)");
  }
  const size_t dropped = PodsWithFault(node, FaultKind::kZdsDropAdds).size();
  if (dropped > 0) {
    if (Status status = ReloadPods(node, PodsFileText(node, [](const LabPod&) { return true; }),
                                   [dropped](const auto& stats) {
                                     auto found = stats.find("adds_dropped");
                                     return found != stats.end() && found->second >= dropped;
                                   });
        !status.ok()) {
      return status;
    }
  }
  const std::vector<const LabPod*> stale = PodsWithFault(node, FaultKind::kStaleWorkload);
  if (!stale.empty()) {
    const auto keep = [](const LabPod& pod) { return !HasFault(pod, FaultKind::kStaleWorkload); };
    if (Status status = ReloadPods(node, PodsFileText(node, keep),
                                   [&stale](const auto& stats) {
                                     auto found = stats.find("dels_dropped");
                                     return found != stats.end() && found->second >= stale.size();
                                   });
        !status.ok()) {
      return status;
    }
    // The pod is gone; only ztunnel-sim's fd keeps its netns (and listeners) alive.
    std::string batch;
    for (const LabPod* pod : stale) batch += "netns del " + pod->netns_name + "\n";
    if (Status status = Run({{"ip", "-batch", "-"}, batch}); !status.ok()) return status;
  }
  return kOk;
}

// kubelet-prober in the host netns, probing every meshed pod (the host's SNAT rule makes them
// probe connections). A closed port answers with RST: only a pod whose replies are dropped
// leaves unreplied entries.
Status StartKubeletProber(LabNode& node, const LabOptions& options) {
  const std::string program = SimBinaryPath(kKubeletProber);
  if (program.empty()) return LabError("kubelet-prober executable not found (build target)");
  std::vector<std::string> argv = {program, "--interval-ms",
                                   std::to_string(std::max(options.prober_interval_ms, 10)),
                                   "--timeout-ms", "1000"};
  for (const LabPod& pod : node.pods) {
    if (!pod.meshed) continue;
    argv.insert(argv.end(), {"--target", pod.ipv4 + ":8080"});
    if (node.ipv6) argv.insert(argv.end(), {"--target", "[" + pod.ipv6 + "]:8080"});
  }
  const std::string run_dir = LabRunDir(node.prefix);
  std::error_code error;
  fs::create_directories(run_dir, error);
  if (error) return LabError("mkdir " + run_dir + ": " + error.message());
  Result<int> pid = SpawnDaemon({argv, node.host_netns_path, run_dir + "/kubelet-prober.log"});
  if (!pid.ok()) return pid.error();
  node.kubelet_prober_pid = *pid;
  return WriteFileAtomically(PidFilePath(run_dir, kKubeletProber), std::to_string(*pid) + "\n");
}

// kube-api-sim on 127.0.0.1 (a free port) in the machine's netns, where the agent runs: a
// self-signed certificate for 127.0.0.1, a token, the lab's objects, and a kubeconfig naming them.
Status StartKubeApi(LabNode& node) {
  LabKube& kube = node.kube;
  const std::string program = SimBinaryPath(kKubeApiSim);
  if (program.empty()) return LabError("kube-api-sim executable not found (build kube-api-sim)");
  std::error_code error;
  fs::create_directories(kube.dir, error);
  if (error) return LabError("create " + kube.dir + ": " + error.message());
  if (Status made =
          Run({{"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", kube.key_file, "-out", kube.ca_file, "-days", "30", "-subj",
                "/CN=ambient-lab-kube-api", "-addext", "subjectAltName=IP:127.0.0.1"}});
      !made.ok()) {
    return made;
  }
  const int64_t hour_ago = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count() -
                           3600;
  for (const auto& [path, text] :
       {std::pair{kube.token_file, "lab-token-" + node.prefix + "\n"},
        std::pair{kube.objects_file, LabKubeObjectsJson(node, hour_ago)}}) {
    if (Status written = WriteFileAtomically(path, text); !written.ok()) return written;
  }
  std::vector<std::string> argv = {
      program,           "--cert",        kube.ca_file, "--key", kube.key_file,
      "--token-file",    kube.token_file, "--port",     "0",     "--objects",
      kube.objects_file, "--bookmark-ms", "60000"};
  Result<int> pid = SpawnDaemon({argv, "", kube.log});
  if (!pid.ok()) return pid.error();
  kube.pid = *pid;
  if (Status status = WriteFileAtomically(PidFilePath(LabRunDir(node.prefix), kKubeApiSim),
                                          std::to_string(*pid) + "\n");
      !status.ok()) {
    return status;
  }
  auto server_line = [&kube]() -> std::string {
    std::ifstream in(kube.log);
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with("https://")) return line;
    }
    return {};
  };
  WaitUntil([&] { return !server_line().empty() || !DaemonRunning(kube.pid, kKubeApiSim); },
            std::chrono::seconds(5));
  kube.server = server_line();
  if (kube.server.empty()) {
    return LabError("kube-api-sim did not start" + LogTail(kube.log));
  }
  return WriteFileAtomically(kube.kubeconfig,
                             LabKubeconfigText(kube.server, kube.ca_file, kube.token_file));
}

void StopEmulators(const std::string& prefix) {
  const std::string run_dir = LabRunDir(prefix);
  // ztunnel first, like a node drain; then the server.
  StopDaemon(ReadPidFile(PidFilePath(run_dir, kZtunnelSim)), kZtunnelSim);
  StopDaemon(ReadPidFile(PidFilePath(run_dir, kCniSim)), kCniSim);
  StopDaemon(ReadPidFile(PidFilePath(run_dir, kCriSim)), kCriSim);
  StopDaemon(ReadPidFile(PidFilePath(run_dir, kKubeletProber)), kKubeletProber);
  StopDaemon(ReadPidFile(PidFilePath(run_dir, kKubeApiSim)), kKubeApiSim);
  std::error_code ignored;
  fs::remove_all(run_dir, ignored);
}

}  // namespace

std::string_view LabBackendName(LabBackend backend) {
  switch (backend) {
    case LabBackend::kLegacy:
      return "legacy";
    case LabBackend::kIptablesNft:
      return "iptables-nft";
    case LabBackend::kNft:
      return "nft";
  }
  return "?";
}

Result<LabBackend> ParseBackend(std::string_view name) {
  for (LabBackend backend : {LabBackend::kLegacy, LabBackend::kIptablesNft, LabBackend::kNft}) {
    if (name == LabBackendName(backend)) return backend;
  }
  return LabError("unknown backend '" + std::string(name) + "' (legacy, iptables-nft, nft)");
}

std::string_view FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kFlip:
      return "flip";
    case FaultKind::kDupJump:
      return "dup-jump";
    case FaultKind::kDeleteRule:
      return "delete-rule";
    case FaultKind::kNoPolicyRoute:
      return "no-policy-route";
    case FaultKind::kSidecar:
      return "sidecar";
    case FaultKind::kHostEnrolled:
      return "host-enrolled";
    case FaultKind::kNoProbeMember:
      return "no-probe-member";
    case FaultKind::kZdsDeadlock:
      return "zds-deadlock";
    case FaultKind::kZdsSlowAck:
      return "zds-slow-ack";
    case FaultKind::kZdsDropAdds:
      return "zds-drop-adds";
    case FaultKind::kZtunnelNoListeners:
      return "ztunnel-no-listeners";
    case FaultKind::kZtunnelNack:
      return "ztunnel-nack";
    case FaultKind::kZtunnelCrash:
      return "ztunnel-crash";
    case FaultKind::kStaleWorkload:
      return "stale-workload";
    case FaultKind::kRedirectMissing:
      return "redirect-missing";
    case FaultKind::kDnsNoListener:
      return "dns-no-listener";
    case FaultKind::kNoLoV6:
      return "no-lo-v6";
    case FaultKind::kProbeUnreplied:
      return "probe-unreplied";
    case FaultKind::kCniChainMissing:
      return "cni-chain-missing";
    case FaultKind::kZtunnelFdPressure:
      return "ztunnel-fd-pressure";
    case FaultKind::kCertUnavailable:
      return "cert-unavailable";
    case FaultKind::kNotEnrolled:
      return "not-enrolled";
    case FaultKind::kAnnotationStale:
      return "annotation-stale";
    case FaultKind::kOptedOut:
      return "opted-out";
  }
  return "?";
}

const std::vector<FaultKind>& AllFaultKinds() {
  static const std::vector<FaultKind> kinds = {FaultKind::kFlip,         FaultKind::kDupJump,
                                               FaultKind::kDeleteRule,   FaultKind::kNoPolicyRoute,
                                               FaultKind::kSidecar,      FaultKind::kHostEnrolled,
                                               FaultKind::kNoProbeMember};
  return kinds;
}

const std::vector<FaultKind>& ZdsFaultKinds() {
  static const std::vector<FaultKind> kinds = {
      FaultKind::kZdsDeadlock, FaultKind::kZdsSlowAck, FaultKind::kZdsDropAdds,
      FaultKind::kZtunnelNoListeners, FaultKind::kZtunnelNack, FaultKind::kZtunnelCrash,
      FaultKind::kStaleWorkload, FaultKind::kRedirectMissing,
      // In-pod prerequisites:
      FaultKind::kDnsNoListener, FaultKind::kNoLoV6,
      // ztunnel health:
      FaultKind::kZtunnelFdPressure, FaultKind::kCertUnavailable};
  return kinds;
}

const std::vector<FaultKind>& NodeFileFaultKinds() {
  // CNI chain group:
  static const std::vector<FaultKind> kinds = {FaultKind::kCniChainMissing};
  return kinds;
}

const std::vector<FaultKind>& KubeFaultKinds() {
  static const std::vector<FaultKind> kinds = {FaultKind::kNotEnrolled, FaultKind::kAnnotationStale,
                                               FaultKind::kOptedOut};
  return kinds;
}

bool IsKubeFault(FaultKind kind) {
  const auto& kinds = KubeFaultKinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

bool IsZdsFault(FaultKind kind) {
  const auto& kinds = ZdsFaultKinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

bool IsNodeFault(FaultKind kind) {
  return kind == FaultKind::kHostEnrolled || kind == FaultKind::kZdsDeadlock ||
         kind == FaultKind::kZdsSlowAck || kind == FaultKind::kZtunnelCrash ||
         kind == FaultKind::kCniChainMissing || kind == FaultKind::kZtunnelFdPressure;
}

Result<FaultSpec> ParseFault(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  FaultSpec spec;
  std::vector<FaultKind> kinds = AllFaultKinds();
  kinds.insert(kinds.end(), ZdsFaultKinds().begin(), ZdsFaultKinds().end());
  kinds.push_back(FaultKind::kProbeUnreplied);  // probe path
  kinds.insert(kinds.end(), NodeFileFaultKinds().begin(), NodeFileFaultKinds().end());
  kinds.insert(kinds.end(), KubeFaultKinds().begin(), KubeFaultKinds().end());
  const auto kind = std::find_if(kinds.begin(), kinds.end(),
                                 [name](FaultKind k) { return FaultName(k) == name; });
  if (kind == kinds.end()) {
    std::string known;
    for (FaultKind k : kinds) known += (known.empty() ? "" : ", ") + std::string(FaultName(k));
    return LabError("unknown fault '" + std::string(name) + "' (" + known + ")");
  }
  spec.kind = *kind;
  if (colon != std::string_view::npos) {
    const std::string_view index_text = text.substr(colon + 1);
    int index = 0;
    const auto [end, ec] =
        std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
    if (ec != std::errc() || end != index_text.data() + index_text.size() || index < 0) {
      return LabError("fault '" + std::string(text) + "': pod index must be a number >= 0");
    }
    spec.pod_index = index;
  }
  return spec;
}

std::string LabManifestPath(const std::string& prefix) {
  return std::string(kManifestDir) + "/" + prefix + ".txt";
}

std::string LabAgentFlagsPath(const std::string& prefix) {
  return std::string(kManifestDir) + "/" + prefix + ".flags";
}

std::string LabAgentFlags(const LabNode& node) {
  std::string text = "# ambient-doctor flags that scan lab " + node.prefix +
                     " (ambient-doctor report --lab-prefix " + node.prefix + ")\n";
  text += "--no-proc\n--netns-dir " + std::string(kNetnsDir) + "\n";
  text += "--netns-match " + node.prefix + "-*\n";
  text += "--host-netns " + node.host_netns_path + "\n";
  if (!node.host_root.empty()) {
    text += "--host-root " + node.host_root + "\n";
    // The lab's runtimes do not report a CNI config directory: the lab names its own.
    text += "--cni-conf-dir /etc/cni/net.d\n";
  }
  if (node.kube.enabled) {
    text += "--kubeconfig " + node.kube.kubeconfig + "\n";
    text += "--node-name " + node.kube.node_name + "\n";
    // The lab's pods are set up when `up` returns (its sandboxes were made moments ago).
    text += "--enrollment-grace 0s\n";
  } else {
    text += "--no-kube-api\n";  // no API server: desired state is not judged
  }
  if (!node.zds.enabled) {
    // No ZDS emulators: judging pods for ztunnel listeners would only restate that.
    text += "--no-zds\n";
    return text;
  }
  text += "--zds-socket " + node.zds.socket_path + "\n";
  text += "--ztunnel-netns " + node.zds.ztunnel_netns_path + "\n";
  text += "--cri-endpoint unix://" + node.zds.cri_socket_path + "\n";
  return text;
}

std::string LabHostRoot(const std::string& prefix) { return LabRunDir(prefix) + "/host-root"; }

std::string LabCniConfDir(const std::string& prefix) {
  return LabHostRoot(prefix) + "/etc/cni/net.d";
}

std::string LabCniConflistName(const std::string& prefix) { return "10-" + prefix + ".conflist"; }

bool LabCniChainHasIstio(const std::string& prefix) {
  std::ifstream in(LabCniConfDir(prefix) + "/" + LabCniConflistName(prefix));
  if (!in) return true;  // a lab without a CNI config (older layout): the emulators enroll
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find("\"istio-cni\"") != std::string::npos;
}

Result<std::monostate> WriteLabCniConfig(const std::string& prefix, bool with_istio_cni) {
  if (!ValidPrefix(prefix)) return LabError("invalid prefix '" + prefix + "'");
  const std::string dir = LabCniConfDir(prefix);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return LabError("mkdir " + dir + ": " + error.message());
  // istio-cni's kubeconfig (a placeholder token: nothing talks to an API server in the lab).
  const std::string kubeconfig = "/etc/cni/net.d/ZZZ-istio-cni-kubeconfig";
  if (Status status = WriteFileAtomically(
          LabHostRoot(prefix) + kubeconfig,
          "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: "
          "https://10.96.0.1:443\nusers:\n- name: istio-cni\n  user:\n    token: lab-placeholder\n"
          "contexts:\n- name: istio-cni-context\n  context:\n    cluster: local\n    user: "
          "istio-cni\ncurrent-context: istio-cni-context\n");
      !status.ok()) {
    return status.error();
  }
  std::string conflist =
      "{\n  \"cniVersion\": \"0.4.0\",\n  \"name\": \"" + prefix +
      "\",\n  \"plugins\": [\n"
      "    {\"type\": \"ptp\", \"ipMasq\": true, \"ipam\": {\"type\": \"host-local\", "
      "\"subnet\": \"10.244.0.0/16\"}},\n"
      "    {\"type\": \"portmap\", \"capabilities\": {\"portMappings\": true}}";
  if (with_istio_cni) {
    conflist +=
        ",\n    {\"type\": \"istio-cni\", \"plugin_log_level\": \"info\", "
        "\"cni_agent_run_dir\": \"/var/run/istio-cni\", \"ambient_enabled\": true, "
        "\"exclude_namespaces\": [\"kube-system\"], \"kubeconfig\": \"" +
        kubeconfig + "\"}";
  }
  conflist += "\n  ]\n}\n";
  return WriteFileAtomically(dir + "/" + LabCniConflistName(prefix), conflist);
}

std::string LabRunDir(const std::string& prefix) {
  return std::string(kManifestDir) + "/" + prefix;
}

std::vector<LabEmulator> LabEmulators(const std::string& prefix) {
  std::vector<LabEmulator> emulators;
  for (const char* name : {kCniSim, kZtunnelSim, kCriSim, kKubeletProber, kKubeApiSim}) {
    const int pid = ReadPidFile(PidFilePath(LabRunDir(prefix), name));
    if (pid > 0) emulators.push_back({name, pid, DaemonRunning(pid, name)});
  }
  return emulators;
}

std::string LabNode::Describe() const {
  int meshed = 0;
  for (const LabPod& pod : pods) meshed += pod.meshed ? 1 : 0;
  std::string out = "lab " + prefix + ": backend " + std::string(LabBackendName(backend)) +
                    (ipv6 ? ", ipv4+ipv6" : ", ipv4") + ", " + std::to_string(meshed) +
                    " ambient + " + std::to_string(pods.size() - meshed) + " plain pods\n";
  out += "  host  " + host_netns_name + "  " + host_netns_path + "\n";
  for (const LabPod& pod : pods) {
    out += "  pod   " + pod.netns_name + "  " + pod.ipv4 + (pod.ipv6.empty() ? "" : " " + pod.ipv6);
    if (pod.meshed) {
      out += "  ambient/" + std::string(LabBackendName(pod.backend)) + "  " +
             VariantText(pod.variant) + "  uid=" + pod.pod_uid;
    } else {
      out += "  plain";
    }
    if (!pod.faults.empty()) {
      out += "  FAULTS:";
      for (const std::string& fault : pod.faults) out += " " + fault;
    }
    out += "\n";
  }
  if (zds.enabled) {
    out += "  zds   cni-sim pid " + std::to_string(zds.cni_sim_pid) + " in " + host_netns_name +
           ", socket " + zds.socket_path + "\n";
    out += "        ztunnel-sim pid " + std::to_string(zds.ztunnel_sim_pid) + " in " +
           zds.ztunnel_netns_name + " (" + zds.ztunnel_netns_path +
           "): admin 127.0.0.1:15000, stats :15020, ready :15021\n";
    out += "        cri-sim pid " + std::to_string(zds.cri_sim_pid) + ", CRI socket " +
           zds.cri_socket_path + "\n";
    out += "        pods " + zds.pods_file + ", ips " + zds.pod_ips_file + ", stats " +
           zds.stats_file + "\n";
    out += "        logs " + zds.cni_log + ", " + zds.ztunnel_log + ", " + zds.cri_log + "\n";
  }
  if (kube.enabled) {
    out += "  kube  kube-api-sim pid " + std::to_string(kube.pid) + " on " + kube.server +
           ", node " + kube.node_name + ", kubeconfig " + kube.kubeconfig + "\n";
  }
  if (kubelet_prober_pid > 0) {
    out += "  probe kubelet-prober pid " + std::to_string(kubelet_prober_pid) + " in " +
           host_netns_name + ": every ambient pod's :8080\n";
  }
  if (!host_root.empty()) {
    out += "  host root " + host_root + " (--host-root), CNI config " + cni_conf_dir + "\n";
  }
  out += "faults injected: " + std::to_string(faults.size()) + "\n";
  for (const InjectedFault& fault : faults) {
    out += "  " + std::string(FaultName(fault.kind)) + " -> " + fault.netns_name + ": " +
           fault.description + "\n";
  }
  return out;
}

Result<LabNode> PlanLab(const LabOptions& options) {
  if (!ValidPrefix(options.prefix)) {
    return LabError("prefix '" + options.prefix + "' must be 1-24 characters of [A-Za-z0-9-]");
  }
  if (options.pods < 0 || options.plain_pods < 0 || options.pods + options.plain_pods > kMaxPods) {
    return LabError("pod counts must be >= 0 and at most " + std::to_string(kMaxPods) +
                    " in total");
  }
  LabNode node;
  node.prefix = options.prefix;
  node.host_netns_name = options.prefix + "-host";
  node.host_netns_path = std::string(kNetnsDir) + "/" + node.host_netns_name;
  node.backend = options.backend;
  node.ipv6 = options.ipv6;
  node.snat = options.snat;
  node.host_root = LabHostRoot(options.prefix);
  node.cni_conf_dir = LabCniConfDir(options.prefix);
  node.zds.enabled =
      options.zds || std::any_of(options.faults.begin(), options.faults.end(),
                                 [](const FaultSpec& f) { return IsZdsFault(f.kind); });
  if (node.zds.enabled) {
    LabZds& zds = node.zds;
    zds.run_dir = LabRunDir(options.prefix);
    zds.socket_path = zds.run_dir + "/ztunnel.sock";
    zds.pods_file = zds.run_dir + "/pods.txt";
    zds.stats_file = zds.run_dir + "/cni-sim.stats";
    zds.cni_log = zds.run_dir + "/cni-sim.log";
    zds.ztunnel_log = zds.run_dir + "/ztunnel-sim.log";
    zds.cri_socket_path = zds.run_dir + "/cri.sock";
    zds.pod_ips_file = zds.run_dir + "/pod-ips.txt";
    zds.cri_log = zds.run_dir + "/cri-sim.log";
    zds.ztunnel_netns_name = options.prefix + "-ztunnel";
    zds.ztunnel_netns_path = std::string(kNetnsDir) + "/" + zds.ztunnel_netns_name;
  }

  node.kube.enabled =
      options.kube || std::any_of(options.faults.begin(), options.faults.end(),
                                  [](const FaultSpec& f) { return IsKubeFault(f.kind); });
  if (node.kube.enabled) {
    LabKube& kube = node.kube;
    kube.dir = LabRunDir(options.prefix) + "/kube";
    kube.kubeconfig = kube.dir + "/kubeconfig";
    kube.ca_file = kube.dir + "/server.crt";
    kube.key_file = kube.dir + "/server.key";
    kube.token_file = kube.dir + "/token";
    kube.objects_file = kube.dir + "/objects.json";
    kube.log = kube.dir + "/kube-api-sim.log";
    kube.node_name = LabKubeNodeName(options.prefix);
  }

  const int total = options.pods + options.plain_pods;
  const int width =
      std::max<int>(3, static_cast<int>(std::to_string(std::max(total - 1, 0)).size()));
  for (int i = 0; i < total; ++i) {
    LabPod pod;
    pod.index = i;
    pod.netns_name = PodNetnsName(options.prefix, i, width);
    pod.netns_path = std::string(kNetnsDir) + "/" + pod.netns_name;
    pod.ipv4 = PodIpv4(i);
    if (options.ipv6) pod.ipv6 = PodIpv6(i);
    pod.pod_uid = FakePodUid(options.prefix, i);
    pod.backend = options.backend;
    pod.meshed = i < options.pods;
    pod.variant = {.dns_capture = options.dns_capture, .ipv6 = options.ipv6};
    if (pod.meshed && options.mixed_variants) {
      if (i == 0) pod.variant.ingress_mode = true;
      if (i == 1) pod.variant.virtual_interfaces = kLabVirtualInterfaces;
      if (i == 2) pod.variant.dns_capture = !options.dns_capture;  // per-pod annotation override
    }
    if (!pod.meshed) pod.variant = {};
    node.pods.push_back(std::move(pod));
  }

  for (const FaultSpec& spec : options.faults) {
    InjectedFault fault;
    fault.kind = spec.kind;
    if (spec.kind == FaultKind::kFlip && options.backend == LabBackend::kNft) {
      return LabError("fault flip needs an iptables backend (legacy or iptables-nft)");
    }
    if (IsNodeFault(spec.kind)) {
      fault.netns_name = spec.kind == FaultKind::kZtunnelCrash ? node.zds.ztunnel_netns_name
                                                               : node.host_netns_name;
      fault.description = FaultDescription(spec.kind, options.backend, nullptr, options.ipv6);
      if (NodeHasFault(node, spec.kind)) {
        return LabError("fault " + std::string(FaultName(spec.kind)) + " given twice");
      }
      node.faults.push_back(std::move(fault));
      continue;
    }
    // not-enrolled and annotation-stale are about a pod without rules: the last plain pod.
    const bool wants_plain =
        spec.kind == FaultKind::kNotEnrolled || spec.kind == FaultKind::kAnnotationStale;
    const int target = spec.pod_index.value_or(wants_plain ? total - 1 : options.pods - 1);
    if (target < 0 || target >= total) {
      return LabError("fault " + std::string(FaultName(spec.kind)) + ": no pod " +
                      std::to_string(target) + " (ambient pods are 0.." +
                      std::to_string(options.pods - 1) + ")");
    }
    LabPod& pod = node.pods[static_cast<size_t>(target)];
    if (wants_plain && pod.meshed) {
      return LabError("fault " + std::string(FaultName(spec.kind)) + ": pod " +
                      std::to_string(target) + " is an ambient pod; it needs a plain pod " +
                      "(--plain-pods)");
    }
    if (!wants_plain && !pod.meshed) {
      return LabError("fault " + std::string(FaultName(spec.kind)) + ": pod " +
                      std::to_string(target) + " is a plain (non-mesh) pod");
    }
    if (HasFault(pod, spec.kind)) {
      return LabError("fault " + std::string(FaultName(spec.kind)) + " given twice for pod " +
                      std::to_string(target));
    }
    pod.faults.emplace_back(FaultName(spec.kind));
    fault.pod_index = target;
    fault.netns_name = pod.netns_name;
    fault.description = FaultDescription(spec.kind, options.backend, &pod, options.ipv6);
    node.faults.push_back(std::move(fault));
  }
  // Each emulator runs one fault mode at a time.
  auto count_kinds = [&node](std::initializer_list<FaultKind> kinds) {
    int present = 0;
    for (FaultKind kind : kinds) present += NodeHasFault(node, kind) ? 1 : 0;
    return present;
  };
  if (count_kinds({FaultKind::kZdsDeadlock, FaultKind::kZdsSlowAck}) > 1) {
    return LabError("zds-deadlock and zds-slow-ack cannot be combined (one cni-sim fault mode)");
  }
  if (count_kinds({FaultKind::kZtunnelNoListeners, FaultKind::kZtunnelNack,
                   FaultKind::kZtunnelCrash}) > 1) {
    return LabError("ztunnel-no-listeners, ztunnel-nack and ztunnel-crash cannot be combined");
  }
  if (count_kinds({FaultKind::kZdsDeadlock, FaultKind::kZtunnelCrash}) > 0 &&
      count_kinds({FaultKind::kZdsDropAdds, FaultKind::kStaleWorkload}) > 0) {
    return LabError(
        "zds-drop-adds and stale-workload need a running hand-off (not with "
        "zds-deadlock or ztunnel-crash)");
  }
  return node;
}

namespace {

// The lab host's root: the CNI config directory, and /run reachable through it.
Status SetUpHostRoot(const LabNode& node) {
  std::error_code error;
  fs::create_directories(node.host_root + "/var", error);
  if (error) return LabError("mkdir " + node.host_root + "/var: " + error.message());
  // The machine's /run (sockets, netns pins) and its nftables userspace (binary, libraries,
  // package database: what the nft userspace check reads under a host root).
  const std::pair<std::string, std::string> links[] = {
      {"/run", "/run"}, {"/var/run", "/run"}, {"/var/lib", "/var/lib"}, {"/usr", "/usr"}};
  for (const auto& [inside, target] : links) {
    const std::string link = node.host_root + inside;
    fs::remove(link, error);
    fs::create_directory_symlink(target, link, error);
    if (error) return LabError("symlink " + link + " -> " + target + ": " + error.message());
  }
  return WriteLabCniConfig(node.prefix, !NodeHasFault(node, FaultKind::kCniChainMissing));
}

}  // namespace

Result<LabNode> LabUp(const LabOptions& options) {
  Result<LabNode> planned = PlanLab(options);
  if (!planned.ok()) return planned;
  LabNode node = std::move(planned).value();
  if (::geteuid() != 0) return LabError("needs root to create network namespaces");
  if (!ListLabNetns(node.prefix).empty() || fs::exists(LabRunDir(node.prefix))) {
    if (Status status = LabDown(node.prefix); !status.ok()) return status.error();
  }
  // Timed from here: removing an older lab is not part of bringing this one up.
  const auto start = std::chrono::steady_clock::now();
  const int workers =
      options.workers > 0
          ? options.workers
          : std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 2, 8);

  auto fail = [&node](const SourceError& error) -> Result<LabNode> {
    (void)LabDown(node.prefix);
    return SourceError{error.kind, "lab " + node.prefix + " up failed: " + error.message,
                       error.error_number};
  };
  auto phase = std::chrono::steady_clock::now();
  if (Status status = CreateNetns(node); !status.ok()) return fail(status.error());
  node.timings.netns_seconds = SecondsSince(phase);

  phase = std::chrono::steady_clock::now();
  if (Status status = SetUpHostLinks(node); !status.ok()) return fail(status.error());
  if (Status status = SetUpHostRules(node, options); !status.ok()) return fail(status.error());
  node.timings.host_seconds = SecondsSince(phase);

  phase = std::chrono::steady_clock::now();
  Status pods = ForEachParallel(node.pods.size(), workers,
                                [&node](size_t i) { return SetUpPod(node, node.pods[i]); });
  if (!pods.ok()) return fail(pods.error());
  node.timings.pods_seconds = SecondsSince(phase);
  if (node.zds.enabled) {
    phase = std::chrono::steady_clock::now();
    if (Status status = StartZds(node, options); !status.ok()) return fail(status.error());
    node.timings.zds_seconds = SecondsSince(phase);
  }
  const bool prober = options.kubelet_prober ||
                      std::any_of(node.faults.begin(), node.faults.end(), [](const auto& f) {
                        return f.kind == FaultKind::kProbeUnreplied;
                      });
  if (prober) {
    if (Status status = StartKubeletProber(node, options); !status.ok()) {
      return fail(status.error());
    }
  }
  if (Status status = SetUpHostRoot(node); !status.ok()) return fail(status.error());
  if (node.kube.enabled) {
    if (Status status = StartKubeApi(node); !status.ok()) return fail(status.error());
  }
  node.timings.total_seconds = SecondsSince(start);
  WriteManifest(node);
  return node;
}

std::vector<std::string> ListLabNetns(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(kNetnsDir, error)) {
    const std::string name = entry.path().filename().string();
    if (IsLabNetnsName(prefix, name)) names.push_back(name);
  }
  // "-host" sorts before "-pod-" so the host comes first.
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::monostate> LabDown(const std::string& prefix) {
  if (!ValidPrefix(prefix)) return LabError("invalid prefix '" + prefix + "'");
  std::error_code ignored;
  fs::remove(LabManifestPath(prefix), ignored);
  fs::remove(LabAgentFlagsPath(prefix), ignored);
  StopEmulators(prefix);  // before the netns go: they hold netns fds and sockets there
  const std::vector<std::string> names = ListLabNetns(prefix);
  if (names.empty()) return kOk;
  std::string batch;
  for (const std::string& name : names) batch += "netns del " + name + "\n";
  // -force: keep deleting after one failure; the leftover check below reports it.
  Result<CommandOutput> result = RunCommand({{"ip", "-force", "-batch", "-"}, batch});
  if (!result.ok()) return result.error();
  const std::vector<std::string> left = ListLabNetns(prefix);
  if (!left.empty()) {
    return LabError("lab " + prefix + " down left " + std::to_string(left.size()) +
                    " netns (first " + left.front() + "): " + result->err);
  }
  return kOk;
}

// ---- steady-state enrollment through cni-sim ---------------------------------------------------

namespace {

// Rewrites a `uid ...` lines file without the lines of `uid`; true when one was removed.
Result<bool> DropUidLines(const std::string& path, const std::string& uid) {
  std::ifstream in(path);
  if (!in) return false;
  std::string kept;
  bool removed = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(uid + " ", 0) == 0) {
      removed = true;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (!removed) return false;
  if (Status status = WriteFileAtomically(path, kept); !status.ok()) return status.error();
  return true;
}

Status AppendLine(const std::string& path, const std::string& line) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text.back() != '\n') text += '\n';
  return WriteFileAtomically(path, text + line + "\n");
}

struct CniSimHandle {
  std::string run_dir;
  std::string pods_file;
  std::string stats_file;
  std::string log;
  std::string pod_ips_file;  // cri-sim's, when the lab runs it
  int pid = 0;
};

Result<CniSimHandle> FindCniSim(const std::string& prefix) {
  if (!ValidPrefix(prefix)) return LabError("invalid prefix '" + prefix + "'");
  if (::geteuid() != 0) return LabError("needs root to change lab network namespaces");
  CniSimHandle cni;
  cni.run_dir = LabRunDir(prefix);
  cni.pods_file = cni.run_dir + "/pods.txt";
  cni.stats_file = cni.run_dir + "/cni-sim.stats";
  cni.log = cni.run_dir + "/cni-sim.log";
  cni.pod_ips_file = cni.run_dir + "/pod-ips.txt";
  cni.pid = ReadPidFile(PidFilePath(cni.run_dir, kCniSim));
  if (!DaemonRunning(cni.pid, kCniSim) || !fs::exists(cni.pods_file)) {
    return LabError("lab " + prefix + " has no running cni-sim (bring it up with --zds)");
  }
  return cni;
}

// SIGHUPs cni-sim and waits until one of the counters `keys` grows past its value before the
// signal; returns that key.
Result<std::string> SignalAndWait(const CniSimHandle& cni, const std::vector<std::string>& keys,
                                  int timeout_seconds) {
  std::map<std::string, uint64_t> before = ReadStatsFile(cni.stats_file);
  ::kill(cni.pid, SIGHUP);
  std::string grown;
  const bool done = WaitUntil(
      [&] {
        std::map<std::string, uint64_t> now = ReadStatsFile(cni.stats_file);
        for (const std::string& key : keys) {
          if (now[key] > before[key]) grown = key;
        }
        return !grown.empty();
      },
      std::chrono::seconds(timeout_seconds));
  if (!done) {
    return LabError("cni-sim did not report " + keys.front() + " in time" + LogTail(cni.log));
  }
  return grown;
}

// Index and name width of the lab's pod netns: `<prefix>-pod-NNN`.
std::vector<std::pair<int, std::string>> LabPodNetns(const std::string& prefix) {
  std::vector<std::pair<int, std::string>> pods;
  const std::string pod_prefix = prefix + "-pod-";
  for (const std::string& name : ListLabNetns(prefix)) {
    if (name.rfind(pod_prefix, 0) != 0) continue;
    pods.emplace_back(std::atoi(name.c_str() + pod_prefix.size()), name);
  }
  return pods;
}

// Names and addresses of a pod to enroll at `index`; touches nothing.
LabPod PlanEnrolledPod(const std::string& prefix, int index, int width,
                       const EnrollPodOptions& options) {
  LabPod pod;
  pod.index = index;
  pod.netns_name = PodNetnsName(prefix, pod.index, width);
  pod.netns_path = std::string(kNetnsDir) + "/" + pod.netns_name;
  pod.ipv4 = PodIpv4(pod.index);
  if (options.ipv6) pod.ipv6 = PodIpv6(pod.index);
  pod.pod_uid = FakePodUid(prefix, pod.index);
  pod.backend = options.backend;
  pod.variant = {.dns_capture = options.dns_capture, .ipv6 = options.ipv6};
  return pod;
}

// The host side of a pod's veth pair: what a CNI plugin sets up before istio-cni runs.
std::string HostLinkBatch(const LabPod& pod) {
  const std::string veth = "veth" + std::to_string(pod.index);
  std::string host = "link add " + veth + " type veth peer name eth0 netns " + pod.netns_name +
                     "\nlink set " + veth + " up\nroute add " + pod.ipv4 + "/32 dev " + veth + "\n";
  if (!pod.ipv6.empty()) {
    host += "addr add " + std::string(kLinkLocalGatewayV6) + "/64 dev " + veth + " nodad\n";
    host += "route add " + pod.ipv6 + "/128 dev " + veth + "\n";
  }
  return host;
}

// The pod side: links, addresses, default routes (no Istio state).
std::string PodLinkBatch(const LabPod& pod) {
  std::string links = "link set lo up\nlink set eth0 up\naddr add " + pod.ipv4 + "/16 dev eth0\n";
  links += std::string("route add default via ") + kGatewayV4 + " dev eth0\n";
  if (!pod.ipv6.empty()) {
    links += "addr add " + pod.ipv6 + "/64 dev eth0 nodad\n";
    links += std::string("route add default via ") + kLinkLocalGatewayV6 + " dev eth0\n";
  }
  return links;
}

sim::CniPod EnrollingCniPod(const std::string& prefix, const LabPod& pod,
                            const EnrollPodOptions& options) {
  sim::CniPod cni_pod{pod.pod_uid, pod.netns_name, "lab", "default", pod.netns_path};
  cni_pod.enrollment =
      sim::PodEnrollment{.backend = std::string(LabBackendName(pod.backend)),
                         .dns_capture = options.dns_capture,
                         .ipv6 = options.ipv6,
                         .host_netns_path = std::string(kNetnsDir) + "/" + prefix + "-host",
                         .ipv4 = pod.ipv4,
                         .ipv6_address = pod.ipv6};
  return cni_pod;
}

std::string PodIpsLine(const LabPod& pod) {
  return pod.pod_uid + " " + pod.ipv4 + (pod.ipv6.empty() ? "" : " " + pod.ipv6);
}

}  // namespace

Result<LabPod> EnrollPod(const std::string& prefix, const EnrollPodOptions& options) {
  Result<CniSimHandle> found = FindCniSim(prefix);
  if (!found.ok()) return found.error();
  const CniSimHandle& cni = *found;
  int next = 0;
  int width = 3;
  for (const auto& [index, name] : LabPodNetns(prefix)) {
    next = std::max(next, index + 1);
    width = std::max(width, static_cast<int>(name.size() - prefix.size() - 5));
  }
  const LabPod pod = PlanEnrolledPod(prefix, options.index.value_or(next), width, options);
  if (pod.index < 0 || pod.index >= kMaxPods) return LabError("pod index out of range");
  for (const auto& [index, name] : LabPodNetns(prefix)) {
    if (index == pod.index) return LabError("lab " + prefix + " already has pod " + name);
  }
  if (Status status = Run({{"ip", "netns", "add", pod.netns_name}}); !status.ok()) {
    return status.error();
  }
  // From here on a failure removes the pod again (pods-file line, cni-sim state, netns).
  auto fail = [&](const SourceError& error) -> Result<LabPod> {
    (void)UnenrollPod(prefix, pod.index, true, std::min(options.timeout_seconds, 5));
    (void)RunCommand({{"ip", "netns", "del", pod.netns_name}});
    return SourceError{error.kind, "enroll " + pod.netns_name + ": " + error.message,
                       error.error_number};
  };
  if (Status status = Run({{"ip", "-n", prefix + "-host", "-batch", "-"}, HostLinkBatch(pod)});
      !status.ok()) {
    return fail(status.error());
  }
  if (Status status = RunInNetns(pod.netns_path, {"ip", "-batch", "-"}, PodLinkBatch(pod));
      !status.ok()) {
    return fail(status.error());
  }
  sim::CniPod cni_pod = EnrollingCniPod(prefix, pod, options);
  // The runtime runs the chain of the lab host's CNI config: without istio-cni in it the pod
  // gets its network, the runtime knows it (cri-sim reads the pods file on every request), and
  // istio-cni is never told (cni-sim is not signalled; the line carries no enrollment).
  const bool captured = LabCniChainHasIstio(prefix);
  if (!captured) cni_pod.enrollment.reset();
  if (fs::exists(cni.pod_ips_file)) {
    if (Status status = AppendLine(cni.pod_ips_file, PodIpsLine(pod)); !status.ok()) {
      return fail(status.error());
    }
  }
  if (Status status = AppendLine(cni.pods_file, sim::PodsFileLine(cni_pod)); !status.ok()) {
    return fail(status.error());
  }
  if (!captured) {
    LabPod uncaptured = pod;
    uncaptured.meshed = false;
    return uncaptured;
  }
  Result<std::string> outcome = SignalAndWait(
      cni, {"enrollments", "enroll_failures", "enroll_pending"}, options.timeout_seconds);
  if (!outcome.ok()) return fail(outcome.error());
  if (*outcome != "enrollments") {
    return fail(LabError("cni-sim counted " + *outcome + LogTail(cni.log)));
  }
  return pod;
}

Result<std::monostate> UnenrollPod(const std::string& prefix, int index, bool delete_netns,
                                   int timeout_seconds) {
  Result<CniSimHandle> found = FindCniSim(prefix);
  if (!found.ok()) return found.error();
  const CniSimHandle& cni = *found;
  const std::string uid = FakePodUid(prefix, index);
  Result<bool> removed = DropUidLines(cni.pods_file, uid);
  if (!removed.ok()) return removed.error();
  (void)DropUidLines(cni.pod_ips_file, uid);
  Status signalled = kOk;
  if (*removed) {
    // A pod cni-sim never cached (its rules failed) is only dropped: wait for the pod count.
    Result<std::string> outcome =
        SignalAndWait(cni, {"unenrollments", "dels_sent"}, timeout_seconds);
    if (!outcome.ok()) signalled = outcome.error();
  }
  // The netns goes even when cni-sim failed: nothing of the pod may be left behind.
  std::string batch;
  for (const auto& [pod_index, name] : LabPodNetns(prefix)) {
    if (pod_index == index && delete_netns) batch += "netns del " + name + "\n";
  }
  if (!batch.empty()) {
    if (Status status = Run({{"ip", "-batch", "-"}, batch}); !status.ok()) return status;
  }
  if (!signalled.ok()) return signalled;
  if (!*removed && (batch.empty() || !delete_netns)) {
    return LabError("lab " + prefix + " has no pod with index " + std::to_string(index));
  }
  return kOk;
}

Result<std::vector<LabPod>> ChurnPods(const std::string& prefix, const ChurnBatch& batch) {
  Result<CniSimHandle> found = FindCniSim(prefix);
  if (!found.ok()) return found.error();
  const CniSimHandle& cni = *found;
  int next = 0;
  int width = 3;
  std::set<int> in_use;
  for (const auto& [index, name] : LabPodNetns(prefix)) {
    next = std::max(next, index + 1);
    width = std::max(width, static_cast<int>(name.size() - prefix.size() - 5));
    in_use.insert(index);
  }
  std::vector<LabPod> added;
  std::string netns_batch;
  std::string host_batch;
  for (const EnrollPodOptions& options : batch.add) {
    const int index = options.index.value_or(next);
    next = std::max(next, index + 1);
    if (index < 0 || index >= kMaxPods) return LabError("pod index out of range");
    if (!in_use.insert(index).second) {
      return LabError("lab " + prefix + " already has pod " + std::to_string(index));
    }
    added.push_back(PlanEnrolledPod(prefix, index, width, options));
    netns_batch += "netns add " + added.back().netns_name + "\n";
    host_batch += HostLinkBatch(added.back());
  }
  auto remove_added = [&] {
    std::string batch_text;
    for (const LabPod& pod : added) batch_text += "netns del " + pod.netns_name + "\n";
    if (!batch_text.empty()) (void)RunCommand({{"ip", "-force", "-batch", "-"}, batch_text});
  };
  if (!added.empty()) {
    if (Status status = Run({{"ip", "-batch", "-"}, netns_batch}); !status.ok()) {
      remove_added();
      return status.error();
    }
    Status status = Run({{"ip", "-n", prefix + "-host", "-batch", "-"}, host_batch});
    for (size_t i = 0; status.ok() && i < added.size(); ++i) {
      status = RunInNetns(added[i].netns_path, {"ip", "-batch", "-"}, PodLinkBatch(added[i]));
    }
    if (!status.ok()) {
      remove_added();
      return status.error();
    }
  }
  // One rewrite of each file: the removed pods' lines out, the new ones in.
  auto rewrite = [&](const std::string& path, const std::vector<std::string>& new_lines) {
    std::set<std::string> dropped;
    for (int index : batch.remove) dropped.insert(FakePodUid(prefix, index) + " ");
    std::ifstream in(path);
    std::string kept;
    size_t removed = 0;
    for (std::string line; std::getline(in, line);) {
      if (dropped.count(line.substr(0, line.find(' ') + 1))) {
        ++removed;
        continue;
      }
      kept += line + "\n";
    }
    for (const std::string& line : new_lines) kept += line + "\n";
    return std::make_pair(WriteFileAtomically(path, kept), removed);
  };
  std::vector<std::string> pod_lines;
  std::vector<std::string> ip_lines;
  for (size_t i = 0; i < added.size(); ++i) {
    pod_lines.push_back(sim::PodsFileLine(EnrollingCniPod(prefix, added[i], batch.add[i])));
    ip_lines.push_back(PodIpsLine(added[i]));
  }
  const std::map<std::string, uint64_t> before = ReadStatsFile(cni.stats_file);
  if (fs::exists(cni.pod_ips_file)) {
    if (Status status = rewrite(cni.pod_ips_file, ip_lines).first; !status.ok()) {
      remove_added();
      return status.error();
    }
  }
  auto [written, removals] = rewrite(cni.pods_file, pod_lines);
  if (!written.ok()) {
    remove_added();
    return written.error();
  }
  ::kill(cni.pid, SIGHUP);
  auto grown = [&before](const std::map<std::string, uint64_t>& now, const std::string& key) {
    const auto was = before.find(key);
    const auto is = now.find(key);
    return (is == now.end() ? 0 : is->second) - (was == before.end() ? 0 : was->second);
  };
  uint64_t failed = 0;
  const bool done = WaitUntil(
      [&] {
        const std::map<std::string, uint64_t> now = ReadStatsFile(cni.stats_file);
        failed = grown(now, "enroll_failures") + grown(now, "enroll_pending");
        return grown(now, "unenrollments") >= removals &&
               grown(now, "enrollments") + failed >= added.size();
      },
      std::chrono::seconds(batch.timeout_seconds));
  std::string batch_text;
  for (const auto& [pod_index, name] : LabPodNetns(prefix)) {
    if (std::find(batch.remove.begin(), batch.remove.end(), pod_index) != batch.remove.end()) {
      batch_text += "netns del " + name + "\n";
    }
  }
  if (!batch_text.empty()) {
    if (Status status = Run({{"ip", "-batch", "-"}, batch_text}); !status.ok()) {
      return status.error();
    }
  }
  if (!done) return LabError("cni-sim did not count the churn batch in time" + LogTail(cni.log));
  if (failed > 0) {
    return LabError("cni-sim counted " + std::to_string(failed) + " failed or pending enrollments" +
                    LogTail(cni.log));
  }
  return added;
}

Result<LabPod> AddPod(const std::string& prefix, const AddPodOptions& options) {
  if (!ValidPrefix(prefix)) return LabError("invalid prefix '" + prefix + "'");
  LabNode node;
  node.prefix = prefix;
  node.host_netns_name = prefix + "-host";
  node.host_netns_path = std::string(kNetnsDir) + "/" + node.host_netns_name;
  int next = 0;
  int width = 3;
  for (const auto& [index, name] : LabPodNetns(prefix)) {
    next = std::max(next, index + 1);
    width = std::max(width, static_cast<int>(name.size() - prefix.size() - 5));
  }
  LabPod pod;
  pod.index = options.index.value_or(next);
  if (pod.index < 0 || pod.index >= kMaxPods) return LabError("pod index out of range");
  for (const auto& [index, name] : LabPodNetns(prefix)) {
    if (index == pod.index) return LabError("lab " + prefix + " already has pod " + name);
  }
  pod.netns_name = PodNetnsName(prefix, pod.index, width);
  pod.netns_path = std::string(kNetnsDir) + "/" + pod.netns_name;
  pod.ipv4 = PodIpv4(pod.index);
  pod.pod_uid = FakePodUid(prefix, pod.index);
  pod.backend = options.backend;
  pod.variant = {.dns_capture = options.dns_capture};
  if (Status status = Run({{"ip", "netns", "add", pod.netns_name}}); !status.ok()) {
    return status.error();
  }
  Status status = Run({{"ip", "-n", node.host_netns_name, "-batch", "-"}, HostLinkBatch(pod)});
  if (status.ok()) status = SetUpPod(node, pod);
  if (!status.ok()) {
    (void)RunCommand({{"ip", "netns", "del", pod.netns_name}});
    return SourceError{status.error().kind, "add " + pod.netns_name + ": " + status.error().message,
                       status.error().error_number};
  }
  return pod;
}

Result<std::monostate> RemovePod(const std::string& prefix, int index) {
  if (!ValidPrefix(prefix)) return LabError("invalid prefix '" + prefix + "'");
  for (const auto& [pod_index, name] : LabPodNetns(prefix)) {
    if (pod_index == index) return Run({{"ip", "netns", "del", name}});
  }
  return LabError("lab " + prefix + " has no pod with index " + std::to_string(index));
}

ScopedLab::ScopedLab(const LabOptions& options) : prefix_(options.prefix), node_(LabUp(options)) {}

ScopedLab::~ScopedLab() { (void)LabDown(prefix_); }

}  // namespace ad::lab
