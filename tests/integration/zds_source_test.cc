// ZdsNodeSource against a real SEQPACKET hand-off: an istio-cni-like server listening under /tmp
// in the test's netns (a unix socket there is harmless) and ztunnel-like clients in a separate
// test netns, each a forked process. The source must find listener, accepted connections, the
// clients in their own netns, the owners, the unread hello in the receive queue and the netns fds
// both sides hold; and it must never connect (the accept count stays unchanged).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "child_process_util.h"
#include "netns_test_util.h"
#include "scan/zds_node_source.h"
#include "sources/sockdiag/unix_diag.h"

namespace ad {
namespace {

using testing::ChildChannel;
using testing::ChildProcess;

// ZdsHello{version: V1} on the wire.
constexpr char kHello[] = {0x08, 0x01};

bool Contains(const std::vector<uint64_t>& values, uint64_t value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ZdsSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(pod_netns_.ok());
    socket_path_ = dir_.path() + "/ztunnel.sock";
    pod_netns_inode_ = testing::InodeOf(pod_netns_.path());
    ASSERT_NE(pod_netns_inode_, 0u);
  }

  // istio-cni stand-in: listens, keeps a pod netns fd opened through the bind mount, and on 'a'
  // accepts one connection and sends it an "AddWorkload" record carrying that fd. Never reads.
  // On 'c' it drains the backlog without blocking and reports how many connections were waiting.
  std::unique_ptr<ChildProcess> StartServer() {
    const std::string path = socket_path_;
    const std::string netns = pod_netns_.path();
    auto server = std::make_unique<ChildProcess>([path, netns](const ChildChannel& channel) {
      const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      const sockaddr_un address = testing::UnixAddress(path);
      if (::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
          ::listen(listener, 16) != 0) {
        return;
      }
      const int pod_netns = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
      if (pod_netns < 0) return;
      channel.Signal('r');
      while (std::optional<char> command = channel.Wait()) {
        if (*command == 'a') {
          const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
          const char add[] = {0x0a, 0x00};
          channel.Signal(connection >= 0 &&
                                 testing::SendWithFd(connection, add, sizeof(add), pod_netns)
                             ? 'a'
                             : 'x');
        } else if (*command == 'c') {
          int waiting = 0;
          ::fcntl(listener, F_SETFL, O_NONBLOCK);
          while (::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) >= 0) {
            ++waiting;
          }
          channel.Signal(static_cast<char>('0' + std::min(waiting, 9)));
        }
      }
    });
    EXPECT_EQ(server->Read(), 'r');
    return server;
  }

  // ztunnel stand-in inside the pod test netns: connects, sends the hello, and on 'f' receives
  // the record with the netns fd (keeps the fd, like ztunnel keeps each pod netns).
  std::unique_ptr<ChildProcess> StartClient() {
    const std::string path = socket_path_;
    const std::string netns = pod_netns_.path();
    auto client = std::make_unique<ChildProcess>([path, netns](const ChildChannel& channel) {
      if (!testing::EnterNetns(netns)) return;
      const int connection = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      const sockaddr_un address = testing::UnixAddress(path);
      if (::connect(connection, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) !=
              0 ||
          ::send(connection, kHello, sizeof(kHello), 0) != sizeof(kHello)) {
        return;
      }
      channel.Signal('c');
      while (std::optional<char> command = channel.Wait()) {
        if (*command == 'f') channel.Signal(testing::ReceiveFd(connection) >= 0 ? 'f' : 'x');
      }
    });
    EXPECT_EQ(client->Read(), 'c');
    return client;
  }

  NodeSnapshot Collect(ZdsSourceOptions options = {}) {
    options.socket_path = socket_path_;
    if (options.netns_path.empty()) options.netns_path = "/proc/self/ns/net";
    ZdsNodeSource source(options);
    NodeSnapshot snapshot;
    source.Collect(snapshot);
    return snapshot;
  }

  testing::ScopedTempDir dir_;
  testing::ScopedNetns pod_netns_{"zds"};
  std::string socket_path_;
  uint64_t pod_netns_inode_ = 0;
  int64_t test_started_ms_ = NowMs();
};

// Permission warnings of the /proc inventory depend on the machine (a container may hide pid 1);
// anything else is a failure of the source.
void ExpectNoZdsErrors(const ZdsSocketState& zds) {
  for (const SourceError& error : zds.errors) {
    if (error.source() != "proc") ADD_FAILURE() << error.source() << ": " << error.message;
  }
}

const ProcessNetnsFds* FindProcess(const NodeSnapshot& snapshot, int pid) {
  for (const ProcessNetnsFds& process : snapshot.processes) {
    if (process.pid == pid) return &process;
  }
  return nullptr;
}

TEST_F(ZdsSourceTest, FindsListenerConnectionsClientsOwnersAndQueues) {
  auto server = StartServer();
  auto connected = StartClient();
  ASSERT_TRUE(server->Send('a'));
  ASSERT_EQ(server->Read(), 'a');
  ASSERT_TRUE(connected->Send('f'));
  ASSERT_EQ(connected->Read(), 'f');
  auto pending = StartClient();  // never accepted: waits in the backlog

  const NodeSnapshot snapshot = Collect();
  const ZdsSocketState& zds = snapshot.zds;
  EXPECT_TRUE(snapshot.zds_collected);
  ExpectNoZdsErrors(zds);
  EXPECT_EQ(zds.path, socket_path_);
  ASSERT_TRUE(zds.listener_found);
  EXPECT_EQ(zds.listener.state, kUnixStateListen);
  EXPECT_EQ(zds.listener.vfs_inode, testing::InodeOf(socket_path_));
  EXPECT_EQ(zds.listener.owner_pids, std::vector<int>{server->pid()});
  EXPECT_EQ(zds.listener.receive_queue, 1u);  // one connection waiting for accept()
  ASSERT_EQ(zds.listener.pending_client_inodes.size(), 1u);

  ASSERT_EQ(zds.accepted.size(), 1u);
  const UnixSocket& accepted = zds.accepted[0];
  EXPECT_EQ(accepted.owner_pids, std::vector<int>{server->pid()});
  EXPECT_EQ(accepted.receive_queue, sizeof(kHello));  // the hello nobody read
  EXPECT_EQ(accepted.state, kUnixStateEstablished);

  // Both clients live in the pod netns, not where the listener is: found there anyway.
  ASSERT_EQ(zds.clients.size(), 2u);
  EXPECT_EQ(zds.clients[0].inode, accepted.peer_inode);
  EXPECT_EQ(zds.clients[0].peer_inode, accepted.inode);
  EXPECT_EQ(zds.clients[0].state, kUnixStateEstablished);
  EXPECT_EQ(zds.clients[0].receive_queue, 0u);  // it read the AddWorkload
  EXPECT_EQ(zds.clients[0].owner_pids, std::vector<int>{connected->pid()});
  EXPECT_EQ(zds.clients[1].inode, zds.listener.pending_client_inodes[0]);
  EXPECT_EQ(zds.clients[1].owner_pids, std::vector<int>{pending->pid()});

  ASSERT_EQ(snapshot.processes.size(), 3u);
  const ProcessNetnsFds* cni = FindProcess(snapshot, server->pid());
  ASSERT_NE(cni, nullptr);
  EXPECT_EQ(cni->role, ProcessRole::kIstioCni);
  // Started during this test; btime has whole seconds, so allow a second of slack.
  EXPECT_GE(cni->start_time_unix_ms, test_started_ms_ - 1000);
  EXPECT_LE(cni->start_time_unix_ms, NowMs() + 1000);
  // Opened through the bind mount /run/netns/<name>: the fd reads back as that path.
  EXPECT_TRUE(Contains(cni->netns_fd_inodes, pod_netns_inode_));
  const ProcessNetnsFds* ztunnel = FindProcess(snapshot, connected->pid());
  ASSERT_NE(ztunnel, nullptr);
  EXPECT_EQ(ztunnel->role, ProcessRole::kZtunnel);
  EXPECT_EQ(ztunnel->own_netns_inode, pod_netns_inode_);
  // Received over SCM_RIGHTS with a real sendmsg.
  EXPECT_TRUE(Contains(ztunnel->netns_fd_inodes, pod_netns_inode_));
  const ProcessNetnsFds* waiting = FindProcess(snapshot, pending->pid());
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->role, ProcessRole::kZtunnel);
  EXPECT_TRUE(waiting->netns_fd_inodes.empty());
}

TEST_F(ZdsSourceTest, DefaultsToTheSnapshotsHostNetnsAndHostPrefix) {
  auto server = StartServer();
  ZdsSourceOptions options;
  options.socket_path = "/ztunnel.sock";
  options.host_path_prefix = dir_.path();  // as /host in a pod
  options.netns_path = "";
  // The listener is bound to the full path; the source looks for the configured one by file.
  NodeSnapshot snapshot;
  NetnsSnapshot host;
  host.netns.is_host = true;
  host.netns.paths = {"/proc/self/ns/net"};
  snapshot.netns.push_back(host);
  ZdsNodeSource(options).Collect(snapshot);
  ExpectNoZdsErrors(snapshot.zds);
  ASSERT_TRUE(snapshot.zds.listener_found);
  EXPECT_EQ(snapshot.zds.listener.path, socket_path_);
  EXPECT_EQ(snapshot.zds.listener.owner_pids, std::vector<int>{server->pid()});
}

TEST_F(ZdsSourceTest, FindsTheConnectionWithoutProcVisibility) {
  // An empty proc root: no owners, no candidate netns from processes. The accepted socket lives
  // in the client's netns, which the sweep still reaches through the snapshot's netns list.
  auto server = StartServer();
  auto client = StartClient();
  ASSERT_TRUE(server->Send('a'));
  ASSERT_EQ(server->Read(), 'a');
  testing::ScopedTempDir empty_proc;
  ZdsSourceOptions options;
  options.socket_path = socket_path_;
  options.proc_root = empty_proc.path();
  NodeSnapshot snapshot;
  NetnsSnapshot host;
  host.netns.is_host = true;
  host.netns.paths = {"/proc/self/ns/net"};
  host.netns.inode = testing::InodeOf("/proc/self/ns/net");
  NetnsSnapshot pod;
  pod.netns.paths = {pod_netns_.path()};
  pod.netns.inode = pod_netns_inode_;
  snapshot.netns = {host, pod};
  ZdsNodeSource(options).Collect(snapshot);
  ExpectNoZdsErrors(snapshot.zds);
  ASSERT_TRUE(snapshot.zds.listener_found);
  EXPECT_TRUE(snapshot.zds.listener.owner_pids.empty());
  ASSERT_EQ(snapshot.zds.accepted.size(), 1u);
  EXPECT_EQ(snapshot.zds.accepted[0].receive_queue, sizeof(kHello));
  ASSERT_EQ(snapshot.zds.clients.size(), 1u);
  EXPECT_EQ(snapshot.zds.clients[0].peer_inode, snapshot.zds.accepted[0].inode);
  EXPECT_TRUE(snapshot.processes.empty());
}

TEST_F(ZdsSourceTest, MissingSocketIsAStateNotAnError) {
  const NodeSnapshot snapshot = Collect();
  EXPECT_TRUE(snapshot.zds_collected);
  EXPECT_FALSE(snapshot.zds.listener_found);
  ExpectNoZdsErrors(snapshot.zds);
}

TEST_F(ZdsSourceTest, NeverConnectsAcross100Collections) {
  auto server = StartServer();
  auto client = StartClient();
  ASSERT_TRUE(server->Send('a'));
  ASSERT_EQ(server->Read(), 'a');
  for (int i = 0; i < 100; ++i) {
    const NodeSnapshot snapshot = Collect();
    ASSERT_TRUE(snapshot.zds.listener_found);
    ASSERT_EQ(snapshot.zds.accepted.size(), 1u) << "collection " << i;
    ASSERT_EQ(snapshot.zds.listener.receive_queue, 0u) << "collection " << i;
  }
  ASSERT_TRUE(server->Send('c'));
  EXPECT_EQ(server->Read(), '0');  // no connection ever waited for accept()
}

}  // namespace
}  // namespace ad
