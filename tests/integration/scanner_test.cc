// Whole-node scans with the kernel inspector over real namespaces: results in discovery order,
// vanished namespaces reported instead of crashing, the caller's netns untouched.
#include "scan/scanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "netns_test_util.h"
#include "sources/netfilter/readers.h"

namespace ad {
namespace {

using testing::ScopedNetns;

class ScannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

const std::string kPodRules =
    "*nat\n"
    "-N ISTIO_OUTPUT\n"
    "-A OUTPUT -j ISTIO_OUTPUT\n"
    "-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT "
    "--to-ports 15001\n"
    "COMMIT\n";

ScanOptions OptionsFor(const ScopedNetns& any_of_ours) {
  ScanOptions options;
  options.discovery.proc_root = "";
  options.discovery.netns_dirs = {"/run/netns"};
  options.discovery.name_glob = any_of_ours.name().substr(0, any_of_ours.name().rfind('-')) + "-*";
  options.discovery.host_netns_path = "/proc/self/ns/net";
  options.workers = 2;
  options.node_name = "test-node";
  return options;
}

const Table* FindLegacyTable(const NetnsSnapshot& snap, const std::string& name) {
  for (const Table& t : snap.netfilter.tables) {
    if (t.backend == Backend::kIptablesLegacy && t.name == name) return &t;
  }
  return nullptr;
}

TEST_F(ScannerTest, ScansEveryNetnsInDiscoveryOrder) {
  std::vector<std::unique_ptr<ScopedNetns>> pods;
  for (int i = 0; i < 5; ++i) {
    pods.push_back(std::make_unique<ScopedNetns>("scan"));
    ASSERT_TRUE(pods.back()->ok());
    ASSERT_EQ(pods.back()->ExecWithInput("iptables-legacy-restore --noflush", kPodRules), 0);
    ASSERT_EQ(pods.back()->Exec("ip rule add fwmark 0x111/0xfff pref 32764 lookup 100"), 0);
  }
  const ino_t before = testing::ThreadNetnsInode();
  auto inspector = MakeKernelInspector(ReadLimits{});
  NodeSnapshot node = ScanNode(OptionsFor(*pods[0]), *inspector);
  EXPECT_EQ(testing::ThreadNetnsInode(), before);

  EXPECT_EQ(node.node_name, "test-node");
  EXPECT_GT(node.taken_at_unix_ms, 0);
  EXPECT_GT(node.scan_ms, 0);
  ASSERT_EQ(node.netns.size(), pods.size() + 1);
  ASSERT_NE(node.Host(), nullptr);
  EXPECT_EQ(node.Host(), &node.netns[0]);
  for (size_t i = 0; i < pods.size(); ++i) {
    const NetnsSnapshot& snap = node.netns[i + 1];
    EXPECT_EQ(snap.netns.PrimaryPath(), pods[i]->path());
    EXPECT_FALSE(snap.unreadable);
    for (const SourceError& e : snap.errors) {
      ADD_FAILURE() << snap.netns.PrimaryPath() << ": " << e.source() << ": " << e.message;
    }
    EXPECT_EQ(snap.netfilter.legacy_tables_v4, std::vector<std::string>{"nat"});
    EXPECT_TRUE(snap.netfilter.legacy_tables_v6.empty());
    const Table* nat = FindLegacyTable(snap, "nat");
    ASSERT_NE(nat, nullptr);
    ASSERT_NE(nat->FindChain("ISTIO_OUTPUT"), nullptr);
    EXPECT_EQ(nat->FindChain("ISTIO_OUTPUT")->rules.size(), 1u);
    EXPECT_TRUE(std::any_of(snap.routing.rules.begin(), snap.routing.rules.end(),
                            [](const PolicyRule& r) { return r.table == 100; }));
    EXPECT_GT(snap.scan_ms, 0);
  }
}

TEST_F(ScannerTest, FreshNetnsStaysWithoutLegacyTablesAfterManyInspections) {
  ScopedNetns netns("scan");
  ASSERT_TRUE(netns.ok());
  auto inspector = MakeKernelInspector(ReadLimits{});
  NetnsRecord record;
  record.paths = {netns.path()};
  for (int i = 0; i < 1000; ++i) {
    NetnsSnapshot snap = inspector->Inspect(record);
    ASSERT_FALSE(snap.unreadable);
    ASSERT_TRUE(snap.netfilter.legacy_tables_v4.empty()) << "inspection " << i;
    ASSERT_TRUE(snap.netfilter.legacy_tables_v6.empty()) << "inspection " << i;
  }
  EXPECT_EQ(netns.Exec("sh -c '! test -s /proc/net/ip_tables_names'"), 0);
  EXPECT_EQ(netns.Exec("sh -c '! test -s /proc/net/ip6_tables_names'"), 0);
}

TEST_F(ScannerTest, MissingNetnsPathIsUnreadableNotACrash) {
  auto inspector = MakeKernelInspector(ReadLimits{});
  NetnsRecord record;
  record.paths = {"/run/netns/adt-scan-does-not-exist"};
  const ino_t before = testing::ThreadNetnsInode();
  NetnsSnapshot snap = inspector->Inspect(record);
  EXPECT_EQ(testing::ThreadNetnsInode(), before);
  EXPECT_TRUE(snap.unreadable);
  ASSERT_EQ(snap.errors.size(), 1u);
  EXPECT_EQ(snap.errors[0].error_number, ENOENT);
  EXPECT_NE(snap.errors[0].message.find("adt-scan-does-not-exist"), std::string::npos);

  NetnsRecord no_path;
  EXPECT_TRUE(inspector->Inspect(no_path).unreadable);
}

// Deletes one namespace after discovery, just before the scanner inspects it.
class DeletingInspector : public NetnsInspector {
 public:
  DeletingInspector(NetnsInspector& real, ScopedNetns& victim) : real_(real), victim_(victim) {}
  NetnsSnapshot Inspect(const NetnsRecord& netns) override {
    if (netns.PrimaryPath() == victim_.path() && !deleted_.exchange(true)) {
      std::thread([&] { victim_.Delete(); }).join();  // from another thread, as the brief asks
    }
    return real_.Inspect(netns);
  }

 private:
  NetnsInspector& real_;
  ScopedNetns& victim_;
  std::atomic<bool> deleted_{false};
};

TEST_F(ScannerTest, NetnsDeletedDuringScanIsReported) {
  ScopedNetns keep("scan");
  ScopedNetns victim("scan");
  ASSERT_TRUE(keep.ok() && victim.ok());
  const std::string victim_path = victim.path();
  auto real = MakeKernelInspector(ReadLimits{});
  DeletingInspector inspector(*real, victim);
  const ino_t before = testing::ThreadNetnsInode();
  NodeSnapshot node = ScanNode(OptionsFor(keep), inspector);
  EXPECT_EQ(testing::ThreadNetnsInode(), before);
  ASSERT_EQ(node.netns.size(), 3u);
  auto victim_snap = std::find_if(node.netns.begin(), node.netns.end(), [&](const auto& s) {
    return s.netns.PrimaryPath() == victim_path;
  });
  ASSERT_NE(victim_snap, node.netns.end());
  EXPECT_TRUE(victim_snap->unreadable);
  EXPECT_FALSE(victim_snap->errors.empty());
  auto keep_snap = std::find_if(node.netns.begin(), node.netns.end(), [&](const auto& s) {
    return s.netns.PrimaryPath() == keep.path();
  });
  ASSERT_NE(keep_snap, node.netns.end());
  EXPECT_FALSE(keep_snap->unreadable);
}

TEST_F(ScannerTest, NodeNameFallsBackToEnvironment) {
  ScopedNetns netns("scan");
  ASSERT_TRUE(netns.ok());
  ScanOptions options = OptionsFor(netns);
  options.node_name.clear();
  ::setenv("NODE_NAME", "env-node", 1);
  auto inspector = MakeKernelInspector(ReadLimits{});
  NodeSnapshot node = ScanNode(options, *inspector);
  ::unsetenv("NODE_NAME");
  EXPECT_EQ(node.node_name, "env-node");
}

}  // namespace
}  // namespace ad
