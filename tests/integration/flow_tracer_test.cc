// The HBONE flow tracer on the real kernel: two netns joined by a veth pair, a server on :15008 in
// one, clients in the other, real traffic. Each connection gives exactly its outcome (closed,
// refused, reset, timeout) with the right 5-tuple and netns inode; other ports give no event;
// lost events are counted; the raw_tp and tracepoint flavours work when forced; without BTF or
// capabilities the loader reports why. Sockets are created on threads that enter a netns through
// NetnsGuard (a socket stays in the netns it was made in), so the test needs no helper process.
#include "tracing/flow_tracer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "child_process_util.h"
#include "daemon/flow_monitor.h"
#include "flows/flow_hub.h"
#include "flows/flow_table.h"
#include "netns_test_util.h"
#include "scoped_child.h"
#include "sources/netns/netns_guard.h"
#include "tracing/live_tcp.h"

namespace ad {
namespace {

using testing::Capture;
using testing::InodeOf;
using testing::IsRoot;
using testing::Run;
using testing::ScopedNetns;

constexpr const char* kServerIp = "10.211.0.1";
constexpr const char* kNoListenerIp = "10.211.0.3";  // on the server's veth, nothing bound
constexpr const char* kClientIp = "10.211.0.2";
constexpr uint16_t kHbonePort = 15008;
constexpr uint16_t kOtherPort = 15009;

sockaddr_in Address(const char* ip, uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &address.sin_addr);
  return address;
}

// A TCP socket created inside `netns_path` (on a worker thread; it stays in that netns).
UniqueFd SocketIn(const std::string& netns_path) {
  UniqueFd fd;
  std::thread worker([&] {
    Result<NetnsGuard> guard = NetnsGuard::Enter(netns_path);
    if (guard.ok()) fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  });
  worker.join();
  return fd;
}

uint16_t LocalPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

bool WriteAll(int fd, size_t bytes) {
  std::vector<char> data(bytes, 'x');
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::send(fd, data.data() + done, bytes - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool ReadExactly(int fd, size_t bytes) {
  std::vector<char> data(bytes);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::recv(fd, data.data() + done, bytes - done, 0);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void SetReceiveTimeout(int fd, int seconds) {
  timeval timeout{.tv_sec = seconds, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

// Two netns joined by a veth pair: server 10.211.0.1 (+ .3 without listener), client .2.
class VethPair {
 public:
  VethPair() : server_("ebpf-srv"), client_("ebpf-cli") {
    static std::atomic<int> counter{0};
    const std::string tag = std::to_string(::getpid() % 100000) + "x" + std::to_string(counter++);
    const std::string a = "veb" + tag + "a";
    const std::string b = "veb" + tag + "b";
    ok_ = server_.ok() && client_.ok() &&
          Run("ip link add " + a + " netns " + server_.name() + " type veth peer name " + b +
              " netns " + client_.name()) == 0 &&
          server_.Exec("ip addr add " + std::string(kServerIp) + "/24 dev " + a) == 0 &&
          server_.Exec("ip addr add " + std::string(kNoListenerIp) + "/24 dev " + a) == 0 &&
          server_.Exec("ip link set " + a + " up") == 0 && server_.Exec("ip link set lo up") == 0 &&
          client_.Exec("ip addr add " + std::string(kClientIp) + "/24 dev " + b) == 0 &&
          client_.Exec("ip link set " + b + " up") == 0 && client_.Exec("ip link set lo up") == 0;
  }
  bool ok() const { return ok_; }
  const ScopedNetns& server() const { return server_; }
  const ScopedNetns& client() const { return client_; }
  uint32_t server_inode() const { return static_cast<uint32_t>(InodeOf(server_.path())); }
  uint32_t client_inode() const { return static_cast<uint32_t>(InodeOf(client_.path())); }

 private:
  ScopedNetns server_;  // deleting a netns removes its veth end, and so the pair
  ScopedNetns client_;
  bool ok_ = false;
};

UniqueFd ListenIn(const std::string& netns_path, const char* ip, uint16_t port) {
  UniqueFd fd = SocketIn(netns_path);
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address = Address(ip, port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return UniqueFd();
  }
  return fd;
}

// Connects a client socket made in the client netns; returns the socket (connected or not) and
// the connect() errno (0 on success).
std::pair<UniqueFd, int> Connect(const VethPair& lab, const char* ip, uint16_t port,
                                 uint16_t bind_port = 0) {
  UniqueFd fd = SocketIn(lab.client().path());
  if (bind_port != 0) {
    sockaddr_in local = Address(kClientIp, bind_port);
    ::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local));
  }
  sockaddr_in address = Address(ip, port);
  const int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
  return {std::move(fd), rc == 0 ? 0 : errno};
}

class FlowTracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) GTEST_SKIP() << "needs root (BPF, netns)";
    if (!ProbeTracing(TracerOptions{}).btf_present) {
      GTEST_SKIP() << "kernel has no BTF at /sys/kernel/btf/vmlinux";
    }
    lab_.emplace();
    ASSERT_TRUE(lab_->ok()) << "veth lab setup failed";
  }

  std::unique_ptr<FlowTracer> Start(TracerOptions options = {}) {
    Result<std::unique_ptr<FlowTracer>> tracer = StartFlowTracer(options);
    EXPECT_TRUE(tracer.ok()) << tracer.error().message;
    return tracer.ok() ? std::move(tracer).value() : nullptr;
  }

  bool Ours(const Flow& flow) const {
    return flow.netns_inode == lab_->server_inode() || flow.netns_inode == lab_->client_inode();
  }

  // Polls until `done(events)` holds (or 15 s pass: a bound on waiting, not a time assertion).
  std::vector<FlowEvent> PollUntil(FlowTracer& tracer,
                                   const std::function<bool(const std::vector<FlowEvent>&)>& done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (!done(events_) && std::chrono::steady_clock::now() < give_up) {
      Result<size_t> polled = tracer.Poll(std::chrono::milliseconds(100), [&](const FlowEvent& e) {
        if (Ours(e.flow)) events_.push_back(e);
      });
      EXPECT_TRUE(polled.ok()) << polled.error().message;
      if (!polled.ok()) break;
    }
    return events_;
  }

  static std::function<bool(const std::vector<FlowEvent>&)> Closes(size_t n) {
    return [n](const std::vector<FlowEvent>& events) {
      size_t closes = 0;
      for (const FlowEvent& e : events) closes += e.kind == FlowEventKind::kClose ? 1 : 0;
      return closes >= n;
    };
  }

  static std::vector<Flow> ClosedFlows(const std::vector<FlowEvent>& events, FlowRole role) {
    std::vector<Flow> flows;
    for (const FlowEvent& e : events) {
      if (e.kind == FlowEventKind::kClose && e.flow.role == role) flows.push_back(e.flow);
    }
    return flows;
  }

  // One connection: client sends 5000 bytes, server answers 3000, client closes, then server.
  void EstablishedExchange(uint16_t port, uint16_t* client_port) {
    UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, port);
    ASSERT_TRUE(listener.valid());
    std::thread server([&] {
      UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      SetReceiveTimeout(conn.get(), 10);
      if (ReadExactly(conn.get(), 5000) && WriteAll(conn.get(), 3000)) {
        char byte;
        (void)::recv(conn.get(), &byte, 1, 0);  // the client's FIN
      }
    });
    auto [client, err] = Connect(*lab_, kServerIp, port);
    EXPECT_EQ(err, 0) << std::strerror(err);
    *client_port = LocalPort(client.get());
    SetReceiveTimeout(client.get(), 10);
    EXPECT_TRUE(WriteAll(client.get(), 5000));
    EXPECT_TRUE(ReadExactly(client.get(), 3000));
    client.Reset();
    server.join();
  }

  std::optional<VethPair> lab_;
  std::vector<FlowEvent> events_;
};

TEST_F(FlowTracerTest, EstablishedConnectionHasBytesTupleNetnsAndLatency) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  // auto picks the best flavour that works: tp_btf on the project's machine kind.
  EXPECT_NE(tracer->attach_mode(), AttachMode::kAuto);
  EXPECT_TRUE(tracer->probe().attempts.back().ends_with(": ok")) << tracer->probe().attempts.back();
  uint16_t client_port = 0;
  EstablishedExchange(kHbonePort, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));

  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  std::vector<Flow> servers = ClosedFlows(events, FlowRole::kServer);
  ASSERT_EQ(clients.size(), 1u);
  ASSERT_EQ(servers.size(), 1u);
  const Flow& client = clients[0];
  EXPECT_EQ(client.outcome, FlowOutcome::kClosed) << FlowOutcomeName(client.outcome);
  EXPECT_EQ(client.netns_inode, lab_->client_inode());
  EXPECT_EQ(client.tuple.src.ToString(), kClientIp);
  EXPECT_EQ(client.tuple.src_port, client_port);
  EXPECT_EQ(client.tuple.dst.ToString(), kServerIp);
  EXPECT_EQ(client.tuple.dst_port, kHbonePort);
  EXPECT_EQ(client.bytes_sent, 5000u);
  EXPECT_EQ(client.bytes_received, 3000u);
  EXPECT_TRUE(client.cookie_known);
  EXPECT_TRUE(client.ConnectLatencyUs().has_value());
  EXPECT_GT(client.ended_unix_ns, 0);
  EXPECT_EQ(client.resets(), 0u);

  const Flow& server = servers[0];
  EXPECT_EQ(server.outcome, FlowOutcome::kClosed) << FlowOutcomeName(server.outcome);
  EXPECT_EQ(server.netns_inode, lab_->server_inode());
  EXPECT_EQ(server.tuple.src.ToString(), kServerIp);
  EXPECT_EQ(server.tuple.src_port, kHbonePort);
  EXPECT_EQ(server.tuple.dst.ToString(), kClientIp);
  EXPECT_EQ(server.tuple.dst_port, client_port);
  EXPECT_EQ(server.bytes_sent, 3000u);
  EXPECT_EQ(server.bytes_received, 5000u);

  // Exactly one open event per side, before its close.
  size_t opens = 0;
  for (const FlowEvent& e : events) opens += e.kind == FlowEventKind::kOpen ? 1 : 0;
  EXPECT_EQ(opens, 2u);
  EXPECT_EQ(tracer->Counters().lost_events, 0u);
}

TEST_F(FlowTracerTest, ConnectionToAnAddressWithoutListenerIsRefused) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  auto [client, err] = Connect(*lab_, kNoListenerIp, kHbonePort);
  EXPECT_EQ(err, ECONNREFUSED);
  const uint16_t client_port = LocalPort(client.get());
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(1));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kRefused) << FlowOutcomeName(clients[0].outcome);
  EXPECT_EQ(clients[0].tuple.dst.ToString(), kNoListenerIp);
  EXPECT_EQ(clients[0].tuple.dst_port, kHbonePort);
  EXPECT_EQ(clients[0].netns_inode, lab_->client_inode());
  if (client_port != 0) {
    EXPECT_EQ(clients[0].tuple.src_port, client_port);
  }
  EXPECT_GE(clients[0].resets_received, 1u);
  EXPECT_TRUE(ClosedFlows(events, FlowRole::kServer).empty()) << "no socket on the server side";
}

TEST_F(FlowTracerTest, ServerAbortWithLingerZeroIsResetOnBothSides) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  std::thread server([&] {
    UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    SetReceiveTimeout(conn.get(), 10);
    char byte;
    (void)::recv(conn.get(), &byte, 1, 0);
    linger abort_on_close{.l_onoff = 1, .l_linger = 0};
    ::setsockopt(conn.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  });
  auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
  ASSERT_EQ(err, 0);
  ASSERT_TRUE(WriteAll(client.get(), 1));
  server.join();
  SetReceiveTimeout(client.get(), 10);
  char byte;
  EXPECT_LT(::recv(client.get(), &byte, 1, 0), 0);
  EXPECT_EQ(errno, ECONNRESET);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  std::vector<Flow> servers = ClosedFlows(events, FlowRole::kServer);
  ASSERT_EQ(clients.size(), 1u);
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kReset) << FlowOutcomeName(clients[0].outcome);
  EXPECT_GE(clients[0].resets_received, 1u);
  EXPECT_EQ(servers[0].outcome, FlowOutcome::kReset) << FlowOutcomeName(servers[0].outcome);
  EXPECT_EQ(servers[0].netns_inode, lab_->server_inode());
}

TEST_F(FlowTracerTest, DroppedSynTimesOutAndIsVisibleWhileConnecting) {
  constexpr uint16_t kDroppedSourcePort = 41999;
  ASSERT_EQ(lab_->client().Exec("sysctl -w net.ipv4.tcp_syn_retries=1"), 0);
  ASSERT_EQ(lab_->server().ExecWithInput("nft -f -",
                                         "table inet adt_ebpf_drop {\n"
                                         "  chain input {\n"
                                         "    type filter hook input priority 0;\n"
                                         "    tcp sport " +
                                             std::to_string(kDroppedSourcePort) +
                                             " drop\n"
                                             "  }\n"
                                             "}\n"),
            0);
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  auto [client, err] = Connect(*lab_, kServerIp, kHbonePort, kDroppedSourcePort);
  EXPECT_EQ(err, ETIMEDOUT) << std::strerror(err);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(1));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kTimeout) << FlowOutcomeName(clients[0].outcome);
  EXPECT_EQ(clients[0].tuple.src_port, kDroppedSourcePort);
  EXPECT_EQ(clients[0].tuple.dst_port, kHbonePort);
  EXPECT_GE(clients[0].retransmits, 1u);
  EXPECT_FALSE(clients[0].ConnectLatencyUs().has_value());
  // The open event came at the first SYN retransmit: the connect was visible before it failed.
  bool connecting = false;
  for (const FlowEvent& e : events) {
    connecting = connecting ||
                 (e.kind == FlowEventKind::kOpen && e.flow.outcome == FlowOutcome::kConnecting);
  }
  EXPECT_TRUE(connecting);
}

TEST_F(FlowTracerTest, ConnectVisibleAsConnectingIsReopenedWhenItIsEstablished) {
  constexpr uint16_t kDelayedSourcePort = 41998;
  ASSERT_EQ(lab_->server().ExecWithInput("nft -f -",
                                         "table inet adt_ebpf_delay {\n"
                                         "  chain input {\n"
                                         "    type filter hook input priority 0;\n"
                                         "    tcp sport " +
                                             std::to_string(kDelayedSourcePort) +
                                             " drop\n"
                                             "  }\n"
                                             "}\n"),
            0);
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  int connect_err = -1;
  UniqueFd client;
  std::thread connecting([&] {
    auto [fd, err] = Connect(*lab_, kServerIp, kHbonePort, kDelayedSourcePort);
    client = std::move(fd);
    connect_err = err;
  });
  // The first SYN retransmit makes it visible as connecting; then the SYNs get through.
  std::vector<FlowEvent> events = PollUntil(*tracer, [](const std::vector<FlowEvent>& seen) {
    for (const FlowEvent& e : seen) {
      if (e.kind == FlowEventKind::kOpen && e.flow.outcome == FlowOutcome::kConnecting) return true;
    }
    return false;
  });
  EXPECT_EQ(lab_->server().Exec("nft delete table inet adt_ebpf_delay"), 0);
  events = PollUntil(*tracer, [](const std::vector<FlowEvent>& seen) {
    for (const FlowEvent& e : seen) {
      if (e.kind == FlowEventKind::kOpen && e.flow.outcome == FlowOutcome::kOpen) return true;
    }
    return false;
  });
  connecting.join();
  EXPECT_EQ(connect_err, 0) << std::strerror(connect_err);
  std::vector<FlowOutcome> opens;
  for (const FlowEvent& e : events) {
    if (e.kind == FlowEventKind::kOpen && e.flow.role == FlowRole::kClient) {
      opens.push_back(e.flow.outcome);
    }
  }
  ASSERT_EQ(opens.size(), 2u);
  EXPECT_EQ(opens[0], FlowOutcome::kConnecting);
  EXPECT_EQ(opens[1], FlowOutcome::kOpen) << "the established open supersedes the connecting one";
  FlowTable table;
  for (const FlowEvent& e : events) table.Apply(e);
  bool established_client = false;
  for (const Flow& flow : table.View().open) {
    if (flow.role == FlowRole::kClient) established_client = flow.outcome == FlowOutcome::kOpen;
  }
  EXPECT_TRUE(established_client) << "the table keeps the newest open";
}

TEST_F(FlowTracerTest, OtherPortsGiveNoEvent) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  uint16_t other_port = 0;
  EstablishedExchange(kOtherPort, &other_port);
  auto [refused, err] = Connect(*lab_, kNoListenerIp, kOtherPort);
  EXPECT_EQ(err, ECONNREFUSED);
  // Then a traced connection: once its events are in, the untraced ones would have been too.
  uint16_t traced_port = 0;
  EstablishedExchange(kHbonePort, &traced_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  for (const FlowEvent& e : events) {
    EXPECT_TRUE(e.flow.tuple.src_port == kHbonePort || e.flow.tuple.dst_port == kHbonePort)
        << e.flow.tuple.src_port << " -> " << e.flow.tuple.dst_port;
  }
  EXPECT_EQ(ClosedFlows(events, FlowRole::kClient).size(), 1u);
}

TEST_F(FlowTracerTest, ConfiguredPortsAreTraced) {
  TracerOptions options;
  options.ports = {15001, kOtherPort};
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  uint16_t client_port = 0;
  EstablishedExchange(kOtherPort, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].tuple.dst_port, kOtherPort);
}

TEST_F(FlowTracerTest, AllConnectsTracesClientsOfAnyPortButNotTheirServers) {
  TracerOptions options;
  options.trace_all_connects = true;
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  uint16_t client_port = 0;
  EstablishedExchange(kOtherPort, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(1));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].tuple.dst_port, kOtherPort);
  EXPECT_EQ(clients[0].tuple.src_port, client_port);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kClosed);
  EXPECT_TRUE(ClosedFlows(events, FlowRole::kServer).empty()) << "15009 is not a traced port";
}

// A connect/accept on 127.0.0.1 in this process's own netns (the machine's, never watched);
// returns the client's port.
uint16_t HostLoopbackExchange() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = Address("127.0.0.1", 0);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 4) != 0) {
    return 0;
  }
  socklen_t length = sizeof(address);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return 0;
  }
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  return LocalPort(client.get());
}

TEST_F(FlowTracerTest, BypassModeTracesEveryConnectOfAWatchedNetnsOnly) {
  TracerOptions options;
  options.watch_bypass_netns = true;
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  // Nothing watched yet: connects to an untraced port give no event, in a lab netns or the host.
  uint16_t unwatched_port = 0;
  EstablishedExchange(kOtherPort, &unwatched_port);
  const uint16_t host_port = HostLoopbackExchange();
  ASSERT_NE(host_port, 0);
  Result<BypassNetnsState> state = tracer->SetBypassNetns({lab_->client_inode()});
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ(state->watched, 1u);
  EXPECT_EQ(state->not_watched, 0u);
  // Watched: the client netns's connect to any port is traced; the server's accept on 15009 is
  // not (not a capture port, and its netns is not watched).
  uint16_t watched_port = 0;
  EstablishedExchange(kOtherPort, &watched_port);
  // Then a traced-port connection: once its events are in, the others would have been too.
  uint16_t hbone_port = 0;
  EstablishedExchange(kHbonePort, &hbone_port);
  std::vector<FlowEvent> all;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  size_t closes = 0;
  while (closes < 3 && std::chrono::steady_clock::now() < give_up) {
    ASSERT_TRUE(tracer
                    ->Poll(std::chrono::milliseconds(100),
                           [&](const FlowEvent& e) {
                             all.push_back(e);
                             if (Ours(e.flow) && e.kind == FlowEventKind::kClose) ++closes;
                           })
                    .ok());
  }
  ASSERT_EQ(closes, 3u) << "watched client + HBONE client and server";
  size_t watched_clients = 0;
  for (const FlowEvent& e : all) {
    const Flow& flow = e.flow;
    EXPECT_NE(flow.tuple.src_port, unwatched_port) << "connect before the netns was watched";
    EXPECT_FALSE(flow.tuple.src_port == host_port || flow.tuple.dst_port == host_port)
        << "the host netns is not watched";
    if (flow.tuple.dst_port == kOtherPort || flow.tuple.src_port == kOtherPort) {
      EXPECT_EQ(flow.role, FlowRole::kClient) << "no accept on 15009 is traced";
      EXPECT_EQ(flow.netns_inode, lab_->client_inode());
      EXPECT_EQ(flow.tuple.src_port, watched_port);
      EXPECT_TRUE(flow.bypass_watch);
      if (e.kind == FlowEventKind::kClose) {
        ++watched_clients;
        EXPECT_EQ(flow.outcome, FlowOutcome::kClosed);
        EXPECT_EQ(flow.bytes_sent, 5000u);
      }
    }
    if (flow.tuple.dst_port == kHbonePort || flow.tuple.src_port == kHbonePort) {
      EXPECT_FALSE(flow.bypass_watch) << "traced for its port";
    }
  }
  EXPECT_EQ(watched_clients, 1u);
  EXPECT_EQ(tracer->Counters().watched_flows, 1u) << "the one watched connect, nothing else";
}

TEST_F(FlowTracerTest, BypassModeTracesCaptureAcceptsInAWatchedNetns) {
  TracerOptions options;
  options.watch_bypass_netns = true;
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  // The server netns plays an ambient pod whose ztunnel listens on 15001; the client netns is
  // not watched and 15001 is not a traced port, so only the accept is traced.
  ASSERT_TRUE(tracer->SetBypassNetns({lab_->server_inode()}).ok());
  uint16_t client_port = 0;
  EstablishedExchange(15001, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(1));
  std::vector<Flow> servers = ClosedFlows(events, FlowRole::kServer);
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(servers[0].tuple.src_port, 15001);
  EXPECT_EQ(servers[0].tuple.dst_port, client_port) << "the peer: the connect it pairs with";
  EXPECT_EQ(servers[0].netns_inode, lab_->server_inode());
  EXPECT_TRUE(servers[0].bypass_watch);
  EXPECT_TRUE(ClosedFlows(events, FlowRole::kClient).empty()) << "the client netns is not watched";
}

TEST_F(FlowTracerTest, BypassNetnsMapOverflowIsCountedNeverFatal) {
  TracerOptions options;
  options.watch_bypass_netns = true;
  options.max_bypass_netns = 2;
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  // Three netns for two entries: the highest inode (the lab's, made last) is left out.
  Result<BypassNetnsState> state = tracer->SetBypassNetns({1, 2, lab_->client_inode()});
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ(state->watched, 2u);
  EXPECT_EQ(state->not_watched, 1u);
  EXPECT_EQ(state->overflow_total, 1u);
  EXPECT_EQ(tracer->BypassNetns().not_watched, 1u);
  uint16_t left_out_port = 0;
  EstablishedExchange(kOtherPort, &left_out_port);
  uint16_t hbone_port = 0;
  EstablishedExchange(kHbonePort, &hbone_port);
  (void)PollUntil(*tracer, Closes(2));
  EXPECT_EQ(tracer->Counters().watched_flows, 0u) << "left out of the map: not traced";
  // The same set again changes nothing; a smaller one fits and is watched.
  state = tracer->SetBypassNetns({lab_->client_inode(), 2, 1});
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->overflow_total, 1u);
  state = tracer->SetBypassNetns({lab_->client_inode()});
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->watched, 1u);
  EXPECT_EQ(state->not_watched, 0u);
  EXPECT_EQ(state->overflow_total, 1u) << "a total: what was left out stays counted";
  uint16_t watched_port = 0;
  EstablishedExchange(kOtherPort, &watched_port);
  events_.clear();
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(1));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].tuple.src_port, watched_port);
  EXPECT_EQ(tracer->Counters().watched_flows, 1u);
}

TEST_F(FlowTracerTest, BypassNetnsNeedBypassMode) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  Result<BypassNetnsState> state = tracer->SetBypassNetns({lab_->client_inode()});
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.error().message.find("without mesh-bypass mode"), std::string::npos);
}

TEST_F(FlowTracerTest, Ipv6LoopbackConnectionInsideANetns) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  auto socket6 = [&] {
    UniqueFd fd;
    std::thread worker([&] {
      Result<NetnsGuard> guard = NetnsGuard::Enter(lab_->client().path());
      if (guard.ok()) fd.Reset(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    });
    worker.join();
    return fd;
  };
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_port = htons(kHbonePort);
  address.sin6_addr = in6addr_loopback;
  UniqueFd listener = socket6();
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  UniqueFd client = socket6();
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(WriteAll(client.get(), 700));
  ASSERT_TRUE(ReadExactly(conn.get(), 700));
  client.Reset();
  conn.Reset();
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_TRUE(clients[0].tuple.src.ipv6);
  EXPECT_EQ(clients[0].tuple.src.ToString(), "::1");
  EXPECT_EQ(clients[0].tuple.dst.ToString(), "::1");
  EXPECT_EQ(clients[0].tuple.dst_port, kHbonePort);
  EXPECT_EQ(clients[0].bytes_sent, 700u);
  EXPECT_EQ(clients[0].netns_inode, lab_->client_inode());
  EXPECT_EQ(ClosedFlows(events, FlowRole::kServer).size(), 1u);
}

TEST_F(FlowTracerTest, OpenFlowShowsGrowingLiveBytesBeforeItCloses) {
  auto tracer = Start();
  ASSERT_NE(tracer, nullptr);
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
  ASSERT_EQ(err, 0);
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid());
  FlowTable table;
  std::vector<FlowEvent> events = PollUntil(*tracer, [](const std::vector<FlowEvent>& e) {
    return e.size() >= 2;  // both open events
  });
  for (const FlowEvent& e : events) table.Apply(e);
  ASSERT_EQ(table.open_count(), 2u);

  auto refresh = [&] {
    std::vector<LiveSocketStats> live;
    for (const ScopedNetns* netns : {&lab_->client(), &lab_->server()}) {
      Result<std::vector<LiveSocketStats>> sockets =
          ReadLiveTcpSockets(netns->path(), {kHbonePort});
      EXPECT_TRUE(sockets.ok()) << sockets.error().message;
      if (sockets.ok()) live.insert(live.end(), sockets->begin(), sockets->end());
    }
    EXPECT_EQ(table.RefreshLive(live), 2u);
  };
  auto client_flow = [&] {
    for (const Flow& flow : table.View().open) {
      if (flow.role == FlowRole::kClient) return flow;
    }
    return Flow{};
  };
  ASSERT_TRUE(WriteAll(client.get(), 1000));
  ASSERT_TRUE(ReadExactly(conn.get(), 1000));
  refresh();
  EXPECT_EQ(client_flow().bytes_sent, 1000u);
  EXPECT_TRUE(client_flow().live);
  ASSERT_TRUE(WriteAll(client.get(), 1500));
  ASSERT_TRUE(ReadExactly(conn.get(), 1500));
  refresh();
  EXPECT_EQ(client_flow().bytes_sent, 2500u);
  for (const Flow& flow : table.View().open) {
    if (flow.role == FlowRole::kServer) {
      EXPECT_EQ(flow.bytes_received, 2500u);
    }
  }
}

TEST_F(FlowTracerTest, RingBufferLossIsCounted) {
  TracerOptions options;
  options.ring_bytes = 4096;  // one page: about 30 events
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  // 100 connections without reading the ring: ~400 events into room for ~30.
  for (int i = 0; i < 100; ++i) {
    auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
    ASSERT_EQ(err, 0);
    UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    linger abort_on_close{.l_onoff = 1, .l_linger = 0};
    ::setsockopt(conn.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  }
  const TracerCounters counters = tracer->Counters();
  EXPECT_GT(counters.lost_events, 0u);
  EXPECT_GT(counters.events, 0u);
  size_t delivered = 0;
  (void)tracer->Poll(std::chrono::milliseconds(0), [&](const FlowEvent&) { ++delivered; });
  EXPECT_GT(delivered, 0u);
  EXPECT_LT(delivered, 400u);
}

TEST_F(FlowTracerTest, RawTpCanBeForced) {
  TracerOptions options;
  options.attach = AttachMode::kRawTp;
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  EXPECT_EQ(tracer->attach_mode(), AttachMode::kRawTp);
  uint16_t client_port = 0;
  EstablishedExchange(kHbonePort, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kClosed);
  EXPECT_EQ(clients[0].tuple.src_port, client_port);
  EXPECT_EQ(clients[0].bytes_sent, 5000u);
  EXPECT_EQ(clients[0].netns_inode, lab_->client_inode());
}

TEST_F(FlowTracerTest, TracepointNeedsTracefsAndWorksWithIt) {
  TracerOptions options;
  options.attach = AttachMode::kTracepoint;
  options.tracefs_path = "/nonexistent/tracing";
  Result<std::unique_ptr<FlowTracer>> refused = StartFlowTracer(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("tracefs is not mounted"), std::string::npos)
      << refused.error().message;

  // The test (never the agent) mounts tracefs when it is absent, and unmounts it again.
  options.tracefs_path = "/sys/kernel/tracing";
  bool mounted_here = false;
  if (!ProbeTracing(options).tracefs_mounted) {
    if (::mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0) {
      GTEST_SKIP() << "cannot mount tracefs: " << std::strerror(errno);
    }
    mounted_here = true;
  }
  struct Unmount {
    bool active;
    ~Unmount() {
      if (active) ::umount2("/sys/kernel/tracing", MNT_DETACH);
    }
  } unmount{mounted_here};
  auto tracer = Start(options);
  ASSERT_NE(tracer, nullptr);
  EXPECT_EQ(tracer->attach_mode(), AttachMode::kTracepoint);
  uint16_t client_port = 0;
  EstablishedExchange(kHbonePort, &client_port);
  std::vector<FlowEvent> events = PollUntil(*tracer, Closes(2));
  std::vector<Flow> clients = ClosedFlows(events, FlowRole::kClient);
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].outcome, FlowOutcome::kClosed);
  EXPECT_EQ(clients[0].bytes_received, 3000u);
  tracer.reset();  // detach before unmounting
}

TEST(FlowTracerUnavailable, MissingBtfIsAReasonNotACrash) {
  TracerOptions options;
  options.btf_path = "/nonexistent/vmlinux";
  Result<std::unique_ptr<FlowTracer>> tracer = StartFlowTracer(options);
  ASSERT_FALSE(tracer.ok());
  EXPECT_EQ(tracer.error().kind, SourceKind::kTracing);
  EXPECT_NE(tracer.error().message.find("no kernel BTF"), std::string::npos)
      << tracer.error().message;
}

TEST(FlowTracerUnavailable, BadPortListIsRefused) {
  TracerOptions options;
  options.ports = {};
  EXPECT_FALSE(StartFlowTracer(options).ok());
  options.ports = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_FALSE(StartFlowTracer(options).ok());
}

TEST(FlowTracerUnavailable, WithoutCapabilitiesItReportsWhy) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to drop capabilities in a child";
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    __user_cap_header_struct header{};
    header.version = _LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &header, none) != 0) ::_exit(3);
    Result<std::unique_ptr<FlowTracer>> tracer = StartFlowTracer(TracerOptions{});
    const std::string message = tracer.ok() ? "LOADED" : tracer.error().message;
    (void)!::write(pipe_fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child crashed";
  ASSERT_EQ(WEXITSTATUS(status), 0) << "capset failed in the child";
  EXPECT_NE(message.find("missing capabilities"), std::string::npos) << message;
}

// The `flows` command end to end: it traces for its --duration while this test makes traced
// connections, then prints them as JSON; without BTF it exits 2 with the reason.
TEST_F(FlowTracerTest, FlowsCommandPrintsTracedConnections) {
  testing::ScopedTempDir dir("adt-ebpf-flows");
  const std::string out = dir.path() + "/flows.json";
  const std::string binary = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving) {
      pollfd poll_fd{.fd = listener.get(), .events = POLLIN, .revents = 0};
      if (::poll(&poll_fd, 1, 100) != 1) continue;
      UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
  });
  testing::ScopedChild flows(
      {binary, "flows", "--duration", "3s", "-o", "json", "--netns", lab_->client().path()}, "",
      out);
  // Connect until the command is done (it loads in tens of ms; some connects may predate it).
  int exit_code = -1;
  while ((exit_code = flows.Wait(std::chrono::milliseconds(200))) == -1) {
    auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
    EXPECT_EQ(err, 0);
  }
  serving = false;
  server.join();
  EXPECT_EQ(exit_code, 0);
  const std::string json = testing::ReadFile(out);
  EXPECT_NE(json.find("\"schema\": \"ambient-doctor.flows/v1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"attach\": \""), std::string::npos) << json;
  EXPECT_NE(json.find("\"dst_ip\": \"10.211.0.1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"inode\": " + std::to_string(lab_->client_inode())), std::string::npos);
  EXPECT_EQ(json.find("\"inode\": " + std::to_string(lab_->server_inode())), std::string::npos)
      << "--netns keeps only the client netns";

  const std::string refused =
      Capture(binary + " flows --duration 1s --attach tp_btf --port 0 2>&1; echo rc=$?");
  EXPECT_NE(refused.find("bad --port"), std::string::npos) << refused;
  EXPECT_NE(refused.find("rc=2"), std::string::npos) << refused;
  const std::string no_btf =
      Capture(binary + " flows --duration 1s --btf /nonexistent 2>&1; echo rc=$?");
  EXPECT_NE(no_btf.find("tracing unavailable: no kernel BTF"), std::string::npos) << no_btf;
  EXPECT_NE(no_btf.find("rc=2"), std::string::npos) << no_btf;
}

// The daemon's FlowMonitor refreshes an open flow's numbers from tcp_info while it is open: a
// long-lived :15008 connection between the two netns shows at least the bytes sent so far in the
// published view and as "update" events, growing with more traffic, before it closes.
TEST_F(FlowTracerTest, FlowMonitorPublishesGrowingLiveBytesOfAnOpenFlow) {
  auto hub = std::make_shared<FlowHub>();
  FlowMonitorOptions options;
  options.tracer.ports = {kHbonePort};
  options.tracer.ring_bytes = 1u << 16;
  options.poll = std::chrono::milliseconds(100);
  options.live_interval = std::chrono::milliseconds(200);
  FlowMonitor monitor(options, hub);
  ASSERT_TRUE(monitor.available()) << hub->status().reason;
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
  ASSERT_EQ(err, 0) << std::strerror(err);
  const uint16_t client_port = LocalPort(client.get());
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid());
  SetReceiveTimeout(conn.get(), 10);

  auto ours = [&](const Flow& flow) {
    return flow.netns_inode == lab_->client_inode() && flow.role == FlowRole::kClient &&
           flow.tuple.src_port == client_port;
  };
  auto server_side = [&](const Flow& flow) {
    return flow.netns_inode == lab_->server_inode() && flow.role == FlowRole::kServer &&
           flow.tuple.dst_port == client_port;
  };
  // Waits (15 s at most: a bound, not a time assertion) until the published view has our open
  // client flow with at least `sent` bytes sent and its server end with `sent` received.
  auto wait_for_view = [&](uint64_t sent) -> std::optional<Flow> {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < give_up) {
      const FlowHub::Current current = hub->Latest();
      std::optional<Flow> client_flow;
      bool server_ok = false;
      for (const Flow& flow : current.view->open) {
        if (ours(flow) && flow.bytes_sent >= sent) client_flow = flow;
        if (server_side(flow) && flow.bytes_received >= sent) server_ok = true;
      }
      if (client_flow && server_ok) return client_flow;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  };
  uint64_t after = 0;  // hub event sequence already looked at
  // The largest bytes_sent of our flow's update events published since the last call.
  auto updates_sent = [&]() -> uint64_t {
    uint64_t best = 0;
    for (;;) {
      FlowHub::Since since = hub->WaitSince(after, std::chrono::milliseconds(0));
      EXPECT_FALSE(since.gap);
      if (since.events.empty()) return best;
      for (const FlowEvent& event : since.events) {
        if (event.kind == FlowEventKind::kUpdate && ours(event.flow)) {
          EXPECT_TRUE(event.flow.live);
          EXPECT_EQ(event.flow.outcome, FlowOutcome::kOpen);
          best = std::max(best, event.flow.bytes_sent);
        }
      }
      after = since.last_sequence;
    }
  };

  constexpr size_t kFirst = 4000;
  ASSERT_TRUE(WriteAll(client.get(), kFirst));
  ASSERT_TRUE(ReadExactly(conn.get(), kFirst));
  std::optional<Flow> seen = wait_for_view(kFirst);
  ASSERT_TRUE(seen.has_value()) << "the view never showed " << kFirst << " bytes while open";
  EXPECT_TRUE(seen->live);
  EXPECT_EQ(seen->bytes_sent, kFirst) << "data bytes, exactly";
  EXPECT_GE(updates_sent(), kFirst) << "an update event carried them";

  constexpr size_t kMore = 6000;
  ASSERT_TRUE(WriteAll(client.get(), kMore));
  ASSERT_TRUE(ReadExactly(conn.get(), kMore));
  seen = wait_for_view(kFirst + kMore);
  ASSERT_TRUE(seen.has_value()) << "the view never grew to " << kFirst + kMore << " bytes";
  EXPECT_EQ(seen->bytes_sent, kFirst + kMore);
  EXPECT_EQ(updates_sent(), kFirst + kMore) << "a second update, with the grown count";
  const FlowTracerStatus status = hub->status();
  EXPECT_GT(status.live_refreshes, 0u);
  EXPECT_GT(status.live_netns_reads, 0u);
  EXPECT_GT(status.live_updates, 0u);

  client.Reset();
  conn.Reset();
  bool closed = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!closed && std::chrono::steady_clock::now() < give_up) {
    for (const Flow& flow : hub->Latest().view->closed) {
      if (ours(flow)) {
        closed = true;
        EXPECT_EQ(flow.bytes_sent, kFirst + kMore) << "the close agrees with the live count";
      }
    }
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(closed);
  monitor.Stop();
}

// A flow monitor tracing only `port` (one no other traffic of the machine uses), small ring.
FlowMonitorOptions QuietPortMonitor(uint16_t port) {
  FlowMonitorOptions options;
  options.tracer.ports = {port};
  options.tracer.ring_bytes = 1u << 16;
  return options;
}

// With no open traced flow, the live refresh reads nothing at all (no netns discovery, no netns
// entered), however often it is due; the first open flow makes it read.
TEST_F(FlowTracerTest, FlowMonitorLiveRefreshCostsNothingWithoutOpenFlows) {
  constexpr uint16_t kQuietPort = 25608;  // a port no other traffic of the machine uses
  auto hub = std::make_shared<FlowHub>();
  FlowMonitorOptions options = QuietPortMonitor(kQuietPort);
  options.poll = std::chrono::milliseconds(20);
  options.live_interval = std::chrono::milliseconds(20);
  options.republish = std::chrono::milliseconds(20);
  FlowMonitor monitor(options, hub);
  ASSERT_TRUE(monitor.available()) << hub->status().reason;
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // ~30 refreshes due
  FlowTracerStatus status = hub->status();
  EXPECT_EQ(status.live_refreshes, 0u);
  EXPECT_EQ(status.live_netns_reads, 0u);
  EXPECT_EQ(status.live_updates, 0u);

  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kQuietPort);
  ASSERT_TRUE(listener.valid());
  auto [client, err] = Connect(*lab_, kServerIp, kQuietPort);
  ASSERT_EQ(err, 0) << std::strerror(err);
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (hub->status().live_netns_reads == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  status = hub->status();
  EXPECT_GT(status.live_refreshes, 0u) << "an open flow is refreshed";
  EXPECT_GT(status.live_netns_reads, 0u);
  EXPECT_EQ(status.live_errors, 0u);
  monitor.Stop();
}

// The daemon's reader sleeps between drains with no timeout of its own here (republish 10 min,
// no live refresh): only the kernel side's wakeup for the first record into an empty ring can
// end the sleep, and Stop() must end it at once (SIGTERM stops serve within a second).
TEST_F(FlowTracerTest, FlowMonitorSleepsUntilTheFirstEventAndStopsAtOnce) {
  constexpr uint16_t kQuietPort = 25609;  // a port no other traffic of the machine uses
  auto hub = std::make_shared<FlowHub>();
  FlowMonitorOptions options = QuietPortMonitor(kQuietPort);
  options.republish = std::chrono::minutes(10);
  options.live_interval = std::chrono::milliseconds(0);
  FlowMonitor monitor(options, hub);
  ASSERT_TRUE(monitor.available()) << hub->status().reason;
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past its first drain: asleep

  uint64_t seen = hub->Latest().sequence;
  auto [client, err] = Connect(*lab_, kNoListenerIp, kQuietPort);
  EXPECT_EQ(err, ECONNREFUSED);
  bool closed = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!closed && std::chrono::steady_clock::now() < give_up) {
    FlowHub::Since since = hub->WaitSince(seen, std::chrono::milliseconds(500));
    for (const FlowEvent& e : since.events) {
      closed |= e.kind == FlowEventKind::kClose && e.flow.tuple.dst_port == kQuietPort;
    }
    seen = since.last_sequence;
  }
  EXPECT_TRUE(closed) << "the refused connect reached the hub without a timeout to wake the reader";

  const auto stop_started = std::chrono::steady_clock::now();
  monitor.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_started, std::chrono::seconds(5))
      << "Stop() interrupts the reader's wait (it would otherwise sleep until the republish)";
}

// `flows --follow` without a daemon traces in its own process until SIGINT: one line per
// open/close event (-o json: one object per line, as the daemon's follow prints them), exit 0.
// Without a daemon socket it falls back by itself; --local asks for it. --pod still needs the
// daemon.
TEST_F(FlowTracerTest, FlowsFollowTracesLocallyUntilInterrupted) {
  testing::ScopedTempDir dir("adt-flow-live-follow");
  const std::string binary = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";
  UniqueFd listener = ListenIn(lab_->server().path(), kServerIp, kHbonePort);
  ASSERT_TRUE(listener.valid());
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving) {
      pollfd poll_fd{.fd = listener.get(), .events = POLLIN, .revents = 0};
      if (::poll(&poll_fd, 1, 100) != 1) continue;
      UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
  });
  const std::string no_daemon = dir.path() + "/no-daemon.sock";
  struct Case {
    std::vector<std::string> args;
    bool json;
  };
  const std::vector<Case> cases = {
      {{binary, "flows", "--follow", "-o", "json", "--api-socket", no_daemon, "--netns",
        lab_->client().path()},
       true},
      {{binary, "flows", "--follow", "--local", "--netns", lab_->client().path()}, false},
  };
  for (const Case& c : cases) {
    const std::string out = dir.path() + (c.json ? "/follow.json" : "/follow.txt");
    testing::ScopedChild follow(c.args, "", out);
    // Connect until both lines of one of our connections are printed (the tracer loads in tens
    // of ms; connects before it are not seen). 15 s bound, not a time assertion.
    std::string text;
    auto has = [&](const std::string& event) {
      return c.json ? text.find("{\"event\":\"" + event + "\",\"flow\":") != std::string::npos &&
                          text.find("\"dst_ip\":\"10.211.0.1\"") != std::string::npos
                    : text.find(event + "\t") != std::string::npos &&
                          text.find("10.211.0.1:15008") != std::string::npos;
    };
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (!(has("open") && has("close")) && std::chrono::steady_clock::now() < give_up) {
      auto [client, err] = Connect(*lab_, kServerIp, kHbonePort);
      EXPECT_EQ(err, 0);
      client.Reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      text = testing::ReadFile(out);
      ASSERT_EQ(follow.Wait(std::chrono::milliseconds(0)), -1) << "it follows until told\n" << text;
    }
    EXPECT_TRUE(has("open") && has("close")) << text;
    if (c.json) {
      // One object per line, nothing else.
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        EXPECT_TRUE(line.starts_with("{\"event\":\"") && line.ends_with("}")) << line;
        EXPECT_NE(line.find("\"inode\":" + std::to_string(lab_->client_inode())), std::string::npos)
            << "--netns keeps the client netns: " << line;
      }
    }
    follow.Signal(SIGINT);
    EXPECT_EQ(follow.Wait(std::chrono::seconds(10)), 0) << text;
  }
  serving = false;
  server.join();

  const std::string pod = Capture(binary + " flows --follow --pod demo/web-0 --api-socket " +
                                  no_daemon + " 2>&1; echo rc=$?");
  EXPECT_NE(pod.find("--pod reads the daemon's flows"), std::string::npos) << pod;
  EXPECT_NE(pod.find("rc=2"), std::string::npos) << pod;
}

}  // namespace
}  // namespace ad
