// The ZDS emulators on a real kernel. cni-sim is checked byte by byte with this test playing
// ztunnel (SEQPACKET records, SCM_RIGHTS, Del's field number 2, one ack per request, latest-only
// Adds); ztunnel-sim is checked with this test playing istio-cni; the lab runs both as processes
// and every fault is visible where it was injected. Root-only parts skip without root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process_util.h"
#include "cni_sim/cni_server.h"
#include "lab/emulators.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_reader.h"
#include "zds/zds.pb.h"
#include "zds_wire/zds_wire.h"
#include "ztunnel_sim/ztunnel_sim.h"

namespace ad {
namespace {

namespace fs = std::filesystem;
namespace pb = istio::workload::zds;
using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

uint64_t InodeOf(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

uint64_t InodeOfFd(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? info.st_ino : 0;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string text;
  for (int b : bytes) text.push_back(static_cast<char>(b));
  return text;
}

// ---- cni-sim, with this test as ztunnel ---------------------------------------------------------

class CniSimTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  std::unique_ptr<sim::CniServer> StartServer(sim::CniServerOptions options,
                                              const std::vector<sim::CniPod>& pods = {}) {
    options.socket_path = socket_path();
    options.stats_file = dir_.path() + "/stats";
    options.log_to_stderr = false;
    Result<std::unique_ptr<sim::CniServer>> server = sim::CniServer::Start(options, pods);
    EXPECT_TRUE(server.ok()) << server.error().message;
    return server.ok() ? std::move(server).value() : nullptr;
  }

  UniqueFd ConnectWithHello() {
    Result<UniqueFd> socket = zds::ConnectSeqpacket(socket_path());
    EXPECT_TRUE(socket.ok()) << socket.error().message;
    if (!socket.ok()) return UniqueFd();
    EXPECT_TRUE(zds::SendRecord(socket->get(), Bytes({0x08, 0x01})).ok());
    return std::move(socket).value();
  }

  static zds::Record Next(int socket, int timeout_ms = 3000) {
    Result<zds::Record> record = zds::ReceiveRecord(socket, timeout_ms, 4);
    EXPECT_TRUE(record.ok()) << record.error().message;
    return record.ok() ? std::move(record).value() : zds::Record{.eof = true};
  }

  static bool Silent(int socket, int ms = 300) {
    Result<zds::Record> record = zds::ReceiveRecord(socket, ms, 4);
    return !record.ok() && record.error().error_number == ETIMEDOUT;
  }

  static void Ack(int socket, const std::string& error = "") {
    pb::WorkloadResponse response;
    response.mutable_ack()->set_error(error);
    ASSERT_TRUE(zds::SendRecord(socket, response.SerializeAsString()).ok());
  }

  // Handshake with an empty pod cache: SnapshotSent (1a 00) is the only request.
  static void FinishEmptySnapshot(int socket) {
    const zds::Record snapshot = Next(socket);
    EXPECT_EQ(zds::HexBytes(snapshot.bytes), "1a 00");
    Ack(socket);
  }

  std::string socket_path() const { return dir_.path() + "/ztunnel.sock"; }
  testing::ScopedTempDir dir_;
};

TEST_F(CniSimTest, SnapshotSendsAddWithOneNetnsFdOrKeepThenSnapshotSentOneAckEach) {
  const sim::CniPod present{"uid-a", "pod-a", "demo", "sa-a", "/proc/self/ns/net"};
  const sim::CniPod missing{"uid-b", "pod-b", "demo", "sa-b", dir_.path() + "/no-such-netns"};
  std::unique_ptr<sim::CniServer> server = StartServer({}, {present, missing});
  ASSERT_TRUE(server);
  UniqueFd socket = ConnectWithHello();
  ASSERT_TRUE(socket.valid());

  // uid-a sorts first. AddWorkload = field 1 (0a), one SCM_RIGHTS fd of this very netns.
  zds::Record add = Next(socket.get());
  ASSERT_FALSE(add.eof);
  EXPECT_EQ(static_cast<uint8_t>(add.bytes[0]), 0x0a) << zds::HexBytes(add.bytes);
  ASSERT_EQ(add.fds.size(), 1u);
  EXPECT_TRUE(zds::IsNetnsFd(add.fds[0].get()));
  EXPECT_EQ(InodeOfFd(add.fds[0].get()), InodeOf("/proc/self/ns/net"));
  pb::WorkloadRequest request;
  ASSERT_TRUE(request.ParseFromString(add.bytes));
  ASSERT_TRUE(request.has_add());
  EXPECT_EQ(request.add().uid(), "uid-a");
  EXPECT_EQ(request.add().workload_info().name(), "pod-a");
  EXPECT_EQ(request.add().workload_info().namespace_(), "demo");
  EXPECT_EQ(request.add().workload_info().service_account(), "sa-a");
  EXPECT_TRUE(Silent(socket.get())) << "next request sent before the ack";
  Ack(socket.get());

  // KeepWorkload = oneof field 5 (2a), no fd.
  zds::Record keep = Next(socket.get());
  EXPECT_EQ(zds::HexBytes(keep.bytes), "2a 07 0a 05 75 69 64 2d 62");  // keep{uid:"uid-b"}
  EXPECT_TRUE(keep.fds.empty());
  Ack(socket.get());

  FinishEmptySnapshot(socket.get());
  ASSERT_TRUE(WaitFor([&] { return server->stats().snapshots_completed == 1; }));
  const sim::CniStats stats = server->stats();
  EXPECT_EQ(stats.accepted_connections, 1u);
  EXPECT_EQ(stats.hellos_read, 1u);
  EXPECT_EQ(stats.adds_sent, 1u);
  EXPECT_EQ(stats.keeps_sent, 1u);
  EXPECT_EQ(stats.acks_received, 3u);
  // The stats file is what the lab and other tests read.
  EXPECT_EQ(lab::ReadStatsFile(server->options().stats_file)["acks_received"], 3u);
}

TEST_F(CniSimTest, AddGoesToLatestOnlyDelUsesFieldTwoAndGoesToAll) {
  // A short keepalive: like istio-cni, a vanished peer is only noticed by the idle check.
  std::unique_ptr<sim::CniServer> server = StartServer({.keepalive_interval = 200ms});
  ASSERT_TRUE(server);
  UniqueFd first = ConnectWithHello();
  FinishEmptySnapshot(first.get());
  UniqueFd second = ConnectWithHello();
  FinishEmptySnapshot(second.get());
  ASSERT_TRUE(WaitFor([&] { return server->stats().snapshots_completed == 2; }));

  std::shared_future<std::string> added =
      server->PodAdded({"uid-c", "pod-c", "demo", "sa", "/proc/self/ns/net"});
  zds::Record add = Next(second.get());
  EXPECT_EQ(add.fds.size(), 1u);
  EXPECT_TRUE(Silent(first.get())) << "an Add reached an older connection";
  Ack(second.get());
  ASSERT_EQ(added.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(added.get(), "");

  std::vector<std::shared_future<std::string>> deleted = server->PodDeleted("uid-c");
  ASSERT_EQ(deleted.size(), 2u);
  for (int socket : {first.get(), second.get()}) {
    zds::Record del = Next(socket);
    // WorkloadRequest.del (field 2, 12 07) { DelWorkload.uid = field 2 (12 05) "uid-c" }.
    EXPECT_EQ(zds::HexBytes(del.bytes), "12 07 12 05 75 69 64 2d 63");
    EXPECT_TRUE(del.fds.empty());
    Ack(socket);
  }
  for (const auto& result : deleted) {
    ASSERT_EQ(result.wait_for(3s), std::future_status::ready);
    EXPECT_EQ(result.get(), "");
  }

  // When the latest connection goes away the previous one is latest again.
  second.Reset();
  ASSERT_TRUE(WaitFor([&] { return server->stats().connections == 1; }));
  std::shared_future<std::string> again =
      server->PodAdded({"uid-d", "pod-d", "demo", "sa", "/proc/self/ns/net"});
  zds::Record add_d = Next(first.get());
  EXPECT_EQ(add_d.fds.size(), 1u);
  Ack(first.get(), "failure to start proxy : test");
  ASSERT_EQ(again.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(again.get(), "failure to start proxy : test");
  EXPECT_EQ(server->stats().nacks_received, 1u);
}

TEST_F(CniSimTest, DeadlockAcceptsButLeavesTheTwoByteHelloUnread) {
  std::unique_ptr<sim::CniServer> server = StartServer({.fault = sim::CniFault::kDeadlock});
  ASSERT_TRUE(server);
  UniqueFd socket = ConnectWithHello();
  ASSERT_TRUE(WaitFor([&] { return server->stats().accepted_connections == 1; }));
  std::shared_future<std::string> added =
      server->PodAdded({"uid-e", "pod-e", "demo", "sa", "/proc/self/ns/net"});
  EXPECT_TRUE(Silent(socket.get(), 500));
  EXPECT_NE(added.wait_for(0s), std::future_status::ready) << "PodAdded must hang, as pre-fix";
  EXPECT_EQ(server->stats().hellos_read, 0u);

  // The accepted socket carries the listener's path; its Recv-Q is the unread hello.
  Result<lab::CommandOutput> ss = lab::RunCommand({{"ss", "-x", "-a", "-n"}, "", ""});
  ASSERT_TRUE(ss.ok()) << ss.error().message;
  bool found = false;
  std::istringstream lines(ss->out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string netid, state, recv_q, send_q, local;
    fields >> netid >> state >> recv_q >> send_q >> local;
    if (netid == "u_seq" && state == "ESTAB" && local == socket_path()) {
      EXPECT_EQ(recv_q, "2") << line;
      found = true;
    }
  }
  EXPECT_TRUE(found) << ss->out;
  server->Stop();  // unblocks the hung PodAdded
  ASSERT_EQ(added.wait_for(3s), std::future_status::ready);
  EXPECT_NE(added.get(), "");
  EXPECT_FALSE(fs::exists(socket_path()));
}

TEST_F(CniSimTest, DropAddsNeverSendsTheAddButReportsSuccess) {
  std::unique_ptr<sim::CniServer> server = StartServer({.fault = sim::CniFault::kDropAdds});
  ASSERT_TRUE(server);
  UniqueFd socket = ConnectWithHello();
  FinishEmptySnapshot(socket.get());
  std::shared_future<std::string> added =
      server->PodAdded({"uid-f", "pod-f", "demo", "sa", "/proc/self/ns/net"});
  EXPECT_EQ(added.get(), "");
  EXPECT_TRUE(Silent(socket.get()));
  EXPECT_EQ(server->stats().adds_dropped, 1u);
  EXPECT_EQ(server->stats().adds_sent, 0u);
}

TEST_F(CniSimTest, SlowAckDelaysEveryRequest) {
  std::unique_ptr<sim::CniServer> server =
      StartServer({.fault = sim::CniFault::kSlowAck, .slow_delay = 400ms});
  ASSERT_TRUE(server);
  const auto start = std::chrono::steady_clock::now();
  UniqueFd socket = ConnectWithHello();
  FinishEmptySnapshot(socket.get());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
}

TEST_F(CniSimTest, OversizedHelloIsAnErrorAndTheConnectionIsDropped) {
  std::unique_ptr<sim::CniServer> server = StartServer({});
  ASSERT_TRUE(server);
  Result<UniqueFd> socket = zds::ConnectSeqpacket(socket_path());
  ASSERT_TRUE(socket.ok());
  // A 2000-byte record: the server reads at most 1024 and must treat truncation as an error.
  const std::string oversized(2000, '\x08');
  ASSERT_EQ(::send(socket->get(), oversized.data(), oversized.size(), 0), 2000);
  zds::Record record = Next(socket->get());
  EXPECT_TRUE(record.eof);
  EXPECT_EQ(server->stats().hellos_read, 0u);
}

TEST_F(CniSimTest, PodsFileRoundTrip) {
  const std::string path = dir_.path() + "/pods.txt";
  const sim::CniPod pod{"u1", "n1", "ns1", "sa1", "/run/netns/x"};
  {
    std::ofstream out(path);
    out << "# comment\n\n" << sim::PodsFileLine(pod) << "\n";
  }
  Result<std::vector<sim::CniPod>> pods = sim::ReadPodsFile(path);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  ASSERT_EQ(pods->size(), 1u);
  EXPECT_EQ((*pods)[0].netns_path, "/run/netns/x");
  {
    std::ofstream out(path);
    out << "u1 n1 ns1\n";
  }
  EXPECT_FALSE(sim::ReadPodsFile(path).ok());
}

// ---- ztunnel-sim, with this test as istio-cni ---------------------------------------------------

class ZtunnelSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    Result<UniqueFd> listener = zds::ListenSeqpacket(dir_.path() + "/ztunnel.sock");
    ASSERT_TRUE(listener.ok()) << listener.error().message;
    listener_ = std::move(listener).value();
  }

  std::unique_ptr<sim::ZtunnelSim> StartSim(sim::ZtunnelSimOptions options) {
    options.zds_socket_path = dir_.path() + "/ztunnel.sock";
    options.log_to_stderr = false;
    options.on_crash = [] {};
    Result<std::unique_ptr<sim::ZtunnelSim>> started = sim::ZtunnelSim::Start(options);
    EXPECT_TRUE(started.ok());
    return started.ok() ? std::move(started).value() : nullptr;
  }

  UniqueFd Accept() {
    pollfd fd{listener_.get(), POLLIN, 0};
    if (::poll(&fd, 1, 5000) != 1) return UniqueFd();
    return UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }

  static pb::Ack Request(int socket, const pb::WorkloadRequest& request, int fd = -1) {
    EXPECT_TRUE(zds::SendRecord(socket, request.SerializeAsString(), fd).ok());
    Result<zds::Record> reply = zds::ReceiveRecord(socket, 5000, 1);
    pb::WorkloadResponse response;
    EXPECT_TRUE(reply.ok() && !reply->eof && response.ParseFromString(reply->bytes));
    return response.ack();
  }

  testing::ScopedTempDir dir_;
  UniqueFd listener_;
};

TEST_F(ZtunnelSimTest, HelloIsExactlyV1AndSnapshotMakesItReady) {
  std::unique_ptr<sim::ZtunnelSim> ztunnel = StartSim({});
  ASSERT_TRUE(ztunnel);
  UniqueFd conn = Accept();
  ASSERT_TRUE(conn.valid());
  Result<zds::Record> hello = zds::ReceiveRecord(conn.get(), 5000, 1);
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(zds::HexBytes(hello->bytes), "08 01");
  EXPECT_EQ(ztunnel->ReadinessCode(), 500);
  EXPECT_EQ(ztunnel->ReadinessBody(), "not ready, pending: workload proxy manager");

  pb::WorkloadRequest snapshot;
  snapshot.mutable_snapshot_sent();
  EXPECT_EQ(Request(conn.get(), snapshot).error(), "");
  EXPECT_EQ(ztunnel->ReadinessCode(), 200);
  EXPECT_EQ(ztunnel->ReadinessBody(), "ready");
  EXPECT_NE(ztunnel->MetricsText().find("workload_manager_active_proxy_count 0\n"),
            std::string::npos);
}

TEST_F(ZtunnelSimTest, AddWithoutFdIsNackedAndTheConnectionIsRedone) {
  std::unique_ptr<sim::ZtunnelSim> ztunnel = StartSim({});
  ASSERT_TRUE(ztunnel);
  UniqueFd conn = Accept();
  ASSERT_TRUE(zds::ReceiveRecord(conn.get(), 5000, 1).ok());
  pb::WorkloadRequest add;
  add.mutable_add()->set_uid("uid-x");
  add.mutable_add()->mutable_workload_info()->set_name("x");
  EXPECT_EQ(Request(conn.get(), add).error(), "No control message");
  Result<zds::Record> closed = zds::ReceiveRecord(conn.get(), 5000, 1);
  ASSERT_TRUE(closed.ok());
  EXPECT_TRUE(closed->eof);
  UniqueFd again = Accept();  // reconnect with backoff, new hello
  ASSERT_TRUE(again.valid());
  Result<zds::Record> hello = zds::ReceiveRecord(again.get(), 5000, 1);
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(zds::HexBytes(hello->bytes), "08 01");
  EXPECT_TRUE(WaitFor([&] { return ztunnel->status().connections == 2; }));
}

// A real pod netns for ztunnel-sim to open listeners in; removed even on failure.
class ScopedNetns {
 public:
  explicit ScopedNetns(std::string name) : name_(std::move(name)) {
    ok_ = lab::RunChecked({{"ip", "netns", "add", name_}, "", ""}).ok() &&
          lab::RunChecked({{"ip", "link", "set", "lo", "up"}, "", path()}).ok();
  }
  ~ScopedNetns() { (void)lab::RunCommand({{"ip", "netns", "del", name_}, "", ""}); }
  bool ok() const { return ok_; }
  std::string path() const { return "/run/netns/" + name_; }

 private:
  std::string name_;
  bool ok_ = false;
};

int CountListeners(const std::string& netns_path) {
  Result<lab::CommandOutput> ss = lab::RunCommand({{"ss", "-H", "-ltnu"}, "", netns_path});
  if (!ss.ok()) return -1;
  int count = 0;
  std::istringstream lines(ss->out);
  for (std::string line; std::getline(lines, line);) count += line.find(":150") != line.npos;
  return count;
}

TEST_F(ZtunnelSimTest, AddOpensListenersInThePodNetnsDelAndSnapshotDrainThem) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a netns and setns into it";
  ScopedNetns pod_a("adzt" + std::to_string(::getpid()) + "-a");
  ScopedNetns pod_b("adzt" + std::to_string(::getpid()) + "-b");
  ASSERT_TRUE(pod_a.ok() && pod_b.ok());
  std::unique_ptr<sim::ZtunnelSim> ztunnel = StartSim({});
  ASSERT_TRUE(ztunnel);
  UniqueFd conn = Accept();
  ASSERT_TRUE(zds::ReceiveRecord(conn.get(), 5000, 1).ok());
  for (const auto& [uid, netns] : {std::pair{"uid-a", &pod_a}, std::pair{"uid-b", &pod_b}}) {
    UniqueFd netns_fd(::open(netns->path().c_str(), O_RDONLY | O_CLOEXEC));
    pb::WorkloadRequest add;
    add.mutable_add()->set_uid(uid);
    add.mutable_add()->mutable_workload_info()->set_name(uid);
    EXPECT_EQ(Request(conn.get(), add, netns_fd.get()).error(), "");
  }
  // 15001, 15006, 15008, 15053 tcp + udp on 127.0.0.1 and on ::1 (IPv6 is enabled in the netns)
  EXPECT_EQ(CountListeners(pod_a.path()), 7);
  EXPECT_EQ(CountListeners(pod_b.path()), 7);
  EXPECT_EQ(ztunnel->status().proxies_started, 2u);

  pb::WorkloadRequest del;
  del.mutable_del()->set_uid("uid-a");
  EXPECT_EQ(Request(conn.get(), del).error(), "");
  EXPECT_EQ(CountListeners(pod_a.path()), 0);

  // A new connection whose snapshot lacks uid-b drains it at SnapshotSent.
  conn.Reset();
  UniqueFd again = Accept();
  ASSERT_TRUE(zds::ReceiveRecord(again.get(), 5000, 1).ok());
  EXPECT_EQ(CountListeners(pod_b.path()), 7) << "proxies must survive a reconnect";
  pb::WorkloadRequest snapshot;
  snapshot.mutable_snapshot_sent();
  EXPECT_EQ(Request(again.get(), snapshot).error(), "");
  EXPECT_EQ(CountListeners(pod_b.path()), 0);
  EXPECT_EQ(ztunnel->status().proxies_stopped, 2u);
}

// ---- the lab with both emulators as processes ---------------------------------------------------

std::string Prefix(const std::string& tag) { return "adz" + std::to_string(::getpid()) + tag; }

std::string Read(const std::string& netns_path, std::vector<std::string> argv) {
  Result<lab::CommandOutput> result = lab::RunCommand({std::move(argv), "", netns_path});
  return result.ok() ? result->out : "ERROR: " + result.error().message;
}

// Listening sockets and links of the machine's own netns: must be untouched by the lab.
std::string RootNetnsView() {
  return Read("", {"ip", "-o", "link"}) + Read("", {"ip", "rule"}) +
         Read("", {"ss", "-H", "-ltnu", "sport", ">=", ":15000", "and", "sport", "<=", ":15053"});
}

class LabZdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    root_before_ = RootNetnsView();
  }
  void TearDown() override {
    if (::geteuid() == 0) {
      EXPECT_EQ(RootNetnsView(), root_before_) << "the root netns changed";
    }
  }

  static rapidjson::Document ConfigDump(const lab::LabNode& node) {
    rapidjson::Document dump;
    Result<lab::HttpReply> reply =
        lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15000, "/config_dump");
    EXPECT_TRUE(reply.ok()) << reply.error().message;
    if (!reply.ok()) return dump;
    const JsonStatus read = ParseJsonDocument(reply->body, dump);
    EXPECT_TRUE(read.ok()) << read.error;
    return dump;
  }

  static std::string WorkloadState(const rapidjson::Value& dump, const std::string& uid) {
    const rapidjson::Value* states = JsonMember(dump, "workloadState");
    const rapidjson::Value* entry = states ? JsonMember(*states, uid) : nullptr;
    return std::string(entry ? JsonStringMember(*entry, "state") : "");
  }

  // "ss -ltnup -e" inside the pod: ztunnel's listeners, owned by ztunnel-sim, marked 0x539.
  static int MarkedZtunnelListeners(const lab::LabPod& pod, int ztunnel_pid) {
    const std::string ss = Read(pod.netns_path, {"ss", "-H", "-ltnup", "-e"});
    int count = 0;
    std::istringstream lines(ss);
    for (std::string line; std::getline(lines, line);) {
      const bool ours =
          line.find("\"ztunnel-sim\",pid=" + std::to_string(ztunnel_pid)) != std::string::npos &&
          line.find("fwmark:0x539") != std::string::npos;
      count += ours ? 1 : 0;
    }
    return count;
  }

  std::string root_before_;
};

class LabZdsBackendTest : public LabZdsTest,
                          public ::testing::WithParamInterface<lab::LabBackend> {};

TEST_P(LabZdsBackendTest, EveryMeshedPodIsHandedOffAndDownRemovesEverything) {
  const lab::LabBackend backend = GetParam();
  const std::string prefix = Prefix("-" + std::string(lab::LabBackendName(backend)).substr(0, 3));
  lab::LabZds zds;
  {
    lab::ScopedLab lab(
        {.prefix = prefix, .pods = 3, .plain_pods = 1, .backend = backend, .zds = true});
    ASSERT_TRUE(lab.ok()) << lab.error().message;
    const lab::LabNode& node = lab.node();
    zds = node.zds;
    ASSERT_TRUE(zds.enabled);
    EXPECT_TRUE(lab::DaemonRunning(zds.cni_sim_pid, "cni-sim"));
    EXPECT_TRUE(lab::DaemonRunning(zds.ztunnel_sim_pid, "ztunnel-sim"));
    EXPECT_TRUE(fs::exists(zds.socket_path));
    EXPECT_EQ(lab::ListLabNetns(prefix).size(), 6u);  // host, 4 pods, ztunnel

    const rapidjson::Document dump = ConfigDump(node);
    for (const lab::LabPod& pod : node.pods) {
      SCOPED_TRACE(pod.netns_name);
      EXPECT_EQ(MarkedZtunnelListeners(pod, zds.ztunnel_sim_pid), pod.meshed ? 7 : 0);
      EXPECT_EQ(WorkloadState(dump, pod.pod_uid), pod.meshed ? "Up" : "");
    }
    const rapidjson::Value* workloads = JsonMember(dump, "workloads");
    ASSERT_TRUE(workloads && workloads->IsArray());
    ASSERT_EQ(workloads->Size(), 3u);
    const rapidjson::Value& first = (*workloads)[0];
    EXPECT_EQ(JsonStringMember(first, "uid"), "Kubernetes//Pod/lab/" + node.pods[0].netns_name);
    EXPECT_EQ(JsonStringMember(first, "protocol"), "HBONE");
    EXPECT_EQ(JsonStringMember(first, "networkMode"), "Standard");
    EXPECT_EQ(JsonStringMember(first, "node"), prefix + "-node");
    const rapidjson::Value* ips = JsonMember(first, "workloadIps");
    ASSERT_TRUE(ips && ips->IsArray());
    ASSERT_EQ(ips->Size(), 1u);
    EXPECT_EQ(JsonText(&(*ips)[0]), node.pods[0].ipv4);

    Result<lab::HttpReply> ready =
        lab::HttpGetInNetns(zds.ztunnel_netns_path, "127.0.0.1", 15021, "/healthz/ready");
    ASSERT_TRUE(ready.ok()) << ready.error().message;
    EXPECT_EQ(ready->status, 200);
    EXPECT_EQ(ready->body, "ready");
    Result<lab::HttpReply> metrics =
        lab::HttpGetInNetns(zds.ztunnel_netns_path, "127.0.0.1", 15020, "/metrics");
    ASSERT_TRUE(metrics.ok());
    EXPECT_NE(metrics->body.find("workload_manager_active_proxy_count 3\n"), std::string::npos)
        << metrics->body;

    auto stats = lab::ReadStatsFile(zds.stats_file);
    EXPECT_EQ(stats["accepted_connections"], 1u);
    EXPECT_EQ(stats["adds_sent"], 3u);
    EXPECT_EQ(stats["acks_received"], 4u);  // 3 adds + SnapshotSent
    EXPECT_EQ(stats["snapshots_completed"], 1u);
  }
  EXPECT_TRUE(lab::ListLabNetns(prefix).empty());
  EXPECT_FALSE(fs::exists(zds.run_dir));
  EXPECT_FALSE(lab::DaemonRunning(zds.cni_sim_pid, "cni-sim"));
  EXPECT_FALSE(lab::DaemonRunning(zds.ztunnel_sim_pid, "ztunnel-sim"));
}

INSTANTIATE_TEST_SUITE_P(Backends, LabZdsBackendTest,
                         ::testing::Values(lab::LabBackend::kLegacy, lab::LabBackend::kIptablesNft,
                                           lab::LabBackend::kNft),
                         [](const ::testing::TestParamInfo<lab::LabBackend>& info) {
                           std::string name(lab::LabBackendName(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST_F(LabZdsTest, ZtunnelNackKeepsThePodPendingAndZtunnelNotReady) {
  lab::ScopedLab lab(
      {.prefix = Prefix("-nack"), .pods = 2, .faults = {{lab::FaultKind::kZtunnelNack, 1}}});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  const rapidjson::Document dump = ConfigDump(node);
  EXPECT_EQ(WorkloadState(dump, node.pods[0].pod_uid), "Up");
  EXPECT_EQ(WorkloadState(dump, node.pods[1].pod_uid), "Pending");
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[0], node.zds.ztunnel_sim_pid), 7);  // DNS on ::1 too
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[1], node.zds.ztunnel_sim_pid), 0);
  Result<lab::HttpReply> ready =
      lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15021, "/healthz/ready");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 500);
  EXPECT_EQ(ready->body, "not ready, pending: workload proxy manager");
  Result<lab::HttpReply> metrics =
      lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15020, "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("workload_manager_pending_proxy_count 1\n"), std::string::npos);
  EXPECT_EQ(lab::ReadStatsFile(node.zds.stats_file)["nacks_received"], 1u);
}

TEST_F(LabZdsTest, DeadlockLeavesTheHelloQueuedAndNothingHandedOff) {
  lab::ScopedLab lab(
      {.prefix = Prefix("-dl"), .pods = 2, .faults = {{lab::FaultKind::kZdsDeadlock, {}}}});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  auto stats = lab::ReadStatsFile(node.zds.stats_file);
  EXPECT_EQ(stats["accepted_connections"], 1u);
  EXPECT_EQ(stats["hellos_read"], 0u);
  // Both ends of a unix connection belong to the connecting process's netns (ztunnel's).
  const std::string ss = Read(node.zds.ztunnel_netns_path, {"ss", "-x", "-a", "-n", "-H"});
  bool found = false;
  std::istringstream lines(ss);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string netid, state, recv_q, send_q, local;
    fields >> netid >> state >> recv_q >> send_q >> local;
    if (netid == "u_seq" && state == "ESTAB" && local == node.zds.socket_path) {
      EXPECT_EQ(recv_q, "2") << line;
      found = true;
    }
  }
  EXPECT_TRUE(found) << ss;
  for (const lab::LabPod& pod : node.pods) {
    EXPECT_EQ(MarkedZtunnelListeners(pod, node.zds.ztunnel_sim_pid), 0);
  }
  Result<lab::HttpReply> ready =
      lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15021, "/healthz/ready");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 500);
  const rapidjson::Document dump = ConfigDump(node);
  const rapidjson::Value* state = JsonMember(dump, "workloadState");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->IsObject() ? state->MemberCount() : 0u, 0u);
}

TEST_F(LabZdsTest, PodFaultsLandOnTheirPodOnly) {
  using lab::FaultKind;
  lab::ScopedLab lab({.prefix = Prefix("-pf"),
                      .pods = 5,
                      .faults = {{FaultKind::kZdsDropAdds, 0},
                                 {FaultKind::kZtunnelNoListeners, 1},
                                 {FaultKind::kStaleWorkload, 2},
                                 {FaultKind::kRedirectMissing, 3}}});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  const int ztunnel = node.zds.ztunnel_sim_pid;
  const rapidjson::Document dump = ConfigDump(node);
  // 0: rules, but the Add was never sent.
  EXPECT_EQ(WorkloadState(dump, node.pods[0].pod_uid), "");
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[0], ztunnel), 0);
  EXPECT_EQ(lab::ReadStatsFile(node.zds.stats_file)["adds_dropped"], 1u);
  // 1: Up, but no listeners.
  EXPECT_EQ(WorkloadState(dump, node.pods[1].pod_uid), "Up");
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[1], ztunnel), 0);
  // 2: the pod is gone, ztunnel still serves it.
  EXPECT_FALSE(fs::exists(node.pods[2].netns_path));
  EXPECT_EQ(WorkloadState(dump, node.pods[2].pod_uid), "Up");
  EXPECT_EQ(lab::ReadStatsFile(node.zds.stats_file)["dels_dropped"], 1u);
  // 3: listeners, no Istio rules.
  EXPECT_EQ(WorkloadState(dump, node.pods[3].pod_uid), "Up");
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[3], ztunnel), 7);
  EXPECT_EQ(Read(node.pods[3].netns_path, {"iptables-nft-save"}).find("ISTIO"), std::string::npos);
  // 4: the control.
  EXPECT_EQ(WorkloadState(dump, node.pods[4].pod_uid), "Up");
  EXPECT_EQ(MarkedZtunnelListeners(node.pods[4], ztunnel), 7);
  EXPECT_NE(Read(node.pods[4].netns_path, {"iptables-nft-save"}).find("ISTIO_OUTPUT"),
            std::string::npos);
}

TEST_F(LabZdsTest, CrashLeavesRulesWithoutListenersAndNoAdmin) {
  lab::ScopedLab lab(
      {.prefix = Prefix("-cr"), .pods = 2, .faults = {{lab::FaultKind::kZtunnelCrash, {}}}});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  EXPECT_FALSE(lab::DaemonRunning(node.zds.ztunnel_sim_pid, "ztunnel-sim"));
  for (const lab::LabPod& pod : node.pods) {
    EXPECT_EQ(Read(pod.netns_path, {"ss", "-H", "-ltn"}), "");
    EXPECT_NE(Read(pod.netns_path, {"iptables-nft-save"}).find("ISTIO_OUTPUT"), std::string::npos);
  }
  EXPECT_FALSE(
      lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15021, "/healthz/ready").ok());
}

TEST_F(LabZdsTest, SlowAckLeavesTheHandOffInProgress) {
  lab::ScopedLab lab({.prefix = Prefix("-sa"),
                      .pods = 2,
                      .faults = {{lab::FaultKind::kZdsSlowAck, {}}},
                      .slow_ack_seconds = 3});
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  auto stats = lab::ReadStatsFile(node.zds.stats_file);
  EXPECT_EQ(stats["hellos_read"], 1u);
  EXPECT_EQ(stats["snapshots_completed"], 0u);
  Result<lab::HttpReply> ready =
      lab::HttpGetInNetns(node.zds.ztunnel_netns_path, "127.0.0.1", 15021, "/healthz/ready");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 500);
}

TEST_F(LabZdsTest, ZdsFaultWithoutZdsFlagTurnsTheEmulatorsOnAndBadCombinationsAreRefused) {
  Result<lab::LabNode> planned =
      lab::PlanLab({.prefix = "adzplan", .pods = 2, .faults = {{lab::FaultKind::kZtunnelNack, 0}}});
  ASSERT_TRUE(planned.ok());
  EXPECT_TRUE(planned->zds.enabled);
  EXPECT_EQ(planned->zds.ztunnel_netns_name, "adzplan-ztunnel");
  EXPECT_FALSE(lab::PlanLab({.prefix = "adzplan",
                             .pods = 2,
                             .faults = {{lab::FaultKind::kZtunnelNack, 0},
                                        {lab::FaultKind::kZtunnelCrash, {}}}})
                   .ok());
  EXPECT_FALSE(lab::PlanLab({.prefix = "adzplan", .pods = 2}).value().zds.enabled);
  EXPECT_TRUE(lab::ParseFault("zds-drop-adds:1").ok());
}

}  // namespace
}  // namespace ad
