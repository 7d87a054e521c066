// Picking the ZDS listener, its connections and their clients out of unix socket dumps, and
// naming their owners from the fd inventory. Pure: hand-built dumps, no root.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "scan/zds_node_source.h"
#include "sources/sockdiag/unix_diag.h"

namespace ad {
namespace {

const std::string kPath = "/var/run/ztunnel/ztunnel.sock";
constexpr SocketFileId kFile{.dev = 0xfe01, .inode = 77};

UnixSocket Seqpacket(uint64_t inode, uint8_t state, std::string path, uint64_t vfs_inode,
                     uint64_t peer = 0) {
  UnixSocket socket;
  socket.inode = inode;
  socket.type = SOCK_SEQPACKET;
  socket.state = state;
  socket.path = std::move(path);
  socket.vfs_inode = vfs_inode;
  socket.vfs_dev = vfs_inode != 0 ? kFile.dev : 0;
  socket.peer_inode = peer;
  return socket;
}

// istio-cni listener 100 with accepted 101 <-> ztunnel client 200, and client 300 pending.
std::vector<UnixSocket> Handoff() {
  UnixSocket listener = Seqpacket(100, kUnixStateListen, kPath, 77);
  listener.pending_client_inodes = {300};
  listener.receive_queue = 1;
  UnixSocket accepted = Seqpacket(101, kUnixStateEstablished, kPath, 77, 200);
  accepted.receive_queue = 2;
  UnixSocket client = Seqpacket(200, kUnixStateEstablished, "", 0, 101);
  UnixSocket pending = Seqpacket(300, kUnixStateEstablished, "", 0, 0);
  UnixSocket unrelated_stream = Seqpacket(400, kUnixStateListen, kPath, 0);
  unrelated_stream.type = SOCK_STREAM;
  return {unrelated_stream, listener, accepted, client, pending};
}

TEST(MatchZdsSockets, FindsListenerAcceptedAndClients) {
  ZdsSocketState zds = MatchZdsSockets(Handoff(), kPath, kFile);
  EXPECT_TRUE(zds.errors.empty());
  ASSERT_TRUE(zds.listener_found);
  EXPECT_EQ(zds.path, kPath);
  EXPECT_EQ(zds.listener.inode, 100u);
  ASSERT_EQ(zds.accepted.size(), 1u);
  EXPECT_EQ(zds.accepted[0].inode, 101u);
  EXPECT_EQ(zds.accepted[0].receive_queue, 2u);
  ASSERT_EQ(zds.clients.size(), 2u);
  EXPECT_EQ(zds.clients[0].inode, 200u);
  EXPECT_EQ(zds.clients[1].inode, 300u);  // waiting in the backlog
}

TEST(MatchZdsSockets, NoListenerWhenNothingIsBound) {
  ZdsSocketState zds = MatchZdsSockets({Seqpacket(5, kUnixStateListen, "/other", 9)}, kPath, kFile);
  EXPECT_FALSE(zds.listener_found);
  EXPECT_TRUE(zds.accepted.empty());
  EXPECT_TRUE(zds.clients.empty());
}

TEST(MatchZdsSockets, PrefersTheListenerOfTheCurrentFileOverAStaleOne) {
  // An old istio-cni still listens on an unlinked file of the same name (vfs 55); the new one
  // listens on the file the path names now (vfs 77).
  std::vector<UnixSocket> sockets = Handoff();
  sockets.insert(sockets.begin(), Seqpacket(90, kUnixStateListen, kPath, 55));
  sockets.push_back(Seqpacket(91, kUnixStateEstablished, kPath, 55, 290));
  ZdsSocketState zds = MatchZdsSockets(sockets, kPath, kFile);
  EXPECT_EQ(zds.listener.inode, 100u);
  ASSERT_EQ(zds.accepted.size(), 1u);
  EXPECT_EQ(zds.accepted[0].inode, 101u);
}

TEST(MatchZdsSockets, FallsBackToTheNameAndSaysWhenTheFileWasReplaced) {
  std::vector<UnixSocket> sockets = Handoff();
  ZdsSocketState by_name = MatchZdsSockets(sockets, kPath, std::nullopt);
  EXPECT_TRUE(by_name.listener_found);
  EXPECT_TRUE(by_name.errors.empty());

  ZdsSocketState replaced = MatchZdsSockets(sockets, kPath, SocketFileId{kFile.dev, 12345});
  EXPECT_TRUE(replaced.listener_found);
  ASSERT_EQ(replaced.errors.size(), 1u);
  EXPECT_NE(replaced.errors[0].message.find("socket file replaced"), std::string::npos);
}

TEST(MatchZdsSockets, ClientInNoDumpIsListedByInodeAndReported) {
  std::vector<UnixSocket> sockets = Handoff();
  std::erase_if(sockets, [](const UnixSocket& s) { return s.inode == 200; });
  ZdsSocketState zds = MatchZdsSockets(sockets, kPath, kFile);
  ASSERT_EQ(zds.clients.size(), 2u);
  EXPECT_EQ(zds.clients[0].inode, 200u);
  EXPECT_EQ(zds.clients[0].peer_inode, 101u);
  ASSERT_EQ(zds.errors.size(), 1u);
  EXPECT_NE(zds.errors[0].message.find("client socket 200"), std::string::npos);
}

FdInventory Inventory(std::vector<ProcessFds> processes) {
  FdInventory inventory;
  inventory.processes = std::move(processes);
  inventory.BuildIndex();
  return inventory;
}

TEST(AttributeOwners, RolesFollowTheSocketsTheyHold) {
  FdInventory inventory = Inventory({
      {.pid = 10,
       .comm = "istio-cni",
       .start_time_unix_ms = 1000,
       .own_netns_inode = 1,
       .socket_inodes = {100, 101},
       .netns_fd_inodes = {7, 8}},
      {.pid = 20,
       .comm = "ztunnel",
       .own_netns_inode = 2,
       .socket_inodes = {200, 500},
       .netns_fd_inodes = {7}},
      {.pid = 21, .comm = "ztunnel-old", .socket_inodes = {300}},
      {.pid = 30, .comm = "sleep", .socket_inodes = {600}},
  });
  ZdsSocketState zds = MatchZdsSockets(Handoff(), kPath, kFile);
  std::vector<NetnsSnapshot> netns(1);
  netns[0].listeners.push_back(ListeningSocket{.port = 15008, .inode = 500});
  netns[0].listeners.push_back(ListeningSocket{.port = 9, .inode = 999});

  std::vector<ProcessNetnsFds> processes = AttributeOwners(inventory, &zds, &netns);

  EXPECT_EQ(zds.listener.owner_pids, std::vector<int>{10});
  EXPECT_EQ(zds.accepted[0].owner_pids, std::vector<int>{10});
  EXPECT_EQ(zds.clients[0].owner_pids, std::vector<int>{20});
  EXPECT_EQ(zds.clients[1].owner_pids, std::vector<int>{21});
  EXPECT_EQ(netns[0].listeners[0].owner_pids, std::vector<int>{20});
  EXPECT_TRUE(netns[0].listeners[1].owner_pids.empty());
  ASSERT_EQ(processes.size(), 3u);  // not the unrelated "sleep"
  EXPECT_EQ(processes[0].pid, 10);
  EXPECT_EQ(processes[0].role, ProcessRole::kIstioCni);
  EXPECT_EQ(processes[0].comm, "istio-cni");
  EXPECT_EQ(processes[0].start_time_unix_ms, 1000);
  EXPECT_EQ(processes[0].netns_fd_inodes, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(processes[1].pid, 20);
  EXPECT_EQ(processes[1].role, ProcessRole::kZtunnel);
  EXPECT_EQ(processes[1].own_netns_inode, 2u);
  EXPECT_EQ(processes[2].pid, 21);
  EXPECT_EQ(processes[2].role, ProcessRole::kZtunnel);
}

TEST(AttributeOwners, FallsBackToProcessNamesWithoutSockets) {
  FdInventory inventory = Inventory({
      {.pid = 5, .comm = "install-cni"},
      {.pid = 6, .comm = "ztunnel"},
      {.pid = 7, .comm = "bash"},
  });
  ZdsSocketState zds;  // no listener at all
  std::vector<NetnsSnapshot> netns;
  std::vector<ProcessNetnsFds> processes = AttributeOwners(inventory, &zds, &netns);
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0].role, ProcessRole::kIstioCni);
  EXPECT_EQ(processes[1].role, ProcessRole::kZtunnel);
}

}  // namespace
}  // namespace ad
