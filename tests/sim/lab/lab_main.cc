// ambient-lab: bring a simulated Istio ambient node (network namespaces + Istio's rules) up or
// down, show what exists, or print the generated rule text.
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "lab/lab.h"
#include "lab/rules.h"

namespace {

using ad::lab::LabOptions;

constexpr char kUsage[] = R"(usage: ambient-lab COMMAND [options]

commands:
  up       create the lab (an existing lab with the same prefix is removed first)
  down     remove every netns of the lab and stop its ZDS emulators (idempotent)
  status   list the lab's netns and what `up` injected
  rules    print the generated rule text for one variant (no root needed)
  add-pod  new pod NAME-pod-NNN enrolled by cni-sim like istio-cni does (a --zds lab):
           in-pod rules -> Add (acked) -> host probe set; honours --backend, --ipv6,
           --no-dns, --index
  del-pod  --index N: cni-sim unenrolls it (probe set -> rules -> Del), then its netns goes

options:
  --prefix NAME        lab name prefix (default adlab); netns are NAME-host, NAME-pod-NNN
                       (and NAME-ztunnel with --zds)
  --pods N             ambient pods (default 6)
  --plain-pods N       pods without Istio rules, indexed after the ambient pods (default 0)
  --backend B          legacy | iptables-nft | nft (default iptables-nft)
  --ipv6               IPv6 addresses and ip6 rules too
  --no-dns             global DNS capture off
  --mixed-variants     pod 0 ingress mode, pod 1 virtual interfaces, pod 2 DNS override
  --zds                run the ZDS emulators: cni-sim (istio-cni) in NAME-host, ztunnel-sim
                       in NAME-ztunnel; every ambient pod is handed off over ZDS
  --slow-ack-seconds N delay per ZDS request with zds-slow-ack (default 2)
  --fault KIND[:POD]   inject a fault (repeatable; default pod: the last ambient pod):
                       flip, dup-jump, delete-rule, no-policy-route, sidecar,
                       host-enrolled, no-probe-member;
                       ZDS (imply --zds): zds-deadlock, zds-slow-ack, zds-drop-adds,
                       ztunnel-no-listeners, ztunnel-nack, ztunnel-crash, stale-workload,
                       redirect-missing, dns-no-listener, no-lo-v6;
                       ztunnel health (imply --zds): ztunnel-fd-pressure, cert-unavailable;
                       probe path (implies --kubelet-prober): probe-unreplied;
                       node files (the lab host root, printed by `up`; pass it as
                       --host-root): cni-chain-missing;
                       desired state (imply --kube): not-enrolled, annotation-stale (a plain
                       pod, default the last), opted-out (an ambient pod)
  --kube               run kube-api-sim (a kube-apiserver emulator on 127.0.0.1) serving the
                       lab's pods (ambient pods in namespace lab, labelled ambient; plain pods
                       in lab-plain), istio-cni's pod and the node NAME-node; the agent flags
                       get --kubeconfig and --node-name (without it: --no-kube-api); with
                       --zds, cri-sim lists the plain pods too; add-pod and del-pod do not
                       change the API's objects
  --kubelet-prober     run kubelet-prober in NAME-host: TCP probes of every ambient pod's
                       :8080 every 2 s, SNATed to the probe address by the host rule
  --kubelet-uid N      skuid in the nft host rule (default 0)
  --workers N          parallel pod setup (default 2 per CPU, 2..8)
  rules only:  --ingress  --vif IF[,IF...]  --host
  add-pod/del-pod:  --index N   pod index (add-pod default: one past the highest in use)
)";

bool ParseCount(std::string_view text, int& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && value >= 0;
}

struct CliArgs {
  std::string command;
  LabOptions options;
  bool ingress = false;
  bool host = false;
  std::vector<std::string> vifs;
  std::optional<int> index;
};

int Fail(const std::string& message) {
  std::cerr << "ambient-lab: " << message << "\n";
  return 2;
}

std::string PrintRules(const CliArgs& args) {
  const LabOptions& options = args.options;
  const ad::AmbientVariant variant{.dns_capture = options.dns_capture,
                                   .ingress_mode = args.ingress,
                                   .virtual_interfaces = args.vifs,
                                   .ipv6 = options.ipv6};
  if (options.backend == ad::lab::LabBackend::kNft) {
    return args.host ? ad::lab::NftHostScript(options.ipv6, options.snat)
                     : ad::lab::NftInpodScript(variant, options.snat);
  }
  std::string text;
  for (ad::Family family : {ad::Family::kIpv4, ad::Family::kIpv6}) {
    if (family == ad::Family::kIpv6 && !options.ipv6) break;
    text += "# " + std::string(family == ad::Family::kIpv4 ? "ip" : "ip6") + "tables-restore\n";
    text += args.host ? ad::lab::IptablesHostRestore(family, options.snat)
                      : ad::lab::IptablesInpodRestore(variant, family, options.snat);
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  CliArgs cli;
  cli.command = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    auto value = [&](std::string_view& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string_view text;
    int number = 0;
    if (arg == "--ipv6") {
      cli.options.ipv6 = true;
    } else if (arg == "--zds") {
      cli.options.zds = true;
    } else if (arg == "--kubelet-prober") {
      cli.options.kubelet_prober = true;
    } else if (arg == "--kube") {
      cli.options.kube = true;
    } else if (arg == "--slow-ack-seconds" && value(text) && ParseCount(text, number)) {
      cli.options.slow_ack_seconds = number;
    } else if (arg == "--no-dns") {
      cli.options.dns_capture = false;
    } else if (arg == "--mixed-variants") {
      cli.options.mixed_variants = true;
    } else if (arg == "--ingress") {
      cli.ingress = true;
    } else if (arg == "--host") {
      cli.host = true;
    } else if (arg == "--prefix" && value(text)) {
      cli.options.prefix = text;
    } else if (arg == "--pods" && value(text) && ParseCount(text, number)) {
      cli.options.pods = number;
    } else if (arg == "--plain-pods" && value(text) && ParseCount(text, number)) {
      cli.options.plain_pods = number;
    } else if (arg == "--index" && value(text) && ParseCount(text, number)) {
      cli.index = number;
    } else if (arg == "--workers" && value(text) && ParseCount(text, number)) {
      cli.options.workers = number;
    } else if (arg == "--kubelet-uid" && value(text) && ParseCount(text, number)) {
      cli.options.snat.kubelet_uid = static_cast<uint32_t>(number);
    } else if (arg == "--backend" && value(text)) {
      ad::Result<ad::lab::LabBackend> backend = ad::lab::ParseBackend(text);
      if (!backend.ok()) return Fail(backend.error().message);
      cli.options.backend = *backend;
    } else if (arg == "--fault" && value(text)) {
      ad::Result<ad::lab::FaultSpec> fault = ad::lab::ParseFault(text);
      if (!fault.ok()) return Fail(fault.error().message);
      cli.options.faults.push_back(*fault);
    } else if (arg == "--vif" && value(text)) {
      std::istringstream list{std::string(text)};
      for (std::string vif; std::getline(list, vif, ',');) cli.vifs.push_back(vif);
    } else {
      return Fail("bad or incomplete option '" + std::string(arg) + "' (see --help)");
    }
  }

  if (cli.command == "up") {
    ad::Result<ad::lab::LabNode> node = ad::lab::LabUp(cli.options);
    if (!node.ok()) return Fail(node.error().message);
    const ad::lab::LabTimings& t = node->timings;
    std::cout << node->Describe();
    std::printf("lab %s up in %.2fs (netns %.2fs, host %.2fs, pods %.2fs, zds %.2fs)\n",
                node->prefix.c_str(), t.total_seconds, t.netns_seconds, t.host_seconds,
                t.pods_seconds, t.zds_seconds);
    return 0;
  }
  if (cli.command == "down") {
    const size_t count = ad::lab::ListLabNetns(cli.options.prefix).size();
    ad::Result<std::monostate> down = ad::lab::LabDown(cli.options.prefix);
    if (!down.ok()) return Fail(down.error().message);
    std::cout << "lab " << cli.options.prefix << " down (" << count << " netns removed)\n";
    return 0;
  }
  if (cli.command == "status") {
    const std::vector<std::string> names = ad::lab::ListLabNetns(cli.options.prefix);
    if (names.empty()) {
      std::cout << "lab " << cli.options.prefix << ": not running\n";
      return 1;
    }
    std::ifstream manifest(ad::lab::LabManifestPath(cli.options.prefix));
    if (manifest) {
      std::cout << manifest.rdbuf();
    } else {
      std::cout << "lab " << cli.options.prefix << " (no manifest; partial or foreign lab)\n";
    }
    std::cout << names.size() << " netns present:";
    for (const std::string& name : names) std::cout << " " << name;
    std::cout << "\n";
    for (const ad::lab::LabEmulator& emulator : ad::lab::LabEmulators(cli.options.prefix)) {
      std::cout << emulator.name << " pid " << emulator.pid
                << (emulator.running ? " running" : " NOT running") << "\n";
    }
    return 0;
  }
  if (cli.command == "rules") {
    std::cout << PrintRules(cli);
    return 0;
  }
  if (cli.command == "add-pod") {
    ad::lab::EnrollPodOptions enroll;
    enroll.backend = cli.options.backend;
    enroll.dns_capture = cli.options.dns_capture;
    enroll.ipv6 = cli.options.ipv6;
    enroll.index = cli.index;
    ad::Result<ad::lab::LabPod> pod = ad::lab::EnrollPod(cli.options.prefix, enroll);
    if (!pod.ok()) return Fail(pod.error().message);
    std::cout << "pod " << pod->netns_name << " " << pod->ipv4
              << (pod->ipv6.empty() ? "" : " " + pod->ipv6) << " uid=" << pod->pod_uid
              << " enrolled by cni-sim (index " << pod->index << ")\n";
    return 0;
  }
  if (cli.command == "del-pod") {
    if (!cli.index) return Fail("del-pod needs --index N");
    ad::Result<std::monostate> removed = ad::lab::UnenrollPod(cli.options.prefix, *cli.index);
    if (!removed.ok()) return Fail(removed.error().message);
    std::cout << "pod index " << *cli.index << " unenrolled by cni-sim and removed\n";
    return 0;
  }
  return Fail("unknown command '" + cli.command + "' (up, down, status, rules, add-pod, del-pod)");
}
