// The gRPC API over a real unix socket, fed a hub with synthetic results: every RPC with the
// generated client, health, reflection, WatchFindings events, bad input and limits.
#include "api/api_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "api/report_proto.h"
#include "base/unique_fd.h"

namespace ad::api {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

Finding MakeFinding(FindingCode code, uint64_t inode, std::string subject, std::string evidence) {
  Finding f;
  f.code = code;
  f.severity = FindingCodeDetails(code).severity;
  f.netns_path = "/run/netns/pod-" + std::to_string(inode);
  f.netns_inode = inode;
  f.subject = std::move(subject);
  f.pod = "demo/pod-" + std::to_string(inode);
  f.summary = std::string(FindingCodeDetails(code).meaning);
  f.evidence = {std::move(evidence)};
  f.hint = std::string(FindingCodeDetails(code).hint);
  return f;
}

// A usable step of two netns with the given open findings and changes.
EngineStep MakeStep(int64_t taken_at, std::vector<Finding> findings,
                    std::vector<FindingChange> changes = {}) {
  EngineStep step;
  step.usable = true;
  step.snapshot.node_name = "node-a";
  step.snapshot.taken_at_unix_ms = taken_at;
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
    if (!ns.netns.is_host) c.pod = "demo/a";
    step.analysis.netns.push_back(c);
  }
  for (const Finding& f : findings) {
    step.finding_records.push_back({f, taken_at - 1000, taken_at, 0});
  }
  step.analysis.findings = std::move(findings);
  step.changes = std::move(changes);
  step.recently_resolved = std::make_shared<const std::vector<FindingRecord>>();
  return step;
}

// Debian ships no health/reflection .proto files, so these two clients speak the wire format by
// hand: a length-delimited field 1 (HealthCheckRequest.service) and field 7
// (ServerReflectionRequest.list_services).
std::string StringField(int field, const std::string& value) {
  std::string out;
  out += static_cast<char>((field << 3) | 2);
  out += static_cast<char>(value.size());  // short strings only
  return out + value;
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& slice : slices)
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                      const std::string& body, std::string* reply) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  const grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), rpc, &context, request, &response);
  if (status.ok()) *reply = ToString(response);
  return status;
}

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ad-api-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.socket_path = dir_ + "/run/api.sock";
    options_.stream_poll = milliseconds(20);
    options_.version = "test";
    hub_ = std::make_shared<ResultHub>(8);
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }

  void StartServer(NetnsReader reader = {}, std::shared_ptr<const FlowHub> flows = nullptr) {
    auto started = ApiServer::Start(options_, hub_, std::move(reader), std::move(flows));
    ASSERT_TRUE(started.ok()) << started.error().message;
    server_ = std::move(*started);
  }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    return grpc::CreateCustomChannel("unix:" + options_.socket_path,
                                     grpc::InsecureChannelCredentials(), args);
  }
  std::unique_ptr<pb::AmbientDoctor::Stub> Stub() { return pb::AmbientDoctor::NewStub(Channel()); }

  static void SetDeadline(grpc::ClientContext& context, milliseconds timeout = milliseconds(5000)) {
    context.set_deadline(std::chrono::system_clock::now() + timeout);
  }

  std::string dir_;
  ApiServerOptions options_;
  std::shared_ptr<ResultHub> hub_;
  std::unique_ptr<ApiServer> server_;
};

TEST_F(ApiServerTest, SocketIsPrivateAndReportHasHistory) {
  StartServer();
  struct stat st {};
  ASSERT_EQ(::stat(options_.socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto stub = Stub();
  {
    grpc::ClientContext context;
    SetDeadline(context);
    pb::Report report;
    EXPECT_EQ(stub->GetReport(&context, {}, &report).error_code(), grpc::StatusCode::UNAVAILABLE)
        << "nothing published yet";
  }
  hub_->Publish(StepTrigger::kStartup,
                MakeStep(1787392800000, {MakeFinding(FindingCode::kMixedBackend, 4026532001, "nat",
                                                     "iptables-legacy ipv4 nat")}));
  grpc::ClientContext context;
  SetDeadline(context);
  pb::Report report;
  ASSERT_TRUE(stub->GetReport(&context, {}, &report).ok());
  EXPECT_EQ(report.schema(), "ambient-doctor.report/v2");
  EXPECT_EQ(report.node().name(), "node-a");
  EXPECT_EQ(report.node().taken_at_unix_ms(), 1787392800000.0);
  ASSERT_EQ(report.netns_size(), 2);
  EXPECT_EQ(report.netns(1).inode(), 4026532001u);
  EXPECT_EQ(report.netns(1).mode(), "ambient");
  EXPECT_EQ(report.netns(1).pod(), "demo/a");
  EXPECT_EQ(report.netns(1).status(), "critical");
  EXPECT_FALSE(report.netns(0).has_pod());
  ASSERT_EQ(report.findings_size(), 1);
  const pb::Finding& f = report.findings(0);
  EXPECT_EQ(f.code(), "MIXED_BACKEND");
  EXPECT_EQ(f.severity(), "critical");
  EXPECT_EQ(f.subject(), "nat");
  EXPECT_EQ(f.netns().inode(), 4026532001u);
  EXPECT_EQ(f.first_seen_unix_ms(), 1787392799000.0);
  EXPECT_EQ(f.last_seen_unix_ms(), 1787392800000.0);
  EXPECT_FALSE(f.has_resolved_at_unix_ms());
  EXPECT_EQ(report.summary().findings().critical(), 1u);
  EXPECT_EQ(report.summary().by_mode().ambient(), 1u);
}

TEST_F(ApiServerTest, StatusRulesFlowsHealthAndReflection) {
  StartServer([](const NetnsQuery& query) -> Result<NetnsSnapshot> {
    if (query.inode != 4026532001 && query.path != "/run/netns/pod-a") {
      return SourceError{SourceKind::kNetns, "no such netns", ENOENT};
    }
    NetnsSnapshot ns;
    ns.netns.inode = 4026532001;
    ns.netns.paths = {"/run/netns/pod-a"};
    Table nat;
    nat.backend = Backend::kIptablesNft;
    nat.family = Family::kIpv4;
    nat.name = "nat";
    Chain output;
    output.name = "OUTPUT";
    output.is_base = true;
    output.hook = "output";
    output.rules.emplace_back();
    output.rules.back().sem.action.kind = ActionKind::kAccept;
    nat.chains.push_back(output);
    ns.netfilter.tables.push_back(nat);
    ns.routing.rules.push_back({Family::kIpv4, 32764, 0x111, 0xfff, 100, "lookup"});
    return ns;
  });
  EngineStep step = MakeStep(1000, {});
  step.snapshot.netns[1].errors.push_back({SourceKind::kLegacyIpv6, "GET_INFO: EPERM", EPERM});
  hub_->Publish(StepTrigger::kStartup, step);
  EngineStep second = MakeStep(2000, {});
  second.snapshot.cni.collected = true;
  second.snapshot.cni.dir = "/host/var/lib/rancher/k3s/agent/etc/cni/net.d";
  second.snapshot.cni.dir_origin = CniDirOrigin::kRuntime;
  hub_->Publish(StepTrigger::kPoll, std::move(second));
  auto stub = Stub();

  // Status: counters follow the hub (the tracker may lag a moment behind the publish).
  pb::Status status;
  for (int attempt = 0; attempt < 200; ++attempt) {
    grpc::ClientContext context;
    SetDeadline(context);
    ASSERT_TRUE(stub->GetStatus(&context, {}, &status).ok());
    if (status.scans_by_trigger().count("poll") != 0) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(status.version(), "test");
  EXPECT_EQ(status.api_version(), "ambientdoctor.v1");
  EXPECT_EQ(status.scans(), 2u);
  EXPECT_EQ(status.scans_by_trigger().at("startup"), 1u);
  EXPECT_EQ(status.scans_by_trigger().at("poll"), 1u);
  EXPECT_EQ(status.netns_watched(), 2u);
  // The CNI config directory of the latest scan and where it came from.
  EXPECT_EQ(status.cni_conf_dir(), "/host/var/lib/rancher/k3s/agent/etc/cni/net.d");
  EXPECT_EQ(status.cni_conf_dir_source(), "runtime");
  EXPECT_EQ(status.cni_not_judged(), "");
  bool saw_v6 = false;
  for (const pb::SourceStatus& source : status.sources()) {
    if (source.source() != "iptables-legacy/ipv6") continue;
    saw_v6 = true;
    EXPECT_TRUE(source.healthy()) << "recovered in the second scan";
    EXPECT_EQ(source.errors_total(), 1u);
    EXPECT_EQ(source.last_success_unix_ms(), 2000.0);
  }
  EXPECT_TRUE(saw_v6);

  // Rules by inode and by path; unknown and malformed requests.
  for (bool by_inode : {true, false}) {
    grpc::ClientContext context;
    SetDeadline(context);
    pb::GetNetnsRulesRequest request;
    if (by_inode) {
      request.set_inode(4026532001);
    } else {
      request.set_path("/run/netns/pod-a");
    }
    pb::NetnsRules rules;
    ASSERT_TRUE(stub->GetNetnsRules(&context, request, &rules).ok());
    EXPECT_EQ(rules.netns().pod(), "demo/a") << "joined from the latest scan";
    ASSERT_EQ(rules.tables_size(), 1);
    EXPECT_EQ(rules.tables(0).backend(), "iptables-nft");
    ASSERT_EQ(rules.tables(0).chains_size(), 1);
    ASSERT_EQ(rules.tables(0).chains(0).rules_size(), 1);
    EXPECT_NE(rules.tables(0).chains(0).rules(0).text().find("ACCEPT"), std::string::npos)
        << rules.tables(0).chains(0).rules(0).text();
    ASSERT_EQ(rules.policy_rules_size(), 1);
    EXPECT_EQ(rules.policy_rules(0).fwmark(), 0x111u);
  }
  for (auto [request, code] : std::vector<std::pair<pb::GetNetnsRulesRequest, grpc::StatusCode>>{
           {{}, grpc::StatusCode::INVALID_ARGUMENT}}) {
    grpc::ClientContext context;
    pb::NetnsRules rules;
    EXPECT_EQ(stub->GetNetnsRules(&context, request, &rules).error_code(), code);
  }
  {
    grpc::ClientContext context;
    pb::GetNetnsRulesRequest request;
    request.set_path("relative/path");
    pb::NetnsRules rules;
    EXPECT_EQ(stub->GetNetnsRules(&context, request, &rules).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext context;
    pb::GetNetnsRulesRequest request;
    request.set_inode(12345);
    pb::NetnsRules rules;
    const grpc::Status s = stub->GetNetnsRules(&context, request, &rules);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("no such netns"), std::string::npos) << s.error_message();
  }

  // StreamFlows needs a flow hub, which this server was not given.
  {
    grpc::ClientContext context;
    SetDeadline(context);
    auto reader = stub->StreamFlows(&context, {});
    pb::Flow flow;
    EXPECT_FALSE(reader->Read(&flow));
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(s.error_message().find("tracer"), std::string::npos);
  }

  // grpc.health.v1: SERVING (HealthCheckResponse.status = 1) for the server and the service.
  for (const char* service : {"", "ambientdoctor.v1.AmbientDoctor"}) {
    std::string reply;
    const grpc::Status s = RawUnary(Channel(), "/grpc.health.v1.Health/Check",
                                    *service ? StringField(1, service) : "", &reply);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(reply, std::string("\x08\x01", 2)) << service;
  }

  // Reflection lists the service (ListServiceResponse holds the names as strings).
  grpc::ClientContext context;
  SetDeadline(context);
  const grpc::internal::RpcMethod rpc(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          Channel().get(), rpc, &context));
  grpc::Slice list_services(StringField(7, ""));
  ASSERT_TRUE(stream->Write(grpc::ByteBuffer(&list_services, 1)));
  grpc::ByteBuffer response;
  ASSERT_TRUE(stream->Read(&response));
  const std::string listed = ToString(response);
  EXPECT_NE(listed.find("ambientdoctor.v1.AmbientDoctor"), std::string::npos);
  EXPECT_NE(listed.find("grpc.health.v1.Health"), std::string::npos);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ApiServerTest, WatchFindingsSendsCurrentSetThenOpenedAndResolved) {
  StartServer();
  const Finding mixed = MakeFinding(FindingCode::kMixedBackend, 4026532001, "nat", "legacy nat");
  const Finding incomplete =
      MakeFinding(FindingCode::kIncompleteRuleset, 4026532001, "mangle", "no PREROUTING mark");
  hub_->Publish(StepTrigger::kStartup, MakeStep(1000, {mixed}));

  auto stub = Stub();
  grpc::ClientContext context;
  SetDeadline(context, milliseconds(10000));
  auto reader = stub->WatchFindings(&context, {});
  pb::FindingEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), pb::FindingEvent::KIND_CURRENT);
  EXPECT_EQ(event.finding().code(), "MIXED_BACKEND");
  EXPECT_TRUE(event.end_of_current());
  EXPECT_EQ(event.sequence(), 1u);

  hub_->Publish(StepTrigger::kEvent,
                MakeStep(2000, {mixed, incomplete}, {{FindingChange::Kind::kOpened, incomplete}}));
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), pb::FindingEvent::KIND_OPENED);
  EXPECT_EQ(event.finding().code(), "INCOMPLETE_RULESET");
  EXPECT_EQ(event.finding().subject(), "mangle");
  EXPECT_EQ(event.sequence(), 2u);

  Finding reworded = incomplete;
  reworded.evidence = {"no PREROUTING mark", "ISTIO_PRERT missing"};
  hub_->Publish(StepTrigger::kEvent, MakeStep(3000, {mixed, reworded}));
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), pb::FindingEvent::KIND_UPDATED);
  EXPECT_EQ(event.finding().evidence_size(), 2);

  hub_->Publish(StepTrigger::kEvent,
                MakeStep(4000, {mixed}, {{FindingChange::Kind::kResolved, reworded}}));
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), pb::FindingEvent::KIND_RESOLVED);
  EXPECT_EQ(event.finding().code(), "INCOMPLETE_RULESET");
  EXPECT_EQ(event.finding().resolved_at_unix_ms(), 4000.0);
  context.TryCancel();
  EXPECT_FALSE(reader->Read(&event));
  reader->Finish();
}

TEST_F(ApiServerTest, StreamBehindTheRingIsExhaustedAndNeverBlocksPublishing) {
  options_.stalled_write_timeout = milliseconds(500);
  StartServer();
  hub_->Publish(StepTrigger::kStartup, MakeStep(1000, {}));
  auto stub = Stub();
  grpc::ClientContext context;
  SetDeadline(context, milliseconds(30000));
  auto reader = stub->WatchFindings(&context, {});
  pb::FindingEvent event;
  ASSERT_TRUE(reader->Read(&event));  // the (empty) current set; then the client stops reading

  // Big events so HTTP/2 flow control stops the server's writes.
  const std::string big(16 * 1024, 'e');
  for (int i = 0; i < 400; ++i) {
    Finding f = MakeFinding(FindingCode::kDuplicateRule, 4026532001, "r" + std::to_string(i), big);
    hub_->Publish(StepTrigger::kEvent,
                  MakeStep(2000 + i, {f}, {{FindingChange::Kind::kOpened, f}}));
  }
  // Publishing went on (400 results); the stream gets dropped and the server keeps serving.
  EXPECT_EQ(hub_->Latest()->sequence, 401u);
  for (int attempt = 0; attempt < 500 && server_->counters().streams_dropped == 0; ++attempt) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(server_->counters().streams_dropped, 1u);
  grpc::Status final_status;
  while (reader->Read(&event)) {
  }
  final_status = reader->Finish();
  EXPECT_TRUE(final_status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
              final_status.error_code() == grpc::StatusCode::CANCELLED)
      << final_status.error_code() << " " << final_status.error_message();
  grpc::ClientContext again;
  SetDeadline(again);
  pb::Report report;
  EXPECT_TRUE(Stub()->GetReport(&again, {}, &report).ok());
  EXPECT_EQ(server_->counters().active_streams, 0);
}

FlowEvent HboneEvent(FlowEventKind kind, uint32_t netns, uint16_t src_port) {
  FlowEvent event;
  event.kind = kind;
  event.flow.netns_inode = netns;
  event.flow.role = FlowRole::kClient;
  event.flow.tuple.src.bytes = {10, 1, 0, 1};
  event.flow.tuple.src_port = src_port;
  event.flow.tuple.dst.bytes = {10, 1, 0, 2};
  event.flow.tuple.dst_port = 15008;
  event.flow.outcome = kind == FlowEventKind::kOpen ? FlowOutcome::kOpen : FlowOutcome::kRefused;
  return event;
}

TEST_F(ApiServerTest, StreamFlowsSendsOpenFlowsThenEventsFilteredByNetns) {
  auto flows = std::make_shared<FlowHub>(64);
  flows->SetStatus({.enabled = true, .available = true, .attach_mode = "tp_btf"});
  FlowTableView view;
  view.open.push_back(HboneEvent(FlowEventKind::kOpen, 4026532001, 40000).flow);
  view.open.push_back(HboneEvent(FlowEventKind::kOpen, 4026532002, 40001).flow);
  flows->Publish({}, view);
  StartServer({}, flows);
  // Pod names come from the latest scan.
  EngineStep step = MakeStep(1000, {});
  NetnsClassification named;
  named.netns_inode = 4026532001;
  named.netns_path = "/run/netns/a";
  named.pod = "demo/a";
  step.analysis.netns.push_back(named);
  hub_->Publish(StepTrigger::kStartup, std::move(step));
  {
    grpc::ClientContext context;
    SetDeadline(context);
    pb::Status status;
    ASSERT_TRUE(Stub()->GetStatus(&context, {}, &status).ok());
    EXPECT_TRUE(status.flow_tracer_available());
    EXPECT_EQ(status.flow_tracer_attach(), "tp_btf");
  }

  grpc::ClientContext context;
  SetDeadline(context);
  pb::StreamFlowsRequest request;
  request.set_netns_inode(4026532001);
  auto reader = Stub()->StreamFlows(&context, request);
  pb::Flow flow;
  ASSERT_TRUE(reader->Read(&flow));
  EXPECT_EQ(flow.event(), "current");
  EXPECT_TRUE(flow.end_of_current()) << "the other netns' flow is filtered out";
  EXPECT_EQ(flow.pod(), "demo/a");
  EXPECT_EQ(flow.netns_path(), "/run/netns/a");
  EXPECT_EQ(flow.tuple().dst_ip(), "10.1.0.2");
  EXPECT_EQ(flow.tuple().dst_port(), 15008u);
  EXPECT_EQ(flow.outcome(), "open");

  flows->Publish({HboneEvent(FlowEventKind::kClose, 4026532002, 40001),
                  HboneEvent(FlowEventKind::kClose, 4026532001, 40002)},
                 view);
  ASSERT_TRUE(reader->Read(&flow));
  EXPECT_EQ(flow.event(), "close");
  EXPECT_EQ(flow.tuple().src_port(), 40002u);
  EXPECT_EQ(flow.outcome(), "refused");
  context.TryCancel();
  EXPECT_FALSE(reader->Read(&flow));
  reader->Finish();
}

TEST_F(ApiServerTest, StreamFlowsIsUnavailableWithTheReasonWhenTheTracerIsNotRunning) {
  auto flows = std::make_shared<FlowHub>();
  flows->SetStatus({.enabled = true, .available = false, .reason = "no kernel BTF at /x"});
  StartServer({}, flows);
  grpc::ClientContext context;
  SetDeadline(context);
  auto reader = Stub()->StreamFlows(&context, {});
  pb::Flow flow;
  EXPECT_FALSE(reader->Read(&flow));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("no kernel BTF at /x"), std::string::npos);
  grpc::ClientContext status_context;
  SetDeadline(status_context);
  pb::Status reply;
  ASSERT_TRUE(Stub()->GetStatus(&status_context, {}, &reply).ok());
  EXPECT_FALSE(reply.flow_tracer_available());
  EXPECT_EQ(reply.flow_tracer_reason(), "no kernel BTF at /x");
}

TEST_F(ApiServerTest, SlowStreamFlowsConsumerIsDroppedAndNeverBlocksPublishing) {
  options_.stalled_write_timeout = milliseconds(500);
  auto flows = std::make_shared<FlowHub>(256);
  flows->SetStatus({.enabled = true, .available = true, .attach_mode = "tp_btf"});
  StartServer({}, flows);
  grpc::ClientContext context;
  SetDeadline(context, milliseconds(30000));
  auto reader = Stub()->StreamFlows(&context, {});
  pb::Flow flow;
  ASSERT_TRUE(reader->Read(&flow));  // the (empty) current set; then the client stops reading
  EXPECT_TRUE(flow.end_of_current());
  // Far more events than the ring and HTTP/2's window hold.
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<FlowEvent> events;
    for (int i = 0; i < 500; ++i) {
      events.push_back(HboneEvent(FlowEventKind::kClose, 4026532001,
                                  static_cast<uint16_t>(1024 + (batch * 500 + i) % 60000)));
    }
    flows->Publish(std::move(events), {});
  }
  EXPECT_EQ(flows->Latest().sequence, 100000u) << "publishing never waited for the stream";
  for (int attempt = 0; attempt < 500 && server_->counters().streams_dropped == 0; ++attempt) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(server_->counters().streams_dropped, 1u);
  while (reader->Read(&flow)) {
  }
  const grpc::Status final_status = reader->Finish();
  EXPECT_TRUE(final_status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
              final_status.error_code() == grpc::StatusCode::CANCELLED)
      << final_status.error_code() << " " << final_status.error_message();
  EXPECT_EQ(server_->counters().active_streams, 0);
}

TEST_F(ApiServerTest, GarbageOversizedManyClientsAndStreamLimit) {
  options_.max_streams = 2;
  StartServer();
  hub_->Publish(StepTrigger::kStartup, MakeStep(1000, {}));
  auto channel = Channel();

  // Garbage bytes as a request: the server answers INTERNAL/INVALID_ARGUMENT, never crashes.
  {
    grpc::GenericStub generic(channel);
    grpc::ClientContext context;
    SetDeadline(context);
    const std::string garbage = "\xff\xff\xff\xff\x0f garbage";
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&context, "/ambientdoctor.v1.AmbientDoctor/GetNetnsRules", {}, &request,
                      &response, [&](grpc::Status s) {
                        std::lock_guard lock(mutex);
                        status = s;
                        done = true;
                        done_cv.notify_all();
                      });
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
    EXPECT_FALSE(status.ok());
  }
  // An oversized request (over max_request_bytes).
  {
    grpc::ClientContext context;
    SetDeadline(context);
    pb::GetNetnsRulesRequest request;
    request.set_path("/" + std::string(64 * 1024, 'x'));
    pb::NetnsRules rules;
    const grpc::Status s = Stub()->GetNetnsRules(&context, request, &rules);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  // 100 concurrent clients, each on its own channel.
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 100; ++i) {
    clients.emplace_back([&] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);
      auto stub = pb::AmbientDoctor::NewStub(grpc::CreateCustomChannel(
          "unix:" + options_.socket_path, grpc::InsecureChannelCredentials(), args));
      grpc::ClientContext context;
      SetDeadline(context, milliseconds(20000));
      pb::Report report;
      if (stub->GetReport(&context, {}, &report).ok() && report.netns_size() == 2) ok++;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 100);

  // Stream limit: two streams open, the third is refused with RESOURCE_EXHAUSTED.
  auto stub = Stub();
  grpc::ClientContext c1, c2, c3;
  auto r1 = stub->WatchFindings(&c1, {});
  auto r2 = stub->WatchFindings(&c2, {});
  pb::FindingEvent event;
  ASSERT_TRUE(r1->Read(&event));
  ASSERT_TRUE(r2->Read(&event));
  auto r3 = stub->WatchFindings(&c3, {});
  EXPECT_FALSE(r3->Read(&event));
  EXPECT_EQ(r3->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(server_->counters().streams_refused, 1u);
  c1.TryCancel();
  c2.TryCancel();
  while (r1->Read(&event)) {
  }
  while (r2->Read(&event)) {
  }
  r1->Finish();
  r2->Finish();
  for (int attempt = 0; attempt < 500 && server_->counters().active_streams != 0; ++attempt) {
    std::this_thread::sleep_for(milliseconds(10));  // the handlers see the cancel on their poll
  }
  // Deadlines: a stream with a short deadline ends with DEADLINE_EXCEEDED.
  grpc::ClientContext short_deadline;
  SetDeadline(short_deadline, milliseconds(300));
  auto r4 = stub->WatchFindings(&short_deadline, {});
  while (r4->Read(&event)) {
  }
  EXPECT_EQ(r4->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ApiServerTest, SocketPathProblemsAreClearErrors) {
  // A stale socket file (bound, nobody listening: a crashed daemon) is replaced.
  fs::create_directories(dir_ + "/run");
  {
    UniqueFd stale(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(stale.valid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    options_.socket_path.copy(addr.sun_path, options_.socket_path.size());
    ASSERT_EQ(::bind(stale.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ASSERT_TRUE(fs::is_socket(options_.socket_path));
  // A second server on a live socket is refused; the first keeps serving.
  StartServer();
  auto second = ApiServer::Start(options_, hub_, {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("another server"), std::string::npos);
  // A regular file at the path is not replaced.
  ApiServerOptions file_path = options_;
  file_path.socket_path = dir_ + "/run/not-a-socket";
  std::ofstream(file_path.socket_path) << "data";
  auto on_file = ApiServer::Start(file_path, hub_, {});
  ASSERT_FALSE(on_file.ok());
  EXPECT_NE(on_file.error().message.find("not a socket"), std::string::npos);
  EXPECT_TRUE(fs::exists(file_path.socket_path));
  // An unwritable directory (root bypasses permissions, so use a read-only bind... a file as
  // the directory) is a clear error too.
  ApiServerOptions under_file = options_;
  under_file.socket_path = file_path.socket_path + "/api.sock";
  auto in_file = ApiServer::Start(under_file, hub_, {});
  ASSERT_FALSE(in_file.ok());
  EXPECT_NE(in_file.error().message.find("not a directory"), std::string::npos)
      << in_file.error().message;
  // An unwritable directory: root passes permission bits, so a read-only tmpfs (root only).
  if (::geteuid() == 0) {
    const std::string read_only = dir_ + "/ro";
    fs::create_directories(read_only);
    if (::mount("tmpfs", read_only.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                "size=64k") == 0) {
      ApiServerOptions on_ro = options_;
      on_ro.socket_path = read_only + "/api.sock";
      auto denied = ApiServer::Start(on_ro, hub_, {});
      ApiServerOptions below_ro = options_;
      below_ro.socket_path = read_only + "/sub/api.sock";
      auto not_created = ApiServer::Start(below_ro, hub_, {});
      ::umount2(read_only.c_str(), MNT_DETACH);
      ASSERT_FALSE(denied.ok());
      EXPECT_NE(denied.error().message.find("not writable"), std::string::npos)
          << denied.error().message;
      ASSERT_FALSE(not_created.ok());
      EXPECT_NE(not_created.error().message.find("create socket directory"), std::string::npos)
          << not_created.error().message;
    } else {
      ADD_FAILURE() << "mount a read-only tmpfs: " << std::strerror(errno);
    }
  }
  hub_->Publish(StepTrigger::kStartup, MakeStep(1000, {}));
  grpc::ClientContext context;
  SetDeadline(context);
  pb::Report report;
  EXPECT_TRUE(Stub()->GetReport(&context, {}, &report).ok()) << "the first server still serves";
}

TEST_F(ApiServerTest, PythonClientReadsReportAndOneEvent) {
  if (std::system("/usr/bin/python3 -c 'import grpc, google.protobuf' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-grpcio / python3-protobuf not installed (scripts/setup)";
  }
  if (std::system("command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null") !=
      0) {
    GTEST_SKIP() << "protoc or grpc_python_plugin (protobuf-compiler-grpc) not installed";
  }
  StartServer();
  hub_->Publish(StepTrigger::kStartup,
                MakeStep(1000, {MakeFinding(FindingCode::kZdsStall, 4026532001, "zds", "stuck")}));
  const std::string command = std::string("/usr/bin/python3 ") + AD_SOURCE_DIR +
                              "/tests/integration/python/api_client.py " + AD_SOURCE_DIR +
                              "/proto " + options_.socket_path + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("report node-a 2 1"), std::string::npos) << output;
  EXPECT_NE(output.find("event KIND_CURRENT ZDS_STALL"), std::string::npos) << output;
}

}  // namespace
}  // namespace ad::api
