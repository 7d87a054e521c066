// `ambient-doctor serve` with the eBPF flow tracer on the lab (real kernel, real BPF): an HBONE
// connection between two lab pods shows in StreamFlows with the pod's name, a burst of refused
// :15008 connects raises HBONE_CONNECT_FAILURES (same-node) in GetReport and the flow metrics,
// MESH_BYPASS works with the defaults (the ambient pods' netns are watched, others not traced),
// and a daemon that cannot trace reports TRACING_UNAVAILABLE and keeps serving.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "base/unique_fd.h"
#include "child_process_util.h"
#include "lab/lab.h"
#include "scoped_child.h"
#include "sources/netns/netns_guard.h"
#include "sources/ztunnel/http_get.h"

namespace ad {
namespace {

namespace pb = ambientdoctor::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";
constexpr uint32_t kZtunnelMark = 0x539;  // ztunnel's own sockets skip the in-pod redirect

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A TCP connect from inside `netns_path` (with ztunnel's mark by default: an HBONE connect);
// returns the socket and errno.
std::pair<UniqueFd, int> ConnectFrom(const std::string& netns_path, const std::string& ip,
                                     uint16_t port, uint32_t mark = kZtunnelMark) {
  UniqueFd fd;
  int err = 0;
  std::thread worker([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      err = EBADF;
      return;
    }
    fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (mark != 0) ::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    ::inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
    err = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 ? 0
                                                                                           : errno;
  });
  worker.join();
  return {std::move(fd), err};
}

bool HasBtf() { return std::filesystem::exists("/sys/kernel/btf/vmlinux"); }

class ServeFlows : public ::testing::Test {
 protected:
  // Starts serve on a lab (`extra` flags appended) and waits until it serves.
  void StartServe(const lab::LabOptions& options, std::vector<std::string> extra) {
    api_socket_ = dir_.path() + "/api/api.sock";
    log_ = dir_.path() + "/serve.log";
    std::vector<std::string> args = {
        kDoctor,        "serve",    "--lab-prefix",      options.prefix,
        "--interval",   "200ms",    "--metrics-address", "127.0.0.1:0",
        "--api-socket", api_socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    serve_.emplace(args, "", log_, /*with_stderr=*/true);
    const std::regex bound("metrics on 127\\.0\\.0\\.1:([0-9]+)");
    std::smatch match;
    std::string text;
    for (int i = 0; i < 500; ++i) {
      text = ReadAll(log_);
      if (std::regex_search(text, match, bound) && text.find("serving") != std::string::npos) {
        break;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    ASSERT_TRUE(std::regex_search(text, match, bound)) << text;
    metrics_port_ = static_cast<uint16_t>(std::stoi(match[1].str()));
    stub_ = pb::AmbientDoctor::NewStub(
        grpc::CreateChannel("unix:" + api_socket_, grpc::InsecureChannelCredentials()));
  }

  pb::Report Report() {
    pb::Report report;
    for (int i = 0; i < 100; ++i) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + seconds(10));
      if (stub_->GetReport(&context, {}, &report).ok()) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return report;
  }

  std::string Metrics() {
    auto metrics = ztunnel::HttpGet({"", "127.0.0.1", metrics_port_, "/metrics"});
    return metrics.ok() ? metrics->body : "";
  }

  void StopServe() {
    serve_->Signal(SIGTERM);
    EXPECT_EQ(serve_->Wait(seconds(20)), 0) << ReadAll(log_);
  }

  testing::ScopedTempDir dir_{"adt-serve-flows"};
  std::string api_socket_;
  std::string log_;
  uint16_t metrics_port_ = 0;
  std::optional<testing::ScopedChild> serve_;
  std::unique_ptr<pb::AmbientDoctor::Stub> stub_;
};

TEST_F(ServeFlows, HboneConnectionIsStreamedWithPodNamesAndRefusedBurstIsAFinding) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (BPF, network namespaces)";
  if (!HasBtf()) GTEST_SKIP() << "kernel has no BTF at /sys/kernel/btf/vmlinux";
  lab::LabOptions options;
  options.prefix = "adtrd" + std::to_string(::getpid() % 100000);
  options.pods = 3;
  options.zds = true;
  options.faults = {{lab::FaultKind::kZtunnelNoListeners, 2}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  StartServe(options, {"--flow-ring-bytes", "65536"});  // a small ring works as well
  ASSERT_NE(ReadAll(log_).find("flow tracer attached"), std::string::npos) << ReadAll(log_);

  const lab::LabPod& client = lab.node().pods.at(0);
  const lab::LabPod& server = lab.node().pods.at(1);
  const lab::LabPod& no_listener = lab.node().pods.at(2);
  struct stat st {};
  ASSERT_EQ(::stat(client.netns_path.c_str(), &st), 0);
  const auto inode = static_cast<uint32_t>(st.st_ino);

  // The pod name the daemon knows for the client netns (CRI of the lab).
  std::string pod_name;
  for (int i = 0; i < 100 && pod_name.empty(); ++i) {
    const pb::Report report = Report();
    for (const pb::NetnsEntry& netns : report.netns()) {
      if (netns.inode() == inode && netns.has_pod()) pod_name = netns.pod();
    }
    if (pod_name.empty()) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_FALSE(pod_name.empty()) << "the lab's CRI names its pods";

  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    pb::StreamFlowsRequest request;
    request.set_netns_inode(inode);
    auto reader = stub_->StreamFlows(&context, request);
    pb::Flow flow;
    do {
      ASSERT_TRUE(reader->Read(&flow)) << reader->Finish().error_message();
    } while (!flow.end_of_current());
    auto [socket, err] = ConnectFrom(client.netns_path, server.ipv4, 15008);
    ASSERT_EQ(err, 0) << std::strerror(err);
    bool seen = false;
    while (!seen && reader->Read(&flow)) {
      ASSERT_EQ(flow.netns_inode(), inode) << "the netns filter";
      seen = flow.event() == "open" && flow.tuple().dst_ip() == server.ipv4 &&
             flow.tuple().dst_port() == 15008;
    }
    ASSERT_TRUE(seen) << reader->Finish().error_message();
    EXPECT_EQ(flow.pod(), pod_name);
    EXPECT_EQ(flow.role(), "client");
    EXPECT_EQ(flow.mark(), kZtunnelMark);
    socket.Reset();
    context.TryCancel();
    reader->Finish();
  }

  // A refused burst to a pod of this node, while `flows --pod` reads the daemon's stream.
  const std::string flows_out = dir_.path() + "/flows.json";
  testing::ScopedChild flows({kDoctor, "flows", "--api-socket", api_socket_, "--pod", pod_name,
                              "--duration", "3s", "-o", "json"},
                             "", flows_out);
  int flows_exit = -1;
  for (int i = 0; i < 6 || (flows_exit = flows.Wait(milliseconds(200))) == -1; ++i) {
    auto [socket, err] = ConnectFrom(client.netns_path, no_listener.ipv4, 15008);
    EXPECT_EQ(err, ECONNREFUSED) << std::strerror(err);
  }
  EXPECT_EQ(flows_exit, 0);
  const std::string flows_json = ReadAll(flows_out);
  EXPECT_NE(flows_json.find("\"pod\": \"" + pod_name + "\""), std::string::npos) << flows_json;
  EXPECT_NE(flows_json.find("\"outcome\": \"refused\""), std::string::npos) << flows_json;
  EXPECT_NE(flows_json.find("\"dst_ip\": \"" + no_listener.ipv4 + "\""), std::string::npos);
  bool found = false;
  pb::Finding finding;
  for (int i = 0; i < 200 && !found; ++i) {
    const pb::Report report = Report();
    for (const pb::Finding& f : report.findings()) {
      if (f.code() == "HBONE_CONNECT_FAILURES" && f.netns().inode() == inode) {
        finding = f;
        found = true;
      }
    }
    if (!found) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(found) << ReadAll(log_);
  EXPECT_EQ(finding.subject(), "same-node");
  EXPECT_EQ(finding.pod(), pod_name);
  EXPECT_TRUE(finding.has_first_seen_unix_ms()) << "history like any finding";

  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = Metrics();
    if (metrics.find("ambient_doctor_hbone_connections_total{locality=\"same_node\","
                     "outcome=\"refused\"} 0") == std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_NE(metrics.find("ambient_doctor_flow_tracer_available 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ambient_doctor_hbone_connections_total{locality=\"same_node\","
                         "outcome=\"refused\"}"),
            std::string::npos);
  EXPECT_EQ(metrics.find("ambient_doctor_hbone_connections_total{locality=\"same_node\","
                         "outcome=\"refused\"} 0\n"),
            std::string::npos)
      << metrics;

  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    pb::Status status;
    ASSERT_TRUE(stub_->GetStatus(&context, {}, &status).ok());
    EXPECT_TRUE(status.flow_tracer_available());
    EXPECT_FALSE(status.flow_tracer_attach().empty());
  }
  StopServe();
  EXPECT_NE(ReadAll(log_).find("finding opened HBONE_CONNECT_FAILURES"), std::string::npos)
      << ReadAll(log_);
}

// serve's defaults (mesh-bypass mode): the netns the scan finds ambient are watched, so a pod
// whose outbound REDIRECT rule was removed gives MESH_BYPASS for a plain connect, a pod with its
// rules intact (ztunnel-sim accepts on 15001) does not, and a non-ambient pod's connect is not
// traced at all.
TEST_F(ServeFlows, AppConnectionOfAPodWithoutItsRedirectRuleIsMeshBypassByDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (BPF, network namespaces)";
  if (!HasBtf()) GTEST_SKIP() << "kernel has no BTF at /sys/kernel/btf/vmlinux";
  lab::LabOptions options;
  options.prefix = "adtrb" + std::to_string(::getpid() % 100000);
  options.pods = 3;
  options.plain_pods = 1;
  options.zds = true;
  options.faults = {{lab::FaultKind::kDeleteRule, 0}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  StartServe(options, {});  // no flow flags: the defaults
  ASSERT_NE(ReadAll(log_).find("flow tracer attached"), std::string::npos) << ReadAll(log_);
  auto inode_of = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint32_t>(st.st_ino) : 0u;
  };
  const lab::LabPod& escaping = lab.node().pods.at(0);
  const lab::LabPod& redirected = lab.node().pods.at(1);
  const lab::LabPod& target = lab.node().pods.at(2);
  const lab::LabPod& plain = lab.node().pods.at(3);
  ASSERT_FALSE(plain.meshed);
  const uint32_t escaping_inode = inode_of(escaping.netns_path);
  const uint32_t redirected_inode = inode_of(redirected.netns_path);
  const uint32_t plain_inode = inode_of(plain.netns_path);
  // The scan's ambient netns reach the tracer's map (status is republished at least every 5 s).
  pb::Status status;
  for (int i = 0; i < 300; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    status.Clear();
    if (stub_->GetStatus(&context, {}, &status).ok() && status.flow_tracer_bypass_netns() >= 3) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(status.flow_tracer_bypass());
  ASSERT_GE(status.flow_tracer_bypass_netns(), 3u) << status.DebugString();
  EXPECT_EQ(status.flow_tracer_bypass_netns_not_watched(), 0u);
  EXPECT_EQ(status.flow_tracer_bypass_netns_overflow(), 0u);

  grpc::ClientContext stream_context;
  stream_context.set_deadline(std::chrono::system_clock::now() + seconds(30));
  auto reader = stub_->StreamFlows(&stream_context, pb::StreamFlowsRequest{});
  pb::Flow flow;
  do {
    ASSERT_TRUE(reader->Read(&flow)) << reader->Finish().error_message();
  } while (!flow.end_of_current());
  // Plain application connects (no mark) to another pod's port 80: inbound capture answers them.
  // The non-ambient pod's first: by the time the others' events are in, its would be too.
  std::vector<UniqueFd> sockets;
  for (const lab::LabPod* pod : {&plain, &escaping, &redirected}) {
    auto [socket, err] = ConnectFrom(pod->netns_path, target.ipv4, 80, /*mark=*/0);
    EXPECT_EQ(err, 0) << pod->netns_name << ": " << std::strerror(err);
    sockets.push_back(std::move(socket));
  }
  bool escaping_seen = false;
  bool redirected_seen = false;
  while (!(escaping_seen && redirected_seen) && reader->Read(&flow)) {
    EXPECT_NE(flow.netns_inode(), plain_inode) << "a non-ambient netns is not traced";
    if (flow.event() != "open" || flow.role() != "client" || flow.tuple().dst_port() != 80) {
      continue;
    }
    escaping_seen = escaping_seen || flow.netns_inode() == escaping_inode;
    redirected_seen = redirected_seen || flow.netns_inode() == redirected_inode;
  }
  EXPECT_TRUE(escaping_seen && redirected_seen) << reader->Finish().error_message();
  stream_context.TryCancel();
  reader->Finish();

  bool found = false;
  bool redirected_flagged = false;
  for (int i = 0; i < 200 && !found; ++i) {
    const pb::Report report = Report();
    for (const pb::Finding& f : report.findings()) {
      if (f.code() != "MESH_BYPASS") continue;
      if (f.netns().inode() == escaping_inode) found = true;
      if (f.netns().inode() == redirected_inode) redirected_flagged = true;
      EXPECT_NE(f.netns().inode(), plain_inode);
    }
    if (!found) std::this_thread::sleep_for(milliseconds(100));
  }
  if (!found) {
    std::string state;
    const pb::Report report = Report();
    for (const pb::NetnsEntry& netns : report.netns()) {
      if (netns.inode() == escaping_inode) state = netns.DebugString();
    }
    const std::string flows_out = dir_.path() + "/flows.json";
    testing::ScopedChild flows({kDoctor, "flows", "--api-socket", api_socket_, "--netns",
                                escaping.netns_path, "--duration", "1s", "-o", "json"},
                               "", flows_out);
    flows.Wait(seconds(10));
    ADD_FAILURE() << "no MESH_BYPASS for " << escaping.netns_name << "\n"
                  << state << "\nflows:\n"
                  << ReadAll(flows_out);
  }
  EXPECT_FALSE(redirected_flagged) << "its connect went through ztunnel's :15001";
  StopServe();
  EXPECT_NE(ReadAll(log_).find("finding opened MESH_BYPASS"), std::string::npos) << ReadAll(log_);
}

// --no-flow-bypass: the tracer runs, but no application connect is traced (the map is not fed).
TEST_F(ServeFlows, NoFlowBypassTracesNoApplicationConnect) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (BPF, network namespaces)";
  if (!HasBtf()) GTEST_SKIP() << "kernel has no BTF at /sys/kernel/btf/vmlinux";
  lab::LabOptions options;
  options.prefix = "adtro" + std::to_string(::getpid() % 100000);
  options.pods = 2;
  options.zds = true;
  options.faults = {{lab::FaultKind::kDeleteRule, 0}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  StartServe(options, {"--no-flow-bypass"});
  ASSERT_NE(ReadAll(log_).find("flow tracer attached"), std::string::npos) << ReadAll(log_);
  (void)Report();
  const lab::LabPod& escaping = lab.node().pods.at(0);
  const lab::LabPod& target = lab.node().pods.at(1);
  auto [app, app_err] = ConnectFrom(escaping.netns_path, target.ipv4, 80, /*mark=*/0);
  EXPECT_EQ(app_err, 0) << std::strerror(app_err);
  // A traced HBONE connect after it: once the daemon shows it, the app connect would be there.
  auto [hbone, hbone_err] = ConnectFrom(escaping.netns_path, target.ipv4, 15008);
  EXPECT_EQ(hbone_err, 0) << std::strerror(hbone_err);
  pb::Status status;
  for (int i = 0; i < 300; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    status.Clear();
    if (stub_->GetStatus(&context, {}, &status).ok() && status.flow_tracer_available()) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_FALSE(status.flow_tracer_bypass());
  EXPECT_EQ(status.flow_tracer_bypass_netns(), 0u);
  EXPECT_EQ(status.flow_tracer_bypass_flows(), 0u);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(30));
  auto reader = stub_->StreamFlows(&context, pb::StreamFlowsRequest{});
  pb::Flow flow;
  bool hbone_seen = false;
  while (!hbone_seen && reader->Read(&flow)) {  // the open flows, then the events
    EXPECT_NE(flow.tuple().dst_port(), 80u) << "application connects are not traced";
    hbone_seen = flow.tuple().dst_port() == 15008 && flow.role() == "client";
  }
  EXPECT_TRUE(hbone_seen) << reader->Finish().error_message();
  context.TryCancel();
  reader->Finish();
  const pb::Report report = Report();
  for (const pb::Finding& f : report.findings()) EXPECT_NE(f.code(), "MESH_BYPASS");
  StopServe();
}

// A long-lived connection between two lab pods on a traced port: StreamFlows sends "update"
// events with its bytes while it is open (serve --flow-live-interval), growing with the traffic,
// and daemon-mode `flows` prints them before the connection closes.
TEST_F(ServeFlows, OpenConnectionBytesReachStreamFlowsAsUpdatesBeforeItCloses) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (BPF, network namespaces)";
  if (!HasBtf()) GTEST_SKIP() << "kernel has no BTF at /sys/kernel/btf/vmlinux";
  lab::LabOptions options;
  options.prefix = "adtfl" + std::to_string(::getpid() % 100000);  // flow-live
  options.pods = 2;
  // The server pod's ztunnel (sim) has no listeners, so the test's own listener takes :15008
  // there (an HBONE port is not redirected inbound; the client sets ztunnel's mark, so its
  // connect is not redirected outbound) and the test owns both ends of the connection.
  options.faults = {{lab::FaultKind::kZtunnelNoListeners, 1}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  constexpr uint16_t kPort = 15008;
  StartServe(options, {"--flow-live-interval", "300ms"});
  ASSERT_NE(ReadAll(log_).find("flow tracer attached"), std::string::npos) << ReadAll(log_);
  const lab::LabPod& client = lab.node().pods.at(0);
  const lab::LabPod& server = lab.node().pods.at(1);
  struct stat st {};
  ASSERT_EQ(::stat(client.netns_path.c_str(), &st), 0);
  const auto inode = static_cast<uint32_t>(st.st_ino);

  UniqueFd listener;
  std::thread make_listener([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(server.netns_path);
    if (!guard.ok()) return;
    listener.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(kPort);
    ::inet_pton(AF_INET, server.ipv4.c_str(), &address.sin_addr);
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener.get(), 8) != 0) {
      listener.Reset();
    }
  });
  make_listener.join();
  ASSERT_TRUE(listener.valid());

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(60));
  pb::StreamFlowsRequest request;
  request.set_netns_inode(inode);
  auto reader = stub_->StreamFlows(&context, request);
  pb::Flow flow;
  do {
    ASSERT_TRUE(reader->Read(&flow)) << reader->Finish().error_message();
  } while (!flow.end_of_current());
  auto [socket, err] = ConnectFrom(client.netns_path, server.ipv4, kPort);
  ASSERT_EQ(err, 0) << std::strerror(err);
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid());
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&local), &length);
  const uint32_t client_port = ntohs(local.sin_port);
  auto send_and_drain = [&](size_t bytes) {
    const std::vector<char> data(bytes, 'x');
    ASSERT_EQ(::send(socket.get(), data.data(), bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
    std::vector<char> in(bytes);
    size_t got = 0;
    while (got < bytes) {
      const ssize_t n = ::recv(conn.get(), in.data() + got, bytes - got, 0);
      ASSERT_GT(n, 0);
      got += static_cast<size_t>(n);
    }
  };
  // Reads the stream until an update of our connection shows at least `bytes` sent.
  auto read_update = [&](uint64_t bytes) {
    while (reader->Read(&flow)) {
      if (flow.event() == "close" && flow.tuple().src_port() == client_port) return false;
      if (flow.event() == "update" && flow.tuple().src_port() == client_port &&
          flow.bytes_sent() >= bytes) {
        return true;
      }
    }
    return false;
  };
  constexpr size_t kFirst = 3000;
  send_and_drain(kFirst);
  ASSERT_TRUE(read_update(kFirst)) << reader->Finish().error_message();
  EXPECT_EQ(flow.bytes_sent(), kFirst);
  EXPECT_TRUE(flow.live());
  EXPECT_EQ(flow.outcome(), "open");
  EXPECT_EQ(flow.role(), "client");
  EXPECT_EQ(flow.netns_inode(), inode);
  EXPECT_EQ(flow.tuple().dst_ip(), server.ipv4);

  // Daemon-mode `flows` (one shot) shows the open flow with its live bytes so far.
  const std::string flows_out = dir_.path() + "/flows.json";
  testing::ScopedChild flows({kDoctor, "flows", "--api-socket", api_socket_, "--netns",
                              client.netns_path, "--duration", "1s", "-o", "json"},
                             "", flows_out);
  EXPECT_EQ(flows.Wait(seconds(20)), 0);
  const std::string flows_json = ReadAll(flows_out);
  EXPECT_NE(flows_json.find("\"src_port\": " + std::to_string(client_port)), std::string::npos)
      << flows_json;
  EXPECT_NE(flows_json.find("\"bytes_sent\": " + std::to_string(kFirst)), std::string::npos)
      << flows_json;

  constexpr size_t kMore = 5000;
  send_and_drain(kMore);
  ASSERT_TRUE(read_update(kFirst + kMore)) << reader->Finish().error_message();
  EXPECT_EQ(flow.bytes_sent(), kFirst + kMore) << "it grew while open";
  socket.Reset();
  conn.Reset();
  bool closed = false;
  while (!closed && reader->Read(&flow)) {
    closed = flow.event() == "close" && flow.tuple().src_port() == client_port;
  }
  ASSERT_TRUE(closed);
  EXPECT_EQ(flow.bytes_sent(), kFirst + kMore);
  context.TryCancel();
  reader->Finish();
  StopServe();
}

TEST(ServeFlowsFlags, BadLiveIntervalIsRefusedAtStart) {
  const std::string command = kDoctor +
                              " serve --api-socket off --metrics-address 127.0.0.1:0 "
                              "--flow-live-interval often 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << output;
  EXPECT_NE(output.find("--flow-live-interval needs a duration"), std::string::npos) << output;
}

TEST(ServeFlowsFlags, BadRingSizeIsRefusedAtStart) {
  for (const char* value : {"12x", "1024", "", "99999999999"}) {
    const std::string command = kDoctor + " serve --api-socket off --metrics-address 127.0.0.1:0 " +
                                "--flow-ring-bytes '" + value + "' 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << value << ": " << output;
    EXPECT_NE(output.find("--flow-ring-bytes must be between 4096 and 1073741824"),
              std::string::npos)
        << value << ": " << output;
  }
}

TEST_F(ServeFlows, WithoutBtfTracingIsUnavailableAndServeKeepsServing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  lab::LabOptions options;
  options.prefix = "adtrn" + std::to_string(::getpid() % 100000);
  options.pods = 1;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  StartServe(options, {"--flow-btf", dir_.path() + "/no-such-btf"});
  EXPECT_NE(ReadAll(log_).find("flow tracer unavailable"), std::string::npos) << ReadAll(log_);

  bool found = false;
  for (int i = 0; i < 100 && !found; ++i) {
    const pb::Report report = Report();
    for (const pb::Finding& f : report.findings()) {
      if (f.code() != "TRACING_UNAVAILABLE") continue;
      found = true;
      EXPECT_EQ(f.severity(), "info");
      ASSERT_EQ(f.evidence_size(), 1);
      EXPECT_NE(f.evidence(0).find("no-such-btf"), std::string::npos) << f.evidence(0);
    }
    if (!found) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(found);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    pb::Status status;
    ASSERT_TRUE(stub_->GetStatus(&context, {}, &status).ok());
    EXPECT_FALSE(status.flow_tracer_available());
    EXPECT_NE(status.flow_tracer_reason().find("no-such-btf"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto reader = stub_->StreamFlows(&context, {});
    pb::Flow flow;
    EXPECT_FALSE(reader->Read(&flow));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(status.error_message().find("no-such-btf"), std::string::npos)
        << status.error_message();
  }
  auto health = ztunnel::HttpGet({"", "127.0.0.1", metrics_port_, "/healthz"});
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200) << "still serving";
  const std::string metrics = Metrics();
  EXPECT_NE(metrics.find("ambient_doctor_flow_tracer_available 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ambient_doctor_hbone_connections_total{locality=\"remote\","
                         "outcome=\"timeout\"} 0"),
            std::string::npos)
      << "exported at 0 with the tracer off";
  StopServe();
}

}  // namespace
}  // namespace ad
