// The kernel's floor for a one-shot nf_tables read: per netns, enter it, open one netfilter
// netlink socket and dump tables, chains, rules and sets, decoding nothing. What an in-process
// scan costs above this is ours, not the kernel's (shared/facts/change-detection.md §5).
//
//   nft_dump_floor --prefix P [--dir /run/netns] [--rounds R] [--threads T]
//
// Every netns named P-* in --dir is read once per round; rounds repeat the whole node. Prints
// one `key=value` line (parsed by oneshot_bench) after a human summary. Needs root.
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "sources/netns/netns_guard.h"

namespace ad::bench {
namespace {

// The largest dump skb the kernel builds is 32 KiB; one fixed size per socket (facts §5 pitfall).
constexpr size_t kReceiveBufferSize = 64 * 1024;
constexpr uint8_t kDumpedObjects[] = {NFT_MSG_GETTABLE, NFT_MSG_GETCHAIN, NFT_MSG_GETRULE,
                                      NFT_MSG_GETSET};

double NowMicroseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

struct MnlSocketCloser {
  void operator()(mnl_socket* socket) const { mnl_socket_close(socket); }
};
using MnlSocket = std::unique_ptr<mnl_socket, MnlSocketCloser>;

// Bytes received, or nullopt on an error (printed once by the caller).
std::optional<size_t> Dump(mnl_socket* socket, uint8_t object, uint32_t sequence,
                           std::vector<char>& buffer) {
  nlmsghdr* request = mnl_nlmsg_put_header(buffer.data());
  request->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | object;
  request->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request->nlmsg_seq = sequence;
  auto* header = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(request, sizeof(nfgenmsg)));
  header->nfgen_family = AF_UNSPEC;
  header->version = NFNETLINK_V0;
  header->res_id = 0;
  if (mnl_socket_sendto(socket, request, request->nlmsg_len) < 0) return std::nullopt;
  const uint32_t port = mnl_socket_get_portid(socket);
  size_t total = 0;
  for (;;) {
    const ssize_t received = mnl_socket_recvfrom(socket, buffer.data(), buffer.size());
    if (received <= 0) return std::nullopt;
    total += static_cast<size_t>(received);
    // A null callback only walks the headers: it finds NLMSG_DONE and errors, decodes nothing.
    const int status = mnl_cb_run(buffer.data(), received, sequence, port, nullptr, nullptr);
    if (status == MNL_CB_STOP) return total;
    if (status < 0) return std::nullopt;
  }
}

struct NetnsRead {
  double microseconds = 0;
  size_t bytes = 0;
  bool ok = false;
};

NetnsRead ReadOne(const std::string& netns_path, std::vector<char>& buffer) {
  NetnsRead read;
  const double start = NowMicroseconds();
  {
    auto guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) return read;
    MnlSocket socket(mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC));
    if (!socket || mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0) return read;
    uint32_t sequence = 1;
    for (uint8_t object : kDumpedObjects) {
      std::optional<size_t> bytes = Dump(socket.get(), object, sequence++, buffer);
      if (!bytes) return read;
      read.bytes += *bytes;
    }
  }
  read.microseconds = NowMicroseconds() - start;
  read.ok = true;
  return read;
}

struct Flags {
  std::string prefix;
  std::string dir = "/run/netns";
  int rounds = 15;
  int threads = 1;
};

std::optional<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    const bool has_value = i + 1 < argc;
    if (argument == "--prefix" && has_value) {
      flags.prefix = argv[++i];
    } else if (argument == "--dir" && has_value) {
      flags.dir = argv[++i];
    } else if (argument == "--rounds" && has_value) {
      flags.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (argument == "--threads" && has_value) {
      flags.threads = std::clamp(std::atoi(argv[++i]), 1, 64);
    } else {
      return std::nullopt;
    }
  }
  if (flags.prefix.empty()) return std::nullopt;
  return flags;
}

int Main(int argc, char** argv) {
  std::optional<Flags> flags = ParseFlags(argc, argv);
  if (!flags) {
    std::fprintf(stderr,
                 "usage: nft_dump_floor --prefix P [--dir /run/netns] [--rounds R] "
                 "[--threads T]\n");
    return 2;
  }
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(flags->dir, error)) {
    if (entry.path().filename().string().starts_with(flags->prefix + "-")) {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    std::fprintf(stderr, "nft_dump_floor: no netns %s-* in %s\n", flags->prefix.c_str(),
                 flags->dir.c_str());
    return 2;
  }

  std::vector<double> per_netns_us;
  std::vector<double> node_ms;
  const double cpu_start_ms = ProcessCpuMilliseconds();
  size_t bytes_per_round = 0;
  std::atomic<size_t> failures{0};
  for (int round = 0; round < flags->rounds; ++round) {
    std::vector<std::vector<NetnsRead>> reads(flags->threads);
    std::atomic<size_t> next{0};
    const double start = NowMicroseconds();
    {
      std::vector<std::jthread> workers;
      for (int t = 0; t < flags->threads; ++t) {
        workers.emplace_back([&, t] {
          std::vector<char> buffer(kReceiveBufferSize);
          for (size_t i = next++; i < paths.size(); i = next++) {
            NetnsRead read = ReadOne(paths[i], buffer);
            if (!read.ok) ++failures;
            reads[t].push_back(read);
          }
        });
      }
    }
    node_ms.push_back((NowMicroseconds() - start) / 1e3);
    bytes_per_round = 0;
    for (const auto& thread_reads : reads) {
      for (const NetnsRead& read : thread_reads) {
        per_netns_us.push_back(read.microseconds);
        bytes_per_round += read.bytes;
      }
    }
  }
  const double cpu_per_round_ms = (ProcessCpuMilliseconds() - cpu_start_ms) / flags->rounds;
  if (failures > 0) {
    std::fprintf(stderr, "nft_dump_floor: %zu netns reads failed (%s)\n", failures.load(),
                 std::strerror(errno));
    return 1;
  }
  std::printf(
      "%zu netns, %d rounds, %d thread(s): per netns median %.1f us, node median %.2f ms "
      "(CPU %.2f ms), %zu B per node\n",
      paths.size(), flags->rounds, flags->threads, Median(per_netns_us), Median(node_ms),
      cpu_per_round_ms, bytes_per_round);
  std::printf("netns=%zu per_netns_us=%.2f node_ms=%.3f bytes=%zu cpu_ms=%.3f\n", paths.size(),
              Median(per_netns_us), Median(node_ms), bytes_per_round, cpu_per_round_ms);
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
