// cni-sim: the istio-cni node agent's side of ZDS, wire-faithful (facts: zds-and-ztunnel.md
// §2-§3). A SEQPACKET server with an ordered connection list whose newest entry is "latest";
// every connection gets the pod snapshot (AddWorkload + netns fd, or KeepWorkload), then
// SnapshotSent; afterwards Adds go to the latest connection only and Dels to all. One
// WorkloadResponse is awaited per request. Faults reproduce the stalls the agent must diagnose.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cni_sim/inpod_enroll.h"
#include "model/result.h"

namespace ad::sim {

// One ambient pod as the CNI's pod cache knows it.
struct CniPod {
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string service_account;
  std::string netns_path;  // opened (and held) by the server; unopenable -> KeepWorkload
  // Set: cni-sim enrolls the pod itself when it appears after start-up (rules, Add, probe set)
  // and unenrolls it when it vanishes. Unset: someone else (the lab) installed its rules.
  std::optional<PodEnrollment> enrollment;
};

enum class CniFault : uint8_t {
  kNone,
  kDeadlock,  // accepts but never reads the hello or sends anything (pre-1.29.6 #60786)
  kSlowAck,   // waits `slow_delay` before sending each request
  kDropAdds,  // silently never sends steady-state Adds
};
std::string_view CniFaultName(CniFault fault);  // "none", "deadlock", "slow-ack", "drop-adds"
Result<CniFault> ParseCniFault(std::string_view name);

struct CniServerOptions {
  std::string socket_path;
  std::string stats_file;  // rewritten atomically on every change; empty: none
  CniFault fault = CniFault::kNone;
  std::chrono::milliseconds slow_delay{2000};
  std::set<std::string> drop_add_uids;  // steady-state Adds for these never sent
  std::set<std::string> drop_del_uids;  // Dels for these never sent (a missed deletion)
  std::chrono::milliseconds hello_timeout{5000};
  std::chrono::milliseconds ack_timeout{5000};
  std::chrono::milliseconds keepalive_interval{5000};
  bool log_to_stderr = true;
};

struct CniStats {
  uint64_t accepted_connections = 0;
  uint64_t hellos_read = 0;
  uint64_t snapshots_started = 0;
  uint64_t snapshots_completed = 0;
  uint64_t adds_sent = 0;
  uint64_t keeps_sent = 0;
  uint64_t dels_sent = 0;
  uint64_t acks_received = 0;  // every WorkloadResponse, ACK or NACK
  uint64_t nacks_received = 0;
  uint64_t ack_timeouts = 0;
  uint64_t adds_dropped = 0;
  uint64_t dels_dropped = 0;
  uint64_t connections = 0;  // registered now
  uint64_t pods = 0;         // in the pod cache now
  // Pods with enrollment info, added/removed after start-up (inpod_enroll.h):
  uint64_t enrollments = 0;      // rules + Add acked + probe set member
  uint64_t enroll_failures = 0;  // CreateInpodRules failed (pod not cached, nothing sent)
  uint64_t enroll_pending = 0;   // rules in place but the Add was not acked (no probe member)
  uint64_t unenrollments = 0;    // probe set -> rules -> Del done
  uint64_t unenroll_errors = 0;  // a removal step failed (logged; the Del is still sent)

  std::string ToText() const;  // "key value" lines (the stats file)
};

class CniServer {
 public:
  // Builds the pod cache from `initial_pods`, then listens (unlinking a stale socket file) and
  // accepts, like istio-cni which accepts only after its snapshot is ready.
  static Result<std::unique_ptr<CniServer>> Start(CniServerOptions options,
                                                  const std::vector<CniPod>& initial_pods);
  ~CniServer();
  CniServer(const CniServer&) = delete;
  CniServer& operator=(const CniServer&) = delete;

  // Pod cache events. The futures yield "" once the peer acked, otherwise the error text; they
  // also resolve when the server stops. PodAdded goes to the latest connection only.
  std::shared_future<std::string> PodAdded(const CniPod& pod);
  // Broadcast to every connection; one future per connection (none when nobody is connected).
  std::vector<std::shared_future<std::string>> PodDeleted(const std::string& uid);
  // Applies a full desired pod list: Adds for new or changed pods, Dels for vanished ones. New
  // pods with enrollment info are enrolled in istio-cni's order (in-pod rules -> Add, waiting for
  // the ack -> host probe set); vanished ones are unenrolled (probe set -> rules -> Del).
  void SetPods(const std::vector<CniPod>& pods);

  CniStats stats() const;
  const CniServerOptions& options() const;
  void Stop();

 private:
  struct State;
  explicit CniServer(std::unique_ptr<State> state);
  void EnrollPod(const CniPod& pod);
  void UnenrollPod(const CniPod& pod);
  std::unique_ptr<State> state_;
};

// Pods file: one pod per line, `uid name namespace service-account netns-path [enrollment]`, the
// optional enrollment being key=value fields (EnrollmentFields: `backend=iptables-nft|legacy|nft
// dns=0|1 ipv6=0|1 host=NETNS-PATH ip=A [ip6=A]`); '#' comments and blank lines are skipped.
Result<std::vector<CniPod>> ReadPodsFile(const std::string& path);
std::string PodsFileLine(const CniPod& pod);

}  // namespace ad::sim
