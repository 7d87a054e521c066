// The loader of the HBONE flow tracer (bpf/hbone_flows.bpf.c) behind an interface: feature
// probing, the attach type that works (tp_btf, then raw_tp, then the classic tracepoint), the
// ring buffer and the loss counters. Every libbpf object and fd is owned (RAII); nothing is
// pinned, so everything is gone when the tracer is destroyed or the process dies. The agent never
// mounts anything: without tracefs the tracepoint flavour reports why instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flows/flow.h"
#include "model/istio_facts.h"
#include "model/result.h"

namespace ad {

enum class AttachMode : uint8_t { kAuto, kTpBtf, kRawTp, kTracepoint };
std::string_view AttachModeName(AttachMode mode);  // "auto", "tp_btf", "raw_tp", "tracepoint"
std::optional<AttachMode> ParseAttachMode(std::string_view name);
// A ring-buffer size flag: decimal bytes in [kMinRingBytes, kMaxRingBytes], else nullopt.
inline constexpr uint64_t kMinRingBytes = 4096;
inline constexpr uint64_t kMaxRingBytes = 1ull << 30;
std::optional<uint32_t> ParseRingBytes(const std::string& text);

struct TracerOptions {
  std::vector<uint16_t> ports = {
      istio::kZtunnelInboundPort};        // at most 8 (bpf/hbone_flows.h HBONE_MAX_PORTS)
  AttachMode attach = AttachMode::kAuto;  // kAuto: the first that loads and attaches
  // Kernel BTF for CO-RE. Another path is passed to libbpf as its custom BTF; a missing one is
  // reported as "no BTF" (which also lets tests simulate a kernel without BTF).
  std::string btf_path = "/sys/kernel/btf/vmlinux";
  std::string tracefs_path = "/sys/kernel/tracing";  // where the tracepoint flavour needs it
  uint32_t ring_bytes = 1u << 20;  // rounded up to a power of two, at least one page
  uint32_t max_flows = 65536;      // LRU state entries (flows open at once)
  // Batch consumer wakeups: the kernel side wakes the reader for the first record put into an
  // empty ring and then once a quarter of the ring is filled; Poll() drains whatever is there.
  // A reader that drains at most every N ms (FlowMonitor) thus takes a busy node's events in
  // batches and sleeps on an idle one. Two CPUs that emit into an empty ring at the same instant
  // may both see the other's record and not wake it: those events wait for the reader's next
  // timeout. false: a wakeup per event (lowest latency, far more CPU).
  bool batch_wakeups = true;
  // Trace every outgoing connection (any destination port) besides the traced ports: the
  // application side that MESH_BYPASS needs. An event pair per connect on the whole node.
  bool trace_all_connects = false;
  // Mesh-bypass mode: trace every connect, and ztunnel's accepts on `capture_ports`, in the netns
  // given to FlowTracer::SetBypassNetns (the node's ambient pods) only; other netns pay one map
  // lookup per connect. Off: SetBypassNetns has nothing to feed.
  bool watch_bypass_netns = false;
  // At most 2: outbound capture, DNS proxy.
  std::vector<uint16_t> capture_ports = {istio::kZtunnelOutboundPort, istio::kDnsCapturePort};
  uint32_t max_bypass_netns = 4096;  // the watched-netns map's size
};

struct TracerCounters {
  uint64_t events = 0;       // submitted by the kernel side
  uint64_t lost_events = 0;  // ring buffer full: events lost (always reported)
  uint64_t state_full = 0;   // flows not tracked (state map refused them)
  uint64_t late_flows = 0;   // flows first seen at close
  uint64_t decode_errors = 0;
  uint64_t watched_flows = 0;  // flows tracked because their netns is watched (bypass mode)
};

// The watched-netns map after SetBypassNetns: what it holds, and what did not fit.
struct BypassNetnsState {
  size_t watched = 0;           // netns in the map now
  size_t not_watched = 0;       // asked for but left out of the last update: the map was full
  uint64_t overflow_total = 0;  // netns left out, summed over every update that changed the set
  uint64_t update_errors = 0;   // map writes that failed (other than full)
};

// Why tracing is not available, or how it was set up.
struct TracerProbe {
  bool btf_present = false;
  bool capabilities_ok = false;  // CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN
  std::string lockdown;          // "none", "integrity", "confidentiality" or "" (unknown)
  bool tracefs_mounted = false;
  std::vector<std::string> attempts;  // "tp_btf: ok", "raw_tp: load: Operation not permitted"
};

class FlowTracer {
 public:
  virtual ~FlowTracer() = default;
  virtual AttachMode attach_mode() const = 0;
  virtual const TracerProbe& probe() const = 0;
  // Waits up to `timeout` for events (or a batch wakeup), then hands every pending decoded event
  // to `sink`; returns how many. Interrupt() ends the wait early.
  virtual Result<size_t> Poll(std::chrono::milliseconds timeout,
                              const std::function<void(const FlowEvent&)>& sink) = 0;
  // Ends a Poll() waiting now, or the next one, at once (any thread): a reader may wait long on
  // an idle node and still stop promptly.
  virtual void Interrupt() = 0;
  virtual TracerCounters Counters() const = 0;
  // Makes the watched-netns map (mesh-bypass mode) hold `inodes`: entries no longer wanted are
  // deleted, new ones added while there is room (the ones already watched stay first; what does
  // not fit is counted, never an error). Cheap when nothing changed (no syscall). An error only
  // when bypass mode is off (TracerOptions::watch_bypass_netns). Both may be called from any
  // thread, also while another one polls.
  virtual Result<BypassNetnsState> SetBypassNetns(const std::vector<uint32_t>& inodes) = 0;
  virtual BypassNetnsState BypassNetns() const = 0;
};

// Probes, then loads and attaches. The error (SourceKind::kTracing) is the reason tracing is
// unavailable, phrased for an operator ("no kernel BTF at /sys/kernel/btf/vmlinux ...").
Result<std::unique_ptr<FlowTracer>> StartFlowTracer(const TracerOptions& options);

// The probe alone (no load), for status output and tests.
TracerProbe ProbeTracing(const TracerOptions& options);

// CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns (to turn kernel stamps into unix time).
int64_t MonotonicToUnixOffsetNs();

}  // namespace ad
