#include "tracing/flow_tracer.h"

#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#ifdef AD_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "hbone_flows.skel.h"
#pragma GCC diagnostic pop
#endif

#include "base/unique_fd.h"
#include "hbone_flows.h"

namespace ad {
namespace {

SourceError TracingError(const std::string& message, int err = 0) {
  return SourceError{SourceKind::kTracing, message, err};
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Effective capabilities of the calling thread (capget: no libcap needed).
bool HasTracingCapabilities() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  auto has = [&data](int cap) { return (data[cap / 32].effective & (1u << (cap % 32))) != 0; };
  constexpr int kCapPerfmon = 38;  // not in every libc's headers yet
  constexpr int kCapBpf = 39;
  return has(CAP_SYS_ADMIN) || (has(kCapBpf) && has(kCapPerfmon));
}

// "[integrity]" in "none [integrity] confidentiality"; "" when securityfs is not mounted.
std::string ReadLockdown() {
  std::ifstream in("/sys/kernel/security/lockdown");
  std::string line;
  if (!std::getline(in, line)) return "";
  const size_t open = line.find('[');
  const size_t close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

std::string TracepointEventDir(const TracerOptions& options) {
  return options.tracefs_path + "/events/sock/inet_sock_set_state";
}

}  // namespace

std::string_view AttachModeName(AttachMode mode) {
  switch (mode) {
    case AttachMode::kAuto:
      return "auto";
    case AttachMode::kTpBtf:
      return "tp_btf";
    case AttachMode::kRawTp:
      return "raw_tp";
    case AttachMode::kTracepoint:
      return "tracepoint";
  }
  return "auto";
}

std::optional<uint32_t> ParseRingBytes(const std::string& text) {
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || bytes < kMinRingBytes || bytes > kMaxRingBytes) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(bytes);
}

std::optional<AttachMode> ParseAttachMode(std::string_view name) {
  for (AttachMode mode :
       {AttachMode::kAuto, AttachMode::kTpBtf, AttachMode::kRawTp, AttachMode::kTracepoint}) {
    if (AttachModeName(mode) == name) return mode;
  }
  return std::nullopt;
}

int64_t MonotonicToUnixOffsetNs() {
  timespec real{};
  timespec mono{};
  ::clock_gettime(CLOCK_REALTIME, &real);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t{real.tv_sec} - mono.tv_sec) * 1'000'000'000 + (real.tv_nsec - mono.tv_nsec);
}

TracerProbe ProbeTracing(const TracerOptions& options) {
  TracerProbe probe;
  probe.btf_present = Exists(options.btf_path);
  probe.capabilities_ok = HasTracingCapabilities();
  probe.lockdown = ReadLockdown();
  probe.tracefs_mounted = Exists(TracepointEventDir(options));
  return probe;
}

#ifndef AD_HAVE_BPF

Result<std::unique_ptr<FlowTracer>> StartFlowTracer(const TracerOptions&) {
  return TracingError("this ambient-doctor was built without the eBPF flow tracer (AD_BPF=OFF)");
}

#else

namespace {

// libbpf's warnings go to the debug log; the last one explains a failed load or attach.
thread_local std::string* g_libbpf_last_warning = nullptr;

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char text[1024];
  std::vsnprintf(text, sizeof(text), format, args);
  std::string line(text);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  spdlog::debug("libbpf: {}", line);
  if (g_libbpf_last_warning != nullptr && !line.empty()) *g_libbpf_last_warning = line;
  return 0;
}

struct SkeletonDeleter {
  void operator()(hbone_flows_bpf* skeleton) const { hbone_flows_bpf__destroy(skeleton); }
};
struct RingBufferDeleter {
  void operator()(ring_buffer* ring) const { ring_buffer__free(ring); }
};
using SkeletonPtr = std::unique_ptr<hbone_flows_bpf, SkeletonDeleter>;

uint32_t RingSize(uint32_t requested) {
  const auto page = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));
  uint32_t size = page;
  while (size < requested && size < (1u << 30)) size <<= 1;
  return size;
}

// The programs of one flavour; the others stay unloaded.
std::vector<bpf_program*> ProgramsOf(hbone_flows_bpf& skeleton, AttachMode mode) {
  switch (mode) {
    case AttachMode::kTpBtf:
      return {skeleton.progs.btf_set_state, skeleton.progs.btf_retransmit,
              skeleton.progs.btf_receive_reset, skeleton.progs.btf_send_reset};
    case AttachMode::kRawTp:
      return {skeleton.progs.raw_set_state, skeleton.progs.raw_retransmit,
              skeleton.progs.raw_receive_reset, skeleton.progs.raw_send_reset};
    case AttachMode::kTracepoint:
      return {skeleton.progs.tp_set_state, skeleton.progs.tp_retransmit,
              skeleton.progs.tp_receive_reset, skeleton.progs.tp_send_reset};
    case AttachMode::kAuto:
      break;
  }
  return {};
}

std::string Failure(const std::string& step, int err, const std::string& libbpf_message) {
  std::string text = step + ": " + std::strerror(err);
  if (!libbpf_message.empty()) text += " (libbpf: " + libbpf_message + ")";
  return text;
}

// Opens, configures, loads and attaches one flavour. The error is the attempt's explanation.
Result<SkeletonPtr> LoadFlavour(const TracerOptions& options, AttachMode mode) {
  std::string last_warning;
  g_libbpf_last_warning = &last_warning;
  struct Reset {
    ~Reset() { g_libbpf_last_warning = nullptr; }
  } reset;

  bpf_object_open_opts open_options{};
  open_options.sz = sizeof(open_options);
  if (options.btf_path != "/sys/kernel/btf/vmlinux") {
    open_options.btf_custom_path = options.btf_path.c_str();
  }
  SkeletonPtr skeleton(hbone_flows_bpf__open_opts(&open_options));
  if (!skeleton) return TracingError(Failure("open", errno, last_warning), errno);

  skeleton->rodata->traced_port_count = static_cast<uint32_t>(options.ports.size());
  for (size_t i = 0; i < options.ports.size(); ++i) {
    skeleton->rodata->traced_ports[i] = options.ports[i];
  }
  for (size_t i = options.ports.size(); i < HBONE_MAX_PORTS; ++i) {
    skeleton->rodata->traced_ports[i] = 0;
  }
  const uint32_t ring_size = RingSize(options.ring_bytes);
  skeleton->rodata->wakeup_bytes = options.batch_wakeups ? ring_size / 4 : 0;
  skeleton->rodata->trace_all_connects = options.trace_all_connects;
  skeleton->rodata->watch_netns = options.watch_bypass_netns;
  for (size_t i = 0; i < HBONE_MAX_CAPTURE_PORTS; ++i) {
    skeleton->rodata->capture_ports[i] =
        i < options.capture_ports.size() ? options.capture_ports[i] : 0;
  }
  // The map exists in every mode (the skeleton has it); one entry when nothing will write it.
  const uint32_t watched_entries = options.watch_bypass_netns ? options.max_bypass_netns : 1;
  if (int err = bpf_map__set_max_entries(skeleton->maps.watched_netns, watched_entries); err != 0) {
    return TracingError(Failure("watched netns map size", -err, last_warning), -err);
  }
  if (int err = bpf_map__set_max_entries(skeleton->maps.flow_events, ring_size); err != 0) {
    return TracingError(Failure("ring buffer size", -err, last_warning), -err);
  }
  if (int err = bpf_map__set_max_entries(skeleton->maps.flow_states, options.max_flows); err != 0) {
    return TracingError(Failure("state map size", -err, last_warning), -err);
  }
  const std::vector<bpf_program*> wanted = ProgramsOf(*skeleton, mode);
  bpf_program* program = nullptr;
  bpf_object__for_each_program(program, skeleton->obj) {
    bool keep = false;
    for (bpf_program* candidate : wanted) keep = keep || candidate == program;
    bpf_program__set_autoload(program, keep);
  }
  if (int err = hbone_flows_bpf__load(skeleton.get()); err != 0) {
    return TracingError(Failure("load", -err, last_warning), -err);
  }
  // Attaches the loaded flavour only (the skeleton skips programs that are not autoloaded).
  if (int err = hbone_flows_bpf__attach(skeleton.get()); err != 0) {
    return TracingError(Failure("attach", -err, last_warning), -err);
  }
  return skeleton;
}

class BpfFlowTracer final : public FlowTracer {
 public:
  BpfFlowTracer(SkeletonPtr skeleton, AttachMode mode, TracerProbe probe,
                const TracerOptions& options)
      : skeleton_(std::move(skeleton)),
        mode_(mode),
        probe_(std::move(probe)),
        offset_ns_(MonotonicToUnixOffsetNs()),
        watch_bypass_netns_(options.watch_bypass_netns),
        max_bypass_netns_(options.max_bypass_netns) {}

  // The ring, and an epoll set of the ring's own epoll fd and an eventfd that Interrupt() signals.
  Status OpenRing() {
    ring_.reset(
        ring_buffer__new(bpf_map__fd(skeleton_->maps.flow_events), &OnRecord, this, nullptr));
    if (!ring_) return TracingError(std::string("ring buffer: ") + std::strerror(errno), errno);
    interrupt_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    epoll_.Reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!interrupt_.valid() || !epoll_.valid()) {
      return TracingError(std::string("ring wait set: ") + std::strerror(errno), errno);
    }
    for (const auto& [fd, token] : {std::pair{ring_buffer__epoll_fd(ring_.get()), kRingToken},
                                    std::pair{interrupt_.get(), kInterruptToken}}) {
      epoll_event event{.events = EPOLLIN, .data = {.u64 = token}};
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
        return TracingError(std::string("ring wait set: ") + std::strerror(errno), errno);
      }
    }
    return OkStatus();
  }

  AttachMode attach_mode() const override { return mode_; }
  const TracerProbe& probe() const override { return probe_; }

  Result<size_t> Poll(std::chrono::milliseconds timeout,
                      const std::function<void(const FlowEvent&)>& sink) override {
    sink_ = &sink;
    polled_ = 0;
    std::array<epoll_event, 2> ready{};
    const int n = ::epoll_wait(epoll_.get(), ready.data(), static_cast<int>(ready.size()),
                               static_cast<int>(timeout.count()));
    int rc = n < 0 ? -errno : 0;
    for (int i = 0; i < n; ++i) {
      if (ready[static_cast<size_t>(i)].data.u64 != kInterruptToken) continue;
      uint64_t count = 0;
      (void)!::read(interrupt_.get(), &count, sizeof(count));
    }
    // Every ready record, woken or not (batching submits most without a wakeup).
    if (rc == 0 || rc == -EINTR) {
      const int drained = ring_buffer__consume(ring_.get());
      if (drained < 0) rc = drained;
    }
    sink_ = nullptr;
    if (rc < 0 && rc != -EINTR) {
      return TracingError(std::string("ring buffer poll: ") + std::strerror(-rc), -rc);
    }
    return polled_;
  }

  void Interrupt() override {
    const uint64_t one = 1;
    (void)!::write(interrupt_.get(), &one, sizeof(one));
  }

  TracerCounters Counters() const override {
    TracerCounters counters;
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return counters;
    std::vector<uint64_t> values(static_cast<size_t>(cpus));
    const int fd = bpf_map__fd(skeleton_->maps.flow_counters);
    auto sum = [&](uint32_t index) {
      uint64_t total = 0;
      if (bpf_map_lookup_elem(fd, &index, values.data()) != 0) return total;
      for (uint64_t value : values) total += value;
      return total;
    };
    counters.events = sum(HBONE_COUNTER_EVENTS);
    counters.lost_events = sum(HBONE_COUNTER_LOST_EVENTS);
    counters.state_full = sum(HBONE_COUNTER_STATE_FULL);
    counters.late_flows = sum(HBONE_COUNTER_LATE_FLOWS);
    counters.decode_errors = decode_errors_;
    counters.watched_flows = sum(HBONE_COUNTER_WATCHED_FLOWS);
    return counters;
  }

  Result<BypassNetnsState> SetBypassNetns(const std::vector<uint32_t>& inodes) override {
    if (!watch_bypass_netns_) {
      return TracingError("the tracer was started without mesh-bypass mode", EINVAL);
    }
    const std::set<uint32_t> wanted(inodes.begin(), inodes.end());
    std::lock_guard lock(bypass_mutex_);
    if (wanted == wanted_) return bypass_;  // unchanged: no map write
    wanted_ = wanted;
    const int fd = bpf_map__fd(skeleton_->maps.watched_netns);
    for (auto it = watched_.begin(); it != watched_.end();) {
      if (wanted.contains(*it)) {
        ++it;
        continue;
      }
      const uint32_t key = *it;
      if (bpf_map_delete_elem(fd, &key) != 0 && errno != ENOENT) ++bypass_.update_errors;
      it = watched_.erase(it);
    }
    size_t left_out = 0;
    const uint8_t present = 1;
    for (uint32_t inode : wanted) {
      if (watched_.contains(inode)) continue;
      if (watched_.size() >= max_bypass_netns_) {
        ++left_out;
        continue;
      }
      if (bpf_map_update_elem(fd, &inode, &present, BPF_ANY) != 0) {
        if (errno == E2BIG || errno == ENOMEM) {
          ++left_out;
        } else {
          ++bypass_.update_errors;
        }
        continue;
      }
      watched_.insert(inode);
    }
    bypass_.watched = watched_.size();
    bypass_.not_watched = left_out;
    bypass_.overflow_total += left_out;
    return bypass_;
  }

  BypassNetnsState BypassNetns() const override {
    std::lock_guard lock(bypass_mutex_);
    return bypass_;
  }

 private:
  static int OnRecord(void* context, void* data, size_t size) {
    auto* self = static_cast<BpfFlowTracer*>(context);
    Result<FlowEvent> event =
        DecodeFlowEvent(std::span(static_cast<const uint8_t*>(data), size), self->offset_ns_);
    if (!event.ok()) {
      ++self->decode_errors_;
      return 0;
    }
    ++self->polled_;
    if (self->sink_ != nullptr) (*self->sink_)(*event);
    return 0;
  }

  static constexpr uint64_t kRingToken = 1;
  static constexpr uint64_t kInterruptToken = 2;

  // Declared before the ring: the ring (which maps the ring-buffer map) is freed first.
  SkeletonPtr skeleton_;
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring_;
  UniqueFd interrupt_;
  UniqueFd epoll_;  // the ring's epoll fd and interrupt_
  AttachMode mode_;
  TracerProbe probe_;
  int64_t offset_ns_;
  const std::function<void(const FlowEvent&)>* sink_ = nullptr;
  size_t polled_ = 0;
  uint64_t decode_errors_ = 0;
  bool watch_bypass_netns_ = false;
  uint32_t max_bypass_netns_ = 0;
  mutable std::mutex bypass_mutex_;  // SetBypassNetns and BypassNetns come from any thread
  std::set<uint32_t> wanted_;        // the last SetBypassNetns argument
  std::set<uint32_t> watched_;       // what the map holds
  BypassNetnsState bypass_;
};

}  // namespace

Result<std::unique_ptr<FlowTracer>> StartFlowTracer(const TracerOptions& options) {
  TracerProbe probe = ProbeTracing(options);
  if (options.capture_ports.size() > HBONE_MAX_CAPTURE_PORTS ||
      (options.watch_bypass_netns && options.max_bypass_netns == 0)) {
    return TracingError("mesh-bypass mode takes at most " +
                            std::to_string(HBONE_MAX_CAPTURE_PORTS) +
                            " capture ports and a watched-netns map of at least one entry",
                        EINVAL);
  }
  if (options.ports.empty() || options.ports.size() > HBONE_MAX_PORTS) {
    return TracingError("between 1 and " + std::to_string(HBONE_MAX_PORTS) +
                            " traced ports are supported, got " +
                            std::to_string(options.ports.size()),
                        EINVAL);
  }
  if (!probe.btf_present) {
    return TracingError("no kernel BTF at " + options.btf_path +
                            " (CONFIG_DEBUG_INFO_BTF): the CO-RE tracer cannot be relocated",
                        ENOENT);
  }
  if (!probe.capabilities_ok) {
    return TracingError(
        "missing capabilities: the tracer needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)", EPERM);
  }
  if (probe.lockdown == "confidentiality") {
    return TracingError("kernel lockdown=confidentiality forbids reading kernel memory from BPF",
                        EPERM);
  }
  libbpf_set_print(LibbpfPrint);
  std::vector<AttachMode> modes = {options.attach};
  if (options.attach == AttachMode::kAuto) {
    modes = {AttachMode::kTpBtf, AttachMode::kRawTp, AttachMode::kTracepoint};
  }
  int last_error = 0;
  for (AttachMode mode : modes) {
    const std::string name(AttachModeName(mode));
    if (mode == AttachMode::kTracepoint && !probe.tracefs_mounted) {
      probe.attempts.push_back(name + ": tracefs is not mounted at " + options.tracefs_path +
                               " (the agent does not mount it)");
      last_error = ENOENT;
      continue;
    }
    Result<SkeletonPtr> loaded = LoadFlavour(options, mode);
    if (!loaded.ok()) {
      probe.attempts.push_back(name + ": " + loaded.error().message);
      last_error = loaded.error().error_number;
      continue;
    }
    probe.attempts.push_back(name + ": ok");
    auto tracer = std::make_unique<BpfFlowTracer>(std::move(loaded).value(), mode, probe, options);
    if (Status ring = tracer->OpenRing(); !ring.ok()) return ring.error();
    return std::unique_ptr<FlowTracer>(std::move(tracer));
  }
  std::string message = "no attach type worked: ";
  for (size_t i = 0; i < probe.attempts.size(); ++i) {
    if (i > 0) message += "; ";
    message += probe.attempts[i];
  }
  return TracingError(message, last_error);
}

#endif

}  // namespace ad
