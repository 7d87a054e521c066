// In-pod prerequisites, end to end on the real kernel: the lab with cni-sim and
// ztunnel-sim, the real ambient-doctor binary and its JSON. dns-no-listener must give exactly
// DNS_CAPTURE_BROKEN in its pod, no-lo-v6 exactly INPOD_PROXY_BLOCKED (plus the ZDS_PENDING it
// causes) in its pod, and the healthy lab nothing. The readers are also driven directly: the
// port-filtered UDP dump, lo's link state, and the bad inputs (a vanished netns, lo down).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/unique_fd.h"
#include "daemon/daemon.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "report_json.h"
#include "scan/inspector.h"
#include "sources/netns/netns_guard.h"
#include "sources/route/route_reader.h"
#include "sources/sockdiag/inet_diag.h"
#include "sources/sockdiag/sock_diag_socket.h"

namespace ad {
namespace {

using lab::FaultKind;
using lab::LabBackend;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string UniquePrefix(const std::string& tag) {
  return "adi" + std::to_string(::getpid() % 100000) + tag;
}

class InpodReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  }
};

using test::EvidenceHas;
using test::JsonFinding;
using Report = test::ReportRun;

Report RunReport(const lab::LabNode& node) {
  return test::RunReportJson(
      {kDoctor, "report", "--local", "--lab-prefix", node.prefix, "-o", "json"});
}

using NetnsCode = std::tuple<std::string, std::string>;  // netns path, code

std::multiset<NetnsCode> WarningOrAbove(const Report& report) {
  std::multiset<NetnsCode> out;
  for (const JsonFinding& f : report.findings) {
    if (f.severity != "info") out.insert({f.netns_path, f.code});
  }
  return out;
}

const JsonFinding* Find(const Report& report, const std::string& path, const std::string& code) {
  for (const JsonFinding& f : report.findings) {
    if (f.netns_path == path && f.code == code) return &f;
  }
  return nullptr;
}

TEST_F(InpodReportTest, HealthyLabsHaveNoFindings) {
  for (bool ipv6 : {false, true}) {
    for (LabBackend backend : {LabBackend::kIptablesNft, LabBackend::kNft, LabBackend::kLegacy}) {
      if (!ipv6 && backend != LabBackend::kNft) continue;  // zds_report_test covers v4 ones
      lab::LabOptions options;
      options.prefix = UniquePrefix(ipv6 ? "h6" : "h4");
      options.pods = 2;
      options.backend = backend;
      options.ipv6 = ipv6;
      options.zds = true;
      lab::ScopedLab lab(options);
      ASSERT_TRUE(lab.ok()) << lab.error().message;
      Report report = RunReport(lab.node());
      EXPECT_EQ(report.exit_code, 0) << report.raw;
      EXPECT_TRUE(report.findings.empty()) << report.raw;
    }
  }
}

TEST_F(InpodReportTest, FaultsGiveExactlyTheirFindings) {
  for (bool ipv6 : {false, true}) {
    lab::LabOptions options;
    options.prefix = UniquePrefix(ipv6 ? "f6" : "f4");
    options.pods = 3;  // pod 2 stays healthy
    options.ipv6 = ipv6;
    options.zds = true;
    options.faults = {{FaultKind::kDnsNoListener, 0}, {FaultKind::kNoLoV6, 1}};
    lab::ScopedLab lab(options);
    ASSERT_TRUE(lab.ok()) << lab.error().message;
    const lab::LabNode& node = lab.node();
    const std::string pod0 = node.pods.at(0).netns_path;
    const std::string pod1 = node.pods.at(1).netns_path;
    Report report = RunReport(node);
    EXPECT_EQ(report.exit_code, 1) << report.raw;
    const std::multiset<NetnsCode> expected = {
        {pod0, "DNS_CAPTURE_BROKEN"},
        {pod1, "INPOD_PROXY_BLOCKED"},
        {pod1, "ZDS_PENDING"},  // the symptom, raised to warning in a one-shot report
    };
    EXPECT_EQ(WarningOrAbove(report), expected) << report.raw;
    if (const JsonFinding* dns = Find(report, pod0, "DNS_CAPTURE_BROKEN")) {
      EXPECT_EQ(dns->subject, "listeners");
      EXPECT_TRUE(EvidenceHas(*dns, "UDP 127.0.0.1:15053")) << report.raw;
      EXPECT_TRUE(EvidenceHas(*dns, "TCP 127.0.0.1:15053")) << report.raw;
    }
    if (const JsonFinding* blocked = Find(report, pod1, "INPOD_PROXY_BLOCKED")) {
      EXPECT_EQ(blocked->subject, "no ::1 on lo");
      EXPECT_TRUE(EvidenceHas(*blocked, "EADDRNOTAVAIL")) << report.raw;
    }
    if (const JsonFinding* pending = Find(report, pod1, "ZDS_PENDING")) {
      EXPECT_TRUE(EvidenceHas(*pending, "cause: INPOD_PROXY_BLOCKED")) << report.raw;
    }
    for (const JsonFinding& f : report.findings) {
      EXPECT_NE(f.netns_path, node.pods.at(2).netns_path) << "healthy pod: " << f.code;
    }
  }
}

// Open DNS_CAPTURE_BROKEN findings of a published result, by netns path.
std::set<std::string> DnsBrokenNetns(const PublishedResult& result) {
  std::set<std::string> out;
  for (const Finding& f : result.step.analysis.findings) {
    if (f.code == FindingCode::kDnsCaptureBroken) out.insert(f.netns_path);
  }
  return out;
}

TEST_F(InpodReportTest, DaemonSeesALostDnsListenerOnItsPoll) {
  // No rule changes, so no netns event marks the pods dirty, and the resync is an hour away: only
  // the poll's listener refresh can notice that ztunnel-sim closed its DNS sockets.
  lab::LabOptions options;
  options.prefix = UniquePrefix("d");
  options.pods = 2;
  options.zds = true;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  DaemonOptions daemon_options;
  daemon_options.engine.discovery.proc_root.clear();
  daemon_options.engine.discovery.netns_dirs = {"/run/netns"};
  daemon_options.engine.discovery.name_glob = node.prefix + "-*";
  daemon_options.engine.discovery.host_netns_path = node.host_netns_path;
  daemon_options.engine.zds_socket = node.zds.socket_path;
  daemon_options.engine.ztunnel_netns = {node.zds.ztunnel_netns_path};
  daemon_options.engine.cri = false;
  daemon_options.poll_interval = std::chrono::milliseconds(500);
  daemon_options.full_resync = std::chrono::hours(1);
  daemon_options.max_unpublished = std::chrono::milliseconds(0);
  Daemon daemon(daemon_options);
  std::thread runner([&daemon] { daemon.Run(); });

  ResultHub::Since first = daemon.hub().WaitSince(0, std::chrono::seconds(20));
  ASSERT_FALSE(first.results.empty());
  EXPECT_TRUE(DnsBrokenNetns(*first.results.back()).empty());
  uint64_t seen = first.results.back()->sequence;
  ASSERT_EQ(::kill(node.zds.ztunnel_sim_pid, SIGUSR1), 0);

  const std::set<std::string> expected = {node.pods[0].netns_path, node.pods[1].netns_path};
  std::set<std::string> broken;
  // A bound on waiting, not a speed assertion: the resync (1 h) cannot be what finds it.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (broken != expected && std::chrono::steady_clock::now() < give_up) {
    ResultHub::Since next = daemon.hub().WaitSince(seen, std::chrono::seconds(2));
    for (const auto& result : next.results) {
      EXPECT_NE(result->trigger, StepTrigger::kResync);
      broken = DnsBrokenNetns(*result);
      seen = result->sequence;
    }
  }
  daemon.Stop();
  runner.join();
  EXPECT_EQ(broken, expected);
}

// A netns of our own for the reader tests, removed on every path.
class ScratchNetns {
 public:
  explicit ScratchNetns(std::string name) : name_(std::move(name)) {
    ok_ = lab::RunCommand({{"ip", "netns", "add", name_}, "", ""}).ok();
  }
  ~ScratchNetns() { (void)lab::RunCommand({{"ip", "netns", "del", name_}, "", ""}); }
  bool ok() const { return ok_; }
  std::string path() const { return "/run/netns/" + name_; }
  bool Run(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", name_});
    auto out = lab::RunCommand({argv, "", ""});
    return out.ok() && out->exit_code == 0;
  }

 private:
  std::string name_;
  bool ok_ = false;
};

// Runs `body` on a thread inside `path` (the NetnsGuard rule: never on the test's main thread).
template <typename Body>
void InNetns(const std::string& path, Body body) {
  std::thread([&] {
    auto guard = NetnsGuard::Enter(path);
    ASSERT_TRUE(guard.ok()) << guard.error().message;
    body();
  }).join();
}

UniqueFd BoundUdp(int family, const char* address, uint16_t port) {
  UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    ::inet_pton(AF_INET, address, &in->sin_addr);
    length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    ::inet_pton(AF_INET6, address, &in6->sin6_addr);
    length = sizeof(sockaddr_in6);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0) return {};
  return fd;
}

TEST_F(InpodReportTest, UdpPortDumpReturnsOnlyThatPort) {
  ScratchNetns netns(UniquePrefix("udp"));
  ASSERT_TRUE(netns.ok());
  ASSERT_TRUE(netns.Run({"ip", "link", "set", "lo", "up"}));
  InNetns(netns.path(), [] {
    std::vector<UniqueFd> sockets;
    sockets.push_back(BoundUdp(AF_INET, "127.0.0.1", 15053));
    sockets.push_back(BoundUdp(AF_INET6, "::1", 15053));
    for (uint16_t port : {53, 15052, 15054, 5353}) {  // neighbours must not pass the filter
      sockets.push_back(BoundUdp(AF_INET, "127.0.0.1", port));
    }
    for (const UniqueFd& fd : sockets) ASSERT_TRUE(fd.valid());
    const ListenerDump dump = ReadUdpSocketsOnPort(15053);
    EXPECT_TRUE(dump.errors.empty()) << dump.errors.front().message;
    ASSERT_EQ(dump.listeners.size(), 2u);
    std::set<std::string> addresses;
    for (const ListeningSocket& s : dump.listeners) {
      EXPECT_EQ(s.port, 15053);
      EXPECT_EQ(s.protocol, 17);
      addresses.insert(s.address);
    }
    EXPECT_EQ(addresses, (std::set<std::string>{"127.0.0.1", "::1"}));
    // The raw reply holds only that socket: the filter ran in the kernel.
    auto socket = OpenSockDiagSocket();
    ASSERT_TRUE(socket.ok());
    auto raw = DumpSockDiag(*socket, UdpPortDumpRequest(AF_INET, 15053), "udp/ipv4 port 15053");
    ASSERT_TRUE(raw.ok()) << raw.error().message;
    auto decoded = DecodeInetDiagMessages(*raw, IPPROTO_UDP);
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    ASSERT_EQ(decoded->size(), 1u);
    EXPECT_EQ(decoded->front().address, "127.0.0.1");
    // Without the filter the same dump returns all five IPv4 sockets.
    auto all = DumpSockDiag(*socket, ListenerDumpRequest(AF_INET, IPPROTO_UDP), "udp/ipv4");
    ASSERT_TRUE(all.ok());
    auto all_decoded = DecodeInetDiagMessages(*all, IPPROTO_UDP);
    ASSERT_TRUE(all_decoded.ok());
    EXPECT_EQ(all_decoded->size(), 5u);
  });
}

TEST_F(InpodReportTest, UdpLookupFindsTheSocketThatReceives) {
  // A wildcard socket receives what is sent to 127.0.0.1; nothing is bound for ::1 (ENOENT is "no
  // socket", not an error).
  ScratchNetns netns(UniquePrefix("wild"));
  ASSERT_TRUE(netns.ok());
  ASSERT_TRUE(netns.Run({"ip", "link", "set", "lo", "up"}));
  InNetns(netns.path(), [] {
    UniqueFd wildcard = BoundUdp(AF_INET, "0.0.0.0", 15053);
    UniqueFd other = BoundUdp(AF_INET6, "::1", 15054);
    ASSERT_TRUE(wildcard.valid() && other.valid());
    const ListenerDump dump = ReadUdpSocketsOnPort(15053);
    EXPECT_TRUE(dump.errors.empty()) << dump.errors.front().message;
    ASSERT_EQ(dump.listeners.size(), 1u);
    EXPECT_EQ(dump.listeners[0].address, "0.0.0.0");
    EXPECT_EQ(dump.listeners[0].family, Family::kIpv4);
  });
}

TEST(InpodDumpDecodeTest, FailedUdpDumpIsAnError) {
  // What the kernel answers a refused dump with (EPERM): NLMSG_ERROR, decoded into an error.
  std::vector<uint8_t> reply(NLMSG_LENGTH(sizeof(nlmsgerr)));
  nlmsghdr header{};
  header.nlmsg_len = static_cast<uint32_t>(reply.size());
  header.nlmsg_type = NLMSG_ERROR;
  nlmsgerr error{};
  error.error = -EPERM;
  std::memcpy(reply.data(), &header, sizeof(header));
  std::memcpy(reply.data() + NLMSG_HDRLEN, &error, sizeof(error));
  auto decoded = DecodeInetDiagMessages(reply, IPPROTO_UDP);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().error_number, EPERM) << decoded.error().message;
  // A dump cut off before NLMSG_DONE is an error too, not an empty socket list.
  auto truncated = DecodeInetDiagMessages(std::span<const uint8_t>(), IPPROTO_UDP);
  EXPECT_FALSE(truncated.ok());
}

TEST_F(InpodReportTest, LoopbackStateFromTheRouteReader) {
  ScratchNetns netns(UniquePrefix("lo"));
  ASSERT_TRUE(netns.ok());
  // A fresh netns: lo exists and is down (no addresses).
  InNetns(netns.path(), [] {
    auto routing = ReadRouting({100});
    ASSERT_TRUE(routing.ok()) << routing.error().message;
    EXPECT_TRUE(routing->loopback.known);
    EXPECT_TRUE(routing->loopback.found);
    EXPECT_FALSE(routing->loopback.up);
  });
  ASSERT_TRUE(netns.Run({"ip", "link", "set", "lo", "up"}));
  ASSERT_TRUE(netns.Run({"ip", "-6", "addr", "del", "::1/128", "dev", "lo"}));
  InNetns(netns.path(), [] {
    auto routing = ReadRouting({100});
    ASSERT_TRUE(routing.ok()) << routing.error().message;
    EXPECT_TRUE(routing->loopback.up);
    EXPECT_FALSE(routing->ipv6_disabled);
    bool has_v6 = false;
    for (const InterfaceAddress& a : routing->addresses) {
      has_v6 |= a.ifname == "lo" && a.address == "::1";
    }
    EXPECT_FALSE(has_v6);
  });
}

TEST_F(InpodReportTest, VanishedNetnsIsAnErrorNotAFinding) {
  // The inspector is given a netns that is deleted before it reads: an unreadable netns with a
  // clear error, no dns_udp read, no crash.
  std::string path;
  {
    ScratchNetns netns(UniquePrefix("gone"));
    ASSERT_TRUE(netns.ok());
    path = netns.path();
  }
  NetnsRecord record;
  record.paths = {path};
  record.inode = 1;
  auto inspector = MakeKernelInspector(ReadLimits{});
  NetnsSnapshot snapshot = inspector->Inspect(record);
  EXPECT_TRUE(snapshot.unreadable);
  ASSERT_FALSE(snapshot.errors.empty());
  EXPECT_EQ(snapshot.reads.dns_udp, ReadStatus::kNotRead);
}

TEST_F(InpodReportTest, DumpInAClosedNetnsAnswersEmpty) {
  // The thread is in a netns whose bind mount was removed meanwhile (no process, no mount: only
  // the thread keeps it): the dump answers empty or fails as a SourceError, never hangs.
  std::unique_ptr<ScratchNetns> netns = std::make_unique<ScratchNetns>(UniquePrefix("cl"));
  ASSERT_TRUE(netns->ok());
  ListenerDump dump;
  std::thread([&] {
    auto guard = NetnsGuard::Enter(netns->path());
    ASSERT_TRUE(guard.ok()) << guard.error().message;
    netns.reset();  // `ip netns del`: the netns is closed but for this thread
    dump = ReadUdpSocketsOnPort(15053);
  }).join();
  EXPECT_TRUE(dump.listeners.empty());
  for (const SourceError& error : dump.errors) EXPECT_EQ(error.kind, SourceKind::kSockDiag);
}

}  // namespace
}  // namespace ad
