// The real `ambient-doctor serve` with its gRPC API on TCP: flag combinations and TLS files are
// checked at start (exit 2 with a clear message, no socket left behind), and on the lab the TCP
// listener serves GetReport to a client with a certificate of --api-tls-client-ca only.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
#include "tls_test_pki.h"

namespace ad {
namespace {

namespace pb = ::ambientdoctor::v1;
const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A loopback port held by a listening socket.
struct HeldPort {
  UniqueFd fd;
  int port = 0;
};
HeldPort HoldLoopbackPort() {
  HeldPort held{UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), 0};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (::bind(held.fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::listen(held.fd.get(), 1) == 0 &&
      ::getsockname(held.fd.get(), reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    held.port = ntohs(addr.sin_port);
  }
  return held;
}

std::shared_ptr<grpc::Channel> TlsChannel(const testing::TestPki& pki, const std::string& target,
                                          bool with_client_cert) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pki.Read("ca.crt");
  if (with_client_cert) {
    ssl.pem_cert_chain = pki.Read("client.crt");
    ssl.pem_private_key = pki.Read("client.key");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

TEST(ServeTls, BadFlagsAndFilesExitTwoWithAClearError) {
  if (::geteuid() != 0) GTEST_SKIP() << "serve runs as root";
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  pki.Write("garbage.pem", "-----BEGIN CERTIFICATE-----\nnot base64\n");
  testing::ScopedTempDir dir("adt-serve-tls");
  std::filesystem::create_directories(dir.path() + "/empty");
  const std::string socket = dir.path() + "/api/api.sock";
  HeldPort held = HoldLoopbackPort();
  ASSERT_GT(held.port, 0);
  const std::string cert = pki.Path("server.crt");
  const std::string key = pki.Path("server.key");
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--api-address", "127.0.0.1:0"}, "serves TCP only with TLS"},
      {{"--api-address", "127.0.0.1:0", "--api-tls-cert", cert}, "serves TCP only with TLS"},
      {{"--api-tls-cert", cert, "--api-tls-key", key}, "give --api-address HOST:PORT"},
      {{"--api-tls-client-ca", pki.Path("ca.crt")}, "give --api-address HOST:PORT"},
      {{"--api-address", "localhost:9978", "--api-tls-cert", cert, "--api-tls-key", key},
       "IPV4:PORT or [IPV6]:PORT"},
      {{"--api-address", "127.0.0.1:0", "--api-tls-cert", pki.Path("garbage.pem"), "--api-tls-key",
        key},
       "TLS certificate file " + pki.Path("garbage.pem") + " holds no PEM certificate"},
      {{"--api-address", "127.0.0.1:0", "--api-tls-cert", pki.Path("nope.crt"), "--api-tls-key",
        key},
       "TLS certificate file " + pki.Path("nope.crt") + ": No such file or directory"},
      {{"--api-address", "127.0.0.1:0", "--api-tls-cert", cert, "--api-tls-key",
        pki.Path("other-server.key")},
       "does not match the certificate in " + cert},
      {{"--api-address", "127.0.0.1:0", "--api-tls-cert", cert, "--api-tls-key", key,
        "--api-tls-client-ca", pki.Path("garbage.pem")},
       "TLS client CA file " + pki.Path("garbage.pem") + " holds no PEM certificate"},
      {{"--api-address", "127.0.0.1:" + std::to_string(held.port), "--api-tls-cert", cert,
        "--api-tls-key", key},
       "cannot listen on 127.0.0.1:" + std::to_string(held.port) + ": Address already in use"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {
        kDoctor,     "serve",       "--api-socket",        socket,     "--metrics-address", "off",
        "--no-proc", "--netns-dir", dir.path() + "/empty", "--no-zds", "--no-cri"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    const std::string log = dir.path() + "/serve.log";
    testing::ScopedChild serve(argv, "", log, /*with_stderr=*/true);
    const int rc = serve.Wait(std::chrono::seconds(30));
    const std::string text = ReadAll(log);
    EXPECT_EQ(rc, 2) << c.expected << ":\n" << text;
    EXPECT_NE(text.find(c.expected), std::string::npos) << text;
    EXPECT_FALSE(std::filesystem::exists(socket)) << "no socket left: " << c.expected;
  }
}

TEST(ServeTls, TcpListenerWithClientCertificatesOnTheLab) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  lab::LabOptions options;
  options.prefix = "adtls" + std::to_string(::getpid() % 100000);
  options.pods = 2;
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;

  testing::ScopedTempDir dir("adt-serve-tls");
  const std::string log = dir.path() + "/serve.log";
  const std::string socket = dir.path() + "/api/api.sock";
  testing::ScopedChild serve({kDoctor,
                              "serve",
                              "--lab-prefix",
                              options.prefix,
                              "--interval",
                              "200ms",
                              "--metrics-address",
                              "off",
                              "--api-socket",
                              socket,
                              "--api-address",
                              "127.0.0.1:0",
                              "--api-tls-cert",
                              pki.Path("server.crt"),
                              "--api-tls-key",
                              pki.Path("server.key"),
                              "--api-tls-client-ca",
                              pki.Path("ca.crt"),
                              "--log-format",
                              "json",
                              "--log-level",
                              "debug"},
                             "", log, /*with_stderr=*/true);
  const std::regex bound(
      "gRPC API on 127\\.0\\.0\\.1:([0-9]+) \\(TLS, client certificates required\\)");
  std::smatch match;
  std::string text;
  for (int i = 0; i < 500 && !std::regex_search(text, match, bound); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = ReadAll(log);
  }
  ASSERT_TRUE(std::regex_search(text, match, bound)) << text;
  const std::string target = "127.0.0.1:" + match[1].str();

  auto stub = pb::AmbientDoctor::NewStub(TlsChannel(pki, target, /*with_client_cert=*/true));
  grpc::Status status;
  pb::Report report;
  for (int attempt = 0; attempt < 100; ++attempt) {  // UNAVAILABLE until the first scan
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    status = stub->GetReport(&context, pb::GetReportRequest{}, &report);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(report.netns_size(), 3) << "the lab's host and two pods";
  EXPECT_EQ(report.summary().by_mode().ambient(), 2u);

  auto refused = pb::AmbientDoctor::NewStub(TlsChannel(pki, target, /*with_client_cert=*/false));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::Status reply;
  EXPECT_EQ(refused->GetStatus(&context, pb::GetStatusRequest{}, &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "no client certificate";

  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(std::chrono::seconds(20)), 0) << ReadAll(log);
  EXPECT_FALSE(std::filesystem::exists(socket));

  // gRPC's own line about the refused handshake is in the daemon's log, as a JSON debug note:
  // a peer on the TCP port cannot break the log format.
  text = ReadAll(log);
  std::istringstream lines(text);
  bool saw_handshake = false;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.rfind("{\"ts\":", 0), 0u) << "not a JSON log line: " << line;
    if (line.find("grpc: Handshake failed") != std::string::npos) {
      saw_handshake = true;
      EXPECT_NE(line.find("\"level\":\"debug\""), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(saw_handshake) << text;
}

}  // namespace
}  // namespace ad
