// ztunnel health, on the real kernel: the lab faults ztunnel-fd-pressure and
// cert-unavailable give exactly their finding in exactly their netns (the real binary, its JSON),
// CLOSE_WAIT sockets that a ztunnel-like process accumulates across scans become
// ZTUNNEL_RESOURCE_PRESSURE once they grew for 3 scans, and a ztunnel pid that is gone when its
// resources are read is an error in the snapshot, not a crash or a finding.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "report_json.h"
#include "scan/ztunnel_resource_node_source.h"

namespace ad {
namespace {

using lab::FaultKind;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string UniquePrefix(const std::string& tag) {
  return "adzh" + std::to_string(::getpid() % 100000) + tag;
}

uint64_t NetnsInode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// (netns path, netns inode, code) of every finding at warning or above, and the raw output.
using NetnsCode = std::tuple<std::string, uint64_t, std::string>;
struct Report {
  int exit_code = -1;
  std::multiset<NetnsCode> findings;
  std::vector<std::string> evidence;  // of every ZTUNNEL_* finding
  std::string raw;
};

Report RunReport(const lab::LabNode& node, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {kDoctor, "report", "--lab-prefix", node.prefix, "-o", "json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const test::ReportRun run = test::RunReportJson(std::move(argv));
  Report report;
  report.exit_code = run.exit_code;
  report.raw = run.raw;
  for (const test::JsonFinding& f : run.findings) {
    if (f.severity != "warning" && f.severity != "critical") continue;
    report.findings.insert({f.netns_path, f.netns_inode, f.code});
    if (f.code.starts_with("ZTUNNEL_")) {
      report.evidence.insert(report.evidence.end(), f.evidence.begin(), f.evidence.end());
    }
  }
  return report;
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

class ZtunnelHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

TEST_F(ZtunnelHealthTest, CertUnavailableIsExactlyThatPodsFinding) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("c");
  options.pods = 3;
  options.zds = true;
  options.faults = {{FaultKind::kCertUnavailable, 1}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  const std::string pod1 = node.pods[1].netns_path;
  // With CRI the identity's one pod gives the finding its netns; without CRI (and with
  // ztunnel-sim's workloads on another node name) the pod cannot be joined to a netns, so the
  // finding is node-wide, still naming the pod.
  for (const bool cri : {true, false}) {
    Report report =
        RunReport(node, cri ? std::vector<std::string>{} : std::vector<std::string>{"--no-cri"});
    EXPECT_EQ(report.exit_code, 1) << report.raw;
    const std::string& where = cri ? pod1 : node.host_netns_path;
    const std::multiset<NetnsCode> expected = {
        {where, NetnsInode(where), "ZTUNNEL_CERT_UNHEALTHY"}};
    EXPECT_EQ(report.findings, expected) << "cri " << cri << ": " << report.raw;
    EXPECT_TRUE(AnyContains(report.evidence, "state \"Unavailable: failed to fetch certificate"))
        << report.raw;
    EXPECT_TRUE(AnyContains(report.evidence, "lab/" + node.pods[1].netns_name)) << report.raw;
  }
  // The healthy pods' certificates (24 h) expire within a 48 h threshold: then every pod warns.
  Report wide = RunReport(node, {"--cert-expiry-warning", "48h"});
  EXPECT_EQ(wide.findings.size(), 2u) << wide.raw;  // pod 1 + the shared "default" identity
}

TEST_F(ZtunnelHealthTest, FdPressureIsExactlyZtunnelsFinding) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("f");
  options.pods = 3;
  options.zds = true;
  options.faults = {{FaultKind::kZtunnelFdPressure, std::nullopt}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  const std::string ztunnel_netns = node.zds.ztunnel_netns_path;
  // ztunnel-sim tops its fds up to 90 % a few times a second; the first report may be early.
  Report report;
  for (int attempt = 0; attempt < 20; ++attempt) {
    report = RunReport(node);
    if (!report.findings.empty()) break;
    ::usleep(250'000);
  }
  EXPECT_EQ(report.exit_code, 1) << report.raw;
  const std::multiset<NetnsCode> expected = {
      {ztunnel_netns, NetnsInode(ztunnel_netns), "ZTUNNEL_RESOURCE_PRESSURE"}};
  EXPECT_EQ(report.findings, expected) << report.raw;
  const std::string limit = std::to_string(1024 + 8 * node.pods.size());
  EXPECT_TRUE(AnyContains(report.evidence, "/ soft limit " + limit + " (")) << report.raw;
  EXPECT_TRUE(
      AnyContains(report.evidence, "ztunnel pid " + std::to_string(node.zds.ztunnel_sim_pid)))
      << report.raw;
}

// A process named ztunnel in a netns of its own: on each request it opens `per_round` loopback
// connections to its own listener, closes the client ends and keeps the accepted ends, which
// the peer's FIN leaves in CLOSE_WAIT, like the leak of ztunnel#1629.
class CloseWaitLeaker {
 public:
  CloseWaitLeaker(const std::string& netns_path, int per_round) {
    int to_child[2];
    int to_parent[2];
    if (::pipe(to_child) != 0 || ::pipe(to_parent) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_child[1]);
      ::close(to_parent[0]);
      ::prctl(PR_SET_NAME, "ztunnel");
      const int ns = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(3);
      const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t length = sizeof(address);
      if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
          ::listen(listener, 128) != 0 ||
          ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        ::_exit(4);
      }
      char request = 0;
      while (::read(to_child[0], &request, 1) == 1) {
        for (int i = 0; i < per_round; ++i) {
          const int client = ::socket(AF_INET, SOCK_STREAM, 0);
          if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
            ::_exit(5);
          }
          const int accepted = ::accept(listener, nullptr, nullptr);
          ::close(client);
          char byte = 0;
          if (accepted < 0 || ::recv(accepted, &byte, 1, 0) != 0) ::_exit(6);  // FIN arrived
        }
        if (::write(to_parent[1], "k", 1) != 1) ::_exit(7);
      }
      ::_exit(0);
    }
    ::close(to_child[0]);
    ::close(to_parent[1]);
    request_ = to_child[1];
    reply_ = to_parent[0];
  }
  ~CloseWaitLeaker() {
    if (request_ >= 0) ::close(request_);
    if (reply_ >= 0) ::close(reply_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool Leak() {
    char reply = 0;
    return request_ >= 0 && ::write(request_, "r", 1) == 1 && ::read(reply_, &reply, 1) == 1;
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int request_ = -1;
  int reply_ = -1;
};

// `ip netns add` for the test's lifetime.
struct ScopedNetns {
  explicit ScopedNetns(std::string name) : name(std::move(name)), path("/run/netns/" + this->name) {
    ok = std::system(("ip netns add " + this->name).c_str()) == 0 &&
         std::system(("ip -n " + this->name + " link set lo up").c_str()) == 0;
  }
  ~ScopedNetns() { (void)std::system(("ip netns del " + name + " 2>/dev/null").c_str()); }
  std::string name;
  std::string path;
  bool ok = false;
};

const Finding* Pressure(const EngineStep& step) {
  for (const Finding& finding : step.analysis.findings) {
    if (finding.code == FindingCode::kZtunnelResourcePressure) return &finding;
  }
  return nullptr;
}

TEST_F(ZtunnelHealthTest, GrowingCloseWaitAcrossScansIsPressure) {
  ScopedNetns netns(UniquePrefix("w"));
  ASSERT_TRUE(netns.ok) << "ip netns add failed";
  CloseWaitLeaker leaker(netns.path, 10);
  ASSERT_GT(leaker.pid(), 0);

  EngineConfig config;
  config.discovery.proc_root.clear();
  config.discovery.netns_dirs = {"/run/netns"};
  config.discovery.name_glob = netns.name;
  config.discovery.host_netns_path = netns.path;
  config.zds_socket = "/run/" + netns.name + "-no-such.sock";
  config.cri = false;
  Engine engine(config);
  // The first collection of a process counts nothing (a one-shot report pays nothing); from the
  // second on, one count per scan (its own netns is all this ztunnel has): growth after 3 counts.
  std::vector<uint32_t> trend;
  for (int scan = 1; scan <= 5; ++scan) {
    ASSERT_TRUE(leaker.Leak()) << "the leaker died";
    EngineStep step = engine.Step();
    ASSERT_TRUE(step.usable);
    const ZtunnelResourceUsage* usage = nullptr;
    for (const ZtunnelResourceUsage& u : step.snapshot.ztunnel_resources) {
      if (u.pid == leaker.pid()) usage = &u;
    }
    ASSERT_NE(usage, nullptr) << "the leaker was not taken for a ztunnel";
    trend = usage->close_wait_counts;
    if (scan == 1) {
      EXPECT_TRUE(trend.empty());
    } else {
      ASSERT_FALSE(trend.empty()) << "scan " << scan;
      EXPECT_EQ(trend.back(), static_cast<uint32_t>(10 * scan));
      EXPECT_EQ(usage->close_wait_netns, 1u);
    }
    const Finding* finding = Pressure(step);
    if (scan < 4) {
      EXPECT_EQ(finding, nullptr) << "growth needs 3 counts: scan " << scan;
    } else {
      ASSERT_NE(finding, nullptr) << "scan " << scan;
      EXPECT_NE(finding->summary.find("CLOSE_WAIT sockets growing"), std::string::npos);
      EXPECT_EQ(finding->netns_inode, NetnsInode(netns.path));
    }
  }
  EXPECT_EQ(trend, (std::vector<uint32_t>{20, 30, 40, 50}));
  // Steady from now on: the finding resolves once the last 3 counts stop growing.
  EngineStep steady = engine.Step();
  EXPECT_EQ(Pressure(steady), nullptr);
}

TEST_F(ZtunnelHealthTest, VanishedZtunnelPidIsAnErrorNotACrash) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // reaped: its pid is gone
  NodeSnapshot snapshot;
  ProcessNetnsFds ztunnel;
  ztunnel.pid = child;
  ztunnel.role = ProcessRole::kZtunnel;
  ztunnel.netns_fd_inodes = {12345};
  snapshot.processes.push_back(ztunnel);
  ZtunnelResourceNodeSource source({}, [](int) { return nullptr; });
  source.Collect(snapshot);
  ASSERT_EQ(snapshot.ztunnel_resources.size(), 1u);
  const ZtunnelResourceUsage& usage = snapshot.ztunnel_resources[0];
  ASSERT_EQ(usage.errors.size(), 1u);
  EXPECT_EQ(usage.errors[0].error_number, ESRCH);
  EXPECT_NE(usage.errors[0].message.find("exited"), std::string::npos) << usage.errors[0].message;
  EXPECT_TRUE(usage.close_wait_counts.empty());
}

}  // namespace
}  // namespace ad
