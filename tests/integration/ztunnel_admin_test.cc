// ztunnel admin source against fake admin/readiness/stats servers bound to 127.0.0.1 inside a
// real test netns (root): good answers, a stuck ztunnel, misbehaving peers, nothing listening,
// vanished PIDs. Every failure must be a clear error within the deadline, never a hang.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "../unit/ztunnel_admin_fixtures.h"
#include "fake_http_server.h"
#include "netns_test_util.h"
#include "scan/ztunnel_node_source.h"
#include "sources/ztunnel/http_get.h"

namespace ad {
namespace {

using testing::ChunkedResponseText;
using ::testing::ElementsAre;
using testing::FakeHttpServer;
using testing::FakeReply;
using ::testing::HasSubstr;
using testing::HttpResponseText;
using testing::ScopedNetns;
using Clock = std::chrono::steady_clock;
using Routes = std::map<std::string, FakeReply>;

constexpr auto kWatchdogLimit = std::chrono::seconds(30);

class ZtunnelAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::IsRoot()) GTEST_SKIP() << "needs root to create network namespaces";
    netns_ = std::make_unique<ScopedNetns>("zt");
    ASSERT_TRUE(netns_->ok());
    ASSERT_EQ(netns_->Exec("ip link set lo up"), 0);
    watchdog_ = std::make_unique<testing::Watchdog>(kWatchdogLimit, [this] { netns_->Delete(); });
    home_netns_ = testing::ThreadNetnsInode();
  }
  void TearDown() override {
    servers_.clear();
    watchdog_.reset();
    if (netns_) {
      EXPECT_EQ(testing::ThreadNetnsInode(), home_netns_) << "thread left in a netns";
    }
    netns_.reset();
  }

  // Fake ztunnel: one server per port, bound to 127.0.0.1 in the test netns.
  void Serve(Routes admin, Routes readiness, Routes stats) {
    for (auto& [port, routes] : std::map<uint16_t, Routes>{
             {15000, std::move(admin)}, {15021, std::move(readiness)}, {15020, std::move(stats)}}) {
      if (routes.empty()) continue;
      servers_.push_back(
          std::make_unique<FakeHttpServer>(netns_->path(), "127.0.0.1", port, std::move(routes)));
      ASSERT_TRUE(servers_.back()->ok()) << servers_.back()->error();
    }
  }

  ZtunnelAdminState Query(const ZtunnelAdminOptions& options = {}) {
    const auto start = Clock::now();
    ZtunnelAdminState state = QueryZtunnelAdmin(netns_->path(), 0, options);
    elapsed_ = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return state;
  }

  std::string Messages(const ZtunnelAdminState& state) {
    std::string out;
    for (const SourceError& e : state.errors)
      out += std::string(e.source()) + ": " + e.message + "\n";
    return out;
  }

  std::unique_ptr<ScopedNetns> netns_;
  std::unique_ptr<testing::Watchdog> watchdog_;
  std::vector<std::unique_ptr<FakeHttpServer>> servers_;
  ino_t home_netns_ = 0;
  std::chrono::milliseconds elapsed_{0};
};

Routes Ready() { return {{"/healthz/ready", FakeReply::Send(HttpResponseText(200, "ready\n"))}}; }

TEST_F(ZtunnelAdminTest, HealthyZtunnel) {
  Serve({{"/config_dump", FakeReply::Send(HttpResponseText(200, testing::kConfigDumpArray))}},
        Ready(), {{"/metrics", FakeReply::Send(ChunkedResponseText(200, {testing::kMetrics}))}});
  const ZtunnelAdminState state = Query();
  EXPECT_TRUE(state.errors.empty()) << Messages(state);
  EXPECT_EQ(state.netns_inode, testing::InodeOf(netns_->path()));
  EXPECT_TRUE(state.admin_reachable);
  EXPECT_EQ(state.ready, true);
  EXPECT_TRUE(state.pending_tasks.empty());
  ASSERT_EQ(state.workload_state.size(), 2u);
  EXPECT_EQ(state.workload_state[0].state, "Up");
  EXPECT_EQ(state.workload_state[1].state, "Pending");
  EXPECT_EQ(state.workloads.size(), 3u);
  EXPECT_EQ(state.active_proxy_count, 3);
  EXPECT_EQ(state.pending_proxy_count, 1);
}

TEST_F(ZtunnelAdminTest, StuckZtunnelWaitingForTheZdsSnapshot) {
  Serve({{"/config_dump",
          FakeReply::Send(ChunkedResponseText(200, {testing::kConfigDumpEmptyState}))}},
        {{"/healthz/ready", FakeReply::Send(HttpResponseText(500, testing::kReadinessNotReady))}},
        {{"/metrics",
          FakeReply::Send(HttpResponseText(200,
                                           "workload_manager_active_proxy_count 0\n"
                                           "workload_manager_pending_proxy_count 0\n"))}});
  const ZtunnelAdminState state = Query();
  EXPECT_TRUE(state.errors.empty()) << Messages(state);
  EXPECT_TRUE(state.admin_reachable);
  EXPECT_EQ(state.ready, false);
  EXPECT_THAT(state.pending_tasks, ElementsAre("workload proxy manager"));
  EXPECT_TRUE(state.workload_state.empty());
  EXPECT_EQ(state.active_proxy_count, 0);
}

TEST_F(ZtunnelAdminTest, HungGarbageAndTruncatedPeersGiveErrorsWithinTheDeadline) {
  Serve({{"/config_dump", FakeReply::Hang()}},
        {{"/healthz/ready", FakeReply::Send("\x16\x03\x01 not http at all\r\n")}},
        {{"/metrics", FakeReply::Send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")}});
  const ZtunnelAdminState state = Query();  // default timeouts: connect 500 ms, total 2 s
  EXPECT_LT(elapsed_, std::chrono::milliseconds(3500));
  EXPECT_FALSE(state.admin_reachable);
  EXPECT_FALSE(state.ready.has_value());
  ASSERT_EQ(state.errors.size(), 3u) << Messages(state);
  EXPECT_EQ(state.errors[0].source(), "ztunnel/config_dump");
  EXPECT_EQ(state.errors[0].message,
            "GET http://127.0.0.1:15000/config_dump: no response within "
            "2000 ms");
  EXPECT_EQ(state.errors[1].source(), "ztunnel/readiness");
  EXPECT_THAT(state.errors[1].message, HasSubstr("malformed status line \"\\x16\\x03\\x01 not"));
  EXPECT_EQ(state.errors[2].source(), "ztunnel/metrics");
  EXPECT_EQ(state.errors[2].message,
            "GET http://127.0.0.1:15020/metrics: truncated body: got 7 of 1000 bytes");
}

TEST_F(ZtunnelAdminTest, OversizedClosedAndWrongStatus) {
  Serve({{"/config_dump", FakeReply::Send("HTTP/1.1 200 OK\r\n\r\n{\"workloads\": [" +
                                          std::string(3u << 20, ' '))}},
        {{"/healthz/ready", FakeReply::CloseImmediately()}},
        {{"/other", FakeReply::Send(HttpResponseText(200, ""))}});  // /metrics: 404
  ZtunnelAdminOptions options;
  options.max_config_dump_bytes = 1u << 20;
  const ZtunnelAdminState state = Query(options);
  EXPECT_LT(elapsed_, std::chrono::milliseconds(3000));
  ASSERT_EQ(state.errors.size(), 3u) << Messages(state);
  EXPECT_EQ(state.errors[0].message,
            "GET http://127.0.0.1:15000/config_dump: response exceeds 1048576 bytes");
  EXPECT_EQ(state.errors[0].error_number, EMSGSIZE);
  EXPECT_THAT(state.errors[1].message, HasSubstr("GET http://127.0.0.1:15021/healthz/ready: "));
  EXPECT_NE(state.errors[1].error_number, ETIMEDOUT);
  EXPECT_EQ(state.errors[2].message, "HTTP 404 Other (body \"not found\n\")");
}

TEST_F(ZtunnelAdminTest, MalformedConfigDumpStillReportsTheRest) {
  Serve({{"/config_dump",
          FakeReply::Send(HttpResponseText(
              200, R"({"workloadState": {"u": {"state": "Up"}, "v": 3}, "workloads": [1]})"))}},
        Ready(), {{"/metrics", FakeReply::Send(HttpResponseText(200, "garbage line\n"))}});
  const ZtunnelAdminState state = Query();
  EXPECT_TRUE(state.admin_reachable);
  EXPECT_EQ(state.ready, true);
  ASSERT_EQ(state.workload_state.size(), 1u);
  ASSERT_EQ(state.errors.size(), 2u) << Messages(state);
  EXPECT_EQ(state.errors[0].message,
            "skipped 2 malformed entries or fields: workloadState[\"v\"]: not an object; "
            "workloads[0]: not an object");
  EXPECT_EQ(state.errors[1].message, "ignored 1 malformed lines");
}

TEST_F(ZtunnelAdminTest, NothingListeningIsConnectionRefused) {
  const ZtunnelAdminState state = Query();
  EXPECT_LT(elapsed_, std::chrono::milliseconds(1000));
  EXPECT_FALSE(state.admin_reachable);
  ASSERT_EQ(state.errors.size(), 3u) << Messages(state);
  EXPECT_EQ(state.errors[0].message,
            "GET http://127.0.0.1:15000/config_dump: connect: Connection refused");
  EXPECT_EQ(state.errors[0].error_number, ECONNREFUSED);
  EXPECT_EQ(state.errors[1].source(), "ztunnel/readiness");
  EXPECT_EQ(state.errors[2].source(), "ztunnel/metrics");
}

TEST_F(ZtunnelAdminTest, AdminOnIpv6LoopbackOnly) {
  auto server = std::make_unique<FakeHttpServer>(
      netns_->path(), "::1", 15000,
      Routes{{"/config_dump",
              FakeReply::Send(HttpResponseText(200, testing::kConfigDumpEmptyState))}});
  if (!server->ok()) GTEST_SKIP() << "no IPv6 loopback in the test netns: " << server->error();
  servers_.push_back(std::move(server));
  const ZtunnelAdminState state = Query();
  EXPECT_TRUE(state.admin_reachable);
  ASSERT_EQ(state.errors.size(), 2u) << Messages(state);  // readiness and metrics refused
  EXPECT_EQ(state.errors[0].source(), "ztunnel/readiness");
}

TEST_F(ZtunnelAdminTest, MissingNetnsPath) {
  const ZtunnelAdminState state = QueryZtunnelAdmin("/nonexistent/adt-zt-netns", 0, {});
  EXPECT_EQ(state.netns_inode, 0u);
  ASSERT_EQ(state.errors.size(), 1u);
  EXPECT_EQ(state.errors[0].source(), "ztunnel");
  EXPECT_EQ(state.errors[0].message, "open(/nonexistent/adt-zt-netns): No such file or directory");
}

// A fake procfs: <root>/<pid>/ns/net symlinks to the test netns; removed even on failure.
struct FakeProcRoot {
  std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("adt-zt-proc-" + std::to_string(::getpid()));
  FakeProcRoot() { std::filesystem::remove_all(root); }
  ~FakeProcRoot() { std::filesystem::remove_all(root); }
  void Add(int pid, const std::string& netns_path) {
    const auto dir = root / std::to_string(pid) / "ns";
    std::filesystem::create_directories(dir);
    std::filesystem::create_symlink(netns_path, dir / "net");
  }
};

ProcessNetnsFds Process(int pid, ProcessRole role, uint64_t netns_inode) {
  ProcessNetnsFds process;
  process.pid = pid;
  process.role = role;
  process.own_netns_inode = netns_inode;
  return process;
}

TEST_F(ZtunnelAdminTest, NodeSourceQueriesEachZtunnelNetnsOnce) {
  Serve({{"/config_dump", FakeReply::Send(HttpResponseText(200, testing::kConfigDumpArray))}},
        Ready(), {{"/metrics", FakeReply::Send(HttpResponseText(200, testing::kMetrics))}});
  const uint64_t inode = testing::InodeOf(netns_->path());
  FakeProcRoot proc;
  proc.Add(4242, netns_->path());
  proc.Add(4243, netns_->path());
  proc.Add(4244, netns_->path());
  proc.Add(4245, netns_->path());

  NodeSnapshot snapshot;
  snapshot.processes = {
      Process(4242, ProcessRole::kZtunnel, inode),
      Process(4243, ProcessRole::kZtunnel, inode),    // same netns: not asked twice
      Process(4244, ProcessRole::kIstioCni, inode),   // not a ztunnel
      Process(999999, ProcessRole::kZtunnel, 12345),  // vanished
      Process(4245, ProcessRole::kZtunnel, 777),      // PID now in another netns
  };
  ZtunnelAdminOptions options;
  options.proc_root = proc.root.string();
  options.extra_netns_paths = {netns_->path(), "/nonexistent/adt-zt-netns"};
  ZtunnelAdminNodeSource source(options);
  EXPECT_EQ(source.name(), "ztunnel-admin");
  source.Collect(snapshot);

  ASSERT_EQ(snapshot.ztunnels.size(), 4u);
  const ZtunnelAdminState& good = snapshot.ztunnels[0];
  EXPECT_EQ(good.pid, 4242);
  EXPECT_EQ(good.netns_inode, inode);
  EXPECT_TRUE(good.errors.empty()) << Messages(good);
  EXPECT_EQ(good.ready, true);
  EXPECT_EQ(good.workloads.size(), 3u);

  const ZtunnelAdminState& vanished = snapshot.ztunnels[1];
  EXPECT_EQ(vanished.pid, 999999);
  EXPECT_EQ(vanished.netns_inode, 12345u);
  EXPECT_FALSE(vanished.admin_reachable);
  ASSERT_EQ(vanished.errors.size(), 1u);
  EXPECT_EQ(vanished.errors[0].message, "pid 999999: open(" + proc.root.string() +
                                            "/999999/ns/net): No such file or directory");

  const ZtunnelAdminState& reused = snapshot.ztunnels[2];
  EXPECT_EQ(reused.pid, 4245);
  EXPECT_EQ(reused.netns_inode, 777u);
  ASSERT_EQ(reused.errors.size(), 1u);
  EXPECT_THAT(reused.errors[0].message, HasSubstr("expected 777 (process restarted or PID "
                                                  "reused); not queried"));

  const ZtunnelAdminState& missing = snapshot.ztunnels[3];  // the extra path already queried
  EXPECT_EQ(missing.pid, 0);
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_THAT(missing.errors[0].message, HasSubstr("/nonexistent/adt-zt-netns"));
}

// Repeated collections fetch /config_dump again only when what it depends on changed (the
// ztunnel process, its netns fds, readiness or proxy counts, the node's netns) or the refresh
// interval passed; readiness and metrics are asked every time.
TEST_F(ZtunnelAdminTest, NodeSourceFetchesTheConfigDumpAgainOnlyWhenItMayHaveChanged) {
  Serve({{"/config_dump", FakeReply::Send(HttpResponseText(200, testing::kConfigDumpArray))}},
        Ready(), {{"/metrics", FakeReply::Send(HttpResponseText(200, testing::kMetrics))}});
  const uint64_t inode = testing::InodeOf(netns_->path());
  FakeProcRoot proc;
  proc.Add(4242, netns_->path());
  NodeSnapshot snapshot;
  snapshot.processes = {Process(4242, ProcessRole::kZtunnel, inode)};
  snapshot.netns.resize(1);
  snapshot.netns[0].netns.inode = 1001;
  ZtunnelAdminOptions options;
  options.proc_root = proc.root.string();
  options.config_dump_refresh = std::chrono::hours(1);
  ZtunnelAdminNodeSource source(options);
  auto collect = [&source](NodeSnapshot snapshot) {
    snapshot.ztunnels.clear();
    source.Collect(snapshot);
    return snapshot.ztunnels;
  };

  const std::vector<ZtunnelAdminState> first = collect(snapshot);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].errors.empty()) << Messages(first[0]);
  ASSERT_EQ(first[0].workloads.size(), 3u);
  EXPECT_EQ(source.config_dump_fetches(), 1u);
  const std::vector<ZtunnelAdminState> cached = collect(snapshot);
  EXPECT_EQ(cached, first) << "the cached answer is the same answer";
  EXPECT_EQ(source.config_dump_fetches(), 1u);
  // ... and shares the workload lists with it instead of copying them every poll.
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_EQ(&cached[0].workloads.items(), &first[0].workloads.items());
  EXPECT_EQ(&cached[0].workload_state.items(), &first[0].workload_state.items());

  snapshot.processes[0].netns_fd_inodes = {inode + 1};  // ztunnel took a pod netns
  EXPECT_EQ(collect(snapshot).at(0).workloads.size(), 3u);
  EXPECT_EQ(source.config_dump_fetches(), 2u);
  snapshot.netns.resize(2);  // a pod netns came
  snapshot.netns[1].netns.inode = 1002;
  (void)collect(snapshot);
  EXPECT_EQ(source.config_dump_fetches(), 3u);
  snapshot.processes[0].pid = 4243;  // another ztunnel process (restart)
  proc.Add(4243, netns_->path());
  (void)collect(snapshot);
  EXPECT_EQ(source.config_dump_fetches(), 4u);
  (void)collect(snapshot);
  EXPECT_EQ(source.config_dump_fetches(), 4u);

  options.config_dump_refresh = std::chrono::milliseconds(0);  // every collection
  ZtunnelAdminNodeSource always(options);
  snapshot.ztunnels.clear();
  always.Collect(snapshot);
  snapshot.ztunnels.clear();
  always.Collect(snapshot);
  EXPECT_EQ(always.config_dump_fetches(), 2u);
}

// A real process in the test netns, found through the real /proc; killed even on failure.
class ChildInNetns {
 public:
  explicit ChildInNetns(const std::string& netns_path) {
    pid_ = ::fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      const int fd = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) ::_exit(127);
      ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~ChildInNetns() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

TEST_F(ZtunnelAdminTest, NodeSourceUsesTheRealProcfs) {
  const uint64_t inode = testing::InodeOf(netns_->path());
  ChildInNetns child(netns_->path());
  ASSERT_GT(child.pid(), 0);
  const std::string child_netns = "/proc/" + std::to_string(child.pid()) + "/ns/net";
  for (int i = 0; i < 200 && testing::InodeOf(child_netns) != inode; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(testing::InodeOf(child_netns), inode);
  Serve({{"/config_dump", FakeReply::Send(HttpResponseText(200, testing::kConfigDumpMap))}},
        Ready(), {{"/metrics", FakeReply::Send(HttpResponseText(200, testing::kMetrics))}});

  NodeSnapshot snapshot;
  snapshot.processes = {Process(child.pid(), ProcessRole::kZtunnel, inode)};
  ZtunnelAdminNodeSource source;
  source.Collect(snapshot);
  ASSERT_EQ(snapshot.ztunnels.size(), 1u);
  EXPECT_EQ(snapshot.ztunnels[0].pid, child.pid());
  EXPECT_TRUE(snapshot.ztunnels[0].errors.empty()) << Messages(snapshot.ztunnels[0]);
  EXPECT_EQ(snapshot.ztunnels[0].workloads.size(), 2u);
}

}  // namespace
}  // namespace ad
