// The gRPC API over TCP with TLS, real gRPC on loopback, certificates made with the openssl CLI
// at test time: TLS clients call GetStatus, GetReport, health and reflection; a plaintext client,
// a client trusting another CA, and (with a client CA) a client without a certificate or with one
// of another CA are refused. Bad TLS files, bad addresses and a port in use are clear errors of
// Start, which then leaves no socket behind.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "api/api_server.h"
#include "api/report_proto.h"
#include "base/unique_fd.h"
#include "tls_test_pki.h"

namespace ad::api {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::TestPki;

// One usable step: the host netns and one pod netns with a finding.
EngineStep MakeStep() {
  EngineStep step;
  step.usable = true;
  step.snapshot.node_name = "node-tls";
  step.snapshot.taken_at_unix_ms = 1787392800000;
  for (uint64_t inode : {4026531840ull, 4026532001ull}) {
    NetnsSnapshot ns;
    ns.netns.inode = inode;
    ns.netns.paths = {inode == 4026531840ull ? "/proc/1/ns/net" : "/run/netns/pod-a"};
    ns.netns.is_host = inode == 4026531840ull;
    ns.reads = NetnsReads::AllOk();
    step.snapshot.netns.push_back(ns);
    NetnsClassification c;
    c.netns_inode = inode;
    c.netns_path = ns.netns.paths[0];
    c.is_host = ns.netns.is_host;
    c.mode = ns.netns.is_host ? DataplaneMode::kNone : DataplaneMode::kAmbient;
    step.analysis.netns.push_back(c);
  }
  Finding f;
  f.code = FindingCode::kMixedBackend;
  f.severity = FindingCodeDetails(f.code).severity;
  f.netns_path = "/run/netns/pod-a";
  f.netns_inode = 4026532001;
  f.subject = "nat";
  f.summary = std::string(FindingCodeDetails(f.code).meaning);
  step.finding_records.push_back(
      {f, step.snapshot.taken_at_unix_ms, step.snapshot.taken_at_unix_ms, 0});
  step.analysis.findings.push_back(f);
  step.recently_resolved = std::make_shared<const std::vector<FindingRecord>>();
  return step;
}

// Health and reflection without their .proto files (Debian ships none): field 1
// (HealthCheckRequest.service) and field 7 (ServerReflectionRequest.list_services) by hand.
std::string StringField(int field, const std::string& value) {
  std::string out;
  out += static_cast<char>((field << 3) | 2);
  out += static_cast<char>(value.size());
  return out + value;
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

bool Ipv6LoopbackWorks() {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

class ApiTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = std::make_unique<TestPki>(); }
  static void TearDownTestSuite() { pki_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(pki_->ok()) << pki_->error();
    char tmpl[] = "/tmp/ad-api-tls-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.socket_path = dir_ + "/run/api.sock";
    options_.tcp_address = "127.0.0.1:0";
    options_.tls = {pki_->Path("server.crt"), pki_->Path("server.key"), ""};
    options_.stream_poll = milliseconds(20);
    options_.version = "test";
    hub_ = std::make_shared<ResultHub>(8);
    hub_->Publish(StepTrigger::kStartup, MakeStep());
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void StartServer() {
    auto started = ApiServer::Start(options_, hub_, {});
    ASSERT_TRUE(started.ok()) << started.error().message;
    server_ = std::move(*started);
    ASSERT_GT(server_->tcp_port(), 0);
  }

  // The error message of a Start that must fail; it must leave no socket file behind.
  std::string StartError() {
    auto started = ApiServer::Start(options_, hub_, {});
    EXPECT_FALSE(started.ok());
    EXPECT_FALSE(fs::exists(options_.socket_path)) << "a failed start leaves no socket";
    return started.ok() ? "" : started.error().message;
  }

  std::string Target(const std::string& host = "127.0.0.1") const {
    return host + ":" + std::to_string(server_->tcp_port());
  }

  // A TLS channel trusting `ca` and, when `client` is set, presenting client.crt/key.
  static std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target,
                                                   const std::string& ca = "ca",
                                                   const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_->Read(ca + ".crt");
    if (!client.empty()) {
      ssl.pem_cert_chain = pki_->Read(client + ".crt");
      ssl.pem_private_key = pki_->Read(client + ".key");
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    // A fresh connection per channel: no subchannel shared with an earlier test's credentials.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
  }

  static grpc::Status CallStatus(const std::shared_ptr<grpc::Channel>& channel,
                                 pb::Status* status = nullptr) {
    auto stub = pb::AmbientDoctor::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::Status reply;
    grpc::Status result = stub->GetStatus(&context, {}, &reply);
    if (status != nullptr) *status = reply;
    return result;
  }

  static grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& method, const std::string& body,
                               std::string* reply) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(body);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    const grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel.get(), rpc, &context, request, &response);
    if (status.ok()) *reply = ToString(response);
    return status;
  }

  static std::unique_ptr<TestPki> pki_;
  std::string dir_;
  ApiServerOptions options_;
  std::shared_ptr<ResultHub> hub_;
  std::unique_ptr<ApiServer> server_;
};

std::unique_ptr<TestPki> ApiTlsTest::pki_;

TEST_F(ApiTlsTest, TlsClientGetsStatusReportHealthAndReflection) {
  StartServer();
  auto channel = TlsChannel(Target());
  pb::Status status;
  const grpc::Status got = CallStatus(channel, &status);
  ASSERT_TRUE(got.ok()) << got.error_message();
  EXPECT_EQ(status.version(), "test");
  EXPECT_EQ(status.node(), "node-tls");
  EXPECT_EQ(status.scans(), 1u);

  {
    auto stub = pb::AmbientDoctor::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::Report report;
    const grpc::Status s = stub->GetReport(&context, {}, &report);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(report.schema(), "ambient-doctor.report/v2");
    ASSERT_EQ(report.findings_size(), 1);
    EXPECT_EQ(report.findings(0).code(), "MIXED_BACKEND");
  }

  // The unix socket serves alongside, in plaintext as before.
  EXPECT_TRUE(CallStatus(grpc::CreateChannel("unix:" + options_.socket_path,
                                             grpc::InsecureChannelCredentials()))
                  .ok());

  for (const char* service : {"", "ambientdoctor.v1.AmbientDoctor"}) {
    std::string reply;
    const grpc::Status s = RawUnary(channel, "/grpc.health.v1.Health/Check",
                                    *service ? StringField(1, service) : "", &reply);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(reply, std::string("\x08\x01", 2)) << "SERVING for '" << service << "'";
  }

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::internal::RpcMethod rpc(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), rpc, &context));
  grpc::Slice list_services(StringField(7, ""));
  ASSERT_TRUE(stream->Write(grpc::ByteBuffer(&list_services, 1)));
  grpc::ByteBuffer response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_NE(ToString(response).find("ambientdoctor.v1.AmbientDoctor"), std::string::npos);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ApiTlsTest, NameLocalhostMatchesTheCertificate) {
  StartServer();
  const grpc::Status s = CallStatus(TlsChannel(Target("localhost")));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(ApiTlsTest, Ipv6Listener) {
  if (!Ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 on loopback (::1 cannot be bound)";
  options_.tcp_address = "[::1]:0";
  StartServer();
  const grpc::Status s = CallStatus(TlsChannel(Target("[::1]")));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(ApiTlsTest, PlaintextClientAndClientTrustingAnotherCaFail) {
  StartServer();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const grpc::Status plaintext =
      CallStatus(grpc::CreateCustomChannel(Target(), grpc::InsecureChannelCredentials(), args));
  EXPECT_FALSE(plaintext.ok()) << "TCP is TLS only";
  EXPECT_NE(plaintext.error_code(), grpc::StatusCode::OK);

  const grpc::Status other_ca = CallStatus(TlsChannel(Target(), "other-ca"));
  EXPECT_EQ(other_ca.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "the server's certificate is not signed by the CA this client trusts: "
      << other_ca.error_message();

  // The server keeps serving good clients.
  EXPECT_TRUE(CallStatus(TlsChannel(Target())).ok());
}

// Garbage instead of a ClientHello, a peer that never speaks and one that hangs up mid-handshake:
// each is that peer's problem; the listener keeps serving, and a silent peer is closed after the
// handshake timeout.
TEST_F(ApiTlsTest, GarbageAndSilentPeersDoNotStopTheListener) {
  options_.handshake_timeout = milliseconds(300);
  StartServer();
  auto connect = [&] {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(server_->tcp_port()));
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  };
  UniqueFd silent = connect();
  {
    UniqueFd garbage = connect();
    std::string bytes(64 * 1024, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7919) & 0xff);
    (void)!::send(garbage.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  {
    UniqueFd half = connect();
    const char client_hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
    (void)!::send(half.get(), client_hello_start, sizeof(client_hello_start), MSG_NOSIGNAL);
  }
  EXPECT_TRUE(CallStatus(TlsChannel(Target())).ok()) << "served while the silent peer waits";

  // The silent peer is closed by the server: its read ends (EOF or reset) instead of blocking.
  timeval receive_timeout{30, 0};  // a bound for the test only, far above the 300 ms
  ::setsockopt(silent.get(), SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  char byte = 0;
  const ssize_t got = ::recv(silent.get(), &byte, 1, 0);
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET))
      << "got " << got << " errno " << errno << ": closed after the handshake timeout";
}

TEST_F(ApiTlsTest, ClientCaRequiresAClientCertificateOfThatCa) {
  options_.tls.client_ca_file = pki_->Path("ca.crt");
  StartServer();
  const grpc::Status without = CallStatus(TlsChannel(Target()));
  EXPECT_EQ(without.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "no client certificate: " << without.error_message();
  const grpc::Status other = CallStatus(TlsChannel(Target(), "ca", "other-client"));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a client certificate of another CA: " << other.error_message();
  pb::Status status;
  const grpc::Status with = CallStatus(TlsChannel(Target(), "ca", "client"), &status);
  ASSERT_TRUE(with.ok()) << with.error_message();
  EXPECT_EQ(status.node(), "node-tls");
  // The unix socket asks for no certificate: its 0600 mode is the access control.
  EXPECT_TRUE(CallStatus(grpc::CreateChannel("unix:" + options_.socket_path,
                                             grpc::InsecureChannelCredentials()))
                  .ok());
}

TEST_F(ApiTlsTest, SameLimitsOnBothListeners) {
  options_.max_streams = 1;
  StartServer();
  auto tls = TlsChannel(Target());

  // An oversized request over TLS is refused like on the socket.
  {
    auto stub = pb::AmbientDoctor::NewStub(tls);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::GetNetnsRulesRequest request;
    request.set_path("/" + std::string(32 * 1024, 'x'));
    pb::NetnsRules rules;
    EXPECT_EQ(stub->GetNetnsRules(&context, request, &rules).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }

  // One stream on the socket takes the only slot: a TLS stream is refused.
  auto unix_stub = pb::AmbientDoctor::NewStub(
      grpc::CreateChannel("unix:" + options_.socket_path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext unix_context;
  unix_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto held = unix_stub->WatchFindings(&unix_context, {});
  pb::FindingEvent event;
  ASSERT_TRUE(held->Read(&event)) << "the socket's stream is open";

  auto tls_stub = pb::AmbientDoctor::NewStub(tls);
  grpc::ClientContext tls_context;
  tls_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto refused = tls_stub->WatchFindings(&tls_context, {});
  EXPECT_FALSE(refused->Read(&event));
  const grpc::Status s = refused->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  unix_context.TryCancel();
  held->Finish();

  // Deadlines end a TLS stream as they end one on the socket (once the cancelled one let go).
  for (int i = 0; i < 500 && server_->counters().active_streams > 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(server_->counters().active_streams, 0);
  grpc::ClientContext short_context;
  short_context.set_deadline(std::chrono::system_clock::now() + milliseconds(300));
  auto short_stream = tls_stub->WatchFindings(&short_context, {});
  while (short_stream->Read(&event)) {
  }
  EXPECT_EQ(short_stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ApiTlsTest, TcpOnlyWithoutSocket) {
  options_.socket_path.clear();
  StartServer();
  EXPECT_TRUE(CallStatus(TlsChannel(Target())).ok());
}

TEST_F(ApiTlsTest, TcpWithoutTlsIsRefused) {
  options_.tls = {};
  EXPECT_NE(StartError().find("TCP only with TLS"), std::string::npos);
  options_.tls = {pki_->Path("server.crt"), "", ""};
  EXPECT_NE(StartError().find("both a certificate and a private key"), std::string::npos);
  options_.tcp_address.clear();
  options_.tls = {pki_->Path("server.crt"), pki_->Path("server.key"), ""};
  EXPECT_NE(StartError().find("no TCP address"), std::string::npos);
  options_.socket_path.clear();
  options_.tls = {};
  EXPECT_NE(StartError().find("neither"), std::string::npos);
}

TEST_F(ApiTlsTest, BadTlsFilesAreClearErrors) {
  pki_->Write("garbage.pem", "not a certificate\n");
  pki_->Write("empty.pem", "");
  pki_->Write("huge.pem", std::string(2 << 20, 'A'));
  struct Case {
    ApiTlsFiles files;
    std::string expected;
  };
  const std::string cert = pki_->Path("server.crt");
  const std::string key = pki_->Path("server.key");
  const std::vector<Case> cases = {
      {{pki_->Path("missing.crt"), key, ""},
       "TLS certificate file " + pki_->Path("missing.crt") + ": No such file or directory"},
      {{cert, pki_->Path("missing.key"), ""},
       "TLS key file " + pki_->Path("missing.key") + ": No such file or directory"},
      {{pki_->dir(), key, ""}, "TLS certificate file " + pki_->dir() + " is not a regular file"},
      {{cert, "/dev/null", ""}, "TLS key file /dev/null is not a regular file"},
      {{pki_->Path("garbage.pem"), key, ""}, "holds no PEM certificate"},
      {{pki_->Path("empty.pem"), key, ""}, "holds no PEM certificate"},
      {{pki_->Path("huge.pem"), key, ""}, "is larger than 1 MiB"},
      {{key, key, ""}, "holds no PEM certificate"},
      {{cert, pki_->Path("garbage.pem"), ""}, "holds no PEM private key"},
      {{cert, cert, ""}, "holds no PEM private key"},
      {{cert, pki_->Path("encrypted.key"), ""}, "is encrypted"},
      {{cert, pki_->Path("other-server.key"), ""},
       "TLS key file " + pki_->Path("other-server.key") + " does not match the certificate in " +
           cert},
      {{cert, key, pki_->Path("garbage.pem")},
       "TLS client CA file " + pki_->Path("garbage.pem") + " holds no PEM certificate"},
      {{cert, key, pki_->Path("missing-ca.crt")}, "TLS client CA file"},
  };
  for (const Case& c : cases) {
    options_.tls = c.files;
    const std::string message = StartError();
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "cert " << c.files.cert_file << " key " << c.files.key_file << " ca "
        << c.files.client_ca_file << ": " << message;
  }
}

TEST_F(ApiTlsTest, PortInUseIsAClearError) {
  // Held by a plain listening socket.
  UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(holder.valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(holder.get(), 1), 0);
  socklen_t length = sizeof(addr);
  ASSERT_EQ(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&addr), &length), 0);
  const int port = ntohs(addr.sin_port);
  options_.tcp_address = "127.0.0.1:" + std::to_string(port);
  std::string message = StartError();
  EXPECT_NE(message.find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << message;
  EXPECT_NE(message.find("Address already in use"), std::string::npos) << message;

  // Held by another API server: gRPC's SO_REUSEPORT must not let two share it.
  holder.Reset();
  StartServer();
  ApiServerOptions second = options_;
  second.socket_path = dir_ + "/second/api.sock";
  second.tcp_address = "127.0.0.1:" + std::to_string(server_->tcp_port());
  auto started = ApiServer::Start(second, hub_, {});
  ASSERT_FALSE(started.ok()) << "two servers on one port";
  EXPECT_NE(started.error().message.find("Address already in use"), std::string::npos)
      << started.error().message;
  EXPECT_FALSE(fs::exists(second.socket_path));
  EXPECT_TRUE(CallStatus(TlsChannel(Target())).ok()) << "the first one keeps serving";
}

// The Python client (python3-grpcio, its own TLS stack) over mutual TLS.
TEST_F(ApiTlsTest, PythonClientOverMutualTls) {
  if (std::system("/usr/bin/python3 -c 'import grpc, google.protobuf' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-grpcio / python3-protobuf not installed (scripts/setup)";
  }
  if (std::system("command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null") !=
      0) {
    GTEST_SKIP() << "protoc or grpc_python_plugin (protobuf-compiler-grpc) not installed";
  }
  options_.tls.client_ca_file = pki_->Path("ca.crt");
  StartServer();
  auto run = [&](const std::string& client) {
    std::string command = std::string("/usr/bin/python3 ") + AD_SOURCE_DIR +
                          "/tests/integration/python/api_client.py " + AD_SOURCE_DIR +
                          "/proto --tls " + Target() + " " + pki_->Path("ca.crt");
    if (!client.empty()) {
      command += " " + pki_->Path(client + ".crt") + " " + pki_->Path(client + ".key");
    }
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    std::string output;
    if (pipe == nullptr) return std::make_pair(-1, output);
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    return std::make_pair(::pclose(pipe), output);
  };
  const auto [status, output] = run("client");
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("report node-tls 2 1"), std::string::npos) << output;
  EXPECT_NE(output.find("event KIND_CURRENT MIXED_BACKEND"), std::string::npos) << output;
  const auto [refused_status, refused_output] = run("");
  EXPECT_NE(refused_status, 0) << "no client certificate: " << refused_output;
}

}  // namespace
}  // namespace ad::api
