// /metrics and /healthz over a real loopback socket: fresh and stale health, a promtool-clean
// scrape, and bad input (garbage, oversized requests, idle clients, a client that never reads)
// that must not stall the server for the next scraper.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "metrics/metrics_endpoint.h"

namespace ad {
namespace {

constexpr int64_t kScanMs = 1'800'000'000'000;
// Only a guard so that a broken server fails the test instead of hanging it; never asserted on.
constexpr int kClientGuardMs = 20'000;

UniqueFd Connect(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  return fd;
}

// Reads until the server closes (every response closes) or the guard expires.
std::string ReadAll(int fd) {
  std::string text;
  char buffer[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kClientGuardMs) <= 0) {
      ADD_FAILURE() << "the server did not finish the response";
      return text;
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::string Exchange(uint16_t port, const std::string& request) {
  UniqueFd fd = Connect(port);
  EXPECT_EQ(send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  return ReadAll(fd.get());
}

struct Reply {
  int status = 0;
  std::string headers;
  std::string body;
};

Reply Get(uint16_t port, const std::string& path, const std::string& method = "GET") {
  const std::string raw =
      Exchange(port, method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
  Reply reply;
  const size_t end = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.1 ") || end == std::string::npos) {
    ADD_FAILURE() << "not an HTTP response: " << raw.substr(0, 200);
    return reply;
  }
  reply.status = std::atoi(raw.c_str() + 9);
  reply.headers = raw.substr(0, end);
  reply.body = raw.substr(end + 4);
  return reply;
}

PublishedResult Node(int pods) {
  PublishedResult result;
  result.sequence = 1;
  result.step.usable = true;
  result.step.snapshot.taken_at_unix_ms = kScanMs;
  for (int i = 0; i < pods; ++i) {
    NetnsClassification netns;
    netns.netns_inode = 4026530000 + i;
    netns.netns_path = "/run/netns/cni-" + std::to_string(i);
    netns.pod = "team-" + std::to_string(i % 7) + "/pod-" + std::to_string(i);
    netns.mode = DataplaneMode::kAmbient;
    netns.ambient_backends = {i % 3 == 0 ? Backend::kIptablesNft : Backend::kNft};
    netns.zds_state = i % 11 == 0 ? ZdsState::kPending : ZdsState::kHandedOff;
    result.step.analysis.netns.push_back(netns);
    if (i % 5 == 0) {
      Finding finding;
      finding.code = FindingCode::kDuplicateRule;
      finding.severity = Severity::kWarning;
      finding.netns_inode = netns.netns_inode;
      result.step.analysis.findings.push_back(finding);
      result.step.changes.push_back({FindingChange::Kind::kOpened, finding});
    }
  }
  result.step.snapshot.errors.push_back({SourceKind::kCri, "connect: refused", 111});
  return result;
}

class MetricsHttp : public ::testing::Test {
 protected:
  void StartWith(MetricsOptions options, HttpServerOptions server_options = {}) {
    exporter_ = std::make_unique<MetricsExporter>(options, [this] { return now_ms_; });
    server_options.bind_address = "127.0.0.1";
    server_options.port = 0;
    endpoint_ = std::make_unique<MetricsEndpoint>(*exporter_, server_options);
    Result<uint16_t> port = endpoint_->Start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
  }

  int64_t now_ms_ = kScanMs;
  std::unique_ptr<MetricsExporter> exporter_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
  uint16_t port_ = 0;
};

TEST_F(MetricsHttp, HealthzIsFreshThenStaleAndMetricsAreServed) {
  StartWith(MetricsOptions{.stale_after_ms = 60'000});
  Reply reply = Get(port_, "/healthz");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, "no successful scan yet\n");

  exporter_->Consume(Node(3));
  now_ms_ = kScanMs + 10'000;
  reply = Get(port_, "/healthz");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "ok\n");

  now_ms_ = kScanMs + 61'000;
  reply = Get(port_, "/healthz");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, "last successful scan 61 s ago (stale after 60 s)\n");

  reply = Get(port_, "/metrics?x=1");
  EXPECT_EQ(reply.status, 200);
  EXPECT_NE(reply.headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_EQ(reply.body, exporter_->Exposition());
  EXPECT_NE(reply.body.find("ambient_doctor_pods{redirect_state=\"healthy\"} 2"),
            std::string::npos);

  reply = Get(port_, "/metrics", "HEAD");
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.body.empty());
  EXPECT_EQ(Get(port_, "/nope").status, 404);
  EXPECT_EQ(Get(port_, "/metrics", "POST").status, 405);
}

// Runs `promtool check metrics` on `exposition`; returns its exit status and output.
std::pair<int, std::string> Promtool(const std::string& exposition) {
  char path[] = "/tmp/ad-metrics-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, exposition.data(), exposition.size()),
            static_cast<ssize_t>(exposition.size()));
  close(fd);
  const std::string command = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (pipe != nullptr && fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pipe == nullptr ? -1 : pclose(pipe);
  unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_F(MetricsHttp, PromtoolAcceptsARealScrape) {
  if (system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/setup installs Debian's prometheus)";
  }
  for (bool per_pod : {false, true}) {
    StartWith(MetricsOptions{.per_pod_labels = per_pod});
    exporter_->Consume(Node(50));
    exporter_->RecordReread(StepTrigger::kEvent, 0.0004);
    exporter_->RecordEventSocketOverflow();
    const Reply reply = Get(port_, "/metrics");
    ASSERT_EQ(reply.status, 200);
    const auto [status, output] = Promtool(reply.body);
    EXPECT_EQ(status, 0) << "per_pod_labels=" << per_pod << ":\n" << output;
    EXPECT_EQ(output, "") << "no lint findings";
    endpoint_.reset();
  }
}

TEST_F(MetricsHttp, BadInputGetsAnErrorAndTheServerKeepsServing) {
  StartWith(MetricsOptions{});
  EXPECT_TRUE(Exchange(port_, std::string("\x00\x01\xff garbage\r\n\r\n", 16))
                  .starts_with("HTTP/1.1 400 "));
  EXPECT_TRUE(Exchange(port_, "GET /metrics FTP/9\r\n\r\n").starts_with("HTTP/1.1 400 "));
  EXPECT_TRUE(Exchange(port_, "GET\r\n\r\n").starts_with("HTTP/1.1 400 "));
  EXPECT_TRUE(Exchange(port_, "GET /healthz HTTP/1.0\n\n").starts_with("HTTP/1.1 503 "))
      << "bare LF line ends are a valid request";

  // A request line far over the limit, never terminated: 431 once the limit is passed.
  {
    UniqueFd fd = Connect(port_);
    const std::string huge = "GET /" + std::string(64 * 1024, 'a');
    size_t sent = 0;
    while (sent < huge.size()) {
      const ssize_t n = send(fd.get(), huge.data() + sent, huge.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server answered and closed
      sent += static_cast<size_t>(n);
    }
    EXPECT_TRUE(ReadAll(fd.get()).starts_with("HTTP/1.1 431 "));
  }
  EXPECT_EQ(Get(port_, "/healthz").status, 503) << "still serving";
}

TEST_F(MetricsHttp, ClientsThatNeverReadDoNotBlockTheNextScrape) {
  StartWith(MetricsOptions{.per_pod_labels = true});
  // An exposition larger than the most the kernel buffers for one socket (tcp_wmem max), so a
  // server that wrote blocking would stall on the first client that never reads.
  size_t send_buffer_max = 4 << 20;
  if (FILE* f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r")) {
    unsigned long low = 0, initial = 0, max = 0;
    if (fscanf(f, "%lu %lu %lu", &low, &initial, &max) == 3) send_buffer_max = max;
    fclose(f);
  }
  exporter_->Consume(Node(static_cast<int>(send_buffer_max / 100) + 1000));
  const size_t exposition_size = exporter_->Exposition().size();
  ASSERT_GT(exposition_size, send_buffer_max);

  std::vector<UniqueFd> stuck;
  for (int i = 0; i < 3; ++i) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int small = 4096;
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    stuck.push_back(std::move(fd));
  }
  const Reply reply = Get(port_, "/metrics");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body.size(), exposition_size) << "the whole exposition, not a truncated one";
  EXPECT_EQ(Get(port_, "/healthz").status, 200);
  endpoint_->Stop();  // returns with the stuck clients still connected
}

TEST_F(MetricsHttp, IdleClientsOverTheCapDoNotLockScrapersOut) {
  StartWith(MetricsOptions{}, HttpServerOptions{.max_connections = 8});
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(Connect(port_));
    if (i % 2 == 0) send(idle.back().get(), "GET /metr", 9, MSG_NOSIGNAL);  // half a request
  }
  EXPECT_EQ(Get(port_, "/metrics").status, 200);
  EXPECT_EQ(Get(port_, "/healthz").status, 503);
  // The oldest idle clients were closed to make room.
  pollfd p{idle.front().get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, kClientGuardMs), 1);
  char byte = 0;
  const ssize_t n = recv(idle.front().get(), &byte, 1, 0);
  // A reset when the server closed with the client's half request unread, else end of file.
  EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << "closed without a response";
}

TEST_F(MetricsHttp, ServesAgainAfterRunningOutOfFileDescriptors) {
  StartWith(MetricsOptions{});
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // A few fds above what is open now, shared by this test's clients and the server's accepts.
  int highest = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) highest = fd;
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(highest + 8);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 4096; ++i) {  // until this process, server included, is out of fds
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) break;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
    clients.push_back(std::move(fd));
  }
  usleep(200'000);  // let the server hit EMFILE on accept (not asserted: only exercised)
  clients.clear();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(Get(port_, "/healthz").status, 503) << "serving again";
}

TEST(MetricsHttpServer, StartFailsAsAValue) {
  MetricsExporter exporter;
  MetricsEndpoint bad_address(exporter, HttpServerOptions{.bind_address = "not-an-ip"});
  Result<uint16_t> port = bad_address.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.error().kind, SourceKind::kHttp);
  EXPECT_NE(port.error().message.find("not an IP literal"), std::string::npos);

  MetricsEndpoint first(exporter, HttpServerOptions{.bind_address = "127.0.0.1", .port = 0});
  Result<uint16_t> taken = first.Start();
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(first.Start().error().error_number, EALREADY);
  MetricsEndpoint second(exporter, HttpServerOptions{.bind_address = "127.0.0.1", .port = *taken});
  port = second.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.error().message.find("bind(metrics listener 127.0.0.1:"), std::string::npos)
      << port.error().message;
  EXPECT_EQ(port.error().error_number, EADDRINUSE);
}

TEST(MetricsHttpServer, ServesOnIpv6Loopback) {
  MetricsExporter exporter;
  MetricsEndpoint endpoint(exporter, HttpServerOptions{.bind_address = "::1", .port = 0});
  Result<uint16_t> port = endpoint.Start();
  if (!port.ok() && port.error().error_number == EADDRNOTAVAIL) {
    GTEST_SKIP() << "no IPv6 loopback here: " << port.error().message;
  }
  ASSERT_TRUE(port.ok()) << port.error().message;
  UniqueFd fd(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_port = htons(*port);
  address.sin6_addr = in6addr_loopback;
  ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = "GET /healthz HTTP/1.0\r\n\r\n";
  ASSERT_EQ(send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  EXPECT_TRUE(ReadAll(fd.get()).starts_with("HTTP/1.1 503 "));
}

}  // namespace
}  // namespace ad
