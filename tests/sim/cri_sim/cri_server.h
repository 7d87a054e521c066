// cri-sim: a small CRI runtime for the lab node, so reports can name its pods without a real
// containerd. Serves runtime.v1.RuntimeService on a unix socket: Version, ListPodSandbox (READY
// sandboxes, honouring the id, state and label filters) and PodSandboxStatus (typed status plus,
// when verbose, a containerd-1.6-shaped "info" JSON carrying the netns path). Every other RPC
// answers UNIMPLEMENTED. Pods come from the lab's pods file (the one cni-sim reads), re-read on
// every request so the runtime follows the lab; pod IPs from an optional separate file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cri/runtime_v1.grpc.pb.h"
#include "model/result.h"

namespace ad::sim {

struct CriSimOptions {
  std::string socket_path;  // listened on as unix://<socket_path>; a stale file is unlinked
  std::string pods_file;    // `uid name namespace service-account netns-path` lines
  std::string ips_file;     // optional: `uid ipv4 [ipv6]` lines; missing pods have no IP
  bool log_to_stderr = true;
};

// One sandbox as cri-sim reports it.
struct CriSimSandbox {
  std::string id;  // "crisim-" + uid
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string netns_path;
  std::vector<std::string> ips;  // ipv4 first, then ipv6 (may be empty)
};

// The sandboxes the files describe now. A missing or unreadable pods file is an error; a missing
// ips file only leaves the IPs empty.
Result<std::vector<CriSimSandbox>> LoadCriSimSandboxes(const CriSimOptions& options);

// containerd 1.6's verbose `info` JSON, reduced to what ambient-doctor reads.
std::string CriSimInfoJson(const CriSimSandbox& sandbox);

class CriSimService final : public runtime::v1::RuntimeService::Service {
 public:
  // created_at_ns: the creation time of the sandboxes the pods file lists at start (the
  // server's start); a sandbox that appears later was created when cri-sim first saw it.
  CriSimService(CriSimOptions options, int64_t created_at_ns)
      : options_(std::move(options)), created_at_ns_(created_at_ns) {}
  void SeedKnownSandboxes();

  grpc::Status Version(grpc::ServerContext* context, const runtime::v1::VersionRequest* request,
                       runtime::v1::VersionResponse* response) override;
  grpc::Status ListPodSandbox(grpc::ServerContext* context,
                              const runtime::v1::ListPodSandboxRequest* request,
                              runtime::v1::ListPodSandboxResponse* response) override;
  grpc::Status PodSandboxStatus(grpc::ServerContext* context,
                                const runtime::v1::PodSandboxStatusRequest* request,
                                runtime::v1::PodSandboxStatusResponse* response) override;

 private:
  int64_t CreatedAt(const std::string& uid);

  CriSimOptions options_;
  int64_t created_at_ns_ = 0;
  std::mutex mutex_;
  std::map<std::string, int64_t> created_at_by_uid_;  // guarded by mutex_
};

// The running server; stopping (destructor or Shutdown) removes the socket file.
class CriSimServer {
  struct Token {
    explicit Token() = default;
  };

 public:
  static Result<std::unique_ptr<CriSimServer>> Start(const CriSimOptions& options);
  ~CriSimServer();
  CriSimServer(const CriSimServer&) = delete;
  CriSimServer& operator=(const CriSimServer&) = delete;

  explicit CriSimServer(Token, const CriSimOptions& options);  // use Start()

  void Shutdown();
  const std::string& endpoint() const { return endpoint_; }  // "unix:///run/.../cri.sock"

 private:
  std::unique_ptr<CriSimService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
  std::string endpoint_;
};

}  // namespace ad::sim
