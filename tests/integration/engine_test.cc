// The engine: one Step() = discovery + inspection + analysis + the changes since the last step.
// Discovery runs on a real netns (root); the inspector is scripted so each step's picture is
// chosen by the test, and the clock is the test's.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "netns_test_util.h"
#include "scripted_inspector.h"

namespace ad {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    netns_ = std::make_unique<testing::ScopedNetns>("engine");
    ASSERT_TRUE(netns_->ok());
    config_.discovery.proc_root.clear();
    config_.discovery.netns_dirs = {"/run/netns"};
    config_.discovery.name_glob = netns_->name();
    config_.discovery.host_netns_path = netns_->path();  // the only netns: it plays the host
    config_.zds = false;
    config_.cri = false;
  }

  // An engine over this test's netns (every "adt-engine-<pid>-*"), reading through a scripted
  // inspector that returns `first` until told otherwise; its first full step has run.
  std::unique_ptr<Engine> ScriptedEngine(NetnsSnapshot first, ScriptedInspector** script) {
    EngineConfig config = config_;
    config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
    auto inspector = std::make_unique<ScriptedInspector>();
    *script = inspector.get();
    inspector->SetNext(std::move(first));
    auto engine = std::make_unique<Engine>(config, std::move(inspector));
    (void)engine->Step();
    return engine;
  }

  std::unique_ptr<testing::ScopedNetns> netns_;
  EngineConfig config_;
};

TEST_F(EngineTest, StepsReportOpenedAndResolvedFindingsOnce) {
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  int64_t now = 1'000'000;
  Engine engine(config_, std::move(inspector), [&now] { return now; });

  script->SetNext(PartlyFailed("dump: EPERM"));
  EngineStep first = engine.Step();
  ASSERT_TRUE(first.usable);
  EXPECT_EQ(first.snapshot.taken_at_unix_ms, now) << "the engine's clock stamps the snapshot";
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].kind, FindingChange::Kind::kOpened);
  EXPECT_EQ(first.changes[0].finding.code, FindingCode::kNetnsUnreadable);
  EXPECT_EQ(engine.open_findings().size(), 1u);

  now += 5000;
  script->SetNext(PartlyFailed("dump: EPERM (reworded)"));
  EngineStep same = engine.Step();
  EXPECT_TRUE(same.changes.empty()) << "new message text, same condition";
  EXPECT_EQ(same.snapshot.taken_at_unix_ms, now);

  script->SetNext(Readable());
  EngineStep fixed = engine.Step();
  ASSERT_EQ(fixed.changes.size(), 1u);
  EXPECT_EQ(fixed.changes[0].kind, FindingChange::Kind::kResolved);
  EXPECT_TRUE(engine.open_findings().empty());
  EXPECT_EQ(script->calls(), 3);
}

TEST_F(EngineTest, AnUnusableStepKeepsTheOpenFindings) {
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  Engine engine(config_, std::move(inspector));

  script->SetNext(PartlyFailed("dump: EPERM"));
  ASSERT_EQ(engine.Step().changes.size(), 1u);
  script->SetNext(Unreadable());
  EngineStep failed = engine.Step();
  EXPECT_FALSE(failed.usable);
  EXPECT_TRUE(failed.changes.empty());
  EXPECT_EQ(engine.open_findings().size(), 1u) << "nothing was judged, nothing resolved";

  script->SetNext(PartlyFailed("dump: EPERM"));
  EngineStep back = engine.Step();
  EXPECT_TRUE(back.usable);
  EXPECT_TRUE(back.scan_recovered);
  EXPECT_TRUE(back.changes.empty()) << "the same finding, still open";
}

// A partial step reads only the planned netns (and new ones); the rest come from the last step.
TEST_F(EngineTest, PartialStepsReadOnlyWhatIsDirtyOrNew) {
  testing::ScopedNetns second("engine");
  ASSERT_TRUE(second.ok());
  EngineConfig config = config_;
  config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  script->SetNext(Readable());
  Engine engine(config, std::move(inspector));

  EngineStep full = engine.Step();
  ASSERT_EQ(full.snapshot.netns.size(), 2u);
  EXPECT_EQ(script->calls(), 2);
  const uint64_t second_inode = testing::InodeOf(second.path());

  EngineStep idle = engine.Step(StepPlan{.full = false, .dirty_netns = {}, .node_sources = false});
  EXPECT_EQ(script->calls(), 2) << "nothing dirty: nothing read";
  EXPECT_EQ(idle.snapshot.netns.size(), 2u);
  EXPECT_TRUE(idle.changes.empty());

  script->SetNext(PartlyFailed("dump: EPERM"));
  EngineStep dirty =
      engine.Step(StepPlan{.full = false, .dirty_netns = {second_inode}, .node_sources = false});
  EXPECT_EQ(script->calls(), 3) << "only the dirty netns is read";
  ASSERT_EQ(dirty.changes.size(), 1u);
  EXPECT_EQ(dirty.changes[0].finding.netns_inode, second_inode);

  testing::ScopedNetns third("engine");
  ASSERT_TRUE(third.ok());
  script->SetNext(Readable());
  EngineStep grown = engine.Step(StepPlan{.full = false, .dirty_netns = {}, .node_sources = false});
  EXPECT_EQ(script->calls(), 4) << "a new netns is read without being planned";
  EXPECT_EQ(grown.snapshot.netns.size(), 3u);
  EXPECT_TRUE(grown.changes.empty()) << "the dirty netns kept its earlier snapshot";
}

TEST_F(EngineTest, SkipsOnlyPartialStepsThatFoundNothingNew) {
  testing::ScopedNetns second("engine");
  ASSERT_TRUE(second.ok());
  EngineConfig config = config_;
  config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  script->SetNext(PartlyFailed("dump: EPERM"));
  Engine engine(config, std::move(inspector));
  const StepPlan idle{
      .full = false, .dirty_netns = {}, .node_sources = true, .skip_if_unchanged = true};

  EngineStep full = engine.Step();
  ASSERT_EQ(full.snapshot.netns.size(), 2u);
  EXPECT_FALSE(full.unchanged);
  EngineStep quiet = engine.Step(idle);
  EXPECT_TRUE(quiet.unchanged) << "nothing read, same records, no node source, no aged signal";
  EXPECT_TRUE(quiet.snapshot.netns.empty()) << "an unchanged step carries no data";
  EXPECT_EQ(engine.open_findings().size(), 2u) << "the open findings stay";
  EXPECT_FALSE(
      engine.Step(StepPlan{.full = false, .dirty_netns = {}, .node_sources = true}).unchanged)
      << "only when asked";

  testing::ScopedNetns third("engine");
  ASSERT_TRUE(third.ok());
  script->SetNext(Readable());
  EngineStep grown = engine.Step(idle);
  EXPECT_FALSE(grown.unchanged) << "a new netns was read";
  ASSERT_EQ(grown.snapshot.netns.size(), 3u);
  EXPECT_TRUE(engine.Step(idle).unchanged);

  const uint64_t second_inode = testing::InodeOf(second.path());
  StepPlan dirty = idle;
  dirty.dirty_netns = {second_inode};
  EngineStep reread = engine.Step(dirty);
  EXPECT_FALSE(reread.unchanged) << "a dirty netns was read";
  ASSERT_EQ(reread.changes.size(), 1u) << "and its finding resolved";
  EXPECT_EQ(reread.changes[0].kind, FindingChange::Kind::kResolved);

  third.Delete();
  EngineStep shrunk = engine.Step(idle);
  EXPECT_FALSE(shrunk.unchanged) << "a netns went away";
  EXPECT_EQ(shrunk.snapshot.netns.size(), 2u);
  EXPECT_TRUE(engine.Step(idle).unchanged);
  EXPECT_FALSE(engine.Step().unchanged) << "a full step is never skipped";
}

TEST_F(EngineTest, SkipsAPartialStepWhoseRereadsFoundTheSame) {
  testing::ScopedNetns second("engine");
  ASSERT_TRUE(second.ok());
  EngineConfig config = config_;
  config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  script->SetNext(Readable());
  Engine engine(config, std::move(inspector));
  ASSERT_EQ(engine.Step().snapshot.netns.size(), 2u);

  const uint64_t second_inode = testing::InodeOf(second.path());
  StepPlan dirty{.full = false,
                 .dirty_netns = {second_inode},
                 .node_sources = false,
                 .skip_if_unchanged = true};
  EXPECT_TRUE(engine.Step(dirty).unchanged) << "read again, found the same";
  EXPECT_EQ(script->calls(), 3);

  NetnsSnapshot with_rule = Readable();
  with_rule.netfilter.tables.push_back(Table{.backend = Backend::kNft, .name = "t"});
  script->SetNext(with_rule);
  EngineStep changed = engine.Step(dirty);
  EXPECT_FALSE(changed.unchanged) << "a table appeared";
  ASSERT_EQ(changed.snapshot.netns.size(), 2u);
  EXPECT_TRUE(engine.Step(dirty).unchanged) << "and stayed";
}

TEST_F(EngineTest, RelistenAllReadsOnlyTheListenersOfTheOtherNetns) {
  testing::ScopedNetns second("engine");
  ASSERT_TRUE(second.ok());
  EngineConfig config = config_;
  config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  NetnsSnapshot with_table = Readable();
  with_table.netfilter.tables.push_back(Table{.backend = Backend::kNft, .name = "kept"});
  script->SetNext(with_table);
  Engine engine(config, std::move(inspector));
  ASSERT_EQ(engine.Step().snapshot.netns.size(), 2u);

  const uint64_t second_inode = testing::InodeOf(second.path());
  StepPlan relisten{.full = false,
                    .dirty_netns = {second_inode},
                    .node_sources = false,
                    .relisten_all = true,
                    .skip_if_unchanged = true};
  EXPECT_TRUE(engine.Step(relisten).unchanged) << "same tables, same (no) listeners";
  EXPECT_EQ(script->relistens(), 1) << "only the netns not read in full";

  NetnsSnapshot listening = Readable();  // no table: a full read would drop "kept"
  listening.listeners.push_back(ListeningSocket{.address = "0.0.0.0", .port = 15008, .inode = 7});
  listening.errors.push_back({SourceKind::kSockDiag, "udp dump: EPERM", 1});
  script->SetNext(listening);
  relisten.dirty_netns = {};
  EngineStep step = engine.Step(relisten);
  EXPECT_FALSE(step.unchanged) << "a listener appeared";
  ASSERT_EQ(step.snapshot.netns.size(), 2u);
  for (const NetnsSnapshot& netns : step.snapshot.netns) {
    ASSERT_EQ(netns.listeners.size(), 1u) << netns.netns.PrimaryPath();
    EXPECT_EQ(netns.listeners[0].port, 15008);
    ASSERT_EQ(netns.netfilter.tables.size(), 1u) << "the rest of the netns is kept";
    EXPECT_EQ(netns.netfilter.tables[0].name, "kept");
    ASSERT_EQ(netns.errors.size(), 1u) << "the listener read's error comes along";
    EXPECT_EQ(netns.errors[0].kind, SourceKind::kSockDiag);
  }
  EXPECT_TRUE(engine.Step(relisten).unchanged);
  script->SetNext(with_table);
  step = engine.Step(relisten);
  EXPECT_FALSE(step.unchanged) << "the listener went away";
  for (const NetnsSnapshot& netns : step.snapshot.netns) {
    EXPECT_TRUE(netns.listeners.empty());
    EXPECT_TRUE(netns.errors.empty()) << "the old listener error is replaced";
  }
}

TEST_F(EngineTest, RelistenReadsOnlyTheListenersOfTheNetnsNamed) {
  testing::ScopedNetns second("engine");
  ASSERT_TRUE(second.ok());
  ScriptedInspector* script = nullptr;
  std::unique_ptr<Engine> scripted = ScriptedEngine(Readable(), &script);
  Engine& engine = *scripted;
  const uint64_t second_inode = testing::InodeOf(second.path());
  StepPlan relisten{
      .full = false, .node_sources = false, .relisten = {second_inode}, .skip_if_unchanged = true};
  EXPECT_TRUE(engine.Step(relisten).unchanged);
  EXPECT_EQ(script->relistens(), 1);
  NetnsSnapshot listening = Readable();
  listening.listeners.push_back(ListeningSocket{.address = "0.0.0.0", .port = 15008, .inode = 7});
  script->SetNext(listening);
  EngineStep step = engine.Step(relisten);
  EXPECT_FALSE(step.unchanged) << "a listener appeared in the netns named";
  EXPECT_EQ(script->relistens(), 2);
  for (const NetnsSnapshot& netns : step.snapshot.netns) {
    EXPECT_EQ(netns.listeners.size(), netns.netns.inode == second_inode ? 1u : 0u);
  }
}

// Pure: the netns a ztunnel holds without an owned HBONE listener, nothing else.
// A pod netns (this test's second netns; the first plays the host) holding the pod IP 10.244.0.9.
NetnsSnapshot PodWithIp() {
  NetnsSnapshot snapshot = Readable();
  snapshot.routing.addresses.push_back(
      {.ifname = "eth0", .address = "10.244.0.9", .prefix_len = 16, .global_scope = true});
  return snapshot;
}

// The Kubernetes API's view: namespace demo labelled `mode`, pod demo/web on node `node`.
std::shared_ptr<const KubeSnapshot> KubeView(const std::string& node, const std::string& mode,
                                             int64_t created_unix_s, bool healthy = true) {
  auto view = std::make_shared<KubeSnapshot>();
  view->status.enabled = true;
  view->status.node_name = node;
  for (KubeResourceStatus* status :
       {&view->status.pods, &view->status.namespaces, &view->status.node}) {
    status->synced = true;
  }
  if (!healthy) {
    view->status.reason = KubeApiReason::kForbidden;
    view->status.message = "GET /api/v1/pods: HTTP 403";
  }
  view->namespaces.push_back({.name = "demo", .dataplane_mode = mode});
  KubePod pod;
  pod.uid = "uid-web";
  pod.name = "web";
  pod.namespace_name = "demo";
  pod.node_name = node;
  pod.phase = "Running";
  pod.pod_ips = {"10.244.0.9"};
  pod.creation_unix_s = created_unix_s;
  view->pods.push_back(pod);
  view->node = KubeNode{.name = node};
  return view;
}

bool HasCode(const std::vector<Finding>& findings, FindingCode code) {
  return std::any_of(findings.begin(), findings.end(),
                     [code](const Finding& f) { return f.code == code; });
}

TEST_F(EngineTest, JudgesTheKubernetesViewAndStepsWhenItChanges) {
  testing::ScopedNetns pod("engine");
  ASSERT_TRUE(pod.ok());
  EngineConfig config = config_;
  config.discovery.name_glob = "adt-engine-" + std::to_string(::getpid()) + "-*";
  config.node_name = "node-a";
  auto inspector = std::make_unique<ScriptedInspector>();
  inspector->SetNext(PodWithIp());
  int64_t now = 1'800'000'000'000;
  Engine engine(config, std::move(inspector), [&now] { return now; });
  std::shared_ptr<const KubeSnapshot> view = KubeView("node-a", "ambient", now / 1000 - 3600);
  engine.set_kube_view([&view] { return view; });
  const StepPlan idle{
      .full = false, .dirty_netns = {}, .node_sources = true, .skip_if_unchanged = true};

  EngineStep first = engine.Step();
  ASSERT_TRUE(first.usable);
  ASSERT_TRUE(first.desired);
  EXPECT_TRUE(first.desired->judged);
  EXPECT_EQ(first.snapshot.kube, view);
  EXPECT_TRUE(HasCode(first.analysis.findings, FindingCode::kPodNotEnrolled))
      << "labelled ambient, no redirect in its netns";
  EXPECT_TRUE(engine.Step(idle).unchanged) << "same view, same reads";

  view = KubeView("node-a", "none", now / 1000 - 3600);  // the namespace is relabelled
  EngineStep relabelled = engine.Step(idle);
  EXPECT_FALSE(relabelled.unchanged) << "a new view is judged even when no netns changed";
  EXPECT_FALSE(HasCode(relabelled.analysis.findings, FindingCode::kPodNotEnrolled));
  ASSERT_EQ(relabelled.changes.size(), 1u);
  EXPECT_EQ(relabelled.changes[0].kind, FindingChange::Kind::kResolved);

  view = KubeView("node-a", "ambient", now / 1000 - 3600, /*healthy=*/false);
  EngineStep degraded = engine.Step(idle);
  EXPECT_FALSE(HasCode(degraded.analysis.findings, FindingCode::kPodNotEnrolled))
      << "no desired-state finding from a degraded source";
  ASSERT_TRUE(degraded.desired);
  EXPECT_FALSE(degraded.desired->judged);
  ASSERT_EQ(degraded.source_changes.size(), 1u);
  EXPECT_EQ(degraded.source_changes[0].source, SourceKind::kKubeApi);
  EXPECT_EQ(degraded.source_changes[0].kind, SourceChange::Kind::kDegraded);

  view = KubeView("node-a", "ambient", now / 1000 - 5);  // a pod being set up
  EngineStep young = engine.Step(idle);
  EXPECT_FALSE(HasCode(young.analysis.findings, FindingCode::kPodNotEnrolled));
  now += 60'000;
  EngineStep grown = engine.Step(idle);
  EXPECT_FALSE(grown.unchanged) << "a pod in its grace period ages without any input changing";
  EXPECT_TRUE(HasCode(grown.analysis.findings, FindingCode::kPodNotEnrolled));
}

TEST(AwaitingListenersTest, HeldWithoutAnOwnedHboneListener) {
  NodeSnapshot snapshot;
  auto netns = [&](uint64_t inode, std::vector<ListeningSocket> listeners) {
    NetnsSnapshot& n = snapshot.netns.emplace_back();
    n.netns.inode = inode;
    n.listeners = std::move(listeners);
  };
  netns(1, {});  // host
  snapshot.netns.back().netns.is_host = true;
  netns(2, {});                                                                // ztunnel's own
  netns(3, {ListeningSocket{.port = 15008, .inode = 30, .owner_pids = {9}}});  // handed off
  netns(4, {});                                                                // awaiting
  netns(5, {ListeningSocket{.port = 15008, .inode = 50}});  // a listener nobody owns (yet)
  netns(6, {ListeningSocket{.port = 15001, .inode = 60, .owner_pids = {9}}});  // no HBONE one
  netns(7, {});  // not held: a pending hand-off is ZDS's business, not the listeners'
  ProcessNetnsFds ztunnel{.pid = 9, .role = ProcessRole::kZtunnel, .own_netns_inode = 2};
  ztunnel.netns_fd_inodes = {1, 2, 3, 4, 5, 6};
  snapshot.processes.push_back(ztunnel);
  ProcessNetnsFds cni{.pid = 8, .role = ProcessRole::kIstioCni, .netns_fd_inodes = {7}};
  snapshot.processes.push_back(cni);
  EXPECT_EQ(AwaitingListeners(snapshot), (std::set<uint64_t>{4, 5, 6}));
  snapshot.processes.clear();
  EXPECT_TRUE(AwaitingListeners(snapshot).empty()) << "no ztunnel, nothing awaited";
}

TEST_F(EngineTest, ComposeScanFollowsTheConfig) {
  EngineConfig config = config_;
  config.cni_conf_dir.clear();     // --cni-conf-dir off
  config.nft_userspace = false;    // --no-nft-probe
  config.probe_conntrack = false;  // --no-probe-path
  EXPECT_TRUE(ComposeScan(config).node_sources.empty());
  config.zds = true;
  config.cri = true;
  config.cni_conf_dir = "/etc/cni/net.d";
  config.nft_userspace = true;
  config.probe_conntrack = true;
  const ScanOptions scan = ComposeScan(config);
  std::vector<std::string> names;
  for (const auto& source : scan.node_sources) names.emplace_back(source->name());
  // ZDS finds ztunnel and istio-cni, whose limits and admin come next; CRI names the pods; the
  // CNI gaps are matched against the sandboxes' created_at, so after CRI.
  const std::vector<std::string> expected = {
      "zds", "ztunnel-resources", "ztunnel-admin", "cri", "conntrack", "cni", "nft-userspace"};
  EXPECT_EQ(names, expected);
}

}  // namespace
}  // namespace ad
