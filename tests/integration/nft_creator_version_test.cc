// NFT_BACKEND_UNUSABLE, "tables of a newer nft" on real kernel objects (root): the node's nft
// (Debian 12: 1.0.6) cannot write the creator-version entry newer nftables puts into a table's
// userdata, so this test writes the table itself through libnftnl + libmnl in a throwaway netns
// (the agent never writes), then loads Istio's in-pod rules into it with the real `nft -f`. The
// agent's nft reader decodes the entry, the nft userspace source reads the node's version because
// a table names its creator, and the check fires; a table without the entry and one with a
// malformed entry are handled without a guess.
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "lab/rules.h"
#include "model/version.h"
#include "netns_test_util.h"
#include "scan/inspector.h"
#include "scan/nft_node_source.h"
#include "scan/scanner.h"
#include "sources/netfilter/nft_table_userdata.h"
#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes CreatorUserdata(const Bytes& version_value) {
  Bytes out = {nft::kTableUdataCreatorVersion, static_cast<uint8_t>(version_value.size())};
  out.insert(out.end(), version_value.begin(), version_value.end());
  // Build time 2025-08-13T17:08:38Z, big-endian, as nft writes it next to the version.
  const Bytes stamp = {0, 0, 0, 0, 0x68, 0x9c, 0xc6, 0x46};
  out.push_back(nft::kTableUdataCreatorBuildTime);
  out.push_back(static_cast<uint8_t>(stamp.size()));
  out.insert(out.end(), stamp.begin(), stamp.end());
  return out;
}

struct TableFree {
  void operator()(nftnl_table* t) const { nftnl_table_free(t); }
};
struct SocketClose {
  void operator()(mnl_socket* s) const { mnl_socket_close(s); }
};

// Test-only writer: NFT_MSG_NEWTABLE `inet <name>` carrying `userdata`, one batch, in the calling
// thread's netns. Returns "" or what failed.
std::string CreateTableWithUserdata(const std::string& name, const Bytes& userdata) {
  std::unique_ptr<mnl_socket, SocketClose> socket(mnl_socket_open(NETLINK_NETFILTER));
  if (!socket || mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0) {
    return std::string("netlink socket: ") + std::strerror(errno);
  }
  std::unique_ptr<nftnl_table, TableFree> table(nftnl_table_alloc());
  nftnl_table_set_str(table.get(), NFTNL_TABLE_NAME, name.c_str());
  nftnl_table_set_u32(table.get(), NFTNL_TABLE_FAMILY, NFPROTO_INET);
  nftnl_table_set_data(table.get(), NFTNL_TABLE_USERDATA, userdata.data(),
                       static_cast<uint32_t>(userdata.size()));

  std::vector<char> buffer(MNL_SOCKET_BUFFER_SIZE);
  mnl_nlmsg_batch* batch = mnl_nlmsg_batch_start(buffer.data(), buffer.size());
  uint32_t seq = static_cast<uint32_t>(::time(nullptr));
  nftnl_batch_begin(static_cast<char*>(mnl_nlmsg_batch_current(batch)), seq++);
  mnl_nlmsg_batch_next(batch);
  const uint32_t table_seq = seq++;
  nlmsghdr* header = nftnl_table_nlmsg_build_hdr(static_cast<char*>(mnl_nlmsg_batch_current(batch)),
                                                 NFT_MSG_NEWTABLE, NFPROTO_INET,
                                                 NLM_F_CREATE | NLM_F_ACK, table_seq);
  nftnl_table_nlmsg_build_payload(header, table.get());
  mnl_nlmsg_batch_next(batch);
  nftnl_batch_end(static_cast<char*>(mnl_nlmsg_batch_current(batch)), seq++);
  mnl_nlmsg_batch_next(batch);
  const ssize_t sent =
      mnl_socket_sendto(socket.get(), mnl_nlmsg_batch_head(batch), mnl_nlmsg_batch_size(batch));
  mnl_nlmsg_batch_stop(batch);
  if (sent < 0) return std::string("sendto: ") + std::strerror(errno);
  const ssize_t received = mnl_socket_recvfrom(socket.get(), buffer.data(), buffer.size());
  if (received < 0) return std::string("recvfrom: ") + std::strerror(errno);
  if (mnl_cb_run(buffer.data(), static_cast<size_t>(received), table_seq,
                 mnl_socket_get_portid(socket.get()), nullptr, nullptr) < 0) {
    return std::string("NEWTABLE: ") + std::strerror(errno);
  }
  return "";
}

// Runs `body` on a thread inside `netns_path` (NetnsGuard restores it).
template <typename Body>
std::string InNetns(const std::string& netns_path, Body body) {
  std::string error;
  std::thread worker([&] {
    auto guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      error = guard.error().message;
      return;
    }
    error = body();
  });
  worker.join();
  return error;
}

class NftCreatorVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
    if (!std::filesystem::exists("/usr/sbin/nft")) GTEST_SKIP() << "no /usr/sbin/nft";
    if (!std::filesystem::exists("/var/lib/dpkg/status")) {
      GTEST_SKIP() << "no dpkg database: the node's nft version is unknown here";
    }
    ASSERT_TRUE(host_.ok() && pod_.ok());
  }

  // Istio's in-pod nft rules loaded by the real nft into the pod netns, whose
  // istio-ambient-nat table the test created before with `userdata`.
  void LoadPod(const Bytes& userdata) {
    if (!userdata.empty()) {
      ASSERT_EQ(InNetns(pod_.path(),
                        [&] { return CreateTableWithUserdata("istio-ambient-nat", userdata); }),
                "");
    }
    const std::string script = lab::NftInpodScript({.dns_capture = true}, lab::SnatConfig{});
    ASSERT_EQ(pod_.ExecWithInput("nft -f -", script), 0) << script;
  }

  NodeSnapshot Scan(const ScanReuse* reuse = nullptr) {
    ScanOptions options;
    options.discovery.proc_root.clear();
    options.discovery.netns_dirs = {"/run/netns"};
    options.discovery.name_glob = "adt-nftcause-" + std::to_string(::getpid()) + "-*";
    options.discovery.host_netns_path = host_.path();
    options.workers = 1;
    options.node_sources = {source_};
    std::unique_ptr<NetnsInspector> inspector = MakeKernelInspector(ReadLimits{});
    return ScanNode(options, *inspector, reuse);
  }

  static const Table* PodNatTable(const NodeSnapshot& snapshot) {
    for (const NetnsSnapshot& netns : snapshot.netns) {
      if (netns.netns.is_host) continue;
      for (const Table& table : netns.netfilter.tables) {
        if (table.name == "istio-ambient-nat") return &table;
      }
    }
    return nullptr;
  }

  static std::vector<Finding> NftFindings(const NodeSnapshot& snapshot) {
    std::vector<Finding> found;
    for (const Finding& f : Analyze(snapshot).findings) {
      if (f.code == FindingCode::kNftBackendUnusable) found.push_back(f);
    }
    return found;
  }

  testing::ScopedNetns host_{"nftcause"};
  testing::ScopedNetns pod_{"nftcause"};
  std::shared_ptr<NftUserspaceNodeSource> source_ =
      std::make_shared<NftUserspaceNodeSource>(nft::NftUserspaceOptions{});
};

TEST_F(NftCreatorVersionTest, TableOfANewerNftIsReadAndReported) {
  LoadPod(CreatorUserdata({1, 1, 1, 0}));
  const NodeSnapshot snapshot = Scan();
  const Table* nat = PodNatTable(snapshot);
  ASSERT_NE(nat, nullptr);
  // The kernel kept the test's userdata through the real nft's `add table` + `flush table`.
  EXPECT_EQ(nat->userdata.creator_version, "1.1.1");
  EXPECT_EQ(nat->userdata.creator_build_time, 0x689cc646);
  EXPECT_EQ(nat->userdata.error, "");
  EXPECT_FALSE(nat->chains.empty());  // the rules themselves read as ever

  // A table named its creator, so the node's version was read although JSON support is known.
  const NftUserspaceState& nft = snapshot.nft_userspace;
  ASSERT_FALSE(nft.version.empty()) << "dpkg knows nftables";
  EXPECT_EQ(nft.version_source, "dpkg");
  if (CompareVersions("1.1.1", nft.version).value_or(0) <= 0) {
    GTEST_SKIP() << "the node's nft " << nft.version << " is not older than 1.1.1";
  }
  const std::vector<Finding> found = NftFindings(snapshot);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].subject, "version");
  EXPECT_EQ(found[0].severity, Severity::kInfo);
  const std::string expected = "table inet istio-ambient-nat created by nft 1.1.1, node nft " +
                               nft.version + " (dpkg): " + pod_.path();
  EXPECT_NE(std::find(found[0].evidence.begin(), found[0].evidence.end(), expected),
            found[0].evidence.end())
      << found[0].summary << "\n"
      << ::testing::PrintToString(found[0].evidence);

  // The node's nft lists such a table without complaint: it skips entries it does not know.
  EXPECT_EQ(pod_.Exec("nft list table inet istio-ambient-nat"), 0);
}

// The daemon's event steps re-read changed netns without polling node sources: the finding must
// not resolve there and reopen at the next poll.
TEST_F(NftCreatorVersionTest, StepsWithoutNodeSourcesKeepTheNodesNftState) {
  LoadPod(CreatorUserdata({1, 1, 1, 0}));
  NodeSnapshot first = Scan();
  ASSERT_TRUE(first.nft_userspace.collected);
  const NftUserspaceState before = first.nft_userspace;
  const size_t found_before = NftFindings(first).size();
  const ScanReuse reuse{.previous = &first, .node_sources = false};
  const NodeSnapshot event_step = Scan(&reuse);
  EXPECT_EQ(event_step.nft_userspace, before);
  EXPECT_EQ(NftFindings(event_step).size(), found_before);
}

TEST_F(NftCreatorVersionTest, TableWithoutTheEntryNeedsNoVersion) {
  LoadPod({});  // nft 1.0.6 wrote every table
  const NodeSnapshot snapshot = Scan();
  const Table* nat = PodNatTable(snapshot);
  ASSERT_NE(nat, nullptr);
  EXPECT_EQ(nat->userdata, NftTableUserdata{});
  EXPECT_TRUE(NftFindings(snapshot).empty());
  // JSON support is known from the library, so the package database was not read.
  if (snapshot.nft_userspace.json_support.value_or(false)) {
    EXPECT_EQ(snapshot.nft_userspace.version, "");
  }
}

TEST_F(NftCreatorVersionTest, MalformedEntryIsNamedAndTheRulesStillRead) {
  LoadPod(CreatorUserdata({1, 1, 5}));  // 3 bytes where nft writes 4
  const NodeSnapshot snapshot = Scan();
  const Table* nat = PodNatTable(snapshot);
  ASSERT_NE(nat, nullptr);
  EXPECT_EQ(nat->userdata.creator_version, "");
  EXPECT_EQ(nat->userdata.error, "userdata creator version has 3 bytes, expected 4");
  EXPECT_FALSE(nat->chains.empty());
  const std::vector<Finding> found = NftFindings(snapshot);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].subject, "userdata");
  EXPECT_NE(::testing::PrintToString(found[0].evidence).find("has 3 bytes, expected 4"),
            std::string::npos);
}

}  // namespace
}  // namespace ad
