#include "client/api_client.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"

namespace ad::client {
namespace {

SourceError ClientError(const std::string& message, int err) {
  return SourceError{SourceKind::kApi, message, err};
}

// Closes the probe socket on every path.
class ProbeFd {
 public:
  explicit ProbeFd(int fd) : fd_(fd) {}
  ~ProbeFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ProbeFd(const ProbeFd&) = delete;
  ProbeFd& operator=(const ProbeFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The socket file exists, is a socket, and someone accepts on it. A unix connect completes (or is
// refused) at once, so this never waits.
Status ProbeSocket(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return ClientError("no daemon socket at " + path, ENOENT);
    return ClientError("daemon socket " + path + ": " + std::strerror(err), err);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return ClientError(path + " is not a socket", ENOTSOCK);
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return ClientError("daemon socket path " + path + " is too long", ENAMETOOLONG);
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ProbeFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) {
    const int err = errno;
    return ClientError(std::string("socket(AF_UNIX): ") + std::strerror(err), err);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int err = errno;
    if (err == ECONNREFUSED) {
      return ClientError("stale daemon socket " + path + ": nobody listens (connection refused)",
                         ECONNREFUSED);
    }
    if (err == EACCES || err == EPERM) {
      return ClientError("daemon socket " + path + ": permission denied (run as root)", EACCES);
    }
    // EAGAIN: the listen backlog is full; gRPC below will say whether it ever answers.
    if (err != EAGAIN && err != EINPROGRESS) {
      return ClientError("connect " + path + ": " + std::strerror(err), err);
    }
  }
  return OkStatus();
}

int ErrnoOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
      return ENOENT;
    case grpc::StatusCode::PERMISSION_DENIED:
      return EACCES;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return EINVAL;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return ETIMEDOUT;
    case grpc::StatusCode::UNAVAILABLE:
      return EAGAIN;
    default:
      return EPROTO;
  }
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    default:
      return "status " + std::to_string(static_cast<int>(code));
  }
}

SourceError StatusError(const std::string& what, const grpc::Status& status) {
  std::string message = what + ": " + CodeName(status.error_code());
  if (!status.error_message().empty()) message += ": " + status.error_message();
  return ClientError(message, ErrnoOf(status.error_code()));
}

std::chrono::system_clock::time_point After(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace

bool IsAnsweredNo(const SourceError& e) {
  return e.error_number == ENOENT || e.error_number == EACCES || e.error_number == EINVAL;
}

struct ApiClient::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::AmbientDoctor::Stub> stub;

  void Prepare(grpc::ClientContext& context) const {
    context.set_deadline(After(options.call_timeout));
  }
};

Result<std::unique_ptr<ApiClient>> ApiClient::Connect(const ClientOptions& options) {
  if (Status probed = ProbeSocket(options.socket_path); !probed.ok()) return probed.error();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_response_bytes);
  args.SetMaxSendMessageSize(options.max_request_bytes);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // One connection attempt is all a one-shot command wants; no backoff dance inside the deadline.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 60000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 60000);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->channel = grpc::CreateCustomChannel("unix:" + options.socket_path,
                                            grpc::InsecureChannelCredentials(), args);
  const auto deadline = After(options.connect_timeout);
  grpc_connectivity_state state = impl->channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return ClientError("daemon socket " + options.socket_path +
                             ": the peer does not speak gRPC (the HTTP/2 handshake failed)",
                         EPROTO);
    }
    if (!impl->channel->WaitForStateChange(state, deadline)) {
      return ClientError("daemon socket " + options.socket_path + ": no answer within " +
                             std::to_string(options.connect_timeout.count()) + " ms",
                         ETIMEDOUT);
    }
    state = impl->channel->GetState(/*try_to_connect=*/true);
  }
  impl->stub = pb::AmbientDoctor::NewStub(impl->channel);
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

const std::string& ApiClient::socket_path() const { return impl_->options.socket_path; }

Result<pb::Report> ApiClient::GetReport() {
  grpc::ClientContext context;
  impl_->Prepare(context);
  pb::Report report;
  const grpc::Status status = impl_->stub->GetReport(&context, pb::GetReportRequest(), &report);
  if (!status.ok()) return StatusError("GetReport", status);
  return report;
}

Result<pb::Status> ApiClient::GetStatus() {
  grpc::ClientContext context;
  impl_->Prepare(context);
  pb::Status reply;
  const grpc::Status status = impl_->stub->GetStatus(&context, pb::GetStatusRequest(), &reply);
  if (!status.ok()) return StatusError("GetStatus", status);
  return reply;
}

namespace {
std::chrono::milliseconds PodCallTimeout(const ClientOptions& options) {
  return std::max(options.call_timeout, std::chrono::milliseconds(15000));
}
}  // namespace

Result<pb::PodReport> ApiClient::GetPod(const std::string& namespace_name,
                                        const std::string& name) {
  grpc::ClientContext context;
  // The daemon's GET of a pod elsewhere is bounded by its HTTP limits (10 s to connect).
  context.set_deadline(After(PodCallTimeout(impl_->options)));
  pb::GetPodRequest request;
  request.set_namespace_(namespace_name);
  request.set_name(name);
  pb::PodReport reply;
  const grpc::Status status = impl_->stub->GetPod(&context, request, &reply);
  if (!status.ok()) return StatusError("GetPod", status);
  return reply;
}

Result<std::string> ApiClient::GetCapture(bool redact_ips) {
  grpc::ClientContext context;
  context.set_deadline(After(PodCallTimeout(impl_->options)));
  pb::GetCaptureRequest request;
  request.set_redact_ips(redact_ips);
  pb::CaptureFile reply;
  const grpc::Status status = impl_->stub->GetCapture(&context, request, &reply);
  if (!status.ok()) return StatusError("GetCapture", status);
  return std::move(*reply.mutable_data());
}

Result<pb::NetnsRules> ApiClient::GetNetnsRulesByPath(const std::string& path) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  pb::GetNetnsRulesRequest request;
  request.set_path(path);
  pb::NetnsRules reply;
  const grpc::Status status = impl_->stub->GetNetnsRules(&context, request, &reply);
  if (!status.ok()) return StatusError("GetNetnsRules " + path, status);
  return reply;
}

struct FindingStream::Impl {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<pb::FindingEvent>> reader;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<pb::FindingEvent> events;
  bool ended = false;
  SourceError end_error;

  void Run() {
    pb::FindingEvent event;
    while (reader->Read(&event)) {
      std::lock_guard lock(mutex);
      events.push_back(std::move(event));
      ready.notify_one();
    }
    const grpc::Status status = reader->Finish();
    std::lock_guard lock(mutex);
    end_error = status.ok() ? ClientError("WatchFindings: the daemon ended the stream", EPIPE)
                            : StatusError("WatchFindings", status);
    ended = true;
    ready.notify_one();
  }
};

Result<std::unique_ptr<FindingStream>> ApiClient::WatchFindings() {
  auto impl = std::make_unique<FindingStream::Impl>();
  impl->reader = impl_->stub->WatchFindings(&impl->context, pb::WatchFindingsRequest());
  FindingStream::Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  auto stream = std::make_unique<FindingStream>(std::move(impl));
  {
    std::unique_lock lock(raw->mutex);
    const bool answered = raw->ready.wait_for(lock, impl_->options.call_timeout,
                                              [raw] { return !raw->events.empty() || raw->ended; });
    if (!answered) {
      return ClientError("WatchFindings: no first event within " +
                             std::to_string(impl_->options.call_timeout.count()) + " ms",
                         ETIMEDOUT);
    }
    if (raw->events.empty()) return raw->end_error;
  }
  return stream;
}

struct FlowStream::Impl {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<pb::Flow>> reader;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<pb::Flow> flows;
  bool ended = false;
  SourceError end_error;

  void Run() {
    pb::Flow flow;
    bool overflow = false;
    while (reader->Read(&flow)) {
      std::lock_guard lock(mutex);
      if (flows.size() >= FlowStream::kMaxBuffered) {
        overflow = true;
        context.TryCancel();
        break;
      }
      flows.push_back(std::move(flow));
      ready.notify_one();
    }
    const grpc::Status status = reader->Finish();
    std::lock_guard lock(mutex);
    if (overflow) {
      end_error = ClientError("StreamFlows: more than " + std::to_string(kMaxBuffered) +
                                  " flows waiting unread; stream ended",
                              ENOBUFS);
    } else {
      end_error = status.ok() ? ClientError("StreamFlows: the daemon ended the stream", EPIPE)
                              : StatusError("StreamFlows", status);
    }
    ended = true;
    ready.notify_one();
  }
};

Result<std::unique_ptr<FlowStream>> ApiClient::StreamFlows(uint32_t netns_inode) {
  auto impl = std::make_unique<FlowStream::Impl>();
  pb::StreamFlowsRequest request;
  request.set_netns_inode(netns_inode);
  impl->reader = impl_->stub->StreamFlows(&impl->context, request);
  FlowStream::Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  auto stream = std::make_unique<FlowStream>(std::move(impl));
  {
    std::unique_lock lock(raw->mutex);
    const bool answered = raw->ready.wait_for(lock, impl_->options.call_timeout,
                                              [raw] { return !raw->flows.empty() || raw->ended; });
    if (!answered) {
      return ClientError("StreamFlows: no first message within " +
                             std::to_string(impl_->options.call_timeout.count()) + " ms",
                         ETIMEDOUT);
    }
    if (raw->flows.empty()) return raw->end_error;
  }
  return stream;
}

FlowStream::FlowStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FlowStream::~FlowStream() {
  impl_->context.TryCancel();
  if (impl_->thread.joinable()) impl_->thread.join();
}

FlowStream::Read FlowStream::Next(pb::Flow* flow, std::chrono::milliseconds wait) {
  std::unique_lock lock(impl_->mutex);
  impl_->ready.wait_for(lock, wait, [this] { return !impl_->flows.empty() || impl_->ended; });
  if (!impl_->flows.empty()) {
    *flow = std::move(impl_->flows.front());
    impl_->flows.pop_front();
    return Read::kFlow;
  }
  return impl_->ended ? Read::kEnded : Read::kIdle;
}

const SourceError& FlowStream::end_error() const { return impl_->end_error; }

FindingStream::FindingStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FindingStream::~FindingStream() {
  impl_->context.TryCancel();
  if (impl_->thread.joinable()) impl_->thread.join();
}

FindingStream::Read FindingStream::Next(pb::FindingEvent* event, std::chrono::milliseconds wait) {
  std::unique_lock lock(impl_->mutex);
  impl_->ready.wait_for(lock, wait, [this] { return !impl_->events.empty() || impl_->ended; });
  if (!impl_->events.empty()) {
    *event = std::move(impl_->events.front());
    impl_->events.pop_front();
    return Read::kEvent;
  }
  return impl_->ended ? Read::kEnded : Read::kIdle;
}

const SourceError& FindingStream::end_error() const { return impl_->end_error; }

}  // namespace ad::client
