// `report`, `watch` and `rules` asking a real `serve` on a lab node over its unix socket: the real
// binaries, real gRPC, the lab's real rules. The daemon's answer carries history (a ZDS deadlock
// is ZDS_STALL in a plain report), --local scans instead, and every socket that is not a working
// daemon (none, stale, silent, garbage) falls back to a local scan that says why.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.pb.h"
#include "child_process_util.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_reader.h"
#include "netns_test_util.h"
#include "scoped_child.h"

namespace ad {
namespace {

namespace pb = ::ambientdoctor::v1;
using std::chrono::milliseconds;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

lab::CommandOutput Doctor(std::vector<std::string> args) {
  args.insert(args.begin(), kDoctor);
  Result<lab::CommandOutput> out = lab::RunCommand({args, "", ""});
  if (!out.ok()) return lab::CommandOutput{-1, "", out.error().message};
  return std::move(out).value();
}

// `report -o json` is the proto's JSON: read it back into the message.
std::optional<pb::Report> ParseReport(const std::string& json) {
  pb::Report report;
  if (!google::protobuf::util::JsonStringToMessage(json, &report).ok()) return std::nullopt;
  return report;
}

bool Has(const pb::Report& report, const std::string& code, const std::string& path = "") {
  for (const pb::Finding& f : report.findings()) {
    if (f.code() == code && (path.empty() || f.netns().path() == path)) return true;
  }
  return false;
}

// A lab node with `serve` on it (fast interval, its own socket in a temp dir).
class DaemonClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }

  void Start(lab::LabOptions options, std::vector<std::string> serve_flags = {}) {
    options.prefix = "adcl" + std::to_string(::getpid() % 100000) + options.prefix;
    lab_ = std::make_unique<lab::ScopedLab>(options);
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
    dir_ = std::make_unique<testing::ScopedTempDir>("adt-client");
    socket_ = dir_->path() + "/api/api.sock";
    log_ = dir_->path() + "/serve.log";
    std::vector<std::string> argv = {
        kDoctor,        "serve", "--lab-prefix",      prefix(), "--interval", "200ms",
        "--api-socket", socket_, "--metrics-address", "off"};
    argv.insert(argv.end(), serve_flags.begin(), serve_flags.end());
    serve_ = std::make_unique<testing::ScopedChild>(argv, "", log_, /*with_stderr=*/true);
    // Ready once GetReport answers: a report from the daemon.
    for (int i = 0; i < 300; ++i) {
      if (std::filesystem::exists(socket_)) {
        const lab::CommandOutput out = Doctor({"report", "--api-socket", socket_, "-o", "json"});
        const auto report = ParseReport(out.out);
        if (report && report->origin().source() == "daemon") return;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << "serve did not answer on " << socket_ << ":\n" << ReadAll(log_);
  }

  // Polls the daemon's report until `done` (bounded; never a timing assertion).
  std::optional<pb::Report> WaitForReport(const std::function<bool(const pb::Report&)>& done) {
    for (int i = 0; i < 300; ++i) {
      const auto report =
          ParseReport(Doctor({"report", "--api-socket", socket_, "-o", "json"}).out);
      if (report && report->origin().source() == "daemon" && done(*report)) return report;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return std::nullopt;
  }

  const std::string& prefix() const { return lab_->node().prefix; }
  const lab::LabPod& Pod(int index) const { return lab_->node().pods.at(index); }

  std::unique_ptr<lab::ScopedLab> lab_;
  std::unique_ptr<testing::ScopedTempDir> dir_;
  std::unique_ptr<testing::ScopedChild> serve_;
  std::string socket_;
  std::string log_;
};

TEST_F(DaemonClientTest, ReportSaysDaemonAndShowsHistory) {
  lab::LabOptions options;
  options.prefix = "r";
  options.pods = 3;
  options.zds = true;
  options.faults = {{lab::FaultKind::kZtunnelNoListeners, 1}};
  Start(options);
  const auto report = WaitForReport(
      [&](const pb::Report& r) { return Has(r, "ZTUNNEL_LISTENERS_MISSING", Pod(1).netns_path); });
  ASSERT_TRUE(report) << ReadAll(log_);
  EXPECT_EQ(report->origin().api_socket(), socket_);
  EXPECT_GT(report->origin().sequence(), 0);
  EXPECT_TRUE(report->origin().history());
  for (const pb::Finding& f : report->findings()) {
    EXPECT_TRUE(f.has_first_seen_unix_ms()) << f.code() << ": the daemon's history";
  }

  const lab::CommandOutput table = Doctor({"report", "--api-socket", socket_});
  EXPECT_EQ(table.exit_code, 1) << table.out << table.err;
  EXPECT_NE(table.out.find("\nsource daemon unix:" + socket_ + "  ·  result #"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("with history"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("    | open for "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ZTUNNEL_LISTENERS_MISSING  " + Pod(1).netns_path), std::string::npos);

  // Explicit scan-scope flags and an explicit socket contradict each other: refused, no scan.
  const lab::CommandOutput refused =
      Doctor({"report", "--api-socket", socket_, "--netns-match", "x*"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--netns-match set a scan scope, which the daemon does not take"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.out, "");

  // --local on the same node: a local scan, saying so, without history.
  const lab::CommandOutput local =
      Doctor({"report", "--local", "--lab-prefix", prefix(), "-o", "json"});
  EXPECT_EQ(local.exit_code, 1) << local.err;
  const auto local_report = ParseReport(local.out);
  ASSERT_TRUE(local_report) << local.out;
  EXPECT_EQ(local_report->origin().source(), "local");
  EXPECT_EQ(local_report->origin().fallback_reason(), "--local");
  EXPECT_TRUE(Has(*local_report, "ZTUNNEL_LISTENERS_MISSING", Pod(1).netns_path));
  for (const pb::Finding& f : local_report->findings()) {
    EXPECT_FALSE(f.has_first_seen_unix_ms()) << f.code() << ": no history in a local scan";
  }
  // A --config file is the node's shared agent flags (the daemon reads the same file): its scope
  // is the daemon's, so the daemon is asked (here: the flags the lab wrote, which serve runs on).
  const lab::CommandOutput configured = Doctor(
      {"report", "--config", "/run/ambient-lab/" + prefix() + ".flags", "--api-socket", socket_});
  EXPECT_NE(configured.out.find("\nsource daemon unix:" + socket_), std::string::npos)
      << configured.out << configured.err;
  // The lab's own selector is a scan scope: a local scan that says why.
  const lab::CommandOutput scoped = Doctor({"report", "--lab-prefix", prefix()});
  EXPECT_NE(scoped.out.find("source local scan (scan-scope flags --lab-prefix given; the daemon "
                            "scans its own scope)"),
            std::string::npos)
      << scoped.out;
}

TEST_F(DaemonClientTest, ZdsDeadlockIsAStallThroughTheDaemonAndAgeUnknownLocally) {
  lab::LabOptions options;
  options.prefix = "d";
  options.pods = 2;
  options.zds = true;
  options.faults = {{lab::FaultKind::kZdsDeadlock, std::nullopt}};
  Start(options, {"--zds-stall-threshold", "1s"});
  ASSERT_TRUE(WaitForReport([](const pb::Report& r) { return Has(r, "ZDS_STALL"); }))
      << ReadAll(log_);

  // A plain report (no flags but the socket) that talked to the daemon.
  const lab::CommandOutput plain = Doctor({"report", "--api-socket", socket_});
  EXPECT_EQ(plain.exit_code, 1) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("source daemon unix:" + socket_), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("CRITICAL ZDS_STALL"), std::string::npos) << plain.out;
  // The stall's age is known from the daemon's history.
  EXPECT_NE(plain.out.find(" ago)\n"), std::string::npos) << plain.out;

  // --local: no history, so no stall; the black-holed pods are at warning, "age unknown".
  const lab::CommandOutput local = Doctor(
      {"report", "--local", "--lab-prefix", prefix(), "--zds-stall-threshold", "1s", "-o", "json"});
  EXPECT_EQ(local.exit_code, 1) << local.err;
  const auto report = ParseReport(local.out);
  ASSERT_TRUE(report) << local.out;
  EXPECT_EQ(report->origin().source(), "local");
  EXPECT_FALSE(Has(*report, "ZDS_STALL")) << local.out;
  for (int pod = 0; pod < options.pods; ++pod) {
    bool warned = false;
    for (const pb::Finding& f : report->findings()) {
      if (f.code() != "ZDS_PENDING" || f.netns().path() != Pod(pod).netns_path) continue;
      warned = f.severity() == "warning";
      bool age_unknown = false;
      for (const std::string& e : f.evidence()) {
        age_unknown = age_unknown || e.find("age unknown") != std::string::npos;
      }
      EXPECT_TRUE(age_unknown) << f.DebugString();
    }
    EXPECT_TRUE(warned) << "pod " << pod << " pending at warning:\n" << local.out;
  }
}

// Listeners that are not a daemon: accept and stay silent, or answer garbage.
class FakePeer {
 public:
  FakePeer(const std::string& path, bool garbage) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un address = testing::UnixAddress(path);
    ok_ = fd_ >= 0 &&
          ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
          ::listen(fd_, 8) == 0;
    if (ok_ && garbage) {
      thread_ = std::thread([this] {
        while (!stopping_) {
          const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) return;
          static const char kJunk[] = "SSH-2.0-OpenSSH_9.2\r\n\x00\x01 not http2 at all";
          (void)!::send(c, kJunk, sizeof(kJunk), MSG_NOSIGNAL);
          ::close(c);
        }
      });
    }
  }
  ~FakePeer() {
    stopping_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Each socket that is not a working daemon: a local scan whose origin says why.
// No command takes positional words: one given is an error that names it, never ignored (a pod
// name after `report` must not silently print the whole node).
TEST(CliArguments, UnknownPositionalWordsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"report", "default/web-0", "--local"},
                                             {"watch", "--count", "1", "default/web-0"},
                                             {"rules", "default/web-0", "--netns", "/x"},
                                             {"findings", "default/web-0"},
                                             {"serve", "default/web-0"},
                                             {"flows", "default/web-0"}}) {
    const lab::CommandOutput out = Doctor(args);
    EXPECT_EQ(out.exit_code, 2) << args[0] << ": " << out.err;
    EXPECT_NE(out.err.find("unexpected argument \"default/web-0\""), std::string::npos)
        << args[0] << ": " << out.err;
  }
}

TEST(DaemonClientFallback, EverySocketThatIsNotADaemonFallsBackWithAReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the fallback scans the machine's netns";
  testing::ScopedTempDir dir("adt-clfb");
  const std::string missing = dir.path() + "/missing.sock";
  const std::string stale = dir.path() + "/stale.sock";
  { FakePeer gone(stale, false); }  // closed: the socket file stays behind
  const std::string silent_path = dir.path() + "/silent.sock";
  FakePeer silent(silent_path, false);
  ASSERT_TRUE(silent.ok());
  const std::string garbage_path = dir.path() + "/garbage.sock";
  FakePeer garbage(garbage_path, true);
  ASSERT_TRUE(garbage.ok());

  struct Case {
    std::string socket;
    std::vector<std::string> reasons;  // one of them
  };
  const std::vector<Case> cases = {
      {missing, {"no daemon socket at " + missing}},
      {stale, {"stale daemon socket " + stale + ": nobody listens (connection refused)"}},
      {silent_path, {"daemon socket " + silent_path + ": no answer within 1000 ms"}},
      {garbage_path,
       {"daemon socket " + garbage_path + ": the peer does not speak gRPC",
        "daemon socket " + garbage_path + ": no answer within 1000 ms"}},
  };
  for (const Case& c : cases) {
    const lab::CommandOutput out = Doctor({"report", "--api-socket", c.socket, "-o", "json"});
    EXPECT_NE(out.exit_code, 2) << c.socket << ": " << out.err;
    const auto report = ParseReport(out.out);
    ASSERT_TRUE(report) << c.socket << ": " << out.out << out.err;
    EXPECT_EQ(report->origin().source(), "local") << c.socket;
    EXPECT_EQ(report->origin().api_socket(), c.socket);
    bool explained = false;
    for (const std::string& reason : c.reasons) {
      explained = explained || report->origin().fallback_reason().starts_with(reason);
    }
    EXPECT_TRUE(explained) << c.socket << ": " << report->origin().fallback_reason();
    EXPECT_GT(report->netns_size(), 0) << "scanned locally";
    if (c.socket != missing) {
      // A socket that was there but failed is worth a warning on stderr.
      EXPECT_NE(out.err.find("scanning locally: "), std::string::npos) << out.err;
    }
  }
  // The table says it in its header.
  const lab::CommandOutput table = Doctor({"report", "--api-socket", stale});
  EXPECT_NE(table.out.find("\nsource local scan (stale daemon socket " + stale), std::string::npos)
      << table.out;
}

// The changes/v1 documents of `watch -o json`: (opened?, code, netns path) per change.
struct WatchChange {
  bool opened = false;
  std::string code;
  std::string path;
};
std::vector<WatchChange> ParseChanges(const std::string& text) {
  std::vector<WatchChange> changes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    rapidjson::Document parsed;
    if (!ParseJsonDocument(line, parsed).ok()) continue;
    for (const char* kind : {"resolved", "opened"}) {
      const rapidjson::Value* list = JsonMember(parsed, kind);
      if (list == nullptr || !list->IsArray()) continue;
      for (const rapidjson::Value& f : list->GetArray()) {
        const rapidjson::Value* netns = JsonMember(f, "netns");
        changes.push_back({std::string(kind) == "opened", std::string(JsonStringMember(f, "code")),
                           std::string(netns != nullptr ? JsonStringMember(*netns, "path") : "")});
      }
    }
  }
  return changes;
}

TEST_F(DaemonClientTest, WatchFollowsTheDaemonAndRulesMatchALocalRead) {
  lab::LabOptions options;
  options.prefix = "w";
  options.pods = 3;
  options.zds = true;
  options.faults = {{lab::FaultKind::kZtunnelNoListeners, 2}};  // one finding in the first set
  Start(options);
  ASSERT_TRUE(WaitForReport(
      [&](const pb::Report& r) { return Has(r, "ZTUNNEL_LISTENERS_MISSING", Pod(2).netns_path); }));

  // rules through the daemon print exactly what a local read prints.
  for (const std::string format : {"table", "json"}) {
    const lab::CommandOutput daemon =
        Doctor({"rules", "--api-socket", socket_, "--netns", Pod(0).netns_path, "-o", format});
    const lab::CommandOutput local =
        Doctor({"rules", "--local", "--netns", Pod(0).netns_path, "-o", format});
    EXPECT_EQ(daemon.exit_code, 0) << daemon.err;
    EXPECT_EQ(local.exit_code, 0) << local.err;
    EXPECT_NE(daemon.out.find("ISTIO_OUTPUT"), std::string::npos) << daemon.out;
    EXPECT_EQ(daemon.out, local.out) << format;
  }
  // --pid: the daemon reads <proc-root>/<pid>/ns/net (ztunnel-sim lives in the lab's ztunnel
  // netns).
  const std::string ztunnel_pid = std::to_string(lab_->node().zds.ztunnel_sim_pid);
  const lab::CommandOutput by_pid =
      Doctor({"rules", "--api-socket", socket_, "--pid", ztunnel_pid});
  EXPECT_EQ(by_pid.exit_code, 0) << by_pid.err;
  EXPECT_NE(by_pid.out.find("# netns /proc/" + ztunnel_pid + "/ns/net"), std::string::npos)
      << by_pid.out;
  EXPECT_EQ(by_pid.out, Doctor({"rules", "--local", "--pid", ztunnel_pid}).out);
  const lab::CommandOutput missing = Doctor(
      {"rules", "--api-socket", socket_, "--netns", "/run/netns/" + prefix() + "-no-such-pod"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("GetNetnsRules /run/netns/" + prefix() + "-no-such-pod: NOT_FOUND"),
            std::string::npos)
      << missing.err;

  // watch: the current set (pod 2), then pod 0's INCOMPLETE_RULESET opened and resolved.
  const std::string json_out = dir_->path() + "/watch.json";
  const std::string text_out = dir_->path() + "/watch.txt";
  testing::ScopedChild watch_json(
      {kDoctor, "watch", "--api-socket", socket_, "--count", "3", "-o", "json"}, "", json_out);
  testing::ScopedChild watch_text({kDoctor, "watch", "--api-socket", socket_, "--count", "3"}, "",
                                  text_out);
  for (int i = 0; i < 300 && (ReadAll(json_out).empty() || ReadAll(text_out).empty()); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_FALSE(ReadAll(json_out).empty()) << "watch printed no current set";
  ASSERT_FALSE(ReadAll(text_out).empty()) << "watch printed no current set";
  const std::string saved =
      testing::Capture("ip netns exec " + Pod(0).netns_name + " iptables-nft-save -t nat");
  ASSERT_EQ(
      testing::Run("ip netns exec " + Pod(0).netns_name + " iptables-nft -t nat -D ISTIO_OUTPUT 1"),
      0);
  for (int i = 0; i < 300 && ParseChanges(ReadAll(json_out)).size() < 2; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_EQ(testing::RunWithInput(
                "ip netns exec " + Pod(0).netns_name + " iptables-nft-restore -T nat", saved),
            0);
  EXPECT_EQ(watch_json.Wait(std::chrono::seconds(30)), 1) << "pod 2 is still black-holed";
  EXPECT_EQ(watch_text.Wait(std::chrono::seconds(30)), 1);

  const std::vector<WatchChange> changes = ParseChanges(ReadAll(json_out));
  ASSERT_EQ(changes.size(), 3u) << ReadAll(json_out);
  EXPECT_TRUE(changes[0].opened);
  EXPECT_EQ(changes[0].code, "ZTUNNEL_LISTENERS_MISSING");
  EXPECT_EQ(changes[0].path, Pod(2).netns_path);
  EXPECT_TRUE(changes[1].opened);
  EXPECT_EQ(changes[1].code, "INCOMPLETE_RULESET");
  EXPECT_EQ(changes[1].path, Pod(0).netns_path) << "exactly the pod whose rule was deleted";
  EXPECT_FALSE(changes[2].opened);
  EXPECT_EQ(changes[2].code, "INCOMPLETE_RULESET");
  EXPECT_EQ(changes[2].path, Pod(0).netns_path);
  const std::string text = ReadAll(text_out);
  EXPECT_NE(text.find(" critical opened INCOMPLETE_RULESET " + Pod(0).netns_path + " (inode "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" critical resolved INCOMPLETE_RULESET " + Pod(0).netns_path + " (inode "),
            std::string::npos)
      << text;

  // The daemon goes away: a watch following it ends with a clear message and exit 2.
  const std::string err_out = dir_->path() + "/watch.err";
  testing::ScopedChild follower({kDoctor, "watch", "--api-socket", socket_}, "", err_out,
                                /*with_stderr=*/true);
  for (int i = 0; i < 300 && ReadAll(err_out).find("opened") == std::string::npos; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  serve_->Signal(SIGTERM);
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(20)), 0);
  EXPECT_EQ(follower.Wait(std::chrono::seconds(20)), 2);
  EXPECT_NE(ReadAll(err_out).find("ambient-doctor watch: the daemon at unix:" + socket_ +
                                  " went away (WatchFindings: UNAVAILABLE"),
            std::string::npos)
      << ReadAll(err_out);
}

}  // namespace
}  // namespace ad
