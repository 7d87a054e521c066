// Writes fuzz seeds from the calling process's netns (run it under `ip netns exec`, as root):
//   capture_seeds nft OUT_DIR PREFIX     every NFT_MSG_NEWRULE message of a rule dump, one file
//   each capture_seeds legacy OUT_DIR PREFIX  every iptables-legacy table (ipv4 and ipv6) as a
//                                        legacy_blob_fuzz input (LegacyBlobHeader + entry blob)
// Read-only, like the agent: it only dumps.
// clang-format off
#include <netinet/in.h>
#include <sys/socket.h>
// clang-format on

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../legacy_blob_input.h"
#include "base/unique_fd.h"
#include "sources/netfilter/nft_reader_netlink.h"

namespace {

void WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  std::printf("%s (%zu bytes)\n", path.c_str(), size);
}

int CaptureNft(const std::string& dir, const std::string& prefix) {
  auto socket = ad::nl::OpenNetfilterSocket(ad::SourceKind::kNftables);
  if (!socket.ok()) {
    std::fprintf(stderr, "%s\n", socket.error().message.c_str());
    return 1;
  }
  std::array<char, 256> buffer{};
  nlmsghdr* request =
      nftnl_nlmsg_build_hdr(buffer.data(), NFT_MSG_GETRULE, NFPROTO_UNSPEC, NLM_F_DUMP, 0);
  int count = 0;
  ad::Status dumped = ad::nl::RunRequest(
      socket->get(), request, ad::SourceKind::kNftables, "NFT_MSG_GETRULE dump",
      [&](const nlmsghdr* message) {
        WriteFile(dir + "/" + prefix + "_" + std::to_string(count++), message, message->nlmsg_len);
        return ad::nl::Next::kContinue;
      });
  if (!dumped.ok()) {
    std::fprintf(stderr, "%s\n", dumped.error().message.c_str());
    return 1;
  }
  return 0;
}

template <typename GetInfo, typename GetEntries>
void CaptureLegacyFamily(int domain, int level, int get_info, int get_entries, bool ipv6,
                         const char* names_file, const std::string& dir,
                         const std::string& prefix) {
  std::ifstream names(names_file);
  ad::UniqueFd sock(::socket(domain, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  for (std::string name; std::getline(names, name);) {
    GetInfo info{};
    std::strncpy(info.name, name.c_str(), sizeof(info.name) - 1);
    socklen_t length = sizeof(info);
    if (::getsockopt(sock.get(), level, get_info, &info, &length) != 0) continue;
    std::vector<uint8_t> buffer(sizeof(GetEntries) + info.size);
    GetEntries request{};
    std::memcpy(request.name, info.name, sizeof(request.name));
    request.size = info.size;
    std::memcpy(buffer.data(), &request, sizeof(request));
    length = static_cast<socklen_t>(buffer.size());
    if (::getsockopt(sock.get(), level, get_entries, buffer.data(), &length) != 0) continue;
    ad::fuzz::LegacyBlobHeader header;
    header.ipv6 = ipv6 ? 1 : 0;
    for (size_t i = 0; i < std::size(ad::fuzz::kLegacyTableNames); ++i) {
      if (name == ad::fuzz::kLegacyTableNames[i]) header.table = static_cast<uint8_t>(i);
    }
    header.valid_hooks = info.valid_hooks;
    for (int hook = 0; hook < 5; ++hook) {
      header.hook_entry[hook] = info.hook_entry[hook];
      header.underflow[hook] = info.underflow[hook];
    }
    header.num_entries = info.num_entries;
    std::vector<uint8_t> out(sizeof(header) + info.size);
    std::memcpy(out.data(), &header, sizeof(header));
    std::memcpy(out.data() + sizeof(header), buffer.data() + sizeof(GetEntries), info.size);
    WriteFile(dir + "/" + prefix + (ipv6 ? "_ip6_" : "_ip4_") + name, out.data(), out.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s nft|legacy OUT_DIR PREFIX\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "nft") return CaptureNft(argv[2], argv[3]);
  if (mode == "legacy") {
    CaptureLegacyFamily<ipt_getinfo, ipt_get_entries>(
        AF_INET, IPPROTO_IP, IPT_SO_GET_INFO, IPT_SO_GET_ENTRIES, false,
        "/proc/self/net/ip_tables_names", argv[2], argv[3]);
    CaptureLegacyFamily<ip6t_getinfo, ip6t_get_entries>(
        AF_INET6, IPPROTO_IPV6, IP6T_SO_GET_INFO, IP6T_SO_GET_ENTRIES, true,
        "/proc/self/net/ip6_tables_names", argv[2], argv[3]);
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
