#include "ztunnel_sim/ztunnel_sim.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>

#include "base/unique_fd.h"
#include "model/json.h"
#include "zds/zds.pb.h"
#include "zds_wire/zds_wire.h"

namespace ad::sim {
namespace {

namespace pb = istio::workload::zds;

constexpr SourceKind kSource = SourceKind::kLab;
constexpr char kReadinessTask[] = "workload proxy manager";

struct ListenerSpec {
  int family;
  int type;
  const char* address;
  uint16_t port;
};

// `ipv6`: the lab's dual-stack wildcard listeners. `dns_v6`: IPv6 is enabled in the pod netns,
// so the DNS proxy binds "localhost" on ::1 as well as 127.0.0.1, like ztunnel (and fails with
// EADDRNOTAVAIL when lo has no ::1). `dns`: false for the no-dns-listener fault.
std::vector<ListenerSpec> InpodListenerSpecs(bool ipv6, bool dns, bool dns_v6) {
  const char* wildcard = ipv6 ? "::" : "0.0.0.0";
  const int wildcard_family = ipv6 ? AF_INET6 : AF_INET;
  std::vector<ListenerSpec> specs = {
      {wildcard_family, SOCK_STREAM, wildcard, kOutboundPort},
      {wildcard_family, SOCK_STREAM, wildcard, kInboundPlaintextPort},
      {wildcard_family, SOCK_STREAM, wildcard, kInboundHbonePort},
  };
  if (!dns) return specs;
  specs.push_back({AF_INET, SOCK_STREAM, "127.0.0.1", kDnsPort});
  specs.push_back({AF_INET, SOCK_DGRAM, "127.0.0.1", kDnsPort});
  if (dns_v6) {
    specs.push_back({AF_INET6, SOCK_STREAM, "::1", kDnsPort});
    specs.push_back({AF_INET6, SOCK_DGRAM, "::1", kDnsPort});
  }
  return specs;
}

// IPv6 usable in the calling thread's netns: /proc/sys/net resolves against the netns of the
// thread that opens it; no such file means the kernel has no IPv6 (ipv6.disable=1).
bool Ipv6EnabledHere() {
  UniqueFd fd(::open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  char value = '1';
  return ::read(fd.get(), &value, 1) == 1 && value == '0';
}

std::string BindName(const ListenerSpec& spec) {
  const bool v6 = spec.family == AF_INET6;
  return std::string(v6 ? "[" : "") + spec.address + (v6 ? "]" : "") + ":" +
         std::to_string(spec.port);
}

// A socket bound (and for TCP listening) in the calling thread's netns, marked like ztunnel's.
Result<UniqueFd> OpenListener(const ListenerSpec& spec) {
  UniqueFd fd(::socket(spec.family, spec.type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoError(kSource, "socket for " + BindName(spec));
  const int on = 1;
  const int off = 0;
  const uint32_t mark = zds::kZtunnelPacketMark;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) != 0) {
    return ErrnoError(kSource, "setsockopt(SO_MARK 0x539) for " + BindName(spec));
  }
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  // INPOD_PORT_REUSE: two ztunnels may hold the same port during an upgrade.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (spec.family == AF_INET) {
    auto* address = reinterpret_cast<sockaddr_in*>(&storage);
    address->sin_family = AF_INET;
    address->sin_port = htons(spec.port);
    ::inet_pton(AF_INET, spec.address, &address->sin_addr);
    length = sizeof(sockaddr_in);
  } else {
    auto* address = reinterpret_cast<sockaddr_in6*>(&storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(spec.port);
    ::inet_pton(AF_INET6, spec.address, &address->sin6_addr);
    length = sizeof(sockaddr_in6);
    if (std::strcmp(spec.address, "::") == 0) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // dual stack
    }
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0) {
    return ErrnoError(kSource, "failed to bind to address " + BindName(spec));
  }
  if (spec.type == SOCK_STREAM && ::listen(fd.get(), 128) != 0) {
    return ErrnoError(kSource, "listen on " + BindName(spec));
  }
  return fd;
}

// Global addresses of the calling thread's netns (what XDS would report as workloadIps).
std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> ips;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return ips;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_LOOPBACK) != 0) continue;
    std::array<char, INET6_ADDRSTRLEN> text{};
    if (entry->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text.data(),
                  text.size());
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& address = reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&address)) continue;
      ::inet_ntop(AF_INET6, &address, text.data(), text.size());
    } else {
      continue;
    }
    ips.emplace_back(text.data());
  }
  ::freeifaddrs(list);
  return ips;
}

struct InpodResult {
  std::vector<UniqueFd> listeners;
  std::vector<std::string> ips;
  std::string error;
};

// Like ztunnel's InPodSocketFactory: the sockets are created inside the pod netns, so they belong
// to it. A throwaway thread does the setns, so no thread of ours is ever left in a pod netns.
InpodResult OpenInPod(int netns_fd, bool open_listeners, bool ipv6, bool dns) {
  InpodResult result;
  std::thread worker([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      result.error = std::string("setns(pod netns): ") + std::strerror(errno);
      return;
    }
    result.ips = InterfaceAddresses();
    if (!open_listeners) return;
    for (const ListenerSpec& spec : InpodListenerSpecs(ipv6, dns, Ipv6EnabledHere())) {
      Result<UniqueFd> listener = OpenListener(spec);
      if (!listener.ok()) {
        result.error = listener.error().message;
        result.listeners.clear();
        return;
      }
      result.listeners.push_back(std::move(listener).value());
    }
  });
  worker.join();
  return result;
}

struct Proxy {
  std::string uid;
  std::string name;
  std::string namespace_name;
  std::string service_account;
  UniqueFd netns;
  uint64_t netns_dev = 0;
  uint64_t netns_inode = 0;
  std::vector<UniqueFd> listeners;
  std::vector<std::string> ips;
  bool up = false;
};

enum class Next : uint8_t { kContinue, kReconnect, kFatal };

std::string EncodeAck(const std::string& error) {
  pb::WorkloadResponse response;
  response.mutable_ack()->set_error(error);
  return response.SerializeAsString();
}

}  // namespace

std::string DefaultNodeName() {
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && env[0] != '\0') return env;
  char host[HOST_NAME_MAX + 1] = {};
  return ::gethostname(host, sizeof(host) - 1) == 0 ? std::string(host) : std::string("unknown");
}

std::string_view ZtunnelFaultName(ZtunnelFault fault) {
  switch (fault) {
    case ZtunnelFault::kNone:
      return "none";
    case ZtunnelFault::kNoListeners:
      return "no-listeners";
    case ZtunnelFault::kNack:
      return "nack";
    case ZtunnelFault::kCrash:
      return "crash";
    case ZtunnelFault::kNoDnsListener:
      return "no-dns-listener";
  }
  return "?";
}

Result<ZtunnelFault> ParseZtunnelFault(std::string_view name) {
  for (ZtunnelFault fault : {ZtunnelFault::kNone, ZtunnelFault::kNoListeners, ZtunnelFault::kNack,
                             ZtunnelFault::kCrash, ZtunnelFault::kNoDnsListener}) {
    if (name == ZtunnelFaultName(fault)) return fault;
  }
  return SourceError{
      kSource,
      "unknown fault '" + std::string(name) + "' (no-listeners, nack, crash, no-dns-listener)",
      EINVAL};
}

namespace {

// RFC 3339 as ztunnel's admin prints certificate times (chrono's to_rfc3339: "+00:00").
std::string Rfc3339(std::chrono::system_clock::time_point at) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 40> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S+00:00", &utc);
  return text.data();
}

// A stand-in for a PEM certificate: base64 of a PEM block naming the subject (not a real DER).
std::string FakePemBase64(const std::string& subject) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::string pem =
      "-----BEGIN CERTIFICATE-----\nztunnel-sim " + subject + "\n-----END CERTIFICATE-----\n";
  std::string out;
  size_t i = 0;
  for (; i + 2 < pem.size(); i += 3) {
    const uint32_t n = (uint8_t(pem[i]) << 16) | (uint8_t(pem[i + 1]) << 8) | uint8_t(pem[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i < pem.size()) {
    uint32_t n = uint8_t(pem[i]) << 16;
    if (i + 1 < pem.size()) n |= uint8_t(pem[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < pem.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

struct ZtunnelSim::State {
  ZtunnelSimOptions options;
  // Certificates are "issued" at start, like ztunnel's first fetch.
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
  UniqueFd wake;  // eventfd: Stop() wakes the ZDS loop
  std::thread zds_thread;

  mutable std::mutex mutex;  // everything below
  bool stopping = false;
  bool connected = false;
  bool snapshot_received = false;
  uint64_t connections = 0;
  uint64_t proxies_started = 0;
  uint64_t proxies_stopped = 0;
  std::map<std::string, Proxy> proxies;  // by pod UID; Pending ones included
  std::set<std::string> snapshot_uids;   // seen on this connection before SnapshotSent
  std::set<std::string> pending;

  void Log(const std::string& message) const {
    if (!options.log_to_stderr) return;
    std::timespec now{};
    std::timespec_get(&now, TIME_UTC);
    std::tm utc{};
    gmtime_r(&now.tv_sec, &utc);
    std::array<char, 32> stamp{};
    std::strftime(stamp.data(), stamp.size(), "%H:%M:%S", &utc);
    std::fprintf(stderr, "%s.%03ld ztunnel-sim: %s\n", stamp.data(), now.tv_nsec / 1000000,
                 message.c_str());
  }

  bool FaultApplies(ZtunnelFault fault, const std::string& uid) const {
    return options.fault == fault &&
           (options.fault_uids.empty() || options.fault_uids.count(uid) > 0);
  }

  // Starts (or restarts) a pod's in-pod proxy; error "" on success, else the NACK text.
  InpodResult StartProxy(const std::string& uid, int netns_fd) {
    const bool nack = FaultApplies(ZtunnelFault::kNack, uid);
    const bool listeners = !nack && !FaultApplies(ZtunnelFault::kNoListeners, uid);
    const bool dns = !FaultApplies(ZtunnelFault::kNoDnsListener, uid);
    InpodResult opened = OpenInPod(netns_fd, listeners, options.ipv6, dns);
    if (nack) {
      opened.error =
          "failure to start proxy : failed to bind to address 127.0.0.1:15053: simulated by "
          "ztunnel-sim --fault nack";
    } else if (!opened.error.empty()) {
      opened.error = "failure to start proxy : " + opened.error;
    }
    return opened;
  }

  // Caller holds `mutex`.
  void DrainLocked(const std::string& uid, const char* why) {
    auto found = proxies.find(uid);
    if (found == proxies.end()) return;
    if (found->second.up) ++proxies_stopped;
    Log(std::string("draining proxy uid=") + uid + " (" + why + ")");
    proxies.erase(found);  // closes its listeners and the netns fd
    pending.erase(uid);
  }

  std::string HandleAdd(const pb::AddWorkload& add, UniqueFd netns) {
    struct stat identity {};
    ::fstat(netns.get(), &identity);
    if (!zds::IsNetnsFd(netns.get())) Log("received fd is not a network namespace (debug only)");
    {
      std::lock_guard lock(mutex);
      if (!snapshot_received) snapshot_uids.insert(add.uid());
      auto existing = proxies.find(add.uid());
      if (existing != proxies.end()) {
        const bool same_netns = existing->second.netns_dev == identity.st_dev &&
                                existing->second.netns_inode == identity.st_ino;
        if (same_netns && existing->second.up) return "";  // idempotent
        DrainLocked(add.uid(), same_netns ? "retrying" : "netns changed");
      }
    }
    Proxy proxy;
    proxy.uid = add.uid();
    proxy.name = add.workload_info().name();
    proxy.namespace_name = add.workload_info().namespace_();
    proxy.service_account = add.workload_info().service_account();
    proxy.netns = std::move(netns);
    proxy.netns_dev = identity.st_dev;
    proxy.netns_inode = identity.st_ino;
    Log("pod received, starting proxy uid=" + proxy.uid + " name=" + proxy.name);
    InpodResult started = StartProxy(proxy.uid, proxy.netns.get());
    const std::string error = started.error;
    proxy.ips = std::move(started.ips);
    proxy.listeners = std::move(started.listeners);
    std::lock_guard lock(mutex);
    proxy.up = error.empty();
    if (proxy.up) {
      ++proxies_started;
    } else {
      pending.insert(proxy.uid);
      Log("failed to start proxy uid=" + proxy.uid + ": " + error);
    }
    proxies.insert_or_assign(proxy.uid, std::move(proxy));
    return error;
  }

  void RetryPending() {
    std::vector<std::string> uids;
    {
      std::lock_guard lock(mutex);
      uids.assign(pending.begin(), pending.end());
    }
    for (const std::string& uid : uids) {
      int netns_fd = -1;
      {
        std::lock_guard lock(mutex);
        auto found = proxies.find(uid);
        if (found == proxies.end()) continue;
        netns_fd = found->second.netns.get();  // stays open: only this thread erases proxies
      }
      InpodResult started = StartProxy(uid, netns_fd);
      std::lock_guard lock(mutex);
      auto found = proxies.find(uid);
      if (found == proxies.end() || !started.error.empty()) continue;
      found->second.up = true;
      found->second.ips = std::move(started.ips);
      found->second.listeners = std::move(started.listeners);
      ++proxies_started;
      pending.erase(uid);
      Log("pending proxy started uid=" + uid);
    }
  }

  // Processes one request record and sends its response.
  Next Process(int socket, zds::Record record) {
    pb::WorkloadRequest request;
    std::string error;
    Next next = Next::kContinue;
    if (!request.ParseFromString(record.bytes)) {
      error = "failed to decode request";
      next = Next::kReconnect;
    } else if (request.has_add()) {
      if (record.fds.size() != 1) {
        error = record.fds.empty() ? "No control message"
                                   : "Expected 1 FD, got " + std::to_string(record.fds.size());
        next = Next::kReconnect;
      } else if (!request.add().has_workload_info()) {
        error = "protocol error: add without workload_info";
        next = Next::kFatal;
      } else {
        error = HandleAdd(request.add(), std::move(record.fds.front()));
      }
    } else if (!record.fds.empty()) {
      error = "Unexpected control message";
      next = Next::kReconnect;
    } else if (request.has_keep()) {
      std::lock_guard lock(mutex);
      if (snapshot_received) {
        error = "protocol error: keep after snapshot";
        next = Next::kFatal;
      } else {
        snapshot_uids.insert(request.keep().uid());
      }
    } else if (request.has_del()) {
      std::lock_guard lock(mutex);
      snapshot_uids.erase(request.del().uid());
      DrainLocked(request.del().uid(), "deleted");
    } else if (request.has_snapshot_sent()) {
      std::lock_guard lock(mutex);
      if (snapshot_received) {
        error = "protocol error: duplicate snapshot";
        next = Next::kFatal;
      } else {
        std::vector<std::string> stale;
        for (const auto& [uid, proxy] : proxies) {
          if (!snapshot_uids.count(uid)) stale.push_back(uid);
        }
        for (const std::string& uid : stale) DrainLocked(uid, "not in snapshot");
        snapshot_received = true;
        Log("received snapshot sent; " + std::to_string(proxies.size()) + " proxies, " +
            std::to_string(pending.size()) + " pending");
      }
    } else {
      error = "unknown request";
      next = Next::kReconnect;
    }
    Result<std::monostate> sent = zds::SendRecord(socket, EncodeAck(error));
    if (!sent.ok()) {
      Log("failed to send ack: " + sent.error().message);
      return Next::kReconnect;
    }
    if (next == Next::kContinue && request.has_snapshot_sent() &&
        options.fault == ZtunnelFault::kCrash) {
      Log("fault crash: exiting after the snapshot");
      if (options.on_crash) {
        options.on_crash();
      } else {
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
    return next;
  }

  bool WaitForStop(std::chrono::milliseconds delay) {
    pollfd fd{wake.get(), POLLIN, 0};
    return ::poll(&fd, 1, static_cast<int>(delay.count())) > 0;
  }

  void Disconnected() {
    std::lock_guard lock(mutex);
    connected = false;
    snapshot_received = false;
    snapshot_uids.clear();
    // Pending adds are forgotten; running proxies survive until the next snapshot reconciles.
    for (const std::string& uid : std::set<std::string>(pending)) DrainLocked(uid, "reconnect");
    pending.clear();
  }

  void Run() {
    std::chrono::milliseconds backoff{10};
    while (true) {
      Result<UniqueFd> socket = zds::ConnectSeqpacket(options.zds_socket_path);
      if (!socket.ok()) {
        if (WaitForStop(backoff)) return;
        backoff = std::min(backoff * 2, options.max_backoff);
        continue;
      }
      backoff = std::chrono::milliseconds(10);
      pb::ZdsHello hello;
      hello.set_version(pb::V1);
      if (!zds::SendRecord(socket->get(), hello.SerializeAsString()).ok()) {
        if (WaitForStop(backoff)) return;
        continue;
      }
      {
        std::lock_guard lock(mutex);
        connected = true;
        ++connections;
      }
      Log("handling new stream to " + options.zds_socket_path);
      Next next = Next::kContinue;
      auto last_retry = std::chrono::steady_clock::now();
      while (next == Next::kContinue) {
        std::array<pollfd, 2> fds{pollfd{socket->get(), POLLIN, 0}, pollfd{wake.get(), POLLIN, 0}};
        bool has_pending = false;
        {
          std::lock_guard lock(mutex);
          has_pending = !pending.empty();
        }
        const int timeout = has_pending ? static_cast<int>(options.retry_interval.count()) : -1;
        if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
        if (fds[1].revents != 0) return;
        if (has_pending &&
            std::chrono::steady_clock::now() - last_retry >= options.retry_interval) {
          RetryPending();
          last_retry = std::chrono::steady_clock::now();
        }
        if (fds[0].revents == 0) continue;
        Result<zds::Record> record = zds::ReceiveRecord(socket->get(), 0, 1);
        if (!record.ok()) {
          // Truncation or a read error: NACK and reconnect, like ztunnel.
          Log("read error: " + record.error().message);
          (void)zds::SendRecord(socket->get(), EncodeAck(record.error().message));
          break;
        }
        if (record->eof) {
          Log("ZDS connection closed by the node agent");
          break;
        }
        next = Process(socket->get(), std::move(record).value());
      }
      Disconnected();
      if (next == Next::kFatal) {
        Log("protocol error: exiting");
        if (options.on_crash) {
          options.on_crash();
          return;
        }
        std::fflush(stderr);
        std::_Exit(1);
      }
      if (WaitForStop(backoff)) return;
    }
  }
};

ZtunnelSim::ZtunnelSim(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<ZtunnelSim>> ZtunnelSim::Start(ZtunnelSimOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->wake = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!state->wake.valid()) return ErrnoError(kSource, "eventfd");
  state->Log("connecting to " + state->options.zds_socket_path + ", fault " +
             std::string(ZtunnelFaultName(state->options.fault)));
  State* raw = state.get();
  state->zds_thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<ZtunnelSim>(new ZtunnelSim(std::move(state)));
}

ZtunnelSim::~ZtunnelSim() { Stop(); }

void ZtunnelSim::Stop() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    s.stopping = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(s.wake.get(), &one, sizeof(one));
  if (s.zds_thread.joinable()) s.zds_thread.join();
  std::lock_guard lock(s.mutex);
  s.proxies.clear();
  s.pending.clear();
  s.connected = false;
}

ZtunnelSimStatus ZtunnelSim::status() const {
  const State& s = *state_;
  std::lock_guard lock(s.mutex);
  ZtunnelSimStatus status;
  status.connected = s.connected;
  status.snapshot_received = s.snapshot_received;
  status.ready = s.connected && s.snapshot_received && s.pending.empty();
  status.connections = s.connections;
  status.proxies_started = s.proxies_started;
  status.proxies_stopped = s.proxies_stopped;
  status.pending = s.pending.size();
  for (const auto& [uid, proxy] : s.proxies) {
    status.proxies.push_back({uid, proxy.name, proxy.namespace_name, proxy.service_account,
                              proxy.up ? "Up" : "Pending", proxy.ips, proxy.netns_inode,
                              proxy.listeners.size()});
  }
  return status;
}

std::string ZtunnelSim::ConfigDumpJson() const {
  return ConfigDumpJsonFor(status(), state_->options, state_->started_at);
}

std::string ConfigDumpJsonFor(const ZtunnelSimStatus& status, const ZtunnelSimOptions& options,
                              std::chrono::system_clock::time_point started_at) {
  JsonWriter json;
  json.BeginObject();
  // Cluster-wide XDS view; here every pod ZDS told us about, with addresses read from its netns.
  json.Key("workloads").BeginArray();
  for (const ZtunnelProxyView& proxy : status.proxies) {
    json.BeginObject();
    json.StringArray("workloadIps", proxy.ips);
    json.Field("protocol", "HBONE");
    json.Field("networkMode", "Standard");
    json.Field("uid", "Kubernetes//Pod/" + proxy.namespace_name + "/" + proxy.name);
    json.Field("name", proxy.name);
    json.Field("namespace", proxy.namespace_name);
    json.Field("trustDomain", "cluster.local");
    json.Field("serviceAccount", proxy.service_account);
    json.Field("workloadName", proxy.name);
    json.Field("workloadType", "pod");
    json.Field("canonicalName", proxy.name);
    json.Field("canonicalRevision", "latest");
    json.Field("node", options.node_name);
    json.Field("status", "Healthy");
    json.Field("clusterId", "Kubernetes");
    json.EndObject();
  }
  json.EndArray();
  json.Key("services").BeginArray().EndArray();
  json.Key("policies").BeginArray().EndArray();
  json.Key("stagedServices").BeginObject().EndObject();
  json.Key("staticConfig").BeginObject();
  json.Key("workloads").BeginArray().EndArray();
  json.Key("services").BeginArray().EndArray();
  json.Key("policies").BeginArray().EndArray();
  json.EndObject();
  json.Key("version").BeginObject();
  json.Field("version", "ztunnel-sim");
  json.Field("gitRevision", "ztunnel-sim");
  json.Field("rustVersion", "none");
  json.Field("buildProfile", "release");
  json.Field("buildStatus", "Clean");
  json.Field("istioVersion", "1.29.6");
  json.Field("cryptoProvider", "none");
  json.EndObject();
  json.Key("config").BeginObject();
  json.Field("inpodEnabled", true);
  json.Field("inpodUds", options.zds_socket_path);
  json.Field("packetMark", static_cast<uint32_t>(zds::kZtunnelPacketMark));
  json.Field("inboundAddr", std::string(options.ipv6 ? "[::]" : "0.0.0.0") + ":15008");
  json.Field("proxyMode", "Shared");
  json.Field("localNode", options.node_name);
  json.EndObject();
  // One certificate per pod identity, as ztunnel fetches one per workload service account.
  json.Key("certificates").BeginArray();
  std::map<std::string, bool> identities;  // identity -> unavailable
  for (const ZtunnelProxyView& proxy : status.proxies) {
    const std::string identity =
        "spiffe://cluster.local/ns/" + proxy.namespace_name + "/sa/" + proxy.service_account;
    identities[identity] =
        identities[identity] || options.cert_unavailable_uids.count(proxy.uid) > 0;
  }
  const auto issued = started_at - std::chrono::minutes(1);
  for (const auto& [identity, unavailable] : identities) {
    json.BeginObject();
    json.Field("identity", identity);
    if (unavailable) {
      json.Field("state", "Unavailable: failed to fetch certificate: the identity " + identity +
                              " is not authorized (simulated by ztunnel-sim)");
      json.Key("certChain").BeginArray().EndArray();
      json.Key("rootCerts").BeginArray().EndArray();
    } else {
      json.Field("state", "Available");
      json.Key("certChain").BeginArray();
      json.BeginObject();
      json.Field("pem", FakePemBase64(identity));
      json.Field("serialNumber", "1" + std::to_string(identity.size()) + "0f3a2b");
      json.Field("validFrom", Rfc3339(issued));
      json.Field("expirationTime", Rfc3339(issued + options.cert_lifetime));
      json.EndObject();
      json.EndArray();
      json.Key("rootCerts").BeginArray();
      json.BeginObject();
      json.Field("pem", FakePemBase64("root"));
      json.Field("serialNumber", "1");
      json.Field("validFrom", Rfc3339(issued - std::chrono::hours(24 * 30)));
      json.Field("expirationTime", Rfc3339(issued + std::chrono::hours(24 * 3650)));
      json.EndObject();
      json.EndArray();
    }
    json.EndObject();
  }
  json.EndArray();
  json.Key("workloadState").BeginObject();
  for (const ZtunnelProxyView& proxy : status.proxies) {
    json.Key(proxy.uid).BeginObject();
    json.Field("state", proxy.state);
    if (proxy.state == "Up") {  // only a started proxy has a connection manager
      json.Key("connections").BeginObject();
      json.Key("inbound").BeginArray().EndArray();
      json.Key("outbound").BeginArray().EndArray();
      json.EndObject();
    }
    json.Key("info").BeginObject();
    json.Field("name", proxy.name);
    json.Field("namespace", proxy.namespace_name);
    json.Field("serviceAccount", proxy.service_account);
    json.EndObject();
    json.EndObject();
  }
  json.EndObject();
  json.EndObject();
  return json.str() + "\n";
}

std::string ZtunnelSim::MetricsText() const {
  const ZtunnelSimStatus status = this->status();
  size_t active = 0;
  for (const ZtunnelProxyView& proxy : status.proxies) active += proxy.state == "Up" ? 1 : 0;
  std::string text;
  auto metric = [&text](const std::string& name, const char* type, const char* help,
                        uint64_t value) {
    const std::string sample = std::string(type) == "counter" ? name + "_total" : name;
    text += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + sample + " " +
            std::to_string(value) + "\n";
  };
  metric("workload_manager_active_proxy_count", "gauge",
         "The total number current workloads with active proxies (unstable).", active);
  metric("workload_manager_pending_proxy_count", "gauge",
         "The total number current workloads with pending proxies (unstable).", status.pending);
  metric("workload_manager_proxies_started", "counter",
         "The total number of proxies that were started (unstable).", status.proxies_started);
  metric("workload_manager_proxies_stopped", "counter",
         "The total number of proxies that were stopped (unstable).", status.proxies_stopped);
  return text + "# EOF\n";
}

int ZtunnelSim::ReadinessCode() const { return status().ready ? 200 : 500; }

std::string ZtunnelSim::ReadinessBody() const {
  return status().ready ? "ready" : std::string("not ready, pending: ") + kReadinessTask;
}

size_t ZtunnelSim::DropDnsListeners() {
  std::lock_guard lock(state_->mutex);
  size_t closed = 0;
  for (auto& [uid, proxy] : state_->proxies) {
    std::erase_if(proxy.listeners, [&closed](const UniqueFd& fd) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        return false;
      }
      const uint16_t port =
          ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
      closed += port == kDnsPort ? 1 : 0;
      return port == kDnsPort;
    });
  }
  state_->Log("closed " + std::to_string(closed) + " DNS listener socket(s) (SIGUSR1)");
  return closed;
}

const ZtunnelSimOptions& ZtunnelSim::options() const { return state_->options; }

}  // namespace ad::sim
