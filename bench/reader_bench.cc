// Per-reader cost inside one lab netns: what each in-process reader of KernelInspector costs on
// its own, so a change to one reader can be measured without a whole-node scan.
//
//   reader_bench [--backend iptables-nft|legacy|nft] [--no-ipv6] [--benchmark_* flags]
//
// Needs root: brings up a one-pod lab node (prefix "adreader", DNS capture) and removes it again.
// The pod netns holds Istio's in-pod rules, the lab host netns the probe sets (with elements).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lab/lab.h"
#include "scan/inspector.h"
#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"
#include "sources/route/route_reader.h"

namespace ad::bench {
namespace {

constexpr char kLabPrefix[] = "adreader";
constexpr uint32_t kIstioRouteTable = 100;

struct Target {
  std::string label;  // "pod" or "host"
  std::string netns_path;
};

// Runs `read` inside `netns_path` for every iteration; entering happens once, outside the timing.
template <typename Read>
void InNetns(benchmark::State& state, const std::string& netns_path, Read read) {
  auto guard = NetnsGuard::Enter(netns_path);
  if (!guard.ok()) {
    state.SkipWithError(guard.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    read(state);
  }
}

template <typename T>
void Check(benchmark::State& state, const Result<T>& result) {
  if (!result.ok()) {
    state.SkipWithError(result.error().message.c_str());
  }
  benchmark::DoNotOptimize(result);
}

void RegisterFor(const Target& target, NetnsInspector& inspector, const NetnsRecord& record) {
  const std::string path = target.netns_path;
  const std::string prefix = target.label + "/";
  auto reg = [&](const std::string& name, auto body) {
    benchmark::RegisterBenchmark((prefix + name).c_str(), body)
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.3);
  };
  reg("netns_enter_leave", [path](benchmark::State& state) {
    for (auto _ : state) {
      auto guard = NetnsGuard::Enter(path);
      Check(state, guard);
    }
  });
  reg("legacy_table_names", [path](benchmark::State& state) {
    InNetns(state, path, [](benchmark::State& s) {
      Check(s, ReadLegacyTableNames(Family::kIpv4));
      Check(s, ReadLegacyTableNames(Family::kIpv6));
    });
  });
  reg("legacy_tables", [path](benchmark::State& state) {
    InNetns(state, path, [](benchmark::State& s) {
      for (Family family : {Family::kIpv4, Family::kIpv6}) {
        auto names = ReadLegacyTableNames(family);
        if (names.ok()) Check(s, ReadLegacyTables(family, *names, ReadLimits{}));
      }
    });
  });
  reg("nftables", [path](benchmark::State& state) {
    InNetns(state, path, [](benchmark::State& s) { Check(s, ReadNfTables(ReadLimits{})); });
  });
  reg("ipsets", [path](benchmark::State& state) {
    InNetns(state, path, [](benchmark::State& s) { Check(s, ReadIpSets(ReadLimits{})); });
  });
  reg("routing", [path](benchmark::State& state) {
    InNetns(state, path, [](benchmark::State& s) { Check(s, ReadRouting({kIstioRouteTable})); });
  });
  reg("inspect", [&inspector, record](benchmark::State& state) {
    for (auto _ : state) {
      NetnsSnapshot snapshot = inspector.Inspect(record);
      if (snapshot.unreadable || !snapshot.errors.empty()) {
        state.SkipWithError("inspect reported errors");
        break;
      }
      benchmark::DoNotOptimize(snapshot);
    }
  });
}

int Main(int argc, char** argv) {
  lab::LabOptions options;
  options.prefix = kLabPrefix;
  options.pods = 1;
  options.backend = lab::LabBackend::kIptablesNft;
  options.ipv6 = true;
  options.dns_capture = true;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--no-ipv6") {
      options.ipv6 = false;
    } else if (arg == "--backend" && i + 1 < argc) {
      auto backend = lab::ParseBackend(argv[++i]);
      if (!backend.ok()) {
        std::fprintf(stderr, "reader_bench: %s\n", backend.error().message.c_str());
        return 2;
      }
      options.backend = *backend;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());

  lab::ScopedLab lab(options);
  if (!lab.ok()) {
    std::fprintf(stderr, "reader_bench: lab up failed: %s\n", lab.error().message.c_str());
    return 1;
  }
  std::printf("lab %s: backend %s, %s\n", kLabPrefix,
              std::string(lab::LabBackendName(options.backend)).c_str(),
              options.ipv6 ? "IPv4+IPv6" : "IPv4 only");
  std::unique_ptr<NetnsInspector> inspector = MakeKernelInspector(ReadLimits{});
  std::vector<std::pair<Target, NetnsRecord>> targets;
  for (const Target& target : {Target{"pod", lab.node().pods.at(0).netns_path},
                               Target{"host", lab.node().host_netns_path}}) {
    NetnsRecord record;
    record.paths = {target.netns_path};
    targets.emplace_back(target, record);
  }
  for (const auto& [target, record] : targets) {
    RegisterFor(target, *inspector, record);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
