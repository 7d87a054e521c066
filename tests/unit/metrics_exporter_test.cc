// The metrics exporter fed synthetic PublishedResults: values, fixed label sets, counters, the
// per-pod option, the series count at scale and the /healthz verdict.
#include "metrics/metrics_exporter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "metrics/metrics_endpoint.h"
#include "report/redirect_state.h"

namespace ad {
namespace {

constexpr int64_t kScanMs = 1'800'000'000'000;  // snapshot time of every synthetic step

// series text ("name{a=\"b\"}") -> value, from the text exposition.
std::map<std::string, double> Parse(const std::string& exposition) {
  std::map<std::string, double> series;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    series[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return series;
}

double Value(const MetricsExporter& exporter, const std::string& series) {
  const auto values = Parse(exporter.Exposition());
  const auto it = values.find(series);
  EXPECT_NE(it, values.end()) << "no series " << series;
  return it == values.end() ? -1 : it->second;
}

Finding On(FindingCode code, uint64_t inode, int64_t since_ms = 0) {
  Finding finding;
  finding.code = code;
  finding.severity = FindingCodeDetails(code).severity;
  finding.netns_inode = inode;
  finding.since_unix_ms = since_ms;
  return finding;
}

NetnsClassification Pod(uint64_t inode, std::set<Backend> backends,
                        ZdsState zds = ZdsState::kHandedOff) {
  NetnsClassification netns;
  netns.netns_inode = inode;
  netns.netns_path = "/run/netns/pod-" + std::to_string(inode);
  netns.pod = "default/pod-" + std::to_string(inode);
  netns.mode = backends.empty() ? DataplaneMode::kNone : DataplaneMode::kAmbient;
  netns.ambient_backends = std::move(backends);
  netns.zds_state = zds;
  return netns;
}

// `pods` healthy nft pods handed off to ztunnel, nothing else.
PublishedResult HealthyNode(int pods, StepTrigger trigger = StepTrigger::kPoll) {
  PublishedResult result;
  result.sequence = 1;
  result.trigger = trigger;
  result.step.usable = true;
  result.step.snapshot.taken_at_unix_ms = kScanMs;
  for (int i = 0; i < pods; ++i) {
    result.step.analysis.netns.push_back(Pod(1000 + i, {Backend::kNft}));
  }
  return result;
}

TEST(MetricsExporter, EveryFixedLabelValueIsPresentBeforeAnyScan) {
  MetricsExporter exporter(MetricsOptions{.version = "1.2.3"});
  const auto values = Parse(exporter.Exposition());
  for (RedirectState s : AllRedirectStates()) {
    EXPECT_EQ(values.at("ambient_doctor_pods{redirect_state=\"" +
                        std::string(RedirectStateName(s)) + "\"}"),
              0);
  }
  for (const FindingCodeInfo& info : AllFindingCodes()) {
    const std::string code(info.name);
    EXPECT_EQ(values.at("ambient_doctor_findings_opened_total{code=\"" + code + "\"}"), 0);
    EXPECT_EQ(values.at("ambient_doctor_findings{code=\"" + code + "\",severity=\"" +
                        std::string(SeverityName(info.severity)) + "\"}"),
              0);
  }
  for (const char* backend : {"iptables-legacy", "iptables-nft", "nft"}) {
    EXPECT_EQ(values.at("ambient_doctor_pods_by_backend{backend=\"" + std::string(backend) + "\"}"),
              0);
  }
  for (const char* state : {"handed_off", "pending", "stalled"}) {
    EXPECT_EQ(values.at("ambient_doctor_zds_handoffs{state=\"" + std::string(state) + "\"}"), 0);
  }
  for (const char* trigger : {"startup", "event", "poll", "resync"}) {
    EXPECT_EQ(values.at("ambient_doctor_scans_total{trigger=\"" + std::string(trigger) + "\"}"), 0);
    EXPECT_EQ(
        values.at("ambient_doctor_netns_rereads_total{trigger=\"" + std::string(trigger) + "\"}"),
        0);
  }
  for (int k = 0; k < kSourceKindCount; ++k) {
    EXPECT_EQ(values.at("ambient_doctor_source_errors{source=\"" +
                        std::string(SourceKindName(static_cast<SourceKind>(k))) + "\"}"),
              0);
  }
  EXPECT_EQ(values.at("ambient_doctor_build_info{version=\"1.2.3\"}"), 1);
  EXPECT_EQ(values.at("ambient_doctor_last_successful_scan_timestamp_seconds"), 0);
  EXPECT_EQ(values.at("ambient_doctor_netns_reread_duration_seconds_count"), 0);
  for (const auto& [series, value] : values) {
    EXPECT_TRUE(series.starts_with("ambient_doctor_")) << series;
    EXPECT_EQ(series.find("pod="), std::string::npos) << "per-pod labels are off by default";
  }
}

TEST(MetricsExporter, BuildInfoDefaultsToTheProjectVersion) {
  MetricsExporter exporter;
  EXPECT_NE(exporter.Exposition().find("ambient_doctor_build_info{version=\"" AD_VERSION_FOR_TEST
                                       "\"} 1"),
            std::string::npos)
      << exporter.Exposition();
}

TEST(MetricsExporter, GaugesFollowTheLatestResult) {
  MetricsExporter exporter;
  PublishedResult result = HealthyNode(3, StepTrigger::kStartup);
  NodeAnalysis& analysis = result.step.analysis;
  analysis.netns.push_back(Pod(2000, {Backend::kIptablesLegacy, Backend::kNft}));
  analysis.netns.push_back(Pod(2001, {Backend::kIptablesNft}, ZdsState::kPending));
  analysis.netns.push_back(Pod(2002, {Backend::kIptablesNft}, ZdsState::kStalled));
  analysis.netns.push_back(Pod(2003, {}, ZdsState::kNotApplicable));
  NetnsClassification host = Pod(1, {}, ZdsState::kNotApplicable);
  host.is_host = true;
  analysis.netns.push_back(host);
  analysis.findings = {On(FindingCode::kMixedBackend, 2000),
                       On(FindingCode::kIncompleteRuleset, 2000),
                       On(FindingCode::kIncompleteRuleset, 2001),
                       On(FindingCode::kZdsPending, 2001, kScanMs - 5'000),
                       On(FindingCode::kZdsStall, 2002, kScanMs - 95'000)};
  Finding escalated = On(FindingCode::kZdsPending, 2003);
  escalated.severity = Severity::kWarning;  // "age unknown: no daemon history"
  analysis.findings.push_back(escalated);
  for (const Finding& f : analysis.findings) {
    result.step.changes.push_back({FindingChange::Kind::kOpened, f});
  }
  result.step.changes.push_back(
      {FindingChange::Kind::kResolved, On(FindingCode::kDuplicateRule, 1000)});

  NodeSnapshot& snapshot = result.step.snapshot;
  snapshot.processes = {{.pid = 10, .comm = "ztunnel", .role = ProcessRole::kZtunnel},
                        {.pid = 20, .comm = "istio-cni", .role = ProcessRole::kIstioCni},
                        {.pid = 30, .comm = "intruder", .role = ProcessRole::kOther}};
  snapshot.zds.clients.push_back(UnixSocket{.inode = 1, .owner_pids = {10}});
  snapshot.zds.clients.push_back(UnixSocket{.inode = 2, .owner_pids = {10}});
  snapshot.zds.clients.push_back(UnixSocket{.inode = 3, .owner_pids = {30}});
  snapshot.ztunnels.push_back(ZtunnelAdminState{.pid = 10, .ready = true});
  snapshot.errors.push_back({SourceKind::kProc, "open /proc/1/fd: EACCES", 13});
  snapshot.zds.errors.push_back({SourceKind::kZds, "stat: ENOENT", 2});
  snapshot.cri.errors.push_back({SourceKind::kCri, "connect: ECONNREFUSED", 111});
  NetnsSnapshot pod_netns;
  pod_netns.errors.push_back({SourceKind::kLegacyIpv6, "GET_INFO: EPERM", 1});
  pod_netns.errors.push_back({SourceKind::kLegacyIpv6, "GET_INFO: EPERM", 1});
  snapshot.netns.push_back(pod_netns);

  exporter.Consume(result);
  const auto v = Parse(exporter.Exposition());
  EXPECT_EQ(v.at("ambient_doctor_pods{redirect_state=\"healthy\"}"), 4)
      << "a stalled hand-off does not change the redirect rules";
  EXPECT_EQ(v.at("ambient_doctor_pods{redirect_state=\"mixed_backend\"}"), 1) << "precedence";
  EXPECT_EQ(v.at("ambient_doctor_pods{redirect_state=\"incomplete\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_pods{redirect_state=\"not_enrolled\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_pods{redirect_state=\"host_enrolled\"}"), 0)
      << "the host netns is not counted as a pod";
  EXPECT_EQ(v.at("ambient_doctor_pods_by_backend{backend=\"nft\"}"), 4);
  EXPECT_EQ(v.at("ambient_doctor_pods_by_backend{backend=\"iptables-legacy\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_pods_by_backend{backend=\"iptables-nft\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_findings{code=\"INCOMPLETE_RULESET\",severity=\"critical\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_findings{code=\"ZDS_PENDING\",severity=\"info\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_findings{code=\"ZDS_PENDING\",severity=\"warning\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_findings{code=\"DUPLICATE_RULE\",severity=\"warning\"}"), 0);
  EXPECT_EQ(v.at("ambient_doctor_findings_opened_total{code=\"INCOMPLETE_RULESET\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_findings_opened_total{code=\"DUPLICATE_RULE\"}"), 0)
      << "resolutions are not openings";
  EXPECT_EQ(v.at("ambient_doctor_zds_handoffs{state=\"handed_off\"}"), 4);
  EXPECT_EQ(v.at("ambient_doctor_zds_handoffs{state=\"pending\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_zds_handoffs{state=\"stalled\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_zds_oldest_pending_handoff_age_seconds"), 95);
  EXPECT_EQ(v.at("ambient_doctor_zds_stall"), 1);
  EXPECT_EQ(v.at("ambient_doctor_zds_connected_ztunnels"), 1)
      << "one ztunnel with two connections; the foreign client is not a ztunnel";
  EXPECT_EQ(v.at("ambient_doctor_ztunnel_ready"), 1);
  EXPECT_EQ(v.at("ambient_doctor_scans_total{trigger=\"startup\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_scans_total{trigger=\"poll\"}"), 0);
  EXPECT_EQ(v.at("ambient_doctor_last_successful_scan_timestamp_seconds"), kScanMs / 1000);
  EXPECT_EQ(v.at("ambient_doctor_source_errors{source=\"proc\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_source_errors{source=\"zds\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_source_errors{source=\"cri\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_source_errors{source=\"iptables-legacy/ipv6\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_source_errors{source=\"nft\"}"), 0);

  // The next scan replaces every gauge and adds to the counters.
  PublishedResult next = HealthyNode(2);
  next.step.snapshot.ztunnels.push_back(ZtunnelAdminState{.pid = 10, .ready = true});
  next.step.snapshot.ztunnels.push_back(ZtunnelAdminState{.pid = 11, .ready = false});
  exporter.Consume(next);
  const auto w = Parse(exporter.Exposition());
  EXPECT_EQ(w.at("ambient_doctor_pods{redirect_state=\"healthy\"}"), 2);
  EXPECT_EQ(w.at("ambient_doctor_pods{redirect_state=\"mixed_backend\"}"), 0);
  EXPECT_EQ(w.at("ambient_doctor_findings{code=\"INCOMPLETE_RULESET\",severity=\"critical\"}"), 0);
  EXPECT_EQ(w.at("ambient_doctor_findings_opened_total{code=\"INCOMPLETE_RULESET\"}"), 2);
  EXPECT_EQ(w.at("ambient_doctor_zds_stall"), 0);
  EXPECT_EQ(w.at("ambient_doctor_zds_oldest_pending_handoff_age_seconds"), 0);
  EXPECT_EQ(w.at("ambient_doctor_zds_connected_ztunnels"), 0);
  EXPECT_EQ(w.at("ambient_doctor_ztunnel_ready"), 0) << "one of two ztunnels is not ready";
  EXPECT_EQ(w.at("ambient_doctor_source_errors{source=\"proc\"}"), 0);
  EXPECT_EQ(w.at("ambient_doctor_scans_total{trigger=\"poll\"}"), 1);
}

TEST(MetricsExporter, AnUnusableScanCountsButKeepsTheLastPicture) {
  MetricsExporter exporter;
  exporter.Consume(HealthyNode(4));
  PublishedResult failed;
  failed.trigger = StepTrigger::kResync;
  failed.step.snapshot.taken_at_unix_ms = kScanMs + 60'000;
  failed.step.snapshot.errors.push_back({SourceKind::kNetns, "opendir /run/netns: EACCES", 13});
  exporter.Consume(failed);
  EXPECT_EQ(Value(exporter, "ambient_doctor_pods{redirect_state=\"healthy\"}"), 4);
  EXPECT_EQ(Value(exporter, "ambient_doctor_scans_total{trigger=\"resync\"}"), 1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_source_errors{source=\"netns\"}"), 1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_last_successful_scan_timestamp_seconds"),
            kScanMs / 1000);
}

TEST(MetricsExporter, DaemonCounters) {
  MetricsExporter exporter;
  exporter.RecordReread(StepTrigger::kEvent, 0.0003);
  exporter.RecordReread(StepTrigger::kEvent, 0.004);
  exporter.RecordReread(StepTrigger::kPoll, 0.2);
  exporter.RecordEventSocketOverflow();
  const auto v = Parse(exporter.Exposition());
  EXPECT_EQ(v.at("ambient_doctor_netns_rereads_total{trigger=\"event\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_netns_rereads_total{trigger=\"poll\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_netns_reread_duration_seconds_count"), 3);
  EXPECT_NEAR(v.at("ambient_doctor_netns_reread_duration_seconds_sum"), 0.2043, 1e-9);
  EXPECT_EQ(v.at("ambient_doctor_netns_reread_duration_seconds_bucket{le=\"0.0005\"}"), 1);
  EXPECT_EQ(v.at("ambient_doctor_netns_reread_duration_seconds_bucket{le=\"0.005\"}"), 2);
  EXPECT_EQ(v.at("ambient_doctor_netns_reread_duration_seconds_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(v.at("ambient_doctor_event_socket_overflows_total"), 1);
}

std::set<std::string> SeriesOf(const MetricsExporter& exporter) {
  std::set<std::string> names;
  for (const auto& [series, value] : Parse(exporter.Exposition())) names.insert(series);
  return names;
}

TEST(MetricsExporter, SeriesCountDoesNotGrowWithPods) {
  MetricsExporter ten;
  MetricsExporter thousand;
  ten.Consume(HealthyNode(10));
  PublishedResult big = HealthyNode(1000);
  for (int i = 0; i < 1000; i += 7) {
    big.step.analysis.findings.push_back(On(FindingCode::kDuplicateRule, 1000 + i));
  }
  thousand.Consume(big);
  EXPECT_EQ(Value(thousand, "ambient_doctor_pods{redirect_state=\"healthy\"}"), 1000 - 143);
  EXPECT_EQ(SeriesOf(ten), SeriesOf(thousand)) << "same series, only the values differ";
  EXPECT_EQ(SeriesOf(ten).size(), SeriesOf(MetricsExporter()).size())
      << "and the same as before any scan";
}

// One series for the CNI config directory in use, relabelled when it changes; none when off.
TEST(MetricsExporter, CniConfDirInfoNamesTheDirectoryAndItsOrigin) {
  MetricsExporter exporter;
  PublishedResult result = HealthyNode(1);
  result.step.snapshot.cni.collected = true;
  result.step.snapshot.cni.dir = "/host/var/lib/rancher/k3s/agent/etc/cni/net.d";
  result.step.snapshot.cni.dir_origin = CniDirOrigin::kRuntime;
  exporter.Consume(result);
  const std::string runtime_series =
      "ambient_doctor_cni_conf_dir_info{dir=\"/host/var/lib/rancher/k3s/agent/etc/cni/net.d\","
      "source=\"runtime\"}";
  EXPECT_EQ(Value(exporter, runtime_series), 1);
  result.step.snapshot.cni.dir.clear();
  result.step.snapshot.cni.dir_origin = CniDirOrigin::kNone;
  result.step.snapshot.cni.not_judged = "no container runtime answered over CRI, ...";
  exporter.Consume(result);
  EXPECT_EQ(Value(exporter, "ambient_doctor_cni_conf_dir_info{dir=\"\",source=\"none\"}"), 1);
  EXPECT_FALSE(Parse(exporter.Exposition()).contains(runtime_series)) << "the old one is gone";
  result.step.snapshot.cni = CniConfigState{};  // --cni-conf-dir off
  exporter.Consume(result);
  EXPECT_EQ(exporter.Exposition().find("ambient_doctor_cni_conf_dir_info{"), std::string::npos);
}

TEST(MetricsExporter, PerPodLabelsOnlyWhenAskedAndForgottenWithThePod) {
  MetricsExporter exporter(MetricsOptions{.per_pod_labels = true});
  PublishedResult result = HealthyNode(3);
  result.step.analysis.findings.push_back(On(FindingCode::kIncompleteRuleset, 1001));
  exporter.Consume(result);
  const auto v = Parse(exporter.Exposition());
  EXPECT_EQ(v.at("ambient_doctor_pod_redirect_state{netns_inode=\"1001\",pod=\"default/pod-"
                 "1001\",redirect_state=\"incomplete\"}"),
            1);
  EXPECT_EQ(v.at("ambient_doctor_pod_redirect_state{netns_inode=\"1000\",pod=\"default/pod-"
                 "1000\",redirect_state=\"healthy\"}"),
            1);
  const size_t with_three = SeriesOf(exporter).size();

  exporter.Consume(HealthyNode(1));
  const auto w = Parse(exporter.Exposition());
  EXPECT_EQ(SeriesOf(exporter).size(), with_three - 2) << "removed pods leave no series";
  EXPECT_FALSE(
      w.contains("ambient_doctor_pod_redirect_state{netns_inode=\"1001\",pod=\"default/"
                 "pod-1001\",redirect_state=\"incomplete\"}"));
}

TEST(MetricsExporter, HealthFollowsTheLastSuccessfulScan) {
  int64_t now = kScanMs;
  MetricsExporter exporter(MetricsOptions{.stale_after_ms = 30'000}, [&now] { return now; });
  HealthVerdict health = exporter.Health();
  EXPECT_FALSE(health.healthy);
  EXPECT_EQ(health.reason, "no successful scan yet");
  EXPECT_EQ(ServeMetricsRequest(exporter, "/healthz").status, 503);

  exporter.Consume(HealthyNode(1));
  now = kScanMs + 30'000;
  EXPECT_TRUE(exporter.Health().healthy);
  EXPECT_EQ(ServeMetricsRequest(exporter, "/healthz").body, "ok\n");

  now = kScanMs + 31'000;
  health = exporter.Health();
  EXPECT_FALSE(health.healthy);
  EXPECT_EQ(health.reason, "last successful scan 31 s ago (stale after 30 s)");
  const HttpResponse response = ServeMetricsRequest(exporter, "/healthz");
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.body, health.reason + "\n");

  EXPECT_EQ(ServeMetricsRequest(exporter, "/metrics").status, 200);
  EXPECT_EQ(ServeMetricsRequest(exporter, "/").status, 404);
}

TEST(MetricsExporter, FollowsTheHubAndCountsWhatItMissed) {
  ResultHub hub(2);
  MetricsExporter exporter;
  for (int i = 0; i < 5; ++i) hub.Publish(StepTrigger::kEvent, HealthyNode(i).step);
  hub.Stop();
  exporter.FollowHub(hub);  // returns once it has read what the hub holds and saw the stop
  EXPECT_EQ(Value(exporter, "ambient_doctor_scans_total{trigger=\"event\"}"), 2);
  EXPECT_EQ(Value(exporter, "ambient_doctor_results_missed_total"), 3);
  EXPECT_EQ(Value(exporter, "ambient_doctor_pods{redirect_state=\"healthy\"}"), 4);
}

TEST(MetricsExporter, FollowsAHubWhileBeingScraped) {
  ResultHub hub(256);
  MetricsExporter exporter;
  std::thread follower([&] { exporter.FollowHub(hub); });
  for (int i = 0; i < 200; ++i) {
    hub.Publish(i == 0 ? StepTrigger::kStartup : StepTrigger::kPoll, HealthyNode(i % 20).step);
    if (i % 10 == 0) {
      EXPECT_FALSE(exporter.Exposition().empty());
    }
  }
  // Wait for the follower to see the last result before stopping it (Stop wins over results).
  // The bound is a guard against a hang, not a timing assertion.
  for (int guard = 0; guard < 20'000; ++guard) {
    if (Value(exporter, "ambient_doctor_scans_total{trigger=\"poll\"}") == 199) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  hub.Stop();
  follower.join();
  EXPECT_EQ(Value(exporter, "ambient_doctor_scans_total{trigger=\"poll\"}"), 199);
  EXPECT_EQ(Value(exporter, "ambient_doctor_scans_total{trigger=\"startup\"}"), 1);
  EXPECT_EQ(Value(exporter, "ambient_doctor_results_missed_total"), 0);
  EXPECT_EQ(Value(exporter, "ambient_doctor_pods{redirect_state=\"healthy\"}"), 199 % 20);
}

}  // namespace
}  // namespace ad
