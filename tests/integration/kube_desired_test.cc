// Desired state end to end on the real kernel: lab pods (real netns with Istio's rules, or none)
// described by kube-api-sim, the in-process kube-apiserver emulator, and judged by the real
// `ambient-doctor` — one-shot (`report --kubeconfig`), and as the daemon following the API's
// changes, degrading (no token, 401, 403, 429, garbage, down; hung in a one-shot report) and
// recovering by itself. Every row of Istio's enrollment predicate that
// matters end to end, each desired-state code and its controls, and that the agent sent nothing
// but GET.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "integration/kube_fixture.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "sources/kube/kube_api_source.h"
#include "sources/kube/kube_config.h"

namespace ad::test {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

constexpr char kNode[] = "node-kd";
constexpr char kOtherNode[] = "node-elsewhere";

Strings KubeFlags(const KubeSim& sim) {
  return {"--kubeconfig", sim.kubeconfig(), "--node-name", kNode};
}

// `report --lab-prefix P --no-cri -o json` plus `extra`; the exit code and the parsed report.
struct OneShot {
  int exit_code = -1;
  std::string raw;
  std::optional<pb::Report> report;
};
OneShot ReportOnce(const std::string& prefix, const Strings& extra) {
  Strings args = {"report", "--lab-prefix", prefix, "--no-cri", "-o", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const lab::CommandOutput out = RunDoctor(args);
  return {out.exit_code, out.out + out.err, ParseReportJson(out.out)};
}

// ---- One-shot report: the predicate's rows --------------------------------------------------

// Lab pods 0-4 carry Istio's in-pod rules (pod 4 without its outbound REDIRECT), pods 5-11 none;
// the host netns carries in-pod rules too (the hostNetwork row). Each is described in the API as
// the row it tests.
class KubeDesiredReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    ::unsetenv("KUBERNETES_SERVICE_HOST");  // no in-cluster environment unless a test sets it
    ::unsetenv("KUBERNETES_SERVICE_PORT");
    lab::LabOptions options;
    options.prefix = LabPrefix("r");
    options.pods = 5;
    options.plain_pods = 7;
    options.faults = {{lab::FaultKind::kDeleteRule, 4}, {lab::FaultKind::kHostEnrolled, {}}};
    lab_ = std::make_unique<lab::ScopedLab>(options);
    if (!lab_->ok()) return;
    sim_ = std::make_unique<KubeSim>();
    if (!sim_->Start(&sim_error_)) return;
    Describe(*sim_, lab_->node());
    report_ = ReportOnce(options.prefix, KubeFlags(*sim_));
  }
  static void TearDownTestSuite() {
    report_ = {};
    sim_.reset();
    lab_.reset();
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
    ASSERT_TRUE(sim_->running()) << sim_error_;
  }

  static KubePodSpec LabPod(int index, const std::string& ns, const std::string& name) {
    const lab::LabPod& pod = lab_->node().pods.at(index);
    KubePodSpec spec{.ns = ns, .name = name, .node = kNode, .uid = pod.pod_uid};
    spec.ips = {pod.ipv4};
    return spec;
  }

  static void Describe(KubeSim& sim, const lab::LabNode& node) {
    sim.UpsertNamespace("shop", "ambient");
    sim.UpsertNamespace("kube-system");
    sim.UpsertNamespace("istio-system");
    sim.UpsertNode(kNode, /*cni_not_ready_taint=*/true);
    sim.UpsertNode(kOtherNode, false);
    const std::string enabled = "ambient.istio.io/redirection";
    // With Istio's rules.
    KubePodSpec pod = LabPod(0, "shop", "enrolled");
    pod.annotations[enabled] = "enabled";
    sim.UpsertPod(pod);
    pod = LabPod(1, "shop", "opted-out");
    pod.labels["istio.io/dataplane-mode"] = "none";
    sim.UpsertPod(pod);
    pod = LabPod(2, "shop", "sidecar");
    pod.annotations["sidecar.istio.io/status"] = R"({"containers":["istio-proxy"]})";
    sim.UpsertPod(pod);
    sim.UpsertPod(LabPod(3, "kube-system", "meshed-excluded"));
    pod = LabPod(4, "shop", "incomplete");
    pod.annotations[enabled] = "enabled";
    sim.UpsertPod(pod);
    // Without.
    sim.UpsertPod(LabPod(5, "shop", "not-enrolled"));
    pod = LabPod(6, "shop", "stale");
    pod.annotations[enabled] = "enabled";
    sim.UpsertPod(pod);
    pod = LabPod(7, "shop", "young");
    pod.created_unix_s = NowUnixS();  // inside the default 30 s grace
    sim.UpsertPod(pod);
    pod = LabPod(8, "shop", "job-done");
    pod.phase = "Succeeded";
    sim.UpsertPod(pod);
    sim.UpsertPod(LabPod(9, "kube-system", "coredns"));
    pod = LabPod(10, "shop", "opted-out-plain");
    pod.labels["istio.io/dataplane-mode"] = "none";
    sim.UpsertPod(pod);
    pod = LabPod(11, "shop", "pending");  // how long is unknown to a one-shot report: a note
    pod.annotations[enabled] = "pending";
    sim.UpsertPod(pod);
    // Without a netns of their own.
    sim.UpsertPod({.ns = "shop", .name = "no-ip", .node = kNode});
    sim.UpsertPod({.ns = "shop", .name = "elsewhere", .node = kOtherNode, .ips = {"10.99.0.7"}});
    sim.UpsertPod({.ns = "shop",
                   .name = "host-agent",
                   .node = kNode,
                   .ips = {"192.0.2.10"},
                   .host_network = true});
    sim.UpsertPod({.ns = "istio-system",
                   .name = "istio-cni-node-x1",
                   .node = kNode,
                   .ips = {"192.0.2.10"},
                   .labels = {{"k8s-app", "istio-cni-node"}, {"istio.io/dataplane-mode", "none"}},
                   .host_network = true,
                   .ready = true});
    (void)node;
  }

  static std::string NetnsOf(int index) { return lab_->node().pods.at(index).netns_path; }

  static inline std::unique_ptr<lab::ScopedLab> lab_;
  static inline std::unique_ptr<KubeSim> sim_;
  static inline std::string sim_error_;
  static inline OneShot report_;
};

TEST_F(KubeDesiredReport, EachRowOfThePredicateGivesItsFinding) {
  ASSERT_TRUE(report_.report) << report_.raw;
  const pb::Report& report = *report_.report;
  ASSERT_TRUE(report.kubernetes().healthy()) << report.kubernetes().DebugString();
  EXPECT_EQ(report_.exit_code, 1) << "critical findings";

  EXPECT_EQ(PodsWithCode(report, "POD_NOT_ENROLLED"), Strings{"shop/not-enrolled"})
      << DumpFindings(report);
  // Annotated `enabled` without rules: the stale annotation only, not also POD_NOT_ENROLLED.
  EXPECT_EQ(PodsWithCode(report, "ENROLLMENT_ANNOTATION_STALE"), Strings{"shop/stale"})
      << DumpFindings(report);
  EXPECT_EQ(
      PodsWithCode(report, "POD_ENROLLED_AGAINST_INTENT"),
      (Strings{"kube-system/meshed-excluded", "shop/host-agent", "shop/opted-out", "shop/sidecar"}))
      << DumpFindings(report);
  EXPECT_TRUE(PodsWithCode(report, "ZTUNNEL_NETNS_STALE").empty());
  EXPECT_EQ(DesiredFindingCount(report), 6u) << DumpFindings(report);

  // The controls raise nothing: young, terminal, without IP, another node's, enrolled, excluded
  // without rules, opted out without rules, `pending` for an unknown time, istio-cni's own
  // hostNetwork pod.
  for (const pb::Finding& f : report.findings()) {
    for (const char* quiet : {"shop/young", "shop/job-done", "shop/no-ip", "shop/elsewhere",
                              "shop/enrolled", "shop/pending", "kube-system/coredns",
                              "shop/opted-out-plain", "istio-system/istio-cni-node-x1"}) {
      EXPECT_NE(f.pod(), quiet) << f.code();
    }
    for (int quiet_netns : {0, 7, 8, 9, 10, 11}) {
      EXPECT_NE(f.netns().path(), NetnsOf(quiet_netns)) << f.code() << " " << f.pod();
    }
  }
  // The other findings are the lab's faults, unchanged.
  EXPECT_EQ(FindingsWithCode(report, "INCOMPLETE_RULESET").size(), 1u) << DumpFindings(report);
  EXPECT_EQ(FindingsWithCode(report, "HOST_NETNS_ENROLLED").size(), 1u) << DumpFindings(report);
  EXPECT_EQ(report.findings_size(), 8) << DumpFindings(report);
}

TEST_F(KubeDesiredReport, FindingsCarryTheStorySeverityAndHint) {
  ASSERT_TRUE(report_.report) << report_.raw;
  const pb::Report& report = *report_.report;
  for (const pb::Finding& f : report.findings()) {
    if (!IsDesiredCode(f.code())) continue;
    EXPECT_EQ(f.severity(), f.code() == "POD_ENROLLED_AGAINST_INTENT" ? "warning" : "critical")
        << f.code() << " " << f.pod();
    EXPECT_FALSE(f.hint().empty()) << f.code() << " " << f.pod();
    EXPECT_TRUE(EvidenceMentions(f, "desired ")) << f.code() << " " << f.pod();
    EXPECT_TRUE(EvidenceMentions(f, "annotation ambient.istio.io/redirection")) << f.pod();
  }
  const auto not_enrolled = FindingsWithCode(report, "POD_NOT_ENROLLED");
  ASSERT_EQ(not_enrolled.size(), 1u);
  EXPECT_EQ(not_enrolled[0]->netns().path(), NetnsOf(5));
  EXPECT_TRUE(EvidenceMentions(*not_enrolled[0], "namespace shop")) << DumpFindings(report);
  EXPECT_TRUE(EvidenceMentions(*not_enrolled[0], "paired by pod_ip")) << DumpFindings(report);
  EXPECT_TRUE(EvidenceMentions(*not_enrolled[0], lab_->node().pods.at(5).ipv4));

  const auto stale = FindingsWithCode(report, "ENROLLMENT_ANNOTATION_STALE");
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0]->netns().path(), NetnsOf(6));
  EXPECT_TRUE(EvidenceMentions(*stale[0], "\"enabled\"")) << DumpFindings(report);

  // Why each pod must not be in the mesh: the rule that decided, in the summary.
  std::map<std::string, std::string> why;
  for (const pb::Finding* f : FindingsWithCode(report, "POD_ENROLLED_AGAINST_INTENT")) {
    why[f->pod()] = f->summary();
  }
  EXPECT_NE(why["shop/opted-out"].find("pod_opted_out"), std::string::npos)
      << why["shop/opted-out"];
  EXPECT_NE(why["shop/sidecar"].find("sidecar"), std::string::npos) << why["shop/sidecar"];
  EXPECT_NE(why["kube-system/meshed-excluded"].find("excluded_namespace"), std::string::npos);
  EXPECT_NE(why["shop/host-agent"].find("host_network"), std::string::npos);
}

TEST_F(KubeDesiredReport, OtherFindingsOfThePodsNetnsGetItsDesiredState) {
  ASSERT_TRUE(report_.report) << report_.raw;
  const auto incomplete = FindingsWithCode(*report_.report, "INCOMPLETE_RULESET");
  ASSERT_EQ(incomplete.size(), 1u) << DumpFindings(*report_.report);
  EXPECT_EQ(incomplete[0]->netns().path(), NetnsOf(4));
  EXPECT_TRUE(EvidenceMentions(*incomplete[0],
                               "desired state of pod shop/incomplete (Kubernetes API): ambient"))
      << DumpFindings(*report_.report);
  // The host netns is every hostNetwork pod's: no one pod's state is added there.
  const auto host = FindingsWithCode(*report_.report, "HOST_NETNS_ENROLLED");
  ASSERT_EQ(host.size(), 1u);
  EXPECT_FALSE(EvidenceMentions(*host[0], "desired state of pod"));
}

TEST_F(KubeDesiredReport, NodeSectionAndCounts) {
  ASSERT_TRUE(report_.report) << report_.raw;
  const pb::Kubernetes& kube = report_.report->kubernetes();
  EXPECT_TRUE(kube.enabled());
  EXPECT_TRUE(kube.healthy());
  EXPECT_EQ(kube.reason(), "none");
  EXPECT_EQ(kube.node(), kNode);
  EXPECT_EQ(kube.server(), sim_->server().url());
  EXPECT_TRUE(kube.not_judged().empty()) << kube.not_judged();
  EXPECT_TRUE(kube.cni_not_ready_taint());
  EXPECT_EQ(kube.istio_cni_pod(), "istio-system/istio-cni-node-x1");
  EXPECT_TRUE(kube.istio_cni_ready());
  // ambient: enrolled, incomplete, not-enrolled, stale, young, pending, no-ip; not: opted-out,
  // sidecar,
  // meshed-excluded, coredns, opted-out-plain, host-agent, istio-cni-node-x1. Neither: job-done
  // (terminal) and elsewhere (never listed: the server filters by spec.nodeName).
  EXPECT_EQ(kube.pods_desired().ambient(), 7u) << kube.DebugString();
  EXPECT_EQ(kube.pods_desired().not_ambient(), 7u) << kube.DebugString();
  EXPECT_EQ(kube.pods_desired().unknown(), 0u);
  ASSERT_EQ(kube.collections_size(), 3);
  for (const pb::KubeCollection& c : kube.collections()) {
    EXPECT_TRUE(c.synced()) << c.name();
    EXPECT_EQ(c.reason(), "none") << c.name();
  }
  // The table says the same in one line.
  const lab::CommandOutput table =
      RunDoctor({"report", "--lab-prefix", lab_->node().prefix, "--no-cri", "--kubeconfig",
                 sim_->kubeconfig(), "--node-name", kNode});
  EXPECT_NE(table.out.find("istio-cni istio-system/istio-cni-node-x1"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("POD_NOT_ENROLLED"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cni.istio.io/not-ready"), std::string::npos) << table.out;
}

TEST_F(KubeDesiredReport, WithoutTheApiNothingIsJudged) {
  const std::string prefix = lab_->node().prefix;
  // Off.
  OneShot off = ReportOnce(prefix, {"--no-kube-api"});
  ASSERT_TRUE(off.report) << off.raw;
  EXPECT_FALSE(off.report->kubernetes().enabled());
  EXPECT_EQ(DesiredFindingCount(*off.report), 0u) << DumpFindings(*off.report);
  EXPECT_EQ(off.report->findings_size(), 2) << DumpFindings(*off.report);
  // In-cluster environment without a service-account token (none on this machine).
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(sim_->server().port()).c_str(), 1);
  // The lab's own flags say --no-kube-api (it has no API server): the same flags without it.
  const std::string flags_file = "/run/ambient-lab/" + prefix + "-in-cluster.flags";
  {
    std::string text = ReadFile("/run/ambient-lab/" + prefix + ".flags");
    text.erase(text.find("--no-kube-api\n"), std::string("--no-kube-api\n").size());
    std::ofstream(flags_file) << text;
  }
  const lab::CommandOutput in_cluster =
      RunDoctor({"report", "--config", flags_file, "--no-cri", "-o", "json", "--node-name", kNode});
  ::unlink(flags_file.c_str());
  OneShot no_token{in_cluster.exit_code, in_cluster.out + in_cluster.err,
                   ParseReportJson(in_cluster.out)};
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(no_token.report) << no_token.raw;
  EXPECT_FALSE(no_token.report->kubernetes().healthy());
  EXPECT_EQ(no_token.report->kubernetes().reason(), "no-credentials")
      << no_token.report->kubernetes().DebugString();
  EXPECT_FALSE(no_token.report->kubernetes().not_judged().empty());
  EXPECT_EQ(DesiredFindingCount(*no_token.report), 0u) << DumpFindings(*no_token.report);
  // A kubeconfig whose token file is missing: the API answers 401.
  const std::string kubeconfig = sim_->kubeconfig() + "-absent-token";
  {
    std::string text = ReadFile(sim_->kubeconfig());
    text.replace(text.find("tokenFile: token"), 16, "tokenFile: absent-token");
    std::ofstream(kubeconfig) << text;
  }
  OneShot unauthorized =
      ReportOnce(prefix, {"--kubeconfig", kubeconfig, "--node-name", std::string(kNode)});
  ASSERT_TRUE(unauthorized.report) << unauthorized.raw;
  EXPECT_EQ(unauthorized.report->kubernetes().reason(), "unauthorized")
      << unauthorized.report->kubernetes().DebugString();
  EXPECT_EQ(DesiredFindingCount(*unauthorized.report), 0u);
  EXPECT_EQ(unauthorized.raw.find(KubeSim::kToken), std::string::npos) << "never the token";
}

TEST_F(KubeDesiredReport, HungServerIsNotJudged) {
  sim_->server().SetHang(true);
  const auto start = std::chrono::steady_clock::now();
  OneShot hung = ReportOnce(lab_->node().prefix, KubeFlags(*sim_));
  const auto took = std::chrono::steady_clock::now() - start;
  sim_->server().SetHang(false);
  ASSERT_TRUE(hung.report) << hung.raw;
  EXPECT_FALSE(hung.report->kubernetes().healthy());
  // A one-shot report's lists give up after 8 s (it waits 10 s) and it says why it judged nothing.
  EXPECT_FALSE(hung.report->kubernetes().not_judged().empty());
  EXPECT_EQ(hung.report->kubernetes().reason(), "hung") << hung.report->kubernetes().message();
  EXPECT_EQ(DesiredFindingCount(*hung.report), 0u) << DumpFindings(*hung.report);
  EXPECT_LT(took, 30s);
}

TEST_F(KubeDesiredReport, OnlyGetWasSent) {
  const auto requests = sim_->AllRequests();
  EXPECT_FALSE(requests.empty());
  for (const auto& request : requests) EXPECT_EQ(request.method, "GET") << request.target;
}

// ---- The daemon follows the API --------------------------------------------------------------

class KubeDesiredDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

// Waits until the daemon's report satisfies `done`, printing how long it took.
struct Follower {
  ServeProcess& serve;
  pb::Report last;
  double WaitFor(const std::string& what, const std::function<bool(const pb::Report&)>& done,
                 std::chrono::milliseconds timeout = 10s) {
    const auto start = std::chrono::steady_clock::now();
    const bool ok = WaitUntil(
        [&] {
          std::optional<pb::Report> report = serve.Report();
          if (report) last = std::move(*report);
          return report && done(last);
        },
        timeout, 20ms);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ latency  ] %s: %.0f ms\n", what.c_str(), ms);
    EXPECT_TRUE(ok) << what << " not seen within " << timeout.count() << " ms\n"
                    << last.kubernetes().DebugString() << DumpFindings(last);
    return ok ? ms : -1;
  }
};

TEST_F(KubeDesiredDaemon, FollowsTheApiDegradesAndRecovers) {
  lab::LabOptions options;
  options.prefix = LabPrefix("d");
  options.pods = 1;
  options.plain_pods = 2;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  KubeSim sim;
  std::string error;
  ASSERT_TRUE(sim.Start(&error)) << error;
  sim.UpsertNamespace("shop", "ambient");
  sim.UpsertNode(kNode, false);
  auto lab_pod = [&](int index, const std::string& name) {
    KubePodSpec spec{.ns = "shop", .name = name, .node = kNode, .uid = node.pods.at(index).pod_uid};
    spec.ips = {node.pods.at(index).ipv4};
    return spec;
  };
  KubePodSpec enrolled = lab_pod(0, "enrolled");
  enrolled.annotations["ambient.istio.io/redirection"] = "enabled";
  sim.UpsertPod(enrolled);
  sim.UpsertPod(lab_pod(1, "web-a"));

  testing::ScopedTempDir dir("adt-kd");
  Strings flags = {"--lab-prefix", options.prefix, "--no-cri", "--enrollment-grace", "1s"};
  for (const std::string& flag : KubeFlags(sim)) flags.push_back(flag);
  ServeProcess serve(dir.path(), flags);
  ASSERT_TRUE(serve.WaitReady(30s)) << serve.log();
  Follower follow{serve};

  using Pods = Strings;
  auto not_enrolled = [](const Pods& pods) {
    return [pods](const pb::Report& r) {
      return r.kubernetes().healthy() && PodsWithCode(r, "POD_NOT_ENROLLED") == pods &&
             DesiredFindingCount(r) == pods.size();
    };
  };
  ASSERT_GE(follow.WaitFor("first judged report", not_enrolled({"shop/web-a"}), 20s), 0);
  EXPECT_EQ(follow.last.kubernetes().pods_desired().ambient(), 2u);
  {
    // The same through the CLI (report --api-socket).
    const lab::CommandOutput out =
        RunDoctor({"report", "--api-socket", serve.socket(), "-o", "json"});
    std::optional<pb::Report> report = ParseReportJson(out.out);
    ASSERT_TRUE(report) << out.out << out.err;
    EXPECT_EQ(report->origin().source(), "daemon");
    EXPECT_EQ(PodsWithCode(*report, "POD_NOT_ENROLLED"), Pods{"shop/web-a"});
    EXPECT_EQ(out.exit_code, 1);
  }
  std::string metrics = serve.Metrics();
  EXPECT_EQ(MetricValue(metrics, "ambient_doctor_kube_api_healthy"), 1.0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "ambient_doctor_pods_desired{state=\"ambient\"}"), 2.0);
  // web-a's netns, and pod 2's that no pod claims yet (a netns without Istio rules stays
  // not_enrolled unless a pod not meant for the mesh is paired with it).
  EXPECT_EQ(MetricValue(metrics, "ambient_doctor_pods{redirect_state=\"not_enrolled\"}"), 2.0)
      << metrics;

  // A namespace relabel, back, and a new pod: seen within seconds.
  sim.UpsertNamespace("shop", "none");
  EXPECT_GE(follow.WaitFor("namespace relabelled ambient -> none", not_enrolled({})), 0);
  EXPECT_EQ(follow.last.kubernetes().pods_desired().ambient(), 0u);
  EXPECT_TRUE(WaitUntil(
      [&] {
        metrics = serve.Metrics();
        return MetricValue(metrics, "ambient_doctor_pods{redirect_state=\"out_of_mesh\"}") == 1.0;
      },
      5s))
      << metrics;
  sim.UpsertNamespace("shop", "ambient");
  EXPECT_GE(follow.WaitFor("namespace relabelled none -> ambient", not_enrolled({"shop/web-a"})),
            0);
  KubePodSpec web_b = lab_pod(2, "web-b");
  web_b.created_unix_s = NowUnixS() - 60;
  sim.UpsertPod(web_b);
  EXPECT_GE(follow.WaitFor("new pod", not_enrolled({"shop/web-a", "shop/web-b"})), 0);

  // The watches end (kube-api-sim's DropWatches cuts each stream mid-body, as a reset
  // connection does) while history is compacted: the re-watch gets ERROR 410, the source relists
  // and keeps following.
  auto relists = [](const pb::Report& r) {
    uint32_t sum = 0;
    for (const pb::KubeCollection& c : r.kubernetes().collections()) sum += c.relists();
    return sum;
  };
  auto cut_watches = [&] {
    const uint32_t before = relists(serve.Report().value_or(pb::Report{}));
    // A version none of the three watches sees (another node's pod): each of them is behind the
    // compaction, so each relists.
    sim.UpsertPod({.ns = "shop", .name = "kd-bump", .node = kOtherNode});
    sim.server().Compact();
    sim.server().DropWatches();
    return before;
  };
  auto relisted_and_judged = [&](const Pods& pods, uint32_t before) {
    return [&, pods, before](const pb::Report& r) {
      return relists(r) > before && not_enrolled(pods)(r);
    };
  };
  uint32_t before = cut_watches();
  EXPECT_GE(follow.WaitFor("relisted after 410",
                           relisted_and_judged({"shop/web-a", "shop/web-b"}, before)),
            0);
  web_b.labels["istio.io/dataplane-mode"] = "none";
  sim.UpsertPod(web_b);
  EXPECT_GE(follow.WaitFor("pod relabelled after the relist", not_enrolled({"shop/web-a"})), 0);

  // `pending` without rules: a note within the grace (1 s), ENROLLMENT_ANNOTATION_STALE after it.
  web_b.labels.erase("istio.io/dataplane-mode");
  web_b.annotations["ambient.istio.io/redirection"] = "pending";
  sim.UpsertPod(web_b);
  const double pending_ms = follow.WaitFor("pending past the grace", [](const pb::Report& r) {
    return PodsWithCode(r, "ENROLLMENT_ANNOTATION_STALE") == Pods{"shop/web-b"} &&
           PodsWithCode(r, "POD_NOT_ENROLLED") == Pods{"shop/web-a"} && DesiredFindingCount(r) == 2;
  });
  EXPECT_GE(pending_ms, 900) << "not before the grace";
  web_b.annotations.clear();
  web_b.labels["istio.io/dataplane-mode"] = "none";
  sim.UpsertPod(web_b);
  EXPECT_GE(follow.WaitFor("pod opted out again", not_enrolled({"shop/web-a"})), 0);

  // Degraded: healthy=false with the reason in the report, GetStatus and metrics, and no
  // desired-state finding at all; then it recovers by itself.
  auto degraded = [&](const std::string& reason) {
    SCOPED_TRACE(reason);
    EXPECT_GE(follow.WaitFor("degraded: " + reason,
                             [&](const pb::Report& r) {
                               return !r.kubernetes().healthy() &&
                                      r.kubernetes().reason() == reason;
                             }),
              0);
    EXPECT_EQ(DesiredFindingCount(follow.last), 0u) << DumpFindings(follow.last);
    EXPECT_FALSE(follow.last.kubernetes().not_judged().empty());
    EXPECT_EQ(follow.last.kubernetes().message().find("kd-token"), std::string::npos);
    std::optional<pb::Status> status = serve.Status();
    ASSERT_TRUE(status);
    bool listed = false;
    for (const pb::SourceStatus& source : status->sources()) {
      if (source.source() != "kube-api") continue;
      listed = true;
      EXPECT_FALSE(source.healthy());
      EXPECT_NE(source.last_error().find(reason), std::string::npos) << source.last_error();
    }
    EXPECT_TRUE(listed) << status->DebugString();
    EXPECT_EQ(status->kubernetes().reason(), reason) << status->kubernetes().DebugString();
    std::string text;
    EXPECT_TRUE(WaitUntil(
        [&] {
          text = serve.Metrics();
          return MetricValue(text, "ambient_doctor_kube_api_healthy") == 0.0 &&
                 MetricValue(text, "ambient_doctor_kube_api_degraded{reason=\"" + reason + "\"}") ==
                     1.0;
        },
        5s))
        << text;
  };

  // Token rotation: the file and the server change together; the re-opened watches carry the new
  // token and no request is refused.
  size_t mark = sim.AllRequests().size();
  sim.WriteToken("kd-token-2");
  sim.SetServerToken("kd-token-2");
  before = cut_watches();
  EXPECT_GE(follow.WaitFor("healthy after the token rotated",
                           relisted_and_judged({"shop/web-a"}, before)),
            0);
  // The token file gone: the last token read is kept (as client-go does).
  sim.RemoveToken();
  before = cut_watches();
  EXPECT_GE(
      follow.WaitFor("healthy without a token file", relisted_and_judged({"shop/web-a"}, before)),
      0);
  {
    const auto requests = sim.AllRequests();
    size_t answered = 0;
    for (size_t i = mark; i < requests.size(); ++i) {
      EXPECT_NE(requests[i].status, 401) << requests[i].target;
      answered += requests[i].status == 200 ? 1 : 0;
    }
    EXPECT_GE(answered, 6u) << "re-watches and relists after each cut";
  }
  // 401: the server wants a token the agent does not have, until the file has it.
  sim.SetServerToken("kd-token-3");
  before = cut_watches();
  degraded("unauthorized");
  sim.WriteToken("kd-token-3");
  EXPECT_GE(follow.WaitFor("recovered after the token file was rotated",
                           relisted_and_judged({"shop/web-a"}, before), 20s),
            0);
  // 403 (RBAC without pods).
  sim.server().SetForbidden(Resource::kPods, true);
  before = cut_watches();
  degraded("forbidden");
  sim.server().SetForbidden(Resource::kPods, false);
  EXPECT_GE(follow.WaitFor("recovered after RBAC allowed it again",
                           relisted_and_judged({"shop/web-a"}, before), 20s),
            0);
  // 429 with Retry-After: throttled until the server serves again.
  sim.server().Throttle(6, 2);
  before = cut_watches();
  degraded("throttled");
  EXPECT_GE(follow.WaitFor("recovered after the throttling",
                           relisted_and_judged({"shop/web-a"}, before), 20s),
            0);
  // Answers that are not the API's JSON.
  sim.server().SetGarbage(true);
  before = cut_watches();
  degraded("garbage");
  sim.server().SetGarbage(false);
  EXPECT_GE(follow.WaitFor("recovered after the garbage",
                           relisted_and_judged({"shop/web-a"}, before), 20s),
            0);
  // Down, then up again on the same port.
  sim.Stop();
  degraded("unreachable");
  ASSERT_TRUE(sim.Restart(&error)) << error;
  EXPECT_GE(
      follow.WaitFor("recovered after the server came back", not_enrolled({"shop/web-a"}), 20s), 0);

  for (const auto& request : sim.AllRequests()) {
    EXPECT_EQ(request.method, "GET") << request.target;
  }
}

// ---- The source's backoff after a watch that worked ----------------------------------------

// A watch that worked (the server answered it) and was then cut (a reset connection, a load
// balancer dropping it) starts the backoff over: cuts far apart never grow into a long wait, as
// client-go's backoff manager resets after a quiet period. Each recovery takes about the initial
// backoff.
// kube-api-sim with one ambient namespace and the node, and the source with the daemon's options.
class KubeDesiredBackoff : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds bookmarks) {
    std::string error;
    ASSERT_TRUE(sim_.Start(&error, bookmarks)) << error;
    sim_.UpsertNamespace("shop", "ambient");
    sim_.UpsertNode(kNode, false);
    kube::KubeConfigResult config =
        kube::KubeconfigFileConfig(sim_.kubeconfig(), kube::ProcessEnv, kNode);
    ASSERT_TRUE(config.config) << config.message;
    source_ = std::make_unique<kube::KubeApiSource>(*config.config);
    source_->Start();
    ASSERT_TRUE(WaitUntil([&] { return Healthy(); }, 10s));
  }
  void TearDown() override {
    if (source_) source_->Stop();
  }
  bool Healthy() const { return source_->Snapshot().status.healthy(); }
  // Cuts the watches, then returns how long the source took to be healthy again (or fails).
  std::chrono::milliseconds CutAndRecover(const std::string& what) {
    sim_.server().DropWatches();
    EXPECT_TRUE(WaitUntil([&] { return !Healthy(); }, 2s)) << what;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(WaitUntil([&] { return Healthy(); }, 40s)) << what;
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    std::printf("[ backoff  ] %s: healthy again after %lld ms\n", what.c_str(),
                static_cast<long long>(took.count()));
    return took;
  }

  KubeSim sim_;
  std::unique_ptr<kube::KubeApiSource> source_;
};

TEST_F(KubeDesiredBackoff, BackoffResetsAfterAWatchThatWorked) {
  Start(1s);
  for (int cut = 1; cut <= 5; ++cut) {
    std::this_thread::sleep_for(1500ms);  // the watch works: bookmarks every second
    ASSERT_TRUE(Healthy());
    EXPECT_LT(CutAndRecover("cut " + std::to_string(cut)), 3s);
  }
}

// After a cut watch the source re-watches and the server answers 200: the failure recorded for
// the cut clears then, not at the first line of the new stream, which on a quiet cluster is the
// first bookmark a minute later. Here bookmarks come every 20 s; healthy again takes about the
// initial backoff.
TEST_F(KubeDesiredBackoff, ReopenedWatchIsHealthyBeforeItsFirstLine) {
  Start(20s);
  EXPECT_LT(CutAndRecover("reopened"), 3s);
}

// ---- ztunnel serves a previous netns of the pod ------------------------------------------------

// istio#61182 from the outside: pod 1 was handed to ztunnel-sim, then its sandbox was re-made under
// the same UID (the old netns deleted, ztunnel's Del never sent, so ztunnel-sim still holds it);
// CRI (cri-sim) names the new netns, which has the pod's IP and no Istio rules.
TEST(KubeDesiredZtunnel, ZtunnelServingThePreviousNetnsIsStale) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  lab::LabOptions options;
  options.prefix = LabPrefix("z");
  options.pods = 2;
  options.zds = true;
  options.faults = {{lab::FaultKind::kStaleWorkload, 1}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  const lab::LabPod& remade = node.pods.at(1);
  // The new sandbox's netns: the pod's IP on eth0 (a veth pair kept inside), no Istio state.
  for (const Strings& argv : {Strings{"ip", "netns", "add", remade.netns_name},
                              Strings{"ip", "-n", remade.netns_name, "link", "add", "eth0", "type",
                                      "veth", "peer", "name", "peer0"},
                              Strings{"ip", "-n", remade.netns_name, "address", "add",
                                      remade.ipv4 + "/32", "dev", "eth0"},
                              Strings{"ip", "-n", remade.netns_name, "link", "set", "eth0", "up"},
                              Strings{"ip", "-n", remade.netns_name, "link", "set", "lo", "up"}}) {
    Result<lab::CommandOutput> made = lab::RunCommand({argv, "", ""});
    ASSERT_TRUE(made.ok() && made->exit_code == 0)
        << argv[3] << ": " << (made.ok() ? made->err : made.error().message);
  }
  // cri-sim reads its pods file per request: the UID's sandbox now names the new netns.
  std::ofstream(node.zds.pods_file, std::ios::app)
      << remade.pod_uid << " " << remade.netns_name << " lab default " << remade.netns_path << "\n";

  KubeSim sim;
  std::string error;
  ASSERT_TRUE(sim.Start(&error)) << error;
  sim.UpsertNamespace("lab", "ambient");
  sim.UpsertNode(kNode, false);
  for (int index : {0, 1}) {
    const lab::LabPod& pod = node.pods.at(index);
    KubePodSpec spec{.ns = "lab", .name = pod.netns_name, .node = kNode, .uid = pod.pod_uid};
    spec.ips = {pod.ipv4};
    spec.annotations["ambient.istio.io/redirection"] = "enabled";
    sim.UpsertPod(spec);
  }
  std::this_thread::sleep_for(1100ms);  // the sandboxes outlive the 1 s grace
  const lab::CommandOutput out =
      RunDoctor({"report", "--lab-prefix", options.prefix, "-o", "json", "--kubeconfig",
                 sim.kubeconfig(), "--node-name", kNode, "--enrollment-grace", "1s"});
  std::optional<pb::Report> report = ParseReportJson(out.out);
  ASSERT_TRUE(report) << out.out << out.err;
  ASSERT_TRUE(report->kubernetes().healthy()) << report->kubernetes().DebugString();
  const auto stale = FindingsWithCode(*report, "ZTUNNEL_NETNS_STALE");
  ASSERT_EQ(stale.size(), 1u) << DumpFindings(*report);
  EXPECT_EQ(stale[0]->pod(), "lab/" + remade.netns_name);
  EXPECT_EQ(stale[0]->severity(), "critical");
  EXPECT_EQ(stale[0]->netns().path(), remade.netns_path);
  EXPECT_TRUE(EvidenceMentions(*stale[0], "paired by cri")) << DumpFindings(*report);
  EXPECT_TRUE(EvidenceMentions(*stale[0], "which no live pod sandbox or process has"))
      << DumpFindings(*report);
  EXPECT_TRUE(EvidenceMentions(*stale[0], "workloadState[" + remade.pod_uid + "]"));
  // One finding per pod: not also the stale annotation; the healthy pod 0 raises nothing.
  EXPECT_EQ(DesiredFindingCount(*report), 1u) << DumpFindings(*report);
}

}  // namespace
}  // namespace ad::test
