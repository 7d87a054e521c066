// The Kubernetes API as a read-only source: this node's pods (fieldSelector spec.nodeName), the
// namespaces and the node itself, each mirrored the way client-go's reflector does it — a paged
// LIST, then a WATCH from the list's resourceVersion with bookmarks, a relist when the version
// expired (410, as an ERROR event or an HTTP status), a re-watch when the server ends the stream,
// backoff with jitter on failures and Retry-After on 429. One thread per collection, GET only.
//
// Failures are data: Snapshot().status says which collection fails and why (no credentials,
// 401, 403, unreachable, hung, garbage, ...); the last good data stays in the snapshot but
// status.healthy() is false until every collection is synced and answering again, so a consumer
// judges desired state only from trustworthy data. It recovers by itself.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/kube.h"
#include "sources/kube/kube_config.h"
#include "sources/kube/kube_decode.h"
#include "sources/kube/kube_http.h"

namespace ad::kube {

// What the engine needs of any Kubernetes state source (the API, or a fake in tests).
class KubeStateSource {
 public:
  virtual ~KubeStateSource() = default;
  virtual void Start() = 0;
  virtual void Stop() = 0;  // idempotent; returns once every thread has ended
  // A consistent copy; thread-safe.
  virtual KubeSnapshot Snapshot() const = 0;
  // Changes when the data or the health changes (not on bookmarks alone); thread-safe.
  virtual uint64_t generation() const = 0;
};

struct KubeApiSourceOptions {
  HttpLimits list_limits{std::chrono::milliseconds(10000), std::chrono::milliseconds(60000),
                         std::chrono::milliseconds(30000)};
  // Each watch asks the server to end it after a random time in [min, max) (client-go: 5-10 min)
  // so that watches spread out and reconnect through load balancers.
  std::chrono::seconds watch_timeout_min{300};
  std::chrono::seconds watch_timeout_max{600};
  // A watch with bookmarks receives something at least every ~60 s; twice that in silence is
  // a hung server.
  std::chrono::milliseconds watch_idle{150000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds backoff_initial{800};
  std::chrono::milliseconds backoff_max{30000};
  int page_limit = 500;
  // Called (from a source thread, no lock held) after the generation changed: the daemon wakes
  // its engine on it instead of polling.
  std::function<void()> on_change;
};

class KubeApiSource : public KubeStateSource {
 public:
  KubeApiSource(KubeApiConfig config, KubeApiSourceOptions options = {});
  ~KubeApiSource() override;
  KubeApiSource(const KubeApiSource&) = delete;
  KubeApiSource& operator=(const KubeApiSource&) = delete;

  void Start() override;
  void Stop() override;
  KubeSnapshot Snapshot() const override;
  uint64_t generation() const override;

 private:
  struct Collection;
  enum class Outcome { kOk, kEnded, kExpired, kFailed, kStopped };
  struct Attempt {
    Outcome outcome = Outcome::kOk;
    KubeApiReason reason = KubeApiReason::kNone;
    std::string message;
    int retry_after_seconds = -1;
    bool short_empty = false;  // kEnded within a second without a line
    // A watch the server answered with 200 before it failed: the backoff starts over, so cuts
    // far apart never grow into a long wait.
    bool answered = false;
  };

  void Run(Collection& collection);
  Attempt List(KubeHttp& http, Collection& collection, const std::string& list_rv);
  Attempt Watch(KubeHttp& http, Collection& collection);
  Attempt FromHttp(const HttpOutcome& outcome, const std::string& what) const;
  bool ApplyEvent(Collection& collection, std::string_view line, Attempt& attempt);
  void Replace(Collection& collection, std::vector<KubeObject>& items,
               const std::string& resource_version);
  void Update(Collection& collection, const std::function<bool(KubeResourceStatus&)>& change);
  void Changed();  // generation++ (lock held by the caller) and remembers to notify
  void Notify();
  bool Wait(std::chrono::milliseconds delay);  // false when stopping

  KubeApiConfig config_;
  KubeApiSourceOptions options_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Collection>> collections_;
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, KubePod> pods_;
  std::map<std::string, KubeNamespace> namespaces_;
  std::optional<KubeNode> node_;
  KubeApiStatus status_;
  std::atomic<uint64_t> generation_{0};
};

// A source with no API to talk to: it reports `reason` and `message` (e.g. kNoCredentials
// outside a cluster, kDisabled when turned off) and never connects.
class UnavailableKubeSource : public KubeStateSource {
 public:
  UnavailableKubeSource(KubeApiReason reason, std::string message);
  void Start() override {}
  void Stop() override {}
  KubeSnapshot Snapshot() const override { return snapshot_; }
  uint64_t generation() const override { return snapshot_.generation; }

 private:
  KubeSnapshot snapshot_;
};

// A source whose snapshot the caller sets (engine and daemon tests, replaying a recorded view):
// Set() bumps the generation like a change from the API would.
class FixedKubeSource : public KubeStateSource {
 public:
  void Start() override {}
  void Stop() override {}
  KubeSnapshot Snapshot() const override {
    std::lock_guard lock(mu_);
    return snapshot_;
  }
  uint64_t generation() const override {
    std::lock_guard lock(mu_);
    return snapshot_.generation;
  }
  void Set(KubeSnapshot snapshot) {
    std::lock_guard lock(mu_);
    snapshot.generation = snapshot_.generation + 1;
    snapshot_ = std::move(snapshot);
  }

 private:
  mutable std::mutex mu_;
  KubeSnapshot snapshot_;
};

// One pod by namespace and name, wherever it runs (GET /api/v1/namespaces/NS/pods/NAME): for
// "which node is this pod on" when it is not on this one. `pod` is set when found; `not_found`
// on 404; otherwise `reason` and `message` say why there is no answer.
struct PodLookup {
  std::optional<KubePod> pod;
  bool not_found = false;
  KubeApiReason reason = KubeApiReason::kNone;
  std::string message;
};
PodLookup FetchPod(const KubeApiConfig& config, const std::string& namespace_name,
                   const std::string& name, const HttpLimits& limits = {});

// The source for a configuration attempt: the API when there is a configuration, otherwise an
// unavailable source saying why.
std::unique_ptr<KubeStateSource> MakeKubeSource(KubeConfigResult config,
                                                KubeApiSourceOptions options = {});

}  // namespace ad::kube
