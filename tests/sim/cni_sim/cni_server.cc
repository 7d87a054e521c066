#include "cni_sim/cni_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"
#include "zds/zds.pb.h"
#include "zds_wire/zds_wire.h"

namespace ad::sim {
namespace {

namespace pb = istio::workload::zds;

constexpr SourceKind kSource = SourceKind::kLab;

using SharedFd = std::shared_ptr<UniqueFd>;

struct Request {
  std::string bytes;
  SharedFd netns;  // passed in SCM_RIGHTS when set (AddWorkload only)
  std::string what;
  std::shared_ptr<std::promise<std::string>> done;
};

// One accepted ztunnel connection; its requests are sent one at a time by its handler thread.
struct Connection {
  uint64_t id = 0;
  UniqueFd socket;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Request> queue;
  bool closed = false;
};

struct PodEntry {
  CniPod pod;
  SharedFd netns;  // null when the netns could not be opened
};

std::shared_future<std::string> Resolved(std::string value) {
  std::promise<std::string> promise;
  promise.set_value(std::move(value));
  return promise.get_future().share();
}

SharedFd OpenNetns(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return nullptr;
  return std::make_shared<UniqueFd>(std::move(fd));
}

std::string EncodeAdd(const CniPod& pod) {
  pb::WorkloadRequest request;
  pb::AddWorkload* add = request.mutable_add();
  add->set_uid(pod.uid);
  pb::WorkloadInfo* info = add->mutable_workload_info();
  info->set_name(pod.name);
  info->set_namespace_(pod.namespace_name);
  info->set_service_account(pod.service_account);
  return request.SerializeAsString();
}

std::string EncodeKeep(const std::string& uid) {
  pb::WorkloadRequest request;
  request.mutable_keep()->set_uid(uid);
  return request.SerializeAsString();
}

std::string EncodeDel(const std::string& uid) {
  pb::WorkloadRequest request;
  request.mutable_del()->set_uid(uid);
  return request.SerializeAsString();
}

std::string EncodeSnapshotSent() {
  pb::WorkloadRequest request;
  request.mutable_snapshot_sent();
  return request.SerializeAsString();
}

}  // namespace

std::string_view CniFaultName(CniFault fault) {
  switch (fault) {
    case CniFault::kNone:
      return "none";
    case CniFault::kDeadlock:
      return "deadlock";
    case CniFault::kSlowAck:
      return "slow-ack";
    case CniFault::kDropAdds:
      return "drop-adds";
  }
  return "?";
}

Result<CniFault> ParseCniFault(std::string_view name) {
  for (CniFault fault :
       {CniFault::kNone, CniFault::kDeadlock, CniFault::kSlowAck, CniFault::kDropAdds}) {
    if (name == CniFaultName(fault)) return fault;
  }
  return SourceError{
      kSource, "unknown fault '" + std::string(name) + "' (deadlock, slow-ack, drop-adds)", EINVAL};
}

std::string CniStats::ToText() const {
  std::ostringstream out;
  out << "accepted_connections " << accepted_connections << "\n"
      << "hellos_read " << hellos_read << "\n"
      << "snapshots_started " << snapshots_started << "\n"
      << "snapshots_completed " << snapshots_completed << "\n"
      << "adds_sent " << adds_sent << "\n"
      << "keeps_sent " << keeps_sent << "\n"
      << "dels_sent " << dels_sent << "\n"
      << "acks_received " << acks_received << "\n"
      << "nacks_received " << nacks_received << "\n"
      << "ack_timeouts " << ack_timeouts << "\n"
      << "adds_dropped " << adds_dropped << "\n"
      << "dels_dropped " << dels_dropped << "\n"
      << "connections " << connections << "\n"
      << "pods " << pods << "\n"
      << "enrollments " << enrollments << "\n"
      << "enroll_failures " << enroll_failures << "\n"
      << "enroll_pending " << enroll_pending << "\n"
      << "unenrollments " << unenrollments << "\n"
      << "unenroll_errors " << unenroll_errors << "\n";
  return out.str();
}

struct CniServer::State {
  CniServerOptions options;
  UniqueFd listener;
  UniqueFd wake_accept;  // eventfd: Stop() wakes the accept loop

  mutable std::mutex mutex;  // everything below
  std::condition_variable stopped_cv;
  bool stopping = false;
  uint64_t next_connection_id = 1;
  std::vector<std::shared_ptr<Connection>> connections;  // ordered; back() is "latest"
  std::map<std::string, PodEntry> pods;
  CniStats stats;
  std::vector<std::thread> handlers;
  std::thread acceptor;

  void Log(const std::string& message) const {
    if (!options.log_to_stderr) return;
    std::timespec now{};
    std::timespec_get(&now, TIME_UTC);
    std::tm utc{};
    gmtime_r(&now.tv_sec, &utc);
    std::array<char, 32> stamp{};
    std::strftime(stamp.data(), stamp.size(), "%H:%M:%S", &utc);
    std::fprintf(stderr, "%s.%03ld cni-sim: %s\n", stamp.data(), now.tv_nsec / 1000000,
                 message.c_str());
  }

  // Caller holds `mutex`. Atomic replace so readers never see a half-written file.
  void WriteStatsLocked() {
    stats.connections = connections.size();
    stats.pods = pods.size();
    if (options.stats_file.empty()) return;
    const std::string temporary = options.stats_file + ".tmp";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << stats.ToText();
    }
    std::error_code ignored;
    std::filesystem::rename(temporary, options.stats_file, ignored);
  }

  template <typename Change>
  void Count(Change change) {
    std::lock_guard lock(mutex);
    change(stats);
    WriteStatsLocked();
  }

  // Interruptible sleep; false when the server is stopping.
  bool SleepUnlessStopping(std::chrono::milliseconds delay) {
    std::unique_lock lock(mutex);
    return !stopped_cv.wait_for(lock, delay, [this] { return stopping; });
  }

  struct Outcome {
    bool transport_ok = false;  // false: the connection is unusable (or timed out)
    std::string error;          // "" = ACK
  };

  // Sends one request and waits for its single response (matched by order only).
  Outcome SendAndAwait(Connection& connection, const Request& request) {
    if (options.fault == CniFault::kSlowAck && !SleepUnlessStopping(options.slow_delay)) {
      return {false, "server stopping"};
    }
    Result<std::monostate> sent = zds::SendRecord(connection.socket.get(), request.bytes,
                                                  request.netns ? request.netns->get() : -1);
    if (!sent.ok()) {
      Log("ztunnel connection broken/unwritable conn_uuid=conn-" + std::to_string(connection.id) +
          ": " + sent.error().message);
      return {false, sent.error().message};
    }
    Count([&](CniStats& s) {
      pb::WorkloadRequest parsed;
      parsed.ParseFromString(request.bytes);
      if (parsed.has_add()) ++s.adds_sent;
      if (parsed.has_keep()) ++s.keeps_sent;
      if (parsed.has_del()) ++s.dels_sent;
    });
    Result<zds::Record> reply = zds::ReceiveRecord(
        connection.socket.get(), static_cast<int>(options.ack_timeout.count()), 1);
    if (!reply.ok() || reply->eof) {
      const bool timeout = !reply.ok() && reply.error().error_number == ETIMEDOUT;
      if (timeout) Count([](CniStats& s) { ++s.ack_timeouts; });
      const std::string why = timeout      ? "timed out waiting for valid ztunnel response"
                              : reply.ok() ? "connection closed before response received"
                                           : reply.error().message;
      Log(why + " (" + request.what + ") conn_uuid=conn-" + std::to_string(connection.id));
      return {false, why};
    }
    pb::WorkloadResponse response;
    if (!reply->fds.empty() || !response.ParseFromString(reply->bytes) || !response.has_ack()) {
      Log("protocol error: unexpected response " + zds::HexBytes(reply->bytes));
      return {false, "unexpected response from ztunnel"};
    }
    const std::string error = response.ack().error();
    Count([&](CniStats& s) {
      ++s.acks_received;
      if (!error.empty()) ++s.nacks_received;
    });
    if (!error.empty())
      Log("ztunnel responded with an ack error: " + error + " (" + request.what + ")");
    return {true, error};
  }

  void Unregister(const std::shared_ptr<Connection>& connection) {
    std::deque<Request> orphaned;
    {
      std::lock_guard conn_lock(connection->mutex);
      connection->closed = true;
      orphaned.swap(connection->queue);
    }
    for (Request& request : orphaned) {
      request.done->set_value("connection closed before request sent");
    }
    std::lock_guard lock(mutex);
    std::erase(connections, connection);
    WriteStatsLocked();
    Log("ztunnel disconnected, total connected: " + std::to_string(connections.size()));
  }

  // The snapshot: every cached pod (Add + netns fd, or Keep), then SnapshotSent, one ack each.
  bool SendSnapshot(const std::shared_ptr<Connection>& connection, const std::string& tag) {
    std::vector<PodEntry> snapshot;
    {
      std::lock_guard lock(mutex);
      for (const auto& [uid, entry] : pods) snapshot.push_back(entry);
      ++stats.snapshots_started;
      WriteStatsLocked();
    }
    Log("sending snapshot to ztunnel (" + std::to_string(snapshot.size()) + " pods)" + tag);
    for (const PodEntry& entry : snapshot) {
      Request request;
      if (entry.netns) {
        Log("sending pod to ztunnel as part of snapshot uid=" + entry.pod.uid + tag);
        request = {EncodeAdd(entry.pod), entry.netns, "snapshot add " + entry.pod.uid, nullptr};
      } else {
        Log("netns is not available for pod, sending 'keep' to ztunnel uid=" + entry.pod.uid + tag);
        request = {EncodeKeep(entry.pod.uid), nullptr, "snapshot keep " + entry.pod.uid, nullptr};
      }
      // Ack errors are only logged during the snapshot; transport failures end the connection.
      if (!SendAndAwait(*connection, request).transport_ok) {
        return false;
      }
    }
    if (!SendAndAwait(*connection, {EncodeSnapshotSent(), nullptr, "snapshot sent", nullptr})
             .transport_ok) {
      return false;
    }
    return true;
  }

  void Handle(const std::shared_ptr<Connection>& connection) {
    const std::string tag = " conn_uuid=conn-" + std::to_string(connection->id);
    if (options.fault == CniFault::kDeadlock) {
      // The pre-1.29.6 stall: blocked before reading the hello; the hello stays queued.
      std::unique_lock lock(mutex);
      stopped_cv.wait(lock, [this] { return stopping; });
      lock.unlock();
      Unregister(connection);
      return;
    }
    Result<zds::Record> hello_record = zds::ReceiveRecord(
        connection->socket.get(), static_cast<int>(options.hello_timeout.count()), 1);
    pb::ZdsHello hello;
    if (!hello_record.ok() || hello_record->eof || !hello.ParseFromString(hello_record->bytes)) {
      Log("failed to handle conn: " +
          (hello_record.ok() ? std::string(hello_record->eof ? "EOF before hello" : "bad hello")
                             : hello_record.error().message) +
          tag);
      Unregister(connection);
      return;
    }
    Count([](CniStats& s) { ++s.hellos_read; });
    Log("received hello from ztunnel version=" + pb::Version_Name(hello.version()) + tag);

    // Scoped: the snapshot's netns references must not outlive it (deleted pods close their fd).
    if (!SendSnapshot(connection, tag)) {
      Unregister(connection);
      return;
    }
    Count([](CniStats& s) { ++s.snapshots_completed; });
    Log("snapshot sent to ztunnel" + tag);

    for (;;) {
      std::optional<Request> request;
      {
        std::unique_lock conn_lock(connection->mutex);
        connection->wake.wait_for(conn_lock, options.keepalive_interval,
                                  [&] { return connection->closed || !connection->queue.empty(); });
        if (connection->closed) break;
        if (!connection->queue.empty()) {
          request = std::move(connection->queue.front());
          connection->queue.pop_front();
        }
      }
      if (!request) {
        // Keepalive: a short read; silence = alive, EOF = gone, data = protocol error.
        Result<zds::Record> probe = zds::ReceiveRecord(connection->socket.get(), 10, 1);
        if (probe.ok() && probe->eof) break;
        if (probe.ok()) {
          Log("protocol error: unsolicited data from ztunnel " + zds::HexBytes(probe->bytes) + tag);
          break;
        }
        if (probe.error().error_number != ETIMEDOUT) break;
        continue;
      }
      const Outcome outcome = SendAndAwait(*connection, *request);
      request->done->set_value(outcome.transport_ok
                                   ? outcome.error
                                   : (outcome.error.empty() ? "failed" : outcome.error));
      if (!outcome.transport_ok && outcome.error.find("Broken pipe") != std::string::npos) break;
      if (!outcome.transport_ok && outcome.error.find("closed") != std::string::npos) break;
    }
    Unregister(connection);
  }

  void AcceptLoop() {
    for (;;) {
      std::array<pollfd, 2> fds{pollfd{listener.get(), POLLIN, 0},
                                pollfd{wake_accept.get(), POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!accepted.valid()) continue;
      auto connection = std::make_shared<Connection>();
      connection->socket = std::move(accepted);
      std::lock_guard lock(mutex);
      if (stopping) return;
      connection->id = next_connection_id++;
      // Registered before its hello is read: from now on it is "latest".
      connections.push_back(connection);
      ++stats.accepted_connections;
      WriteStatsLocked();
      Log("new ztunnel connected, total connected: " + std::to_string(connections.size()) +
          " conn_uuid=conn-" + std::to_string(connection->id));
      handlers.emplace_back([this, connection] { Handle(connection); });
    }
  }

  std::shared_future<std::string> Enqueue(const std::shared_ptr<Connection>& connection,
                                          Request request) {
    request.done = std::make_shared<std::promise<std::string>>();
    std::shared_future<std::string> result = request.done->get_future().share();
    {
      std::lock_guard conn_lock(connection->mutex);
      if (connection->closed) return Resolved("connection closed before request sent");
      connection->queue.push_back(std::move(request));
    }
    connection->wake.notify_all();
    return result;
  }
};

CniServer::CniServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<CniServer>> CniServer::Start(CniServerOptions options,
                                                    const std::vector<CniPod>& initial_pods) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  for (const CniPod& pod : initial_pods) {
    state->pods[pod.uid] = PodEntry{pod, OpenNetns(pod.netns_path)};
  }
  state->wake_accept = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!state->wake_accept.valid()) return ErrnoError(kSource, "eventfd");
  Result<UniqueFd> listener = zds::ListenSeqpacket(state->options.socket_path);
  if (!listener.ok()) return listener.error();
  state->listener = std::move(listener).value();
  {
    std::lock_guard lock(state->mutex);
    state->WriteStatsLocked();
  }
  state->Log("listening on " + state->options.socket_path + " (SOCK_SEQPACKET), " +
             std::to_string(initial_pods.size()) + " pods cached, fault " +
             std::string(CniFaultName(state->options.fault)));
  State* raw = state.get();
  state->acceptor = std::thread([raw] { raw->AcceptLoop(); });
  return std::unique_ptr<CniServer>(new CniServer(std::move(state)));
}

CniServer::~CniServer() { Stop(); }

void CniServer::Stop() {
  State& s = *state_;
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    s.stopping = true;
    connections = s.connections;
  }
  s.stopped_cv.notify_all();
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(s.wake_accept.get(), &one, sizeof(one));
  if (s.acceptor.joinable()) s.acceptor.join();
  for (const auto& connection : connections) {
    ::shutdown(connection->socket.get(), SHUT_RDWR);  // wakes a handler blocked in a read
    {
      std::lock_guard conn_lock(connection->mutex);
      connection->closed = true;
    }
    connection->wake.notify_all();
  }
  std::vector<std::thread> handlers;
  {
    std::lock_guard lock(s.mutex);
    handlers.swap(s.handlers);
  }
  for (std::thread& handler : handlers) handler.join();
  s.listener.Reset();
  ::unlink(s.options.socket_path.c_str());
  std::lock_guard lock(s.mutex);
  s.pods.clear();
  s.WriteStatsLocked();
}

std::shared_future<std::string> CniServer::PodAdded(const CniPod& pod) {
  State& s = *state_;
  SharedFd netns = OpenNetns(pod.netns_path);
  std::shared_ptr<Connection> latest;
  {
    std::lock_guard lock(s.mutex);
    s.pods[pod.uid] = PodEntry{pod, netns};
    const bool drop =
        s.options.fault == CniFault::kDropAdds || s.options.drop_add_uids.count(pod.uid);
    if (drop) {
      ++s.stats.adds_dropped;
      s.WriteStatsLocked();
      s.Log("fault drop-adds: not sending pod add uid=" + pod.uid);
      return Resolved("");  // silently: the caller believes the pod was handed off
    }
    s.WriteStatsLocked();
    if (!netns) return Resolved("netns " + pod.netns_path + " not available");
    if (s.connections.empty()) return Resolved("no ztunnel connection");
    latest = s.connections.back();
  }
  s.Log("sending pod add to ztunnel uid=" + pod.uid + " name=" + pod.name +
        " namespace=" + pod.namespace_name + " serviceAccount=" + pod.service_account +
        " conn_uuid=conn-" + std::to_string(latest->id));
  return s.Enqueue(latest, Request{EncodeAdd(pod), netns, "add " + pod.uid, nullptr});
}

std::vector<std::shared_future<std::string>> CniServer::PodDeleted(const std::string& uid) {
  State& s = *state_;
  std::vector<std::shared_ptr<Connection>> targets;
  {
    std::lock_guard lock(s.mutex);
    s.pods.erase(uid);
    if (s.options.drop_del_uids.count(uid)) {
      ++s.stats.dels_dropped;
      s.WriteStatsLocked();
      s.Log("fault drop-del: not sending pod delete uid=" + uid);
      return {};
    }
    s.WriteStatsLocked();
    targets = s.connections;  // a copy: never hold the server lock while waiting on a peer
  }
  s.Log("removing pod from ztunnel uid=" + uid + " (" + std::to_string(targets.size()) +
        " connections)");
  std::vector<std::shared_future<std::string>> results;
  for (const auto& connection : targets) {
    results.push_back(
        s.Enqueue(connection, Request{EncodeDel(uid), nullptr, "del " + uid, nullptr}));
  }
  return results;
}

void CniServer::SetPods(const std::vector<CniPod>& pods) {
  State& s = *state_;
  std::vector<CniPod> added;
  std::vector<CniPod> enrolling;  // new pods with enrollment info
  std::vector<CniPod> deleted;
  {
    std::lock_guard lock(s.mutex);
    std::set<std::string> wanted;
    for (const CniPod& pod : pods) {
      wanted.insert(pod.uid);
      auto known = s.pods.find(pod.uid);
      const bool same = known != s.pods.end() && known->second.pod.netns_path == pod.netns_path &&
                        known->second.pod.name == pod.name &&
                        known->second.pod.namespace_name == pod.namespace_name &&
                        known->second.pod.service_account == pod.service_account;
      if (same) continue;
      (known == s.pods.end() && pod.enrollment ? enrolling : added).push_back(pod);
    }
    for (const auto& [uid, entry] : s.pods) {
      if (!wanted.count(uid)) deleted.push_back(entry.pod);
    }
  }
  for (const CniPod& pod : deleted) {
    if (pod.enrollment) {
      UnenrollPod(pod);
    } else {
      (void)PodDeleted(pod.uid);
    }
  }
  for (const CniPod& pod : added) (void)PodAdded(pod);
  for (const CniPod& pod : enrolling) EnrollPod(pod);
}

void CniServer::EnrollPod(const CniPod& pod) {
  State& s = *state_;
  const PodEnrollment& enrollment = *pod.enrollment;
  s.Log("creating inpod rules uid=" + pod.uid + " backend=" + enrollment.backend +
        " netns=" + pod.netns_path);
  if (Result<std::monostate> rules = CreateInpodRules(pod.netns_path, enrollment); !rules.ok()) {
    s.Log("failed to create inpod rules (non-retryable) uid=" + pod.uid + ": " +
          rules.error().message);
    s.Count([](CniStats& stats) { ++stats.enroll_failures; });
    return;
  }
  std::shared_future<std::string> acked = PodAdded(pod);
  const auto limit =
      s.options.ack_timeout + std::chrono::seconds(1) +
      (s.options.fault == CniFault::kSlowAck ? s.options.slow_delay : std::chrono::milliseconds(0));
  const std::string error = acked.wait_for(limit) == std::future_status::ready
                                ? acked.get()
                                : std::string("no ack in time");
  if (!error.empty()) {
    // istio-cni annotates the pod `pending` and retries; the probe set stays without it.
    s.Log("pod add not acked, enrollment pending uid=" + pod.uid + ": " + error);
    s.Count([](CniStats& stats) { ++stats.enroll_pending; });
    return;
  }
  if (Result<std::monostate> member = AddToHostProbeSet(pod.uid, enrollment); !member.ok()) {
    s.Log("failed to add pod IP to host probe set uid=" + pod.uid + ": " + member.error().message);
    s.Count([](CniStats& stats) { ++stats.enroll_pending; });
    return;
  }
  s.Log("pod enrolled uid=" + pod.uid + " ip=" + enrollment.ipv4);
  s.Count([](CniStats& stats) { ++stats.enrollments; });
}

void CniServer::UnenrollPod(const CniPod& pod) {
  State& s = *state_;
  const PodEnrollment& enrollment = *pod.enrollment;
  bool failed = false;
  if (Result<std::monostate> member = RemoveFromHostProbeSet(enrollment); !member.ok()) {
    s.Log("failed to remove pod IP from host probe set uid=" + pod.uid + ": " +
          member.error().message);
    failed = true;
  }
  if (Result<std::monostate> rules = DeleteInpodRules(pod.netns_path, enrollment); !rules.ok()) {
    s.Log("failed to delete inpod rules uid=" + pod.uid + ": " + rules.error().message);
    failed = true;
  }
  std::vector<std::shared_future<std::string>> acks = PodDeleted(pod.uid);
  for (const auto& ack : acks) {
    (void)ack.wait_for(s.options.ack_timeout + std::chrono::seconds(1));
  }
  s.Log("pod unenrolled uid=" + pod.uid);
  s.Count([failed](CniStats& stats) {
    ++stats.unenrollments;
    if (failed) ++stats.unenroll_errors;
  });
}

CniStats CniServer::stats() const {
  std::lock_guard lock(state_->mutex);
  CniStats copy = state_->stats;
  copy.connections = state_->connections.size();
  copy.pods = state_->pods.size();
  return copy;
}

const CniServerOptions& CniServer::options() const { return state_->options; }

Result<std::vector<CniPod>> ReadPodsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError(kSource, "open(" + path + ")");
  std::vector<CniPod> pods;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    CniPod pod;
    if (!(fields >> pod.uid)) continue;
    if (!(fields >> pod.name >> pod.namespace_name >> pod.service_account >> pod.netns_path)) {
      return SourceError{
          kSource,
          path + ":" + std::to_string(number) +
              ": want 'uid name namespace service-account netns-path [key=value...]'",
          EINVAL};
    }
    std::vector<std::string> extra;
    for (std::string field; fields >> field;) extra.push_back(field);
    if (!extra.empty()) {
      Result<PodEnrollment> enrollment = ParseEnrollmentFields(extra);
      if (!enrollment.ok()) {
        return SourceError{kSource,
                           path + ":" + std::to_string(number) + ": " + enrollment.error().message,
                           EINVAL};
      }
      pod.enrollment = std::move(enrollment).value();
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

std::string PodsFileLine(const CniPod& pod) {
  std::string line = pod.uid + " " + pod.name + " " + pod.namespace_name + " " +
                     pod.service_account + " " + pod.netns_path;
  if (pod.enrollment) line += " " + EnrollmentFields(*pod.enrollment);
  return line;
}

}  // namespace ad::sim
