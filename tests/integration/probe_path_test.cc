// PROBE_PATH_BROKEN on the real kernel: the lab's probe-unreplied fault (kubelet-prober in the lab
// host netns, SNATed by the host's Istio rule, the pod's replies blackholed) gives exactly that
// finding in exactly that pod, and a lab whose probes are answered gives none. The conntrack
// reader: the kernel filter picks the right tuple (reply destination = probe SNAT address) out of
// 100 000 unrelated entries, the user-space fallback is bounded and says so, EPERM and a vanished
// netns are source errors. Only lab/test netns are read or written, never the machine's own.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "analysis/analysis.h"
#include "engine/engine.h"
#include "lab/lab.h"
#include "netns_test_util.h"
#include "scan/conntrack_node_source.h"
#include "sources/conntrack/conntrack_reader.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

using namespace std::chrono_literals;

std::string UniquePrefix(const std::string& tag) {
  return "adpp" + std::to_string(::getpid() % 100000) + tag;
}

EngineConfig LabConfig(const lab::LabNode& node) {
  EngineConfig config;
  config.discovery.proc_root.clear();
  config.discovery.netns_dirs = {"/run/netns"};
  config.discovery.name_glob = node.prefix + "-*";
  config.discovery.host_netns_path = node.host_netns_path;
  config.zds = false;
  config.cri = false;
  config.host_root = node.host_root;  // the lab's CNI config (a healthy chain)
  config.node_name = "lab";
  config.analysis.probe_path_threshold_ms = 2000;
  return config;
}

std::string Dump(const NodeAnalysis& analysis) {
  std::string out;
  for (const Finding& f : analysis.findings) {
    out += std::string(f.code_name()) + " " + f.netns_path + ": " + f.summary + "\n";
    for (const std::string& e : f.evidence) out += "    " + e + "\n";
  }
  return out;
}

bool HasProbePathFinding(const NodeAnalysis& analysis) {
  for (const Finding& f : analysis.findings) {
    if (f.code == FindingCode::kProbePathBroken) return true;
  }
  return false;
}

class ProbePathLabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

TEST_F(ProbePathLabTest, ProbeUnrepliedFaultGivesExactlyItsFinding) {
  for (lab::LabBackend backend : {lab::LabBackend::kIptablesNft, lab::LabBackend::kNft}) {
    SCOPED_TRACE(std::string(lab::LabBackendName(backend)));
    lab::LabOptions options;
    options.prefix = UniquePrefix(backend == lab::LabBackend::kNft ? "n" : "i");
    options.pods = 3;
    options.backend = backend;
    options.prober_interval_ms = 500;
    options.faults.push_back({lab::FaultKind::kProbeUnreplied, 1});
    lab::ScopedLab scoped(options);
    ASSERT_TRUE(scoped.ok()) << scoped.error().message;
    const lab::LabNode& node = scoped.node();
    ASSERT_GT(node.kubelet_prober_pid, 0);
    const lab::LabPod& broken = node.pods[1];

    Engine engine(LabConfig(node));
    EngineStep step;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      step = engine.Step();
      ASSERT_TRUE(step.usable);
      if (HasProbePathFinding(step.analysis)) break;
      std::this_thread::sleep_for(500ms);
    }
    const ProbeConntrackState& conntrack = step.snapshot.probe_conntrack;
    EXPECT_TRUE(conntrack.errors.empty()) << conntrack.errors.front().message;
    EXPECT_EQ(conntrack.filter, "kernel");
    EXPECT_EQ(conntrack.netns_path, node.host_netns_path) << "the lab host netns, nothing else";
    ASSERT_FALSE(conntrack.entries.empty());
    for (const ProbeConntrackEntry& entry : conntrack.entries) {
      EXPECT_EQ(entry.orig_dst, broken.ipv4) << "answered probes are not unreplied entries";
      EXPECT_EQ(entry.reply_dst, "169.254.7.127");
      EXPECT_EQ(entry.orig_dport, 8080);
      EXPECT_EQ(TcpConntrackStateName(entry.tcp_state), "SYN_SENT");
    }
    ASSERT_EQ(step.analysis.findings.size(), 1u) << Dump(step.analysis);
    const Finding& finding = step.analysis.findings[0];
    EXPECT_EQ(finding.code, FindingCode::kProbePathBroken) << Dump(step.analysis);
    EXPECT_EQ(finding.netns_path, broken.netns_path);
    EXPECT_EQ(finding.severity, Severity::kWarning);

    // A one-shot scan (no history) judges by the entries' own age once they are old enough.
    std::this_thread::sleep_for(3s);
    Engine one_shot(LabConfig(node));
    EngineStep single = one_shot.Step();
    ASSERT_EQ(single.analysis.findings.size(), 1u) << Dump(single.analysis);
    EXPECT_EQ(single.analysis.findings[0].netns_path, broken.netns_path);
  }
}

TEST_F(ProbePathLabTest, AnsweredProbesGiveNoFinding) {
  lab::LabOptions options;
  options.prefix = UniquePrefix("h");
  options.pods = 3;
  options.kubelet_prober = true;
  options.prober_interval_ms = 500;
  lab::ScopedLab scoped(options);
  ASSERT_TRUE(scoped.ok()) << scoped.error().message;
  Engine engine(LabConfig(scoped.node()));
  for (int i = 0; i < 8; ++i) {  // 4 s: twice the threshold
    EngineStep step = engine.Step();
    ASSERT_TRUE(step.usable);
    EXPECT_TRUE(step.analysis.findings.empty()) << Dump(step.analysis);
    EXPECT_TRUE(step.snapshot.probe_conntrack.errors.empty());
    // A RST-answered probe's entry is gone at once, so the host's table is often empty.
    EXPECT_TRUE(step.snapshot.probe_conntrack.filter == "kernel" ||
                step.snapshot.probe_conntrack.filter == "empty")
        << step.snapshot.probe_conntrack.filter;
    // Answered probes are replied entries; at most one probe can be mid-flight at the dump.
    EXPECT_LE(step.snapshot.probe_conntrack.entries.size(), 1u);
    std::this_thread::sleep_for(500ms);
  }
}

// ---- the reader on a test netns ----------------------------------------------------------------

class ConntrackReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (testing::Run("command -v conntrack >/dev/null") != 0) {
      GTEST_SKIP() << "conntrack(8) not installed (apt package conntrack, scripts/setup)";
    }
    netns_ = std::make_unique<testing::ScopedNetns>("ctrd");
    ASSERT_TRUE(netns_->ok());
    ASSERT_EQ(netns_->Exec("ip link set lo up"), 0);
    // Conntrack runs in a netns only once something needs it: a ct expression does.
    ASSERT_EQ(netns_->ExecWithInput("nft -f -",
                                    "table inet adt {\n chain out {\n  type filter hook "
                                    "output priority 0;\n  ct state new counter\n }\n}\n"),
              0);
    ASSERT_EQ(netns_->Exec("sysctl -q -w net.netfilter.nf_conntrack_udp_timeout=300"), 0);
  }

  // Unreplied UDP entries to 127.x.y.z:9 (nobody listens), `count` distinct tuples.
  void FillUnrelated(int count) {
    std::thread([&] {
      Result<NetnsGuard> guard = NetnsGuard::Enter(netns_->path());
      ASSERT_TRUE(guard.ok()) << guard.error().message;
      const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(fd, 0);
      for (int i = 0; i < count; ++i) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(9);
        to.sin_addr.s_addr = htonl((127u << 24) | static_cast<uint32_t>(i + 1));
        (void)::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
      }
      ::close(fd);
    }).join();
  }

  int Insert(const std::string& args) {
    return netns_->Exec("conntrack -I " + args + " 2>/dev/null");
  }

  std::unique_ptr<testing::ScopedNetns> netns_;
};

TEST_F(ConntrackReaderTest, KernelFilterPicksTheReplyTupleOutOf100000Entries) {
  FillUnrelated(100000);
  // The one to find: SNATed probe, reply destination = the SNAT address, never answered.
  ASSERT_EQ(Insert("-p tcp -s 10.244.0.1 -d 10.244.0.5 -r 10.244.0.5 -q 169.254.7.127 --sport "
                   "40000 --dport 8080 --reply-port-src 8080 --reply-port-dst 40000 --state "
                   "SYN_SENT -t 100"),
            0);
  // Answered: SEEN_REPLY set.
  ASSERT_EQ(Insert("-p tcp -s 10.244.0.1 -d 10.244.0.6 -r 10.244.0.6 -q 169.254.7.127 --sport "
                   "40001 --dport 8080 --reply-port-src 8080 --reply-port-dst 40001 --state "
                   "ESTABLISHED -u SEEN_REPLY,ASSURED -t 100"),
            0);
  // The SNAT address in the original source only (the wrong tuple to filter on).
  ASSERT_EQ(Insert("-p tcp -s 169.254.7.127 -d 10.244.0.7 -r 10.244.0.50 -q 10.244.0.1 --sport "
                   "40002 --dport 8080 --reply-port-src 8080 --reply-port-dst 40002 --state "
                   "SYN_SENT -t 100"),
            0);
  // UDP to the SNAT address: not a probe.
  ASSERT_EQ(Insert("-p udp -s 10.244.0.1 -d 10.244.0.8 -r 10.244.0.8 -q 169.254.7.127 --sport "
                   "40003 --dport 53 --reply-port-src 53 --reply-port-dst 40003 -t 100"),
            0);

  ProbeConntrackState kernel = ReadProbeConntrackIn(netns_->path(), {});
  ASSERT_TRUE(kernel.errors.empty()) << kernel.errors.front().message;
  EXPECT_EQ(kernel.filter, "kernel");
  ASSERT_EQ(kernel.entries.size(), 1u);
  // The kernel hands back unreplied TCP only: the probe and the wrong-tuple entry, not the 100 000.
  EXPECT_EQ(kernel.examined, 2u);
  EXPECT_FALSE(kernel.truncated);
  const ProbeConntrackEntry& entry = kernel.entries[0];
  EXPECT_EQ(entry.orig_src, "10.244.0.1");
  EXPECT_EQ(entry.orig_dst, "10.244.0.5");
  EXPECT_EQ(entry.orig_sport, 40000);
  EXPECT_EQ(entry.orig_dport, 8080);
  EXPECT_EQ(entry.reply_src, "10.244.0.5");
  EXPECT_EQ(entry.reply_dst, "169.254.7.127");
  EXPECT_EQ(TcpConntrackStateName(entry.tcp_state), "SYN_SENT");
  EXPECT_GT(entry.timeout_s, 80u);
  EXPECT_LE(entry.timeout_s, 100u);
  EXPECT_EQ(kernel.syn_sent_timeout_s, 120u) << "the netns's default";

  // The user-space fallback finds the same entry by walking the whole table.
  ProbeConntrackOptions user;
  user.force_user_space = true;
  ProbeConntrackState walked = ReadProbeConntrackIn(netns_->path(), user);
  ASSERT_TRUE(walked.errors.empty()) << walked.errors.front().message;
  EXPECT_EQ(walked.filter, "user-space");
  EXPECT_GE(walked.examined, 100000u);
  EXPECT_FALSE(walked.truncated);
  ASSERT_EQ(walked.entries.size(), 1u);
  EXPECT_EQ(walked.entries[0].id, entry.id);
  EXPECT_EQ(walked.entries[0].orig_dst, "10.244.0.5");

  // Bounded: the walk stops at max_examined and says so.
  user.max_examined = 20000;
  ProbeConntrackState cut = ReadProbeConntrackIn(netns_->path(), user);
  ASSERT_TRUE(cut.errors.empty()) << cut.errors.front().message;
  EXPECT_EQ(cut.examined, 20000u);
  EXPECT_TRUE(cut.truncated);
}

TEST_F(ConntrackReaderTest, KeptEntriesAreBoundedAndCounted) {
  for (int i = 0; i < 12; ++i) {
    const std::string port = std::to_string(41000 + i);
    ASSERT_EQ(Insert("-p tcp -s 10.244.0.1 -d 10.244.0.5 -r 10.244.0.5 -q 169.254.7.127 --sport " +
                     port + " --dport 8080 --reply-port-src 8080 --reply-port-dst " + port +
                     " --state SYN_SENT -t 100"),
              0);
  }
  ProbeConntrackOptions options;
  options.max_entries = 5;
  ProbeConntrackState state = ReadProbeConntrackIn(netns_->path(), options);
  ASSERT_TRUE(state.errors.empty()) << state.errors.front().message;
  EXPECT_EQ(state.entries.size(), 5u);
  EXPECT_EQ(state.matched, 12u);
  EXPECT_TRUE(state.truncated);
}

TEST_F(ConntrackReaderTest, WithoutCapNetAdminItIsASourceError) {
  // One entry, so the reader cannot answer "empty" from the netns's count without asking.
  ASSERT_EQ(Insert("-p tcp -s 10.244.0.1 -d 10.244.0.5 -r 10.244.0.5 -q 169.254.7.127 --sport "
                   "40000 --dport 8080 --reply-port-src 8080 --reply-port-dst 40000 --state "
                   "SYN_SENT -t 100"),
            0);
  Result<ProbeConntrackState> read = SourceError{};
  std::thread([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_->path());
    ASSERT_TRUE(guard.ok());
    // Capabilities are per thread: drop CAP_NET_ADMIN from this one's effective set only.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    ASSERT_EQ(::syscall(SYS_capget, &header, data), 0);
    data[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
    ASSERT_EQ(::syscall(SYS_capset, &header, data), 0);
    read = ReadProbeConntrack({});
  }).join();
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().kind, SourceKind::kConntrack);
  EXPECT_EQ(read.error().error_number, EPERM) << read.error().message;
  EXPECT_NE(read.error().message.find("CAP_NET_ADMIN"), std::string::npos) << read.error().message;
}

TEST(ConntrackNodeSource, VanishedNetnsIsASourceErrorNotAFinding) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to enter network namespaces";
  auto netns = std::make_unique<testing::ScopedNetns>("ctgone");
  ASSERT_TRUE(netns->ok());
  const std::string path = netns->path();
  netns.reset();  // gone before the read
  ProbeConntrackState state = ReadProbeConntrackIn(path, {});
  EXPECT_TRUE(state.collected);
  ASSERT_EQ(state.errors.size(), 1u);
  EXPECT_EQ(state.errors[0].kind, SourceKind::kConntrack);
  EXPECT_NE(state.errors[0].message.find(path), std::string::npos) << state.errors[0].message;
  EXPECT_TRUE(state.entries.empty());

  NodeSnapshot snapshot;
  snapshot.probe_conntrack = state;
  EXPECT_TRUE(Analyze(snapshot).findings.empty());
}

}  // namespace
}  // namespace ad
