#include "sources/kube/kube_api_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

namespace ad::kube {
namespace {

// One watch line may hold one object; beyond this the stream is not the API's.
constexpr size_t kMaxEventLine = 16u << 20;
constexpr size_t kMaxListPage = 256u << 20;

bool ClearFailure(KubeResourceStatus& status) {
  const bool changed = status.reason != KubeApiReason::kNone;
  status.reason = KubeApiReason::kNone;
  status.message.clear();
  return changed;
}

KubeApiReason ReasonOfStatus(int http_status) {
  switch (http_status) {
    case 401:
      return KubeApiReason::kUnauthorized;
    case 403:
      return KubeApiReason::kForbidden;
    case 429:
      return KubeApiReason::kThrottled;
    default:
      return KubeApiReason::kServerError;
  }
}

}  // namespace

// One mirrored collection and its reflector's bookkeeping (touched by its own thread only,
// except `status`, which lives in status_ under mu_).
struct KubeApiSource::Collection {
  KubeKind kind;
  std::string path;            // /api/v1/pods
  std::string field_selector;  // spec.nodeName=NODE
  KubeResourceStatus KubeApiStatus::*status;
  std::string resource_version;  // where the next watch starts
  std::string line;              // a watch line not yet complete
  KubeHttp* http = nullptr;      // its client while the thread runs (under mu_), for Stop
};

KubeApiSource::KubeApiSource(KubeApiConfig config, KubeApiSourceOptions options)
    : config_(std::move(config)), options_(std::move(options)) {
  status_.enabled = true;
  status_.server = config_.server;
  status_.node_name = config_.node_name;
  auto add = [&](KubeKind kind, std::string path, std::string selector,
                 KubeResourceStatus KubeApiStatus::*status) {
    collections_.push_back(std::make_unique<Collection>(
        Collection{kind, std::move(path), std::move(selector), status, "", "", nullptr}));
  };
  add(KubeKind::kPod, "/api/v1/pods", "spec.nodeName=" + config_.node_name, &KubeApiStatus::pods);
  add(KubeKind::kNamespace, "/api/v1/namespaces", "", &KubeApiStatus::namespaces);
  add(KubeKind::kNode, "/api/v1/nodes", "metadata.name=" + config_.node_name, &KubeApiStatus::node);
}

KubeApiSource::~KubeApiSource() { Stop(); }

void KubeApiSource::Start() {
  if (!threads_.empty()) return;
  for (auto& collection : collections_) {
    threads_.emplace_back([this, c = collection.get()] { Run(*c); });
  }
}

void KubeApiSource::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (auto& collection : collections_) {
      if (collection->http != nullptr) collection->http->Interrupt();
    }
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

KubeSnapshot KubeApiSource::Snapshot() const {
  std::lock_guard lock(mu_);
  KubeSnapshot snapshot;
  snapshot.status = status_;
  snapshot.pods.reserve(pods_.size());
  for (const auto& [key, pod] : pods_) snapshot.pods.push_back(pod);
  for (const auto& [key, ns] : namespaces_) snapshot.namespaces.push_back(ns);
  snapshot.node = node_;
  snapshot.generation = generation_;
  return snapshot;
}

uint64_t KubeApiSource::generation() const { return generation_; }

void KubeApiSource::Changed() { ++generation_; }

void KubeApiSource::Notify() {
  if (options_.on_change) options_.on_change();
}

bool KubeApiSource::Wait(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  return !wake_.wait_for(lock, delay, [&] { return stop_.load(); });
}

// Applies `change` to the collection's status and recomputes the source's overall reason (the
// first failing collection's); bumps the generation when health changed.
void KubeApiSource::Update(Collection& collection,
                           const std::function<bool(KubeResourceStatus&)>& change) {
  bool health_changed = false;
  {
    std::lock_guard lock(mu_);
    KubeResourceStatus& status = status_.*collection.status;
    const bool was_healthy = status_.healthy();
    health_changed = change(status);
    status_.reason = KubeApiReason::kNone;
    status_.message.clear();
    for (const KubeResourceStatus* s : {&status_.pods, &status_.namespaces, &status_.node}) {
      if (s->reason != KubeApiReason::kNone) {
        status_.reason = s->reason;
        status_.message = s->message;
        break;
      }
    }
    health_changed = health_changed || was_healthy != status_.healthy();
    if (health_changed) Changed();
  }
  if (health_changed) Notify();
}

void KubeApiSource::Replace(Collection& collection, std::vector<KubeObject>& items,
                            const std::string& resource_version) {
  {
    std::lock_guard lock(mu_);
    switch (collection.kind) {
      case KubeKind::kPod:
        pods_.clear();
        for (KubeObject& item : items) pods_[item.key()] = std::move(item.pod);
        break;
      case KubeKind::kNamespace:
        namespaces_.clear();
        for (KubeObject& item : items) namespaces_[item.ns.name] = std::move(item.ns);
        break;
      case KubeKind::kNode:
        node_.reset();
        for (KubeObject& item : items) {
          if (item.node.name == config_.node_name) node_ = std::move(item.node);
        }
        break;
    }
    Changed();
  }
  collection.resource_version = resource_version;
  Update(collection, [&](KubeResourceStatus& s) {
    const bool changed = !s.synced || s.reason != KubeApiReason::kNone;
    s.synced = true;
    s.resource_version = resource_version;
    s.reason = KubeApiReason::kNone;
    s.message.clear();
    ++s.lists;
    return changed;
  });
}

KubeApiSource::Attempt KubeApiSource::FromHttp(const HttpOutcome& outcome,
                                               const std::string& what) const {
  Attempt attempt;
  attempt.outcome = Outcome::kFailed;
  if (outcome.transport != KubeApiReason::kNone) {
    attempt.reason = outcome.transport;
    attempt.message = outcome.error;
    return attempt;
  }
  std::string error;
  const std::optional<KubeStatus> status = DecodeStatus(outcome.error_body, &error);
  if (outcome.http_status == 410) {
    attempt.outcome = Outcome::kExpired;
    return attempt;
  }
  attempt.reason = ReasonOfStatus(outcome.http_status);
  attempt.retry_after_seconds = outcome.retry_after_seconds;
  if (status && status->retry_after_seconds > 0 && attempt.retry_after_seconds < 0) {
    attempt.retry_after_seconds = status->retry_after_seconds;
  }
  attempt.message = what + ": HTTP " + std::to_string(outcome.http_status);
  if (status && !status->message.empty()) attempt.message += ": " + status->message;
  return attempt;
}

KubeApiSource::Attempt KubeApiSource::List(KubeHttp& http, Collection& collection,
                                           const std::string& list_rv) {
  std::vector<KubeObject> items;
  std::string continue_token, resource_version;
  do {
    std::string query = "?limit=" + std::to_string(options_.page_limit);
    query += continue_token.empty() ? "&resourceVersion=" + QueryEscape(list_rv)
                                    : "&continue=" + QueryEscape(continue_token);
    if (!collection.field_selector.empty()) {
      query += "&fieldSelector=" + QueryEscape(collection.field_selector);
    }
    std::string body;
    bool too_big = false;
    HttpLimits limits = options_.list_limits;
    limits.connect_timeout = options_.connect_timeout;
    const HttpOutcome outcome = http.Get(
        collection.path + query,
        [&](std::string_view data) {
          too_big = body.size() + data.size() > kMaxListPage;
          if (!too_big) body.append(data);
          return !too_big;
        },
        limits);
    if (outcome.stopped && !too_big) return {Outcome::kStopped};
    const std::string what = "GET " + collection.path;
    if (too_big) {
      return {Outcome::kFailed, KubeApiReason::kGarbage, what + ": a list page over 256 MiB"};
    }
    if (outcome.transport != KubeApiReason::kNone || outcome.http_status != 200) {
      return FromHttp(outcome, what);
    }
    std::string error;
    std::optional<KubeList> page = DecodeList(body, collection.kind, &error);
    if (!page) return {Outcome::kFailed, KubeApiReason::kGarbage, what + ": " + error};
    for (KubeObject& item : page->items) items.push_back(std::move(item));
    continue_token = std::move(page->continue_token);
    resource_version = std::move(page->resource_version);
  } while (!continue_token.empty());
  Replace(collection, items, resource_version);
  return {Outcome::kOk};
}

// Applies one watch line; false ends the stream (an ERROR event or garbage: `attempt` says).
bool KubeApiSource::ApplyEvent(Collection& collection, std::string_view line, Attempt& attempt) {
  std::string error;
  std::optional<WatchEvent> event = DecodeWatchEvent(line, collection.kind, &error);
  if (!event) {
    attempt = {Outcome::kFailed, KubeApiReason::kGarbage,
               "watch " + collection.path + ": " + error};
    return false;
  }
  if (event->type == WatchEventType::kError) {
    const KubeStatus& status = event->status;
    if (status.code == 410 || status.reason == "Expired" || status.reason == "Gone") {
      attempt = {Outcome::kExpired};
    } else {
      attempt = {Outcome::kFailed, ReasonOfStatus(status.code),
                 "watch " + collection.path + ": ERROR " + std::to_string(status.code) + ": " +
                     status.message,
                 status.retry_after_seconds};
    }
    return false;
  }
  collection.resource_version = event->object.resource_version();
  const bool bookmark = event->type == WatchEventType::kBookmark;
  {
    std::lock_guard lock(mu_);
    KubeResourceStatus& status = status_.*collection.status;
    status.resource_version = collection.resource_version;
    if (bookmark) {
      ++status.bookmarks;
      return true;  // no data change: the generation stays
    }
    ++status.events;
    KubeObject& object = event->object;
    const bool deleted = event->type == WatchEventType::kDeleted;
    switch (collection.kind) {
      case KubeKind::kPod:
        if (deleted) pods_.erase(object.key());
        if (!deleted) pods_[object.key()] = std::move(object.pod);
        break;
      case KubeKind::kNamespace:
        if (deleted) namespaces_.erase(object.ns.name);
        if (!deleted) namespaces_[object.ns.name] = std::move(object.ns);
        break;
      case KubeKind::kNode:
        if (object.node.name != config_.node_name) break;
        node_.reset();
        if (!deleted) node_ = std::move(object.node);
        break;
    }
    Changed();
  }
  Notify();
  return true;
}

KubeApiSource::Attempt KubeApiSource::Watch(KubeHttp& http, Collection& collection) {
  static thread_local std::mt19937 random{std::random_device{}()};
  const auto min_s = options_.watch_timeout_min.count();
  const auto span = std::max<int64_t>(1, options_.watch_timeout_max.count() - min_s);
  const int64_t timeout_s = min_s + static_cast<int64_t>(random() % static_cast<uint64_t>(span));
  std::string query = "?watch=true&allowWatchBookmarks=true&resourceVersion=" +
                      QueryEscape(collection.resource_version) +
                      "&timeoutSeconds=" + std::to_string(timeout_s);
  if (!collection.field_selector.empty()) {
    query += "&fieldSelector=" + QueryEscape(collection.field_selector);
  }
  HttpLimits limits;
  limits.connect_timeout = options_.connect_timeout;
  limits.idle = options_.watch_idle;
  // The server ends the stream at timeoutSeconds; a minute past that it hung.
  limits.total = std::chrono::seconds(timeout_s + 60);
  Attempt attempt{Outcome::kEnded};
  collection.line.clear();
  Update(collection, [](KubeResourceStatus& s) {
    s.watching = true;
    return false;
  });
  const auto started = std::chrono::steady_clock::now();
  uint64_t lines = 0;
  const HttpOutcome outcome = http.Get(
      collection.path + query,
      [&](std::string_view data) {
        for (size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
          collection.line.append(data.substr(0, newline));
          data.remove_prefix(newline + 1);
          ++lines;
          const bool go_on = collection.line.find_first_not_of(" \r\t") == std::string::npos ||
                             ApplyEvent(collection, collection.line, attempt);
          collection.line.clear();
          if (!go_on) return false;
        }
        collection.line.append(data);
        if (collection.line.size() > kMaxEventLine) {
          attempt = {Outcome::kFailed, KubeApiReason::kGarbage,
                     "watch " + collection.path + ": an event line over 16 MiB"};
          return false;
        }
        return true;
      },
      limits,
      // The stream answers again: a failure recorded before (hung, throttled, unreachable) is
      // over, though the first event of a quiet cluster (a bookmark) may be a minute away.
      [&] {
        attempt.answered = true;
        Update(collection, ClearFailure);
      });
  Update(collection, [](KubeResourceStatus& s) {
    s.watching = false;
    return false;
  });
  if (outcome.stopped) return stop_ ? Attempt{Outcome::kStopped} : attempt;
  if (outcome.transport != KubeApiReason::kNone || outcome.http_status != 200) {
    Attempt failed = FromHttp(outcome, "watch " + collection.path);
    failed.answered = attempt.answered;
    return failed;
  }
  if (!collection.line.empty()) {
    return {Outcome::kFailed, KubeApiReason::kGarbage,
            "watch " + collection.path + ": the stream ended inside an event"};
  }
  // The server ended the stream (timeoutSeconds). At once and empty, it is not serving watches:
  // re-watching at once would spin.
  attempt.short_empty =
      lines == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(1);
  return attempt;
}

void KubeApiSource::Run(Collection& collection) {
  KubeHttp http(config_, &stop_);
  {
    std::lock_guard lock(mu_);
    collection.http = &http;
  }
  // Unpublished before `http` is destroyed, so Stop never interrupts a dead client.
  struct Unpublish {
    KubeApiSource* source;
    Collection* collection;
    ~Unpublish() {
      std::lock_guard lock(source->mu_);
      collection->http = nullptr;
    }
  } unpublish{this, &collection};
  static thread_local std::mt19937 random{std::random_device{}()};
  bool need_list = true;
  std::string list_rv = "0";  // the first list may come from the watch cache
  int failures = 0;
  while (!stop_) {
    const Attempt attempt = need_list ? List(http, collection, list_rv) : Watch(http, collection);
    switch (attempt.outcome) {
      case Outcome::kStopped:
        return;
      case Outcome::kOk:
        need_list = false;
        failures = 0;
        continue;
      case Outcome::kEnded:
        if (attempt.short_empty && !Wait(options_.backoff_initial)) return;
        failures = 0;
        Update(collection, [](KubeResourceStatus& s) {
          ++s.reconnects;
          return ClearFailure(s);
        });
        continue;
      case Outcome::kExpired:
        // A watch that expired relists from its last version; a list that expired, from the
        // newest ("" : a consistent read).
        list_rv = need_list ? "" : collection.resource_version;
        need_list = true;
        Update(collection, [](KubeResourceStatus& s) {
          ++s.relists;
          return false;
        });
        continue;
      case Outcome::kFailed:
        break;
    }
    if (attempt.answered) failures = 0;
    ++failures;
    spdlog::debug("kube-api {}: {} ({})", collection.path, attempt.message,
                  KubeApiReasonName(attempt.reason));
    Update(collection, [&](KubeResourceStatus& s) {
      const bool changed = s.reason != attempt.reason;
      s.reason = attempt.reason;
      s.message = attempt.message;
      return changed;
    });
    // A failed watch resumes from its version (a 410 then relists); a failed list lists again.
    std::chrono::milliseconds delay = options_.backoff_initial * (1 << std::min(failures - 1, 8));
    delay = std::min(delay, options_.backoff_max);
    delay = std::chrono::milliseconds(delay.count() / 2 +
                                      static_cast<int64_t>(random() % (delay.count() / 2 + 1)));
    if (attempt.retry_after_seconds > 0) delay = std::chrono::seconds(attempt.retry_after_seconds);
    if (!Wait(delay)) return;
  }
}

PodLookup FetchPod(const KubeApiConfig& config, const std::string& namespace_name,
                   const std::string& name, const HttpLimits& limits) {
  KubeHttp http(config, nullptr);
  std::string body;
  const std::string path =
      "/api/v1/namespaces/" + QueryEscape(namespace_name) + "/pods/" + QueryEscape(name);
  const HttpOutcome outcome = http.Get(
      path,
      [&](std::string_view data) {
        body.append(data);
        return body.size() <= (16u << 20);
      },
      limits);
  PodLookup lookup;
  if (outcome.transport != KubeApiReason::kNone) {
    lookup.reason = outcome.transport;
    lookup.message = outcome.error;
    return lookup;
  }
  if (outcome.http_status == 404) {
    lookup.not_found = true;
    return lookup;
  }
  std::string error;
  if (outcome.http_status != 200) {
    lookup.reason = ReasonOfStatus(outcome.http_status);
    const std::optional<KubeStatus> status = DecodeStatus(outcome.error_body, &error);
    lookup.message = "GET " + path + ": HTTP " + std::to_string(outcome.http_status) +
                     (status && !status->message.empty() ? ": " + status->message : "");
    return lookup;
  }
  std::optional<KubeObject> object = DecodeObject(body, KubeKind::kPod, &error);
  if (!object || outcome.stopped) {
    lookup.reason = KubeApiReason::kGarbage;
    lookup.message = "GET " + path + ": " + (outcome.stopped ? "over 16 MiB" : error);
    return lookup;
  }
  lookup.pod = std::move(object->pod);
  return lookup;
}

UnavailableKubeSource::UnavailableKubeSource(KubeApiReason reason, std::string message) {
  snapshot_.status.enabled = reason != KubeApiReason::kDisabled;
  snapshot_.status.reason = reason;
  snapshot_.status.message = std::move(message);
}

std::unique_ptr<KubeStateSource> MakeKubeSource(KubeConfigResult config,
                                                KubeApiSourceOptions options) {
  if (!config.config) {
    return std::make_unique<UnavailableKubeSource>(config.reason, std::move(config.message));
  }
  return std::make_unique<KubeApiSource>(std::move(*config.config), std::move(options));
}

}  // namespace ad::kube
