#include "cri_sim/cri_server.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cni_sim/cni_server.h"
#include "model/json.h"

namespace ad::sim {
namespace {

constexpr SourceKind kSource = SourceKind::kLab;
constexpr char kSandboxIdPrefix[] = "crisim-";

// containerd's pod labels, so label selectors behave like they do against a real runtime.
std::map<std::string, std::string> SandboxLabels(const CriSimSandbox& sandbox) {
  return {{"io.kubernetes.pod.name", sandbox.name},
          {"io.kubernetes.pod.namespace", sandbox.namespace_name},
          {"io.kubernetes.pod.uid", sandbox.uid}};
}

// uid -> IPs from `uid ipv4 [ipv6]` lines; '#' comments and blank lines skipped.
std::map<std::string, std::vector<std::string>> ReadIpsFile(const std::string& path) {
  std::map<std::string, std::vector<std::string>> ips;
  if (path.empty()) return ips;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string uid;
    if (!(fields >> uid)) continue;
    std::vector<std::string>& out = ips[uid];
    for (std::string ip; fields >> ip;) out.push_back(ip);
  }
  return ips;
}

void Log(const CriSimOptions& options, const std::string& message) {
  if (options.log_to_stderr) std::cerr << "cri-sim: " << message << "\n";
}

grpc::Status Unavailable(const SourceError& error) {
  return {grpc::StatusCode::UNAVAILABLE, "pods file: " + error.message};
}

}  // namespace

Result<std::vector<CriSimSandbox>> LoadCriSimSandboxes(const CriSimOptions& options) {
  Result<std::vector<CniPod>> pods = ReadPodsFile(options.pods_file);
  if (!pods.ok()) return pods.error();
  const std::map<std::string, std::vector<std::string>> ips = ReadIpsFile(options.ips_file);
  std::vector<CriSimSandbox> sandboxes;
  sandboxes.reserve(pods->size());
  for (const CniPod& pod : *pods) {
    CriSimSandbox sandbox;
    sandbox.id = kSandboxIdPrefix + pod.uid;
    sandbox.uid = pod.uid;
    sandbox.name = pod.name;
    sandbox.namespace_name = pod.namespace_name;
    sandbox.netns_path = pod.netns_path;
    if (auto found = ips.find(pod.uid); found != ips.end()) sandbox.ips = found->second;
    sandboxes.push_back(std::move(sandbox));
  }
  return sandboxes;
}

std::string CriSimInfoJson(const CriSimSandbox& sandbox) {
  JsonWriter j(false);
  j.BeginObject();
  // The lab's pods have no pause process; pid 0 means "unknown" to the agent, which then relies
  // on the netns path (as containerd 1.6 reports it for pinned sandboxes).
  j.Field("pid", 0);
  j.Field("runtimeType", "io.containerd.runc.v2");
  j.Key("runtimeSpec").BeginObject();
  j.Key("linux").BeginObject();
  j.Key("namespaces").BeginArray();
  j.BeginObject().Field("type", "pid").EndObject();
  j.BeginObject().Field("type", "ipc").EndObject();
  j.BeginObject().Field("type", "uts").EndObject();
  j.BeginObject().Field("type", "mount").EndObject();
  j.BeginObject().Field("type", "network").Field("path", sandbox.netns_path).EndObject();
  j.EndArray();
  j.EndObject();
  j.EndObject();
  j.EndObject();
  return j.str();
}

void CriSimService::SeedKnownSandboxes() {
  Result<std::vector<CriSimSandbox>> sandboxes = LoadCriSimSandboxes(options_);
  if (!sandboxes.ok()) return;
  std::lock_guard lock(mutex_);
  for (const CriSimSandbox& sandbox : *sandboxes) created_at_by_uid_[sandbox.uid] = created_at_ns_;
}

int64_t CriSimService::CreatedAt(const std::string& uid) {
  std::lock_guard lock(mutex_);
  auto [it, added] = created_at_by_uid_.try_emplace(uid, 0);
  if (added) {
    it->second = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  }
  return it->second;
}

grpc::Status CriSimService::Version(grpc::ServerContext*, const runtime::v1::VersionRequest*,
                                    runtime::v1::VersionResponse* response) {
  response->set_version("0.1.0");
  response->set_runtime_name("cri-sim");
  response->set_runtime_version("0.1.0");
  response->set_runtime_api_version("v1");
  return grpc::Status::OK;
}

grpc::Status CriSimService::ListPodSandbox(grpc::ServerContext*,
                                           const runtime::v1::ListPodSandboxRequest* request,
                                           runtime::v1::ListPodSandboxResponse* response) {
  Result<std::vector<CriSimSandbox>> sandboxes = LoadCriSimSandboxes(options_);
  if (!sandboxes.ok()) {
    Log(options_, "ListPodSandbox: " + sandboxes.error().message);
    return Unavailable(sandboxes.error());
  }
  const runtime::v1::PodSandboxFilter& filter = request->filter();
  // Every sandbox cri-sim knows is READY: asking for NOTREADY ones yields nothing.
  if (filter.has_state() && filter.state().state() != runtime::v1::SANDBOX_READY) {
    return grpc::Status::OK;
  }
  for (const CriSimSandbox& sandbox : *sandboxes) {
    if (!filter.id().empty() && filter.id() != sandbox.id) continue;
    const std::map<std::string, std::string> labels = SandboxLabels(sandbox);
    bool selected = true;
    for (const auto& [key, value] : filter.label_selector()) {
      auto found = labels.find(key);
      selected = selected && found != labels.end() && found->second == value;
    }
    if (!selected) continue;
    runtime::v1::PodSandbox* item = response->add_items();
    item->set_id(sandbox.id);
    item->set_state(runtime::v1::SANDBOX_READY);
    item->set_created_at(CreatedAt(sandbox.uid));
    item->mutable_metadata()->set_name(sandbox.name);
    item->mutable_metadata()->set_uid(sandbox.uid);
    item->mutable_metadata()->set_namespace_(sandbox.namespace_name);
    item->mutable_labels()->insert(labels.begin(), labels.end());
  }
  return grpc::Status::OK;
}

grpc::Status CriSimService::PodSandboxStatus(grpc::ServerContext*,
                                             const runtime::v1::PodSandboxStatusRequest* request,
                                             runtime::v1::PodSandboxStatusResponse* response) {
  Result<std::vector<CriSimSandbox>> sandboxes = LoadCriSimSandboxes(options_);
  if (!sandboxes.ok()) {
    Log(options_, "PodSandboxStatus: " + sandboxes.error().message);
    return Unavailable(sandboxes.error());
  }
  for (const CriSimSandbox& sandbox : *sandboxes) {
    if (sandbox.id != request->pod_sandbox_id()) continue;
    runtime::v1::PodSandboxStatus* status = response->mutable_status();
    status->set_id(sandbox.id);
    status->set_state(runtime::v1::SANDBOX_READY);
    status->set_created_at(CreatedAt(sandbox.uid));
    status->mutable_metadata()->set_name(sandbox.name);
    status->mutable_metadata()->set_uid(sandbox.uid);
    status->mutable_metadata()->set_namespace_(sandbox.namespace_name);
    if (!sandbox.ips.empty()) status->mutable_network()->set_ip(sandbox.ips.front());
    for (size_t i = 1; i < sandbox.ips.size(); ++i) {
      status->mutable_network()->add_additional_ips()->set_ip(sandbox.ips[i]);
    }
    status->mutable_linux()->mutable_namespaces()->mutable_options()->set_network(runtime::v1::POD);
    const std::map<std::string, std::string> labels = SandboxLabels(sandbox);
    status->mutable_labels()->insert(labels.begin(), labels.end());
    if (request->verbose()) (*response->mutable_info())["info"] = CriSimInfoJson(sandbox);
    response->set_timestamp(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
    return grpc::Status::OK;
  }
  return {grpc::StatusCode::NOT_FOUND,
          "an error occurred when try to find sandbox: not found: " + request->pod_sandbox_id()};
}

CriSimServer::CriSimServer(Token, const CriSimOptions& options)
    : service_(std::make_unique<CriSimService>(
          options, std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count())),
      socket_path_(options.socket_path),
      endpoint_("unix://" + options.socket_path) {}

Result<std::unique_ptr<CriSimServer>> CriSimServer::Start(const CriSimOptions& options) {
  if (options.socket_path.empty()) return SourceError{kSource, "no socket path", EINVAL};
  if (options.pods_file.empty()) return SourceError{kSource, "no pods file", EINVAL};
  if (::unlink(options.socket_path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(kSource, "unlink " + options.socket_path);
  }
  auto server = std::make_unique<CriSimServer>(Token{}, options);
  server->service_->SeedKnownSandboxes();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(server->endpoint_, grpc::InsecureServerCredentials());
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    return SourceError{kSource, "cannot listen on " + server->endpoint_, EADDRINUSE};
  }
  Log(options, "serving runtime.v1.RuntimeService on " + server->endpoint_ + ", pods from " +
                   options.pods_file);
  return server;
}

void CriSimServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  ::unlink(socket_path_.c_str());
}

CriSimServer::~CriSimServer() { Shutdown(); }

}  // namespace ad::sim
