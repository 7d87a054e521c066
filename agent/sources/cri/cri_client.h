// Read-only CRI client (runtime.v1 over gRPC on a unix socket): Version, Status, ListPodSandbox
// and PodSandboxStatus. Every call has a deadline and the receive size is bounded, so a hung or
// hostile runtime costs at most one deadline per call, never a hang or an unbounded allocation.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cri/runtime_v1.grpc.pb.h"
#include "model/result.h"

namespace ad::cri {

// Where runtimes put their CRI socket, in probe order (crictl's list, then distro variants).
const std::vector<std::string>& DefaultCriSocketPaths();

struct CriClientOptions {
  // "unix:///run/x.sock", "unix:/run/x.sock" or "/run/x.sock", tried in order as given. Empty:
  // probe DefaultCriSocketPaths() under host_root, skipping paths that are not sockets.
  std::vector<std::string> endpoints;
  std::string host_root;  // e.g. "/host" when the node's / is mounted there (defaults only)
  std::chrono::milliseconds call_timeout{2000};
  int max_receive_bytes = 16 << 20;
};

class CriClient {
 public:
  // Connects to the first endpoint whose Version call succeeds. The error lists every endpoint
  // tried and why it failed.
  static Result<CriClient> Connect(const CriClientOptions& options);

  const std::string& endpoint() const { return endpoint_; }  // "unix:///run/containerd/..."
  const runtime::v1::VersionResponse& version() const { return version_; }
  std::string RuntimeDescription() const;  // "containerd 1.6.20~ds1"

  // No call may end later than this (an overall budget across many calls); unset = none.
  void set_deadline_cap(std::chrono::system_clock::time_point cap) { deadline_cap_ = cap; }

  Result<runtime::v1::VersionResponse> Version();
  // The runtime's conditions; verbose adds its `info` map (containerd: CRI and CNI config).
  Result<runtime::v1::StatusResponse> Status(bool verbose);
  Result<std::vector<runtime::v1::PodSandbox>> ListPodSandbox(bool ready_only);
  Result<runtime::v1::PodSandboxStatusResponse> PodSandboxStatus(const std::string& sandbox_id,
                                                                 bool verbose);

  // The underlying channel (tests drive sandboxes through their own stub on it).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  CriClient(std::string endpoint, std::shared_ptr<grpc::Channel> channel,
            std::chrono::milliseconds call_timeout);
  void PrepareContext(grpc::ClientContext& context) const;

  std::string endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<runtime::v1::RuntimeService::Stub> stub_;
  std::chrono::milliseconds call_timeout_;
  std::optional<std::chrono::system_clock::time_point> deadline_cap_;
  runtime::v1::VersionResponse version_;
};

// "unix:///run/x.sock" for any accepted spelling; empty when the scheme is not unix.
std::string NormalizeUnixEndpoint(const std::string& endpoint);

// "ListPodSandbox: DEADLINE_EXCEEDED: Deadline Exceeded"
std::string DescribeStatus(const std::string& call, const grpc::Status& status);

}  // namespace ad::cri
