// Acceptance tests of the whole pipeline on the lab node: real netns, Istio's rules installed with
// the real tools, the kernel readers, the analysis. Each injected fault must produce exactly its
// finding in exactly its netns; healthy labs none; scanning never changes any ruleset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "analysis/analysis.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "scan/scanner.h"

namespace ad {
namespace {

using lab::FaultKind;
using lab::LabBackend;

std::string UniquePrefix(const std::string& tag) {
  return "adt" + std::to_string(::getpid() % 100000) + tag;
}

ScanOptions LabScanOptions(const lab::LabNode& node) {
  ScanOptions options;
  options.discovery.proc_root = "";
  options.discovery.netns_dirs = {"/run/netns"};
  options.discovery.name_glob = node.prefix + "-*";
  options.discovery.host_netns_path = node.host_netns_path;
  options.workers = 2;
  options.node_name = "lab";
  return options;
}

struct ScanResult {
  NodeSnapshot snapshot;
  NodeAnalysis analysis;
};

ScanResult ScanLab(const lab::LabNode& node) {
  auto inspector = MakeKernelInspector(ReadLimits{});
  ScanResult r;
  r.snapshot = ScanNode(LabScanOptions(node), *inspector);
  r.analysis = Analyze(r.snapshot);
  return r;
}

// (netns path, code) pairs: the shape the acceptance criteria speak about.
std::set<std::pair<std::string, std::string>> FindingPairs(const NodeAnalysis& analysis) {
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& f : analysis.findings) out.insert({f.netns_path, std::string(f.code_name())});
  return out;
}

std::string Dump(const NodeAnalysis& analysis) {
  std::string out;
  for (const auto& f : analysis.findings) {
    out += std::string(f.code_name()) + " " + f.netns_path + ": " + f.summary + "\n";
    for (const auto& e : f.evidence) out += "    " + e + "\n";
  }
  return out;
}

std::string ExpectedCode(FaultKind kind) {
  switch (kind) {
    case FaultKind::kFlip:
      return "MIXED_BACKEND";
    case FaultKind::kDupJump:
      return "DUPLICATE_RULE";
    case FaultKind::kDeleteRule:
      return "INCOMPLETE_RULESET";
    case FaultKind::kNoPolicyRoute:
      return "INCOMPLETE_RULESET";
    case FaultKind::kSidecar:
      return "DATAPLANE_CONFLICT";
    case FaultKind::kHostEnrolled:
      return "HOST_NETNS_ENROLLED";
    case FaultKind::kNoProbeMember:
      return "PROBE_SNAT_MISSING";
    default:  // ZDS faults (lab/lab.h ZdsFaultKinds) are not rule faults
      break;
  }
  return "?";
}

class LabReportTest : public ::testing::TestWithParam<std::tuple<LabBackend, bool>> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

std::string ParamName(const ::testing::TestParamInfo<std::tuple<LabBackend, bool>>& info) {
  std::string name(lab::LabBackendName(std::get<0>(info.param)));
  for (char& c : name) c = c == '-' ? '_' : c;
  return name + (std::get<1>(info.param) ? "_ipv6" : "_ipv4");
}

TEST_P(LabReportTest, HealthyLabWithEveryVariantHasNoFindings) {
  auto [backend, ipv6] = GetParam();
  lab::LabOptions options;
  options.prefix = UniquePrefix("h");
  options.pods = 4;
  options.plain_pods = 1;
  options.backend = backend;
  options.ipv6 = ipv6;
  options.mixed_variants = true;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  ScanResult r = ScanLab(lab.node());
  ASSERT_EQ(r.snapshot.netns.size(), 1u + 5u);
  EXPECT_TRUE(r.analysis.findings.empty()) << Dump(r.analysis);
  int ambient = 0;
  for (size_t i = 0; i < r.analysis.netns.size(); ++i) {
    const auto& c = r.analysis.netns[i];
    if (c.mode == DataplaneMode::kAmbient) {
      ++ambient;
      ASSERT_TRUE(c.variant.has_value());
      EXPECT_EQ(c.variant->ipv6, ipv6) << r.snapshot.netns[i].netns.PrimaryPath();
    }
  }
  EXPECT_EQ(ambient, 4);
  EXPECT_TRUE(r.analysis.netns.front().host_rules_present);
}

TEST_P(LabReportTest, EachFaultGivesExactlyItsFindingInItsNetns) {
  auto [backend, ipv6] = GetParam();
  lab::LabOptions options;
  options.prefix = UniquePrefix("f");
  options.backend = backend;
  options.ipv6 = ipv6;
  options.plain_pods = 1;
  // One healthy pod 0, then one pod per fault (the host takes host-enrolled).
  int next_pod = 1;
  for (FaultKind kind : lab::AllFaultKinds()) {
    if (kind == FaultKind::kFlip && backend == LabBackend::kNft) continue;  // iptables-only bug
    lab::FaultSpec spec{kind, std::nullopt};
    if (kind != FaultKind::kHostEnrolled) spec.pod_index = next_pod++;
    options.faults.push_back(spec);
  }
  options.pods = next_pod;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  std::set<std::pair<std::string, std::string>> expected;
  for (const auto& fault : lab.node().faults) {
    expected.insert({"/run/netns/" + fault.netns_name, ExpectedCode(fault.kind)});
  }
  ScanResult r = ScanLab(lab.node());
  EXPECT_EQ(FindingPairs(r.analysis), expected) << Dump(r.analysis);
  EXPECT_EQ(r.analysis.findings.size(), expected.size()) << Dump(r.analysis);
  for (const auto& f : r.analysis.findings) {
    EXPECT_FALSE(f.evidence.empty()) << std::string(f.code_name());
    EXPECT_FALSE(f.hint.empty()) << std::string(f.code_name());
    EXPECT_NE(f.netns_inode, 0u) << std::string(f.code_name());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LabReportTest,
                         ::testing::Combine(::testing::Values(LabBackend::kLegacy,
                                                              LabBackend::kIptablesNft,
                                                              LabBackend::kNft),
                                            ::testing::Bool()),
                         ParamName);

// What the tools print, per netns: the reference for "scanning changed nothing".
std::string ToolView(const std::string& netns_path) {
  std::string view;
  for (const char* tool : {"iptables-legacy-save", "ip6tables-legacy-save", "iptables-nft-save",
                           "ip6tables-nft-save"}) {
    auto out = lab::RunCommand({{tool}, "", netns_path});
    // Drop timestamp comment lines ("# Generated by ... on <date>").
    std::string kept;
    if (out.ok()) {
      size_t pos = 0;
      while (pos < out->out.size()) {
        size_t end = out->out.find('\n', pos);
        if (end == std::string::npos) end = out->out.size();
        std::string line = out->out.substr(pos, end - pos);
        if (line.rfind("# ", 0) != 0) kept += line + "\n";
        pos = end + 1;
      }
    }
    view += std::string("== ") + tool + "\n" + kept;
  }
  auto nft = lab::RunCommand({{"nft", "list", "ruleset"}, "", netns_path});
  view += "== nft\n" + (nft.ok() ? nft->out : "error");
  for (const char* names : {"/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"}) {
    auto cat = lab::RunCommand({{"cat", names}, "", netns_path});
    view += std::string("== ") + names + "\n" + (cat.ok() ? cat->out : "error");
  }
  // Packet counters move with background traffic (IPv6 neighbour discovery); they are not state.
  static const std::regex kSaveCounters(R"(\[\d+:\d+\])");
  static const std::regex kNftCounters(R"(packets \d+ bytes \d+)");
  view = std::regex_replace(view, kSaveCounters, "[0:0]");
  return std::regex_replace(view, kNftCounters, "packets 0 bytes 0");
}

class LabReadOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

TEST_F(LabReadOnlyTest, ThousandScansChangeNothingAndCreateNoLegacyTable) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("ro");
  options.pods = 2;
  options.plain_pods = 2;  // no legacy tables at all: the scan must not create any
  options.backend = LabBackend::kIptablesNft;
  options.ipv6 = true;
  options.faults = {{FaultKind::kFlip, 1}};  // one pod with legacy tables too
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  std::vector<std::string> paths = {lab.node().host_netns_path};
  for (const auto& pod : lab.node().pods) paths.push_back(pod.netns_path);
  std::map<std::string, std::string> before;
  for (const auto& p : paths) before[p] = ToolView(p);
  std::string root_before = ToolView("");

  auto inspector = MakeKernelInspector(ReadLimits{});
  ScanOptions scan = LabScanOptions(lab.node());
  for (int i = 0; i < 1000; ++i) {
    NodeSnapshot snapshot = ScanNode(scan, *inspector);
    ASSERT_EQ(snapshot.netns.size(), paths.size());
  }
  for (const auto& p : paths) EXPECT_EQ(ToolView(p), before[p]) << p;
  EXPECT_EQ(ToolView(""), root_before) << "the machine's own netns changed";
  // The plain pods still have no legacy table (ip_tables_names empty).
  for (const auto& pod : lab.node().pods) {
    if (pod.meshed) continue;
    auto names = lab::RunCommand({{"cat", "/proc/net/ip_tables_names"}, "", pod.netns_path});
    ASSERT_TRUE(names.ok());
    EXPECT_EQ(names->out, "") << pod.netns_name;
    auto names6 = lab::RunCommand({{"cat", "/proc/net/ip6_tables_names"}, "", pod.netns_path});
    ASSERT_TRUE(names6.ok());
    EXPECT_EQ(names6->out, "") << pod.netns_name;
  }
}

TEST_F(LabReadOnlyTest, NetnsDeletedDuringScansGiveUnreadableOrDisappearNeverCrash) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("del");
  options.pods = 40;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  std::atomic<bool> done{false};
  std::thread deleter([&] {
    for (const auto& pod : lab.node().pods) {
      (void)lab::RunCommand({{"ip", "netns", "delete", pod.netns_name}});
    }
    done = true;
  });
  auto inspector = MakeKernelInspector(ReadLimits{});
  ScanOptions scan = LabScanOptions(lab.node());
  int scans = 0;
  std::set<std::string> codes;
  while (!done || scans < 3) {
    NodeSnapshot snapshot = ScanNode(scan, *inspector);
    NodeAnalysis analysis = Analyze(snapshot);
    for (const auto& f : analysis.findings) codes.insert(std::string(f.code_name()));
    ++scans;
    if (scans > 10000) break;
  }
  deleter.join();
  codes.erase("NETNS_UNREADABLE");
  EXPECT_TRUE(codes.empty()) << "unexpected findings while pods vanished: " << *codes.begin();
  NodeSnapshot last = ScanNode(scan, *inspector);
  EXPECT_EQ(last.netns.size(), 1u) << "only the host is left";
}

TEST_F(LabReadOnlyTest, TenThousandRuleNetnsScansCorrectly) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("big");
  options.pods = 1;
  options.backend = LabBackend::kIptablesNft;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabPod& pod = lab.node().pods.front();

  // 5,000 legacy + 5,000 iptables-nft filter rules next to the Istio rules (a busy CNI).
  std::string restore = "*filter\n:KUBE-BIG - [0:0]\n";
  for (int i = 0; i < 5000; ++i) {
    restore += "-A KUBE-BIG -s 10." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
               ".1/32 -p tcp -m tcp --dport " + std::to_string(1000 + i) + " -j ACCEPT\n";
  }
  restore += "COMMIT\n";
  ASSERT_EQ(lab::RunCommand({{"iptables-legacy-restore", "--noflush"}, restore, pod.netns_path})
                ->exit_code,
            0);
  ASSERT_EQ(
      lab::RunCommand({{"iptables-nft-restore", "--noflush"}, restore, pod.netns_path})->exit_code,
      0);

  ScanResult r = ScanLab(lab.node());
  const NetnsSnapshot* snap = nullptr;
  for (const auto& ns : r.snapshot.netns) {
    if (ns.netns.PrimaryPath() == pod.netns_path) snap = &ns;
  }
  ASSERT_NE(snap, nullptr);
  size_t big_rules = 0;
  for (const auto& t : snap->netfilter.tables) {
    if (const Chain* c = t.FindChain("KUBE-BIG")) big_rules += c->rules.size();
  }
  EXPECT_EQ(big_rules, 10000u);
  EXPECT_TRUE(r.analysis.findings.empty()) << Dump(r.analysis);
}

}  // namespace
}  // namespace ad
