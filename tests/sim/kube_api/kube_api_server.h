// kube-api-sim: a small kube-apiserver emulator for tests, faithful on the wire for what a
// read-only node agent uses (kubernetes-and-enrollment facts §3-4):
// - HTTPS (HTTP/1.1) with a test certificate and one accepted bearer token;
// - core/v1 pods (fieldSelector spec.nodeName=, metadata.name=), namespaces and nodes: LIST with
//   limit/continue paging and resourceVersion, GET of one namespace or node;
// - streamed WATCH (chunked, one JSON event per line): ADDED/MODIFIED/DELETED, BOOKMARK with
//   allowWatchBookmarks, ERROR with a 410 Expired Status when the version was compacted away;
// - watch-list (sendInitialEvents=true) answered 422 Invalid unless enabled;
// - Status bodies for 401, 403 and 429 (with Retry-After), a hung mode and a garbage mode.
// Tests change objects through Upsert/Delete and read every request received (Requests()), e.g.
// to prove a client sent nothing but GET.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ad::kube_sim {

enum class Resource { kPods, kNamespaces, kNodes };

struct KubeApiServerOptions {
  std::string cert_file;  // server certificate chain (PEM)
  std::string key_file;   // its key (PEM)
  std::string token;      // the one bearer token accepted (SetToken changes it)
  // When set, a client certificate signed by this CA authenticates too (x509 client auth).
  std::string client_ca_file;
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  // How often an idle watch with allowWatchBookmarks gets a BOOKMARK (the apiserver: ~60 s).
  std::chrono::milliseconds bookmark_interval{60000};
  bool watch_list = false;  // serve sendInitialEvents=true; false: 422 as a server without it
};

struct RequestRecord {
  std::string method;
  std::string target;  // path and query, as sent
  int status = 0;      // the HTTP status answered (0: none, e.g. hung)
};

class KubeApiServer {
 public:
  // Listens and serves on background threads; nullptr and `error` on failure.
  static std::unique_ptr<KubeApiServer> Start(const KubeApiServerOptions& options,
                                              std::string* error);
  ~KubeApiServer();
  KubeApiServer(const KubeApiServer&) = delete;
  KubeApiServer& operator=(const KubeApiServer&) = delete;

  uint16_t port() const;
  std::string url() const;  // https://127.0.0.1:PORT

  // Creates or replaces an object from its v1 JSON (metadata.name, and metadata.namespace for a
  // pod, are required; uid and creationTimestamp are filled in when absent). The server sets
  // metadata.resourceVersion. Returns the new resourceVersion, or "" on a malformed object.
  std::string Upsert(Resource resource, std::string_view json);
  // Deletes an object (namespace "" for namespaces and nodes); false when it does not exist.
  bool Delete(Resource resource, std::string_view namespace_name, std::string_view name);
  std::string ResourceVersion() const;  // the newest version handed out

  // Forgets history up to now: a WATCH or LIST from an older version gets 410 Expired.
  void Compact();
  void SetToken(std::string token);
  void SetForbidden(Resource resource, bool forbidden);  // 403 for that resource
  void Throttle(int requests, int retry_after_seconds);  // the next N requests get 429
  void SetHang(bool hang);           // new requests get no answer; the connection stays open
  void SetStallWatches(bool stall);  // open watches send nothing (no events, no bookmarks)
  void SetGarbage(bool garbage);     // 200 answers whose body is not JSON
  // Cuts every open watch mid-stream (no final chunk), as a dropped connection or a restarted
  // apiserver does; a watch's own timeoutSeconds ends it cleanly instead.
  void DropWatches();
  void Stop();  // closes every connection; idempotent

  std::vector<RequestRecord> Requests() const;
  void ClearRequests();
  int OpenWatches() const;

  struct State;

 private:
  explicit KubeApiServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ad::kube_sim
