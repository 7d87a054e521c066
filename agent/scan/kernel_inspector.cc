#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <tuple>

#include "model/istio_facts.h"
#include "scan/inspector.h"
#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"
#include "sources/route/route_reader.h"
#include "sources/sockdiag/inet_diag.h"

namespace ad {
namespace {

class KernelInspector : public NetnsInspector {
 public:
  KernelInspector(const ReadLimits& limits, InspectorOptions options)
      : limits_(limits), options_(options) {}

  NetnsSnapshot Inspect(const NetnsRecord& netns) override {
    const auto started = std::chrono::steady_clock::now();
    NetnsSnapshot snapshot;
    snapshot.netns = netns;
    ReadInto(snapshot);
    snapshot.scan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    return snapshot;
  }

 private:
  void ReadInto(NetnsSnapshot& snapshot) const {
    const std::string& path = snapshot.netns.PrimaryPath();
    if (path.empty()) {
      snapshot.unreadable = true;
      snapshot.errors.push_back(
          SourceError{SourceKind::kNetns, "netns record has no path", ENOENT});
      return;
    }
    auto guard = NetnsGuard::Enter(path);
    if (!guard.ok()) {
      snapshot.unreadable = true;
      snapshot.errors.push_back(guard.error());
      return;
    }
    NetfilterState& nf = snapshot.netfilter;
    NetnsReads& reads = snapshot.reads;
    // Records the outcome of one read: its status, and its error in the snapshot.
    auto settle = [&snapshot](ReadStatus& status, const SourceError* error) {
      if (error == nullptr) {
        if (status != ReadStatus::kFailed) status = ReadStatus::kOk;
        return;
      }
      status = ReadStatus::kFailed;
      snapshot.errors.push_back(*error);
    };

    // Table names first: querying a legacy table that is not listed would create it.
    std::optional<std::vector<std::string>> v4_names;
    std::optional<std::vector<std::string>> v6_names;
    if (auto names = ReadLegacyTableNames(Family::kIpv4); names.ok()) {
      v4_names = *names;
      nf.legacy_tables_v4 = *names;
    } else {
      settle(reads.legacy_v4, &names.error());
    }
    if (auto names = ReadLegacyTableNames(Family::kIpv6); names.ok()) {
      v6_names = *names;
      nf.legacy_tables_v6 = *names;
    } else {
      settle(reads.legacy_v6, &names.error());
    }

    if (auto tables = ReadNfTables(limits_); tables.ok()) {
      nf.tables = std::move(*tables);
      settle(reads.nftables, nullptr);
    } else {
      settle(reads.nftables, &tables.error());
    }
    for (auto [family, names, status] : {std::tuple{Family::kIpv4, &v4_names, &reads.legacy_v4},
                                         std::tuple{Family::kIpv6, &v6_names, &reads.legacy_v6}}) {
      if (!names->has_value()) {
        continue;  // unknown names: do not guess, a guess would instantiate tables
      }
      if (auto tables = ReadLegacyTables(family, **names, limits_); tables.ok()) {
        for (Table& table : *tables) {
          nf.tables.push_back(std::move(table));
        }
        settle(*status, nullptr);
      } else {
        settle(*status, &tables.error());
      }
    }
    if (snapshot.netns.is_host || !options_.ipsets_in_host_only) {
      if (auto sets = ReadIpSets(limits_); sets.ok()) {
        nf.ipsets = std::move(*sets);
        settle(reads.ipsets, nullptr);
      } else {
        settle(reads.ipsets, &sets.error());
      }
    }
    if (auto routing = ReadRouting({istio::kRouteTableInbound}); routing.ok()) {
      snapshot.routing = std::move(*routing);
      settle(reads.routes, nullptr);
    } else {
      settle(reads.routes, &routing.error());
    }
    ReadListenersInto(snapshot, options_.dns_udp_listeners);
  }

  void RefreshListeners(NetnsSnapshot& snapshot) override {
    std::erase_if(snapshot.errors,
                  [](const SourceError& error) { return error.kind == kListenerErrorKind; });
    snapshot.listeners.clear();
    snapshot.reads.listeners = ReadStatus::kNotRead;
    snapshot.reads.dns_udp = ReadStatus::kNotRead;
    auto guard = NetnsGuard::Enter(snapshot.netns.PrimaryPath());
    if (!guard.ok()) {  // gone since its last read: the next discovery drops it
      snapshot.reads.listeners = ReadStatus::kFailed;
      snapshot.errors.push_back(SourceError{kListenerErrorKind,
                                            "listeners not read again: " + guard.error().message,
                                            guard.error().error_number});
      return;
    }
    ReadListenersInto(snapshot, options_.dns_udp_listeners);
  }

  // Inside the netns. Listeners (ztunnel's in-pod 15001/15006/15008/15053): one TCP dump for both
  // families; ztunnel's DNS proxy also listens on UDP 15053, read only where ztunnel has in-pod
  // TCP listeners (the DNS check judges nothing elsewhere), by exact lookups.
  static void ReadListenersInto(NetnsSnapshot& snapshot, bool dns_udp) {
    NetnsReads& reads = snapshot.reads;
    ListenerDump listeners = ReadListeningSockets(/*include_udp=*/false);
    snapshot.listeners = std::move(listeners.listeners);
    reads.listeners = listeners.errors.empty() ? ReadStatus::kOk : ReadStatus::kFailed;
    snapshot.errors.insert(snapshot.errors.end(), listeners.errors.begin(), listeners.errors.end());
    if (dns_udp && reads.listeners == ReadStatus::kOk &&
        HasZtunnelTcpListener(snapshot.listeners)) {
      ListenerDump dns = ReadUdpSocketsOnPort(istio::kDnsCapturePort);
      for (ListeningSocket& socket : dns.listeners) snapshot.listeners.push_back(socket);
      reads.dns_udp = dns.errors.empty() ? ReadStatus::kOk : ReadStatus::kFailed;
      snapshot.errors.insert(snapshot.errors.end(), dns.errors.begin(), dns.errors.end());
    }
  }

  static bool HasZtunnelTcpListener(const std::vector<ListeningSocket>& listeners) {
    return std::any_of(listeners.begin(), listeners.end(), [](const ListeningSocket& listener) {
      return listener.protocol == IPPROTO_TCP && istio::IsZtunnelInpodPort(listener.port);
    });
  }

  ReadLimits limits_;
  InspectorOptions options_;
};

}  // namespace

std::unique_ptr<NetnsInspector> MakeKernelInspector(const ReadLimits& limits,
                                                    InspectorOptions options) {
  return std::make_unique<KernelInspector>(limits, options);
}

}  // namespace ad
