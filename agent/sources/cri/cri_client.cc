#include "sources/cri/cri_client.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <cerrno>

namespace ad::cri {
namespace {

constexpr std::string_view kUnixScheme = "unix://";

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN_CODE";
  }
}

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint, int max_receive_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_receive_bytes);
  // A diagnostic probe must fail fast and predictably: no transparent retries.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

const std::vector<std::string>& DefaultCriSocketPaths() {
  static const std::vector<std::string> kPaths = {
      "/run/containerd/containerd.sock",
      "/run/crio/crio.sock",
      "/var/run/cri-dockerd.sock",
      "/run/k3s/containerd/containerd.sock",
      "/var/snap/microk8s/common/run/containerd.sock",
      "/run/k0s/containerd.sock",
  };
  return kPaths;
}

std::string NormalizeUnixEndpoint(const std::string& endpoint) {
  if (endpoint.starts_with(kUnixScheme)) return endpoint;
  if (endpoint.starts_with("unix:/")) return std::string(kUnixScheme) + endpoint.substr(5);
  if (endpoint.starts_with("/")) return std::string(kUnixScheme) + endpoint;
  return {};
}

std::string DescribeStatus(const std::string& call, const grpc::Status& status) {
  std::string text = call + ": " + StatusCodeName(status.error_code());
  if (!status.error_message().empty()) text += ": " + status.error_message();
  return text;
}

namespace {

// A failed call as a typed error: a deadline is ETIMEDOUT, so callers can tell a hung runtime
// from a refusing one without reading the message.
SourceError StatusError(const std::string& call, const grpc::Status& status) {
  std::string text = DescribeStatus(call, status);
  int error_number = EPROTO;
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) error_number = ETIMEDOUT;
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) error_number = ECONNREFUSED;
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) error_number = EACCES;
  return SourceError{SourceKind::kCri, std::move(text), error_number};
}

}  // namespace

CriClient::CriClient(std::string endpoint, std::shared_ptr<grpc::Channel> channel,
                     std::chrono::milliseconds call_timeout)
    : endpoint_(std::move(endpoint)),
      channel_(std::move(channel)),
      stub_(runtime::v1::RuntimeService::NewStub(channel_)),
      call_timeout_(call_timeout) {}

Result<CriClient> CriClient::Connect(const CriClientOptions& options) {
  std::vector<std::string> candidates;
  std::string failures;
  auto note_failure = [&failures](const std::string& what) {
    failures += failures.empty() ? what : "; " + what;
  };
  if (!options.endpoints.empty()) {
    for (const std::string& endpoint : options.endpoints) {
      std::string normalized = NormalizeUnixEndpoint(endpoint);
      if (normalized.empty()) {
        note_failure(endpoint + ": only unix:// endpoints are supported");
      } else {
        candidates.push_back(std::move(normalized));
      }
    }
  } else {
    for (const std::string& path : DefaultCriSocketPaths()) {
      const std::string host_path = options.host_root + path;
      // Probing a missing default would only add noise (and a dial) per absent runtime.
      if (IsSocket(host_path)) candidates.push_back(std::string(kUnixScheme) + host_path);
    }
    if (candidates.empty()) {
      std::string probed;
      for (const std::string& path : DefaultCriSocketPaths()) {
        probed += (probed.empty() ? "" : ", ") + options.host_root + path;
      }
      return SourceError{SourceKind::kCri, "no CRI runtime socket found (probed " + probed + ")"};
    }
  }
  for (const std::string& endpoint : candidates) {
    CriClient client(endpoint, MakeChannel(endpoint, options.max_receive_bytes),
                     options.call_timeout);
    Result<runtime::v1::VersionResponse> version = client.Version();
    if (version.ok()) {
      client.version_ = std::move(version.value());
      return client;
    }
    note_failure(endpoint + ": " + version.error().message);
  }
  return SourceError{SourceKind::kCri, "no CRI runtime answered: " + failures};
}

std::string CriClient::RuntimeDescription() const {
  if (version_.runtime_version().empty()) return version_.runtime_name();
  return version_.runtime_name() + " " + version_.runtime_version();
}

void CriClient::PrepareContext(grpc::ClientContext& context) const {
  auto deadline = std::chrono::system_clock::now() + call_timeout_;
  if (deadline_cap_ && *deadline_cap_ < deadline) deadline = *deadline_cap_;
  context.set_deadline(deadline);
}

Result<runtime::v1::VersionResponse> CriClient::Version() {
  grpc::ClientContext context;
  PrepareContext(context);
  runtime::v1::VersionRequest request;
  request.set_version("v1");
  runtime::v1::VersionResponse response;
  const grpc::Status status = stub_->Version(&context, request, &response);
  if (!status.ok()) return StatusError("Version", status);
  return response;
}

Result<runtime::v1::StatusResponse> CriClient::Status(bool verbose) {
  grpc::ClientContext context;
  PrepareContext(context);
  runtime::v1::StatusRequest request;
  request.set_verbose(verbose);
  runtime::v1::StatusResponse response;
  const grpc::Status status = stub_->Status(&context, request, &response);
  if (!status.ok()) return StatusError("Status", status);
  return response;
}

Result<std::vector<runtime::v1::PodSandbox>> CriClient::ListPodSandbox(bool ready_only) {
  grpc::ClientContext context;
  PrepareContext(context);
  runtime::v1::ListPodSandboxRequest request;
  if (ready_only) {
    request.mutable_filter()->mutable_state()->set_state(runtime::v1::SANDBOX_READY);
  }
  runtime::v1::ListPodSandboxResponse response;
  const grpc::Status status = stub_->ListPodSandbox(&context, request, &response);
  if (!status.ok()) return StatusError("ListPodSandbox", status);
  std::vector<runtime::v1::PodSandbox> items(
      std::make_move_iterator(response.mutable_items()->begin()),
      std::make_move_iterator(response.mutable_items()->end()));
  return items;
}

Result<runtime::v1::PodSandboxStatusResponse> CriClient::PodSandboxStatus(
    const std::string& sandbox_id, bool verbose) {
  grpc::ClientContext context;
  PrepareContext(context);
  runtime::v1::PodSandboxStatusRequest request;
  request.set_pod_sandbox_id(sandbox_id);
  request.set_verbose(verbose);
  runtime::v1::PodSandboxStatusResponse response;
  const grpc::Status status = stub_->PodSandboxStatus(&context, request, &response);
  if (!status.ok()) {
    return StatusError("PodSandboxStatus " + sandbox_id, status);
  }
  return response;
}

}  // namespace ad::cri
