#include "api/api_server.h"

#include <arpa/inet.h>
#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "analysis/analysis.h"
#include "api/health_service.h"
#include "api/kube_proto.h"
#include "api/report_proto.h"
#include "base/thread_name.h"
#include "base/unique_fd.h"
#include "capture/capture.h"
#include "model/host_port.h"
#include "report/report_policy.h"

namespace ad::api {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kServiceName = "ambientdoctor.v1.AmbientDoctor";
// The status tracker and an idle watchdog sleep until woken (a result, a new stream, shutdown);
// this only bounds a wake that was somehow missed.
constexpr std::chrono::milliseconds kIdleWait{60000};

SourceError ApiError(std::string message, int err = 0) {
  return SourceError{SourceKind::kApi, std::move(message), err};
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// True when something accepts connections on the unix socket at `path` (a live server).
bool SocketAnswers(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || path.size() >= sizeof(sockaddr_un::sun_path)) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

// PEM files are a few KiB; anything this large is not one.
constexpr size_t kMaxPemBytes = 1 << 20;

Result<std::string> ReadPemFile(const std::string& what, const std::string& path) {
  // Only regular files: opening a FIFO would wait for a writer.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(SourceKind::kApi, what + " " + path);
  if (!S_ISREG(st.st_mode)) {
    return ApiError(what + " " + path + " is not a regular file", EINVAL);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(SourceKind::kApi, what + " " + path);
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return ErrnoError(SourceKind::kApi, what + " " + path);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPemBytes) {
    return ApiError(what + " " + path + " is larger than 1 MiB; not a PEM file", EFBIG);
  }
  return text;
}

// OpenSSL objects, freed on every path.
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using UniqueBio = std::unique_ptr<BIO, BioFree>;
using UniqueX509 = std::unique_ptr<X509, X509Free>;
using UniquePkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

UniqueBio MemoryBio(const std::string& text) {
  return UniqueBio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The reason of the last OpenSSL failure on this thread ("" when none); clears the queue.
std::string TakeOpensslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return std::string(": ") + buffer;
}

// Never prompts: a key with a passphrase fails to load instead of reading the terminal.
int NoPassphrase(char*, int, int, void*) { return -1; }

// The certificates of a PEM text, in order; empty when it holds none.
std::vector<UniqueX509> ParseCertificates(const std::string& pem) {
  std::vector<UniqueX509> certs;
  UniqueBio bio = MemoryBio(pem);
  while (bio) {
    UniqueX509 cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
    if (!cert) break;
    certs.push_back(std::move(cert));
  }
  ERR_clear_error();  // the end of the text reads as "no start line"
  return certs;
}

Result<std::vector<UniqueX509>> CertificatesOf(const std::string& what, const std::string& path,
                                               const std::string& pem) {
  std::vector<UniqueX509> certs = ParseCertificates(pem);
  if (certs.empty()) {
    return ApiError(what + " " + path + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    EINVAL);
  }
  return certs;
}

// Why gRPC could not bind `address`: binds a socket of our own the way gRPC does (SO_REUSEADDR,
// no SO_REUSEPORT) and reports the errno, e.g. "Address already in use". Closed at once.
Status ProbeTcpBind(const HostPort& address) {
  UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(SourceKind::kApi, "socket");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (address.family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(address.port);
    ::inet_pton(AF_INET6, address.host.c_str(), &v6->sin6_addr);
    length = sizeof(*v6);
  } else {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(address.port);
    ::inet_pton(AF_INET, address.host.c_str(), &v4->sin_addr);
    length = sizeof(*v4);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0) {
    const int err = errno;
    return SourceError{SourceKind::kApi, std::strerror(err), err};
  }
  return OkStatus();
}

// Every source a scan consults, and whether it failed in this result.
std::map<SourceKind, std::string> SourcesOf(const EngineStep& step) {
  std::map<SourceKind, std::string> sources;
  for (SourceKind kind : {SourceKind::kNetns, SourceKind::kNftables, SourceKind::kLegacyIpv4,
                          SourceKind::kLegacyIpv6, SourceKind::kRoute, SourceKind::kSockDiag}) {
    sources[kind];
  }
  const NodeSnapshot& s = step.snapshot;
  if (s.zds_collected) {
    for (SourceKind kind : {SourceKind::kZds, SourceKind::kProc, SourceKind::kZtunnel}) {
      sources[kind];
    }
  }
  if (s.cri.available || !s.cri.errors.empty()) sources[SourceKind::kCri];
  auto note = [&sources](const std::vector<SourceError>& errors) {
    for (const SourceError& e : errors) {
      std::string& first = sources[e.kind];
      if (first.empty()) first = e.message.empty() ? "failed" : e.message;
    }
  };
  note(s.errors);
  note(s.zds.errors);
  note(s.cri.errors);
  for (const ZtunnelAdminState& z : s.ztunnels) note(z.errors);
  for (const NetnsSnapshot& ns : s.netns) note(ns.errors);
  if (s.kube && s.kube->status.enabled) {
    sources[SourceKind::kKubeApi];
    if (auto error = KubeApiError(s.kube->status)) note({*error});
  }
  return sources;
}

// A Kubernetes object name or namespace as GetPod accepts it: DNS-1123 characters, at most 253.
bool ValidObjectName(const std::string& name) {
  return !name.empty() && name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

}  // namespace

Status PrepareSocketPath(const std::string& socket_path) {
  namespace fs = std::filesystem;
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    return ApiError("socket path '" + socket_path + "' is empty or longer than " +
                    std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  const fs::path dir = fs::path(socket_path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError(SourceKind::kApi, "create socket directory " + dir.string());
    }
  }
  struct stat dir_stat {};
  if (!dir.empty()) {
    if (::stat(dir.c_str(), &dir_stat) != 0) {
      return ErrnoError(SourceKind::kApi, "socket directory " + dir.string());
    }
    if (!S_ISDIR(dir_stat.st_mode)) {
      return ApiError("socket directory " + dir.string() + " is not a directory", ENOTDIR);
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      return ErrnoError(SourceKind::kApi, "socket directory " + dir.string() + " is not writable");
    }
  }
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OkStatus();
    return ErrnoError(SourceKind::kApi, "socket path " + socket_path);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return ApiError("socket path " + socket_path + " exists and is not a socket; not replacing it",
                    EEXIST);
  }
  if (SocketAnswers(socket_path)) {
    return ApiError("another server is listening on " + socket_path, EADDRINUSE);
  }
  if (::unlink(socket_path.c_str()) != 0) {  // a stale socket of a previous run
    return ErrnoError(SourceKind::kApi, "remove stale socket " + socket_path);
  }
  return OkStatus();
}

namespace {
std::atomic<GrpcLogSink> g_grpc_log_sink{nullptr};

void ForwardGrpcLog(gpr_log_func_args* args) {
  if (GrpcLogSink sink = g_grpc_log_sink.load()) sink(args->message ? args->message : "");
}
}  // namespace

void SetGrpcLogSink(GrpcLogSink sink) {
  g_grpc_log_sink = sink;
  gpr_set_log_function(ForwardGrpcLog);
}

Result<TlsMaterial> LoadTlsMaterial(const ApiTlsFiles& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return ApiError("TLS needs both a certificate and a private key file", EINVAL);
  }
  TlsMaterial material;
  Result<std::string> cert = ReadPemFile("TLS certificate file", files.cert_file);
  if (!cert) return cert.error();
  Result<std::vector<UniqueX509>> chain =
      CertificatesOf("TLS certificate file", files.cert_file, *cert);
  if (!chain) return chain.error();
  material.cert_chain = std::move(*cert);

  Result<std::string> key = ReadPemFile("TLS key file", files.key_file);
  if (!key) return key.error();
  UniqueBio key_bio = MemoryBio(*key);
  UniquePkey pkey(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr)
                          : nullptr);
  if (!pkey) {
    const std::string reason = TakeOpensslError();
    if (key->find("ENCRYPTED") != std::string::npos) {
      return ApiError("TLS key file " + files.key_file +
                          " is encrypted; give an unencrypted PEM key (no passphrase)",
                      EINVAL);
    }
    return ApiError("TLS key file " + files.key_file + " holds no PEM private key" + reason,
                    EINVAL);
  }
  if (X509_check_private_key(chain->front().get(), pkey.get()) != 1) {
    TakeOpensslError();
    return ApiError(
        "TLS key file " + files.key_file + " does not match the certificate in " + files.cert_file,
        EINVAL);
  }
  material.private_key = std::move(*key);

  if (!files.client_ca_file.empty()) {
    Result<std::string> ca = ReadPemFile("TLS client CA file", files.client_ca_file);
    if (!ca) return ca.error();
    Result<std::vector<UniqueX509>> roots =
        CertificatesOf("TLS client CA file", files.client_ca_file, *ca);
    if (!roots) return roots.error();
    material.client_ca = std::move(*ca);
  }
  return material;
}

struct ApiServer::Impl final : pb::AmbientDoctor::Service {
  // One open stream, watched for a write that no longer completes.
  struct Stream {
    grpc::ServerContext* context = nullptr;
    std::atomic<uint64_t> delivered{0};
    std::atomic<int64_t> write_started_ms{0};  // steady ms, 0 when not writing
    std::atomic<bool> dropped{false};
    bool flows = false;  // a StreamFlows stream: `delivered` is a flow event sequence
  };

  ApiServerOptions options;
  std::shared_ptr<const ResultHub> hub;
  std::shared_ptr<const FlowHub> flows;  // null: this server has no flow tracer
  NetnsReader netns_reader;
  PodLocator pod_locator;
  std::unique_ptr<grpc::Server> server;
  HealthService health;  // grpc.health.v1 (sync: no callback completion-queue threads)
  int tcp_port = 0;
  const int64_t started_at_unix_ms = NowUnixMs();

  std::atomic<bool> stopping{false};
  std::atomic<int> active_streams{0};
  std::atomic<uint64_t> streams_dropped{0};
  std::atomic<uint64_t> streams_refused{0};
  std::mutex streams_mutex;
  // Wakes the watchdog at shutdown and when the first stream opens (guarded by streams_mutex).
  std::condition_variable watchdog_wake;
  std::list<Stream*> streams;

  // Status, accumulated by following the hub.
  struct SourceHealth {
    std::string last_error;
    int64_t last_success_unix_ms = 0;
    uint64_t errors_total = 0;
  };
  mutable std::mutex status_mutex;
  std::map<std::string, uint64_t> scans_by_trigger;
  std::map<SourceKind, SourceHealth> source_health;
  int64_t last_usable_scan_unix_ms = 0;

  std::thread watchdog;
  std::thread tracker;
  bool shut_down = false;

  static int64_t SteadyMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
        .count();
  }

  static bool DeadlinePassed(const grpc::ServerContext* context) {
    return context->deadline() <= std::chrono::system_clock::now();
  }

  void Track(const PublishedResult& result) {
    std::lock_guard lock(status_mutex);
    scans_by_trigger[std::string(StepTriggerName(result.trigger))]++;
    const int64_t taken = result.step.snapshot.taken_at_unix_ms;
    if (result.step.usable) last_usable_scan_unix_ms = taken;
    for (const auto& [kind, error] : SourcesOf(result.step)) {
      SourceHealth& health = source_health[kind];
      health.last_error = error;
      if (error.empty()) {
        health.last_success_unix_ms = taken;
      } else {
        health.errors_total++;
      }
    }
  }

  void RunTracker() {
    uint64_t seen = 0;
    while (!stopping.load()) {
      // Woken by the hub on every result, at its stop, and by Shutdown() (a server stopped
      // while the hub goes on): an idle daemon never wakes this thread.
      ResultHub::Since since = hub->WaitSince(seen, kIdleWait, &stopping);
      if (since.stopped) return;
      for (const auto& result : since.results) {
        Track(*result);
        seen = result->sequence;
      }
    }
  }

  void RunWatchdog() {
    std::unique_lock lock(streams_mutex);
    while (!stopping.load()) {
      // Without streams there is nothing to watch until one opens (StreamSlot wakes this).
      if (streams.empty()) {
        watchdog_wake.wait_for(lock, kIdleWait,
                               [this] { return stopping.load() || !streams.empty(); });
      } else {
        watchdog_wake.wait_for(lock, options.stream_poll, [this] { return stopping.load(); });
      }
      const int64_t now = SteadyMs();
      for (Stream* stream : streams) {
        const int64_t started = stream->write_started_ms.load();
        if (started == 0 || stream->dropped.load()) continue;
        const bool stalled = now - started > options.stalled_write_timeout.count();
        const bool behind = stream->flows ? flows->Behind(stream->delivered.load())
                                          : hub->WaitSince(stream->delivered.load(), {}).gap;
        // The stream's own thread may have seen the gap first: a stream is counted once.
        if ((stalled || behind) && !stream->dropped.exchange(true)) {
          streams_dropped++;
          stream->context->TryCancel();
        }
      }
    }
  }

  // Holds one of the max_streams slots and registers the stream with the watchdog.
  class StreamSlot {
   public:
    StreamSlot(Impl& impl, grpc::ServerContext* context) : impl_(impl) {
      if (impl_.active_streams.fetch_add(1) >= impl_.options.max_streams) {
        impl_.active_streams--;
        impl_.streams_refused++;
        return;
      }
      acquired_ = true;
      stream_.context = context;
      std::lock_guard lock(impl_.streams_mutex);
      impl_.streams.push_back(&stream_);
      if (impl_.streams.size() == 1) impl_.watchdog_wake.notify_all();
    }
    ~StreamSlot() {
      if (!acquired_) return;
      {
        std::lock_guard lock(impl_.streams_mutex);
        impl_.streams.remove(&stream_);
      }
      impl_.active_streams--;
    }
    StreamSlot(const StreamSlot&) = delete;
    StreamSlot& operator=(const StreamSlot&) = delete;
    bool acquired() const { return acquired_; }
    Stream& stream() { return stream_; }

   private:
    Impl& impl_;
    Stream stream_;
    bool acquired_ = false;
  };

  grpc::Status TooManyStreams() const {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "too many open streams (limit " + std::to_string(options.max_streams) + "); retry later");
  }

  grpc::Status GetReport(grpc::ServerContext* context, const pb::GetReportRequest*,
                         pb::Report* reply) override {
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before GetReport");
    }
    const auto latest = hub->Latest();
    if (!latest) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no scan has completed yet; retry");
    }
    const EngineStep& step = latest->step;
    *reply = BuildReport(step.snapshot, step.analysis,
                         ReportHistory{&step.finding_records, step.recently_resolved.get()},
                         step.desired.get());
    FillDaemonOrigin(*latest, reply->mutable_origin());
    return grpc::Status::OK;
  }

  grpc::Status GetStatus(grpc::ServerContext* context, const pb::GetStatusRequest*,
                         pb::Status* reply) override {
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before GetStatus");
    }
    reply->set_version(options.version);
    reply->set_api_version("ambientdoctor.v1");
    reply->set_started_at_unix_ms(static_cast<double>(started_at_unix_ms));
    if (flows) {
      const FlowTracerStatus tracer = flows->status();
      reply->set_flow_tracer_available(tracer.available);
      reply->set_flow_tracer_attach(tracer.attach_mode);
      reply->set_flow_tracer_reason(tracer.enabled ? tracer.reason : "disabled (--no-flows)");
      reply->set_flow_tracer_lost_events(tracer.lost_events);
      reply->set_flow_tracer_bypass(tracer.bypass);
      reply->set_flow_tracer_bypass_netns(tracer.bypass_netns);
      reply->set_flow_tracer_bypass_netns_not_watched(tracer.bypass_netns_not_watched);
      reply->set_flow_tracer_bypass_netns_overflow(tracer.bypass_netns_overflow);
      reply->set_flow_tracer_bypass_flows(tracer.bypass_flows);
    } else {
      reply->set_flow_tracer_reason("this server has no flow tracer");
    }
    const auto latest = hub->Latest();
    reply->set_node(latest ? latest->step.snapshot.node_name : options.node_name);
    if (latest) {
      reply->set_scans(latest->sequence);
      reply->set_last_scan_unix_ms(static_cast<double>(latest->step.snapshot.taken_at_unix_ms));
      reply->set_netns_watched(static_cast<uint32_t>(latest->step.snapshot.netns.size()));
      reply->set_open_findings(static_cast<uint32_t>(latest->step.analysis.findings.size()));
      const CniConfigState& cni = latest->step.snapshot.cni;
      if (cni.collected) {
        reply->set_cni_conf_dir(cni.dir);
        reply->set_cni_conf_dir_source(std::string(CniDirOriginName(cni.dir_origin)));
        reply->set_cni_not_judged(cni.not_judged);
      }
      if (latest->step.snapshot.kube) {
        *reply->mutable_kubernetes() =
            BuildKubernetes(latest->step.snapshot, latest->step.desired.get());
      }
    }
    std::lock_guard lock(status_mutex);
    for (const auto& [trigger, count] : scans_by_trigger) {
      (*reply->mutable_scans_by_trigger())[trigger] = count;
    }
    reply->set_last_usable_scan_unix_ms(static_cast<double>(last_usable_scan_unix_ms));
    for (const auto& [kind, health] : source_health) {
      pb::SourceStatus* source = reply->add_sources();
      source->set_source(std::string(SourceKindName(kind)));
      source->set_healthy(health.last_error.empty());
      source->set_last_error(health.last_error);
      source->set_last_success_unix_ms(static_cast<double>(health.last_success_unix_ms));
      source->set_errors_total(health.errors_total);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPod(grpc::ServerContext* context, const pb::GetPodRequest* request,
                      pb::PodReport* reply) override {
    if (!ValidObjectName(request->namespace_()) || !ValidObjectName(request->name())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "namespace and name must be non-empty Kubernetes names");
    }
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before GetPod");
    }
    const auto latest = hub->Latest();
    if (!latest) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no scan has completed yet; retry");
    }
    const EngineStep& step = latest->step;
    *reply = BuildPodReport(step.snapshot, step.analysis, step.desired.get(), &step.finding_records,
                            request->namespace_(), request->name());
    if (reply->location() == "unknown") {
      const PodLocation where = pod_locator
                                    ? pod_locator(request->namespace_(), request->name())
                                    : PodLocation{.error = "this server does not ask the API"};
      FillPodLocation(
          where.found, where.not_found, where.node_name, where.error,
          reply->kubernetes().node().empty() ? step.snapshot.node_name : reply->kubernetes().node(),
          *reply);
    }
    if (reply->has_netns()) AddPodFlows(reply->netns().inode(), *reply);
    FillDaemonOrigin(*latest, reply->mutable_origin());
    return grpc::Status::OK;
  }

  grpc::Status GetCapture(grpc::ServerContext* context, const pb::GetCaptureRequest* request,
                          pb::CaptureFile* reply) override {
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before GetCapture");
    }
    const auto latest = hub->Latest();
    if (!latest) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no scan has completed yet; retry");
    }
    const EngineStep& step = latest->step;
    capture::Capture taken;
    taken.manifest.agent_version = options.version;
    taken.manifest.node_name = step.snapshot.node_name;
    taken.manifest.taken_at_unix_ms = step.snapshot.taken_at_unix_ms;
    taken.manifest.origin = "daemon";
    taken.manifest.agent_flags = options.capture_flags;
    taken.manifest.ips_redacted = request->redact_ips();
    taken.snapshot = step.snapshot;
    if (step.memory) taken.memory = *step.memory;
    Result<std::string> bytes = capture::Encode(std::move(taken));
    if (!bytes.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, bytes.error().message);
    reply->set_data(std::move(bytes).value());
    return grpc::Status::OK;
  }

  // The pod netns's open flows and its most recent closed ones (the tracer's view).
  void AddPodFlows(uint32_t inode, pb::PodReport& reply) {
    if (!flows) return;
    const auto view = flows->Latest().view;
    const auto names = NetnsNames();
    for (const Flow& flow : view->open) {
      if (flow.netns_inode == inode) *reply.add_flows() = BuildFlow(flow, "current", names);
    }
    constexpr size_t kRecentClosed = 20;
    std::vector<const Flow*> closed;
    for (auto it = view->closed.rbegin();
         it != view->closed.rend() && closed.size() < kRecentClosed; ++it) {
      if (it->netns_inode == inode) closed.push_back(&*it);
    }
    for (auto it = closed.rbegin(); it != closed.rend(); ++it) {
      *reply.add_flows() = BuildFlow(**it, "close", names);
    }
  }

  grpc::Status GetNetnsRules(grpc::ServerContext* context, const pb::GetNetnsRulesRequest* request,
                             pb::NetnsRules* reply) override {
    NetnsQuery query;
    switch (request->netns_case()) {
      case pb::GetNetnsRulesRequest::kInode:
        if (request->inode() == 0) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "inode must not be 0");
        }
        query.inode = request->inode();
        break;
      case pb::GetNetnsRulesRequest::kPath:
        query.path = request->path();
        if (query.path.empty() || query.path[0] != '/' || query.path.size() > 4096 ||
            query.path.find('\0') != std::string::npos) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "path must be an absolute path of at most 4096 bytes");
        }
        break;
      case pb::GetNetnsRulesRequest::NETNS_NOT_SET:
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "set netns.inode or netns.path");
    }
    if (!netns_reader) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server reads no netns");
    }
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before the read");
    }
    Result<NetnsSnapshot> netns = netns_reader(query);
    if (!netns) {
      const int err = netns.error().error_number;
      const auto code = (err == ENOENT || err == ESRCH)   ? grpc::StatusCode::NOT_FOUND
                        : (err == EPERM || err == EACCES) ? grpc::StatusCode::PERMISSION_DENIED
                                                          : grpc::StatusCode::UNAVAILABLE;
      return grpc::Status(code, std::string(netns.error().source()) + ": " + netns.error().message);
    }
    // Judge the rules now; pod and ZDS state come from the latest node scan, which has CRI and ZDS.
    NetnsClassification classification = Classify(*netns);
    NodeAnalysis node_analysis;
    if (const auto latest = hub->Latest()) {
      node_analysis = latest->step.analysis;
      for (const NetnsClassification& c : latest->step.analysis.netns) {
        if (c.netns_inode != netns->netns.inode) continue;
        classification.pod = c.pod;
        classification.pod_uid = c.pod_uid;
        classification.zds_state = c.zds_state;
        classification.ztunnel_listeners = c.ztunnel_listeners;
        classification.ztunnel_pids = c.ztunnel_pids;
      }
    }
    *reply = BuildNetnsRules(*netns, classification, node_analysis);
    return grpc::Status::OK;
  }

  // Writes one event; false when the client is gone or the watchdog dropped the stream.
  bool Send(Stream& stream, grpc::ServerWriter<pb::FindingEvent>* writer,
            const pb::FindingEvent& event) {
    stream.write_started_ms = SteadyMs();
    const bool ok = writer->Write(event);
    stream.write_started_ms = 0;
    return ok && !stream.dropped.load();
  }

  grpc::Status EndedStream(const Stream& stream, grpc::ServerContext* context) const {
    if (stream.dropped.load()) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "stream dropped: the client did not read its events");
    }
    if (stopping.load()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
    }
    if (DeadlinePassed(context)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "stream deadline reached");
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled");
  }

  grpc::Status WatchFindings(grpc::ServerContext* context, const pb::WatchFindingsRequest*,
                             grpc::ServerWriter<pb::FindingEvent>* writer) override {
    StreamSlot slot(*this, context);
    if (!slot.acquired()) return TooManyStreams();
    Stream& stream = slot.stream();

    // The current set, from the latest result.
    std::map<std::string, pb::Finding> open;  // by FindingIdentity
    uint64_t sequence = 0;
    double taken_at = 0;
    std::vector<pb::Finding> current;
    if (const auto latest = hub->Latest()) {
      sequence = latest->sequence;
      const EngineStep& step = latest->step;
      taken_at = static_cast<double>(step.snapshot.taken_at_unix_ms);
      const bool with_records = step.finding_records.size() == step.analysis.findings.size();
      for (size_t i = 0; i < step.analysis.findings.size(); ++i) {
        const Finding& f = step.analysis.findings[i];
        current.push_back(with_records ? BuildFinding(step.finding_records[i]) : BuildFinding(f));
        open[FindingIdentity(f)] = current.back();
      }
    }
    stream.delivered = sequence;
    for (size_t i = 0; i < current.size() || (i == 0 && current.empty()); ++i) {
      pb::FindingEvent event;
      event.set_kind(pb::FindingEvent::KIND_CURRENT);
      if (!current.empty()) *event.mutable_finding() = current[i];
      event.set_sequence(sequence);
      event.set_taken_at_unix_ms(taken_at);
      event.set_end_of_current(i + 1 >= current.size());
      if (!Send(stream, writer, event)) return EndedStream(stream, context);
    }

    while (true) {
      if (context->IsCancelled() || stopping.load()) return EndedStream(stream, context);
      ResultHub::Since since = hub->WaitSince(sequence, options.stream_poll);
      if (since.stopped) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
      if (since.gap) {
        if (!stream.dropped.exchange(true)) streams_dropped++;
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "stream fell behind the result ring after sequence " +
                                std::to_string(sequence) + "; reconnect for the current set");
      }
      for (const auto& result : since.results) {
        for (const pb::FindingEvent& event : EventsOf(*result, open)) {
          if (!Send(stream, writer, event)) return EndedStream(stream, context);
        }
        sequence = result->sequence;
        stream.delivered = sequence;
      }
    }
  }

  // Opened, updated and resolved events of one result; `open` follows along.
  static std::vector<pb::FindingEvent> EventsOf(const PublishedResult& result,
                                                std::map<std::string, pb::Finding>& open) {
    std::vector<pb::FindingEvent> events;
    const EngineStep& step = result.step;
    auto add = [&](pb::FindingEvent::Kind kind, pb::Finding finding) {
      pb::FindingEvent& event = events.emplace_back();
      event.set_kind(kind);
      *event.mutable_finding() = std::move(finding);
      event.set_sequence(result.sequence);
      event.set_taken_at_unix_ms(static_cast<double>(step.snapshot.taken_at_unix_ms));
    };
    std::set<std::string> changed;
    for (const FindingChange& change : step.changes) {
      const std::string id = FindingIdentity(change.finding);
      changed.insert(id);
      if (change.kind == FindingChange::Kind::kResolved) {
        pb::Finding finding = BuildFinding(change.finding);
        if (auto it = open.find(id); it != open.end()) {
          finding = it->second;
          open.erase(it);
        }
        finding.set_resolved_at_unix_ms(static_cast<double>(step.snapshot.taken_at_unix_ms));
        add(pb::FindingEvent::KIND_RESOLVED, std::move(finding));
      }
    }
    if (!step.usable) return events;
    const bool with_records = step.finding_records.size() == step.analysis.findings.size();
    for (size_t i = 0; i < step.analysis.findings.size(); ++i) {
      const Finding& f = step.analysis.findings[i];
      const std::string id = FindingIdentity(f);
      pb::Finding finding = with_records ? BuildFinding(step.finding_records[i]) : BuildFinding(f);
      auto it = open.find(id);
      if (it == open.end()) {
        open[id] = finding;
        add(pb::FindingEvent::KIND_OPENED, std::move(finding));
        continue;
      }
      const pb::Finding& before = it->second;
      const bool updated = before.severity() != finding.severity() ||
                           before.summary() != finding.summary() || before.pod() != finding.pod() ||
                           !std::equal(before.evidence().begin(), before.evidence().end(),
                                       finding.evidence().begin(), finding.evidence().end());
      it->second = finding;
      if (updated && !changed.contains(id)) {
        add(pb::FindingEvent::KIND_UPDATED, std::move(finding));
      }
    }
    return events;
  }

  // Netns inode -> (pod, path) from the latest scan, for naming flows.
  std::map<uint32_t, std::pair<std::string, std::string>> NetnsNames() const {
    std::map<uint32_t, std::pair<std::string, std::string>> names;
    if (const auto latest = hub->Latest()) {
      for (const NetnsClassification& netns : latest->step.analysis.netns) {
        names[static_cast<uint32_t>(netns.netns_inode)] = {netns.pod, netns.netns_path};
      }
    }
    return names;
  }

  static pb::Flow BuildFlow(const Flow& flow, std::string_view event,
                            const std::map<uint32_t, std::pair<std::string, std::string>>& names) {
    pb::Flow out;
    out.set_socket_cookie(flow.cookie_known ? flow.flow_id : 0);
    out.set_netns_inode(flow.netns_inode);
    pb::FiveTuple* tuple = out.mutable_tuple();
    tuple->set_protocol("tcp");
    tuple->set_src_ip(flow.tuple.src.ToString());
    tuple->set_src_port(flow.tuple.src_port);
    tuple->set_dst_ip(flow.tuple.dst.ToString());
    tuple->set_dst_port(flow.tuple.dst_port);
    out.set_role(std::string(FlowRoleName(flow.role)));
    out.set_mark(flow.mark);
    out.set_started_unix_ms(static_cast<double>(flow.started_unix_ns) / 1e6);
    out.set_ended_unix_ms(static_cast<double>(flow.ended_unix_ns) / 1e6);
    out.set_bytes_sent(flow.bytes_sent);
    out.set_bytes_received(flow.bytes_received);
    out.set_srtt_us(flow.srtt_us);
    out.set_retransmits(flow.retransmits);
    out.set_resets(flow.resets());
    out.set_outcome(std::string(FlowOutcomeName(flow.outcome)));
    out.set_event(std::string(event));
    out.set_live(flow.live);
    if (auto it = names.find(flow.netns_inode); it != names.end()) {
      out.set_pod(it->second.first);
      out.set_netns_path(it->second.second);
    }
    if (auto latency = flow.ConnectLatencyUs()) {
      out.set_connect_latency_us(static_cast<double>(*latency));
    }
    return out;
  }

  bool SendFlow(Stream& stream, grpc::ServerWriter<pb::Flow>* writer, const pb::Flow& flow) {
    stream.write_started_ms = SteadyMs();
    const bool ok = writer->Write(flow);
    stream.write_started_ms = 0;
    return ok && !stream.dropped.load();
  }

  grpc::Status StreamFlows(grpc::ServerContext* context, const pb::StreamFlowsRequest* request,
                           grpc::ServerWriter<pb::Flow>* writer) override {
    if (!flows) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this server has no flow tracer");
    }
    const FlowTracerStatus tracer = flows->status();
    if (!tracer.available) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          tracer.enabled ? "the flow tracer is not running: " + tracer.reason
                                         : "flow tracing is disabled (serve --no-flows)");
    }
    StreamSlot slot(*this, context);
    if (!slot.acquired()) return TooManyStreams();
    Stream& stream = slot.stream();
    stream.flows = true;
    const uint32_t only_netns = request->netns_inode();
    auto wanted = [only_netns](const Flow& flow) {
      return only_netns == 0 || flow.netns_inode == only_netns;
    };

    FlowHub::Current current = flows->Latest();
    uint64_t sequence = current.sequence;
    stream.delivered = sequence;
    auto names = NetnsNames();
    std::vector<const Flow*> open;
    for (const Flow& flow : current.view->open) {
      if (wanted(flow)) open.push_back(&flow);
    }
    for (size_t i = 0; i < open.size() || (i == 0 && open.empty()); ++i) {
      pb::Flow message;
      if (!open.empty()) message = BuildFlow(*open[i], "current", names);
      message.set_end_of_current(i + 1 >= open.size());
      if (!SendFlow(stream, writer, message)) return EndedStream(stream, context);
    }
    current = {};  // the view is not needed any more

    while (true) {
      if (context->IsCancelled() || stopping.load()) return EndedStream(stream, context);
      FlowHub::Since since = flows->WaitSince(sequence, options.stream_poll);
      if (since.stopped) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
      if (since.gap) {
        if (!stream.dropped.exchange(true)) streams_dropped++;
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "stream fell behind the flow event ring after event " +
                                std::to_string(sequence) + "; reconnect for the open flows");
      }
      if (since.events.empty()) continue;
      names = NetnsNames();
      for (const FlowEvent& event : since.events) {
        if (!wanted(event.flow)) continue;
        const pb::Flow message = BuildFlow(event.flow, FlowEventKindName(event.kind), names);
        if (!SendFlow(stream, writer, message)) return EndedStream(stream, context);
      }
      sequence = since.last_sequence;
      stream.delivered = sequence;
    }
  }
};

Result<std::unique_ptr<ApiServer>> ApiServer::Start(ApiServerOptions options,
                                                    std::shared_ptr<const ResultHub> hub,
                                                    NetnsReader netns_reader,
                                                    std::shared_ptr<const FlowHub> flows,
                                                    PodLocator pod_locator) {
  if (!hub) return ApiError("no result hub");
  const bool with_unix = !options.socket_path.empty();
  const bool with_tcp = !options.tcp_address.empty();
  if (!with_unix && !with_tcp) return ApiError("neither a unix socket nor a TCP address to serve");
  // Everything about TCP is checked before the socket path is touched.
  std::optional<HostPort> tcp;
  std::shared_ptr<grpc::ServerCredentials> tls_credentials;
  if (with_tcp) {
    Result<HostPort> parsed = ParseHostPort(options.tcp_address, PortZero::kPickFree);
    if (!parsed) return parsed.error();
    tcp = *parsed;
    if (options.tls.cert_file.empty() && options.tls.key_file.empty()) {
      return ApiError("the API serves TCP only with TLS: give a certificate and a key for " +
                          options.tcp_address,
                      EINVAL);
    }
    // TLS objects exist only here, so a process without a TCP listener never initialises TLS.
    Result<TlsMaterial> material = LoadTlsMaterial(options.tls);
    if (!material) return material.error();
    grpc::SslServerCredentialsOptions ssl(
        material->client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                    : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = material->client_ca;
    ssl.pem_key_cert_pairs.push_back({material->private_key, material->cert_chain});
    tls_credentials = grpc::SslServerCredentials(ssl);
  } else if (!options.tls.cert_file.empty() || !options.tls.key_file.empty() ||
             !options.tls.client_ca_file.empty()) {
    return ApiError("TLS files are for the TCP listener; no TCP address given", EINVAL);
  }
  if (with_unix) {
    if (Status prepared = PrepareSocketPath(options.socket_path); !prepared.ok()) {
      return prepared.error();
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->hub = std::move(hub);
  impl->netns_reader = std::move(netns_reader);
  impl->flows = std::move(flows);
  impl->pod_locator = std::move(pod_locator);

  grpc::EnableDefaultHealthCheckService(false);  // ours: api/health_service.h
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (with_unix) {
    builder.AddListeningPort("unix:" + impl->options.socket_path,
                             grpc::InsecureServerCredentials());
  }
  if (tcp) {
    builder.AddListeningPort(tcp->ToString(), tls_credentials, &impl->tcp_port);
    // gRPC would share a port with another SO_REUSEPORT listener: a port in use is an error.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  }
  // One service, one set of limits for every listener.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(impl->options.handshake_timeout.count()));
  builder.RegisterService(impl.get());
  builder.RegisterService(&impl->health);
  builder.SetMaxReceiveMessageSize(impl->options.max_request_bytes);
  builder.SetMaxSendMessageSize(impl->options.max_response_bytes);
  impl->server = builder.BuildAndStart();
  if (!impl->server) {
    // gRPC may have bound the unix socket before the TCP port failed.
    if (with_unix) ::unlink(impl->options.socket_path.c_str());
    if (tcp) {
      if (Status bindable = ProbeTcpBind(*tcp); !bindable.ok()) {
        return ApiError(
            "cannot listen on " + impl->options.tcp_address + ": " + bindable.error().message,
            bindable.error().error_number);
      }
    }
    std::string where = with_unix ? "unix:" + impl->options.socket_path : "";
    if (tcp) where += (where.empty() ? "" : " and ") + impl->options.tcp_address;
    return ApiError("gRPC could not listen on " + where);
  }
  // The directory is 0700 already; the socket itself is for root only as well.
  if (with_unix && ::chmod(impl->options.socket_path.c_str(), 0600) != 0) {
    const int err = errno;
    impl->server->Shutdown();
    return ErrnoError(SourceKind::kApi, "chmod 0600 " + impl->options.socket_path, err);
  }
  impl->health.SetServing("", true);
  impl->health.SetServing(kServiceName, true);
  Impl* raw = impl.get();
  impl->tracker = std::thread([raw] {
    NameThisThread("ad-api-status");
    raw->RunTracker();
  });
  impl->watchdog = std::thread([raw] {
    NameThisThread("ad-api-watchdog");
    raw->RunWatchdog();
  });
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() { Shutdown(); }

void ApiServer::Shutdown(std::chrono::milliseconds grace) {
  if (!impl_ || impl_->shut_down) return;
  impl_->shut_down = true;
  {
    std::lock_guard lock(impl_->streams_mutex);
    impl_->stopping = true;
  }
  impl_->watchdog_wake.notify_all();
  if (impl_->hub) impl_->hub->Nudge();  // the tracker, when the hub goes on without us
  impl_->health.Shutdown();             // Watch streams send NOT_SERVING and end
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->server->Wait();
  if (impl_->tracker.joinable()) impl_->tracker.join();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
  if (!impl_->options.socket_path.empty()) ::unlink(impl_->options.socket_path.c_str());
}

const std::string& ApiServer::socket_path() const { return impl_->options.socket_path; }

int ApiServer::tcp_port() const { return impl_->tcp_port; }

ApiServerCounters ApiServer::counters() const {
  return ApiServerCounters{impl_->active_streams.load(), impl_->streams_dropped.load(),
                           impl_->streams_refused.load()};
}

}  // namespace ad::api
