#include "sources/watch/legacy_fingerprint.h"

// glibc's socket headers must precede the linux uapi ones, which skip what libc already defined.
// clang-format off
#include <netinet/in.h>
#include <sys/socket.h>
// clang-format on

#include <fcntl.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

#include "sources/netfilter/xtables_family.h"

namespace ad::watch {
namespace {

// Largest blob hashed per table: far above any Istio table (a few KiB), bounds a hostile netns.
constexpr uint32_t kMaxEntriesBytes = 16u << 20;
constexpr size_t kMaxNamesBytes = 4096;

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void HashBytes(uint64_t* hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    *hash = (*hash ^ bytes[i]) * kFnvPrime;
  }
}

template <typename T>
void HashValue(uint64_t* hash, const T& value) {
  HashBytes(hash, &value, sizeof(value));
}

using xt::Ipv4;
using xt::Ipv6;

template <typename F>
Result<std::vector<std::string>> ReadNames(int names_fd) {
  std::array<char, kMaxNamesBytes> buffer;
  const ssize_t n = ::pread(names_fd, buffer.data(), buffer.size(), 0);
  if (n < 0) return ErrnoError(F::kSource, std::string("pread(") + F::kNamesFile + ")");
  std::vector<std::string> names;
  std::string_view text(buffer.data(), static_cast<size_t>(n));
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view name = text.substr(0, end);
    if (!name.empty() && name.size() < XT_TABLE_MAXNAMELEN) names.emplace_back(name);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return names;
}

template <typename F>
Result<typename F::GetInfo> GetInfo(int socket_fd, const std::string& table) {
  typename F::GetInfo info{};
  std::memcpy(info.name, table.data(), table.size());
  socklen_t length = sizeof(info);
  if (::getsockopt(socket_fd, F::kLevel, F::kGetInfo, &info, &length) != 0) {
    return ErrnoError(F::kSource, "GET_INFO(" + table + ")");
  }
  return info;
}

// Hashes the entry blob without the fields the kernel changes on its own (counters, comefrom).
template <typename F>
Status HashEntries(int socket_fd, const typename F::GetInfo& info, uint64_t* hash) {
  using GetEntries = typename F::GetEntries;
  using Entry = typename F::Entry;
  const std::string table = info.name;
  if (info.size > kMaxEntriesBytes) {
    return SourceError{F::kSource,
                       "GET_ENTRIES(" + table + "): " + std::to_string(info.size) +
                           " bytes exceeds the fingerprint bound",
                       EFBIG};
  }
  // Zeroed on every call: the kernel copies match/target names only up to their NUL, so stale
  // bytes after it would make identical tables hash differently.
  std::vector<unsigned char> buffer(sizeof(GetEntries) + info.size, 0);
  auto* request = reinterpret_cast<GetEntries*>(buffer.data());
  std::memcpy(request->name, info.name, sizeof(request->name));
  request->size = info.size;
  socklen_t length = static_cast<socklen_t>(buffer.size());
  if (::getsockopt(socket_fd, F::kLevel, F::kGetEntries, buffer.data(), &length) != 0) {
    // EAGAIN: the table changed size between GET_INFO and GET_ENTRIES; the gate catches it.
    return ErrnoError(F::kSource, "GET_ENTRIES(" + table + ")");
  }
  unsigned char* blob = buffer.data() + offsetof(GetEntries, entrytable);
  uint32_t offset = 0;
  while (offset + sizeof(Entry) <= info.size) {
    auto* entry = reinterpret_cast<Entry*>(blob + offset);
    if (entry->next_offset < sizeof(Entry) || entry->next_offset > info.size - offset) {
      return SourceError{F::kSource, "GET_ENTRIES(" + table + "): corrupt entry layout", EINVAL};
    }
    std::memset(&entry->counters, 0, sizeof(entry->counters));
    entry->comefrom = 0;
    offset += entry->next_offset;
  }
  HashBytes(hash, blob, info.size);
  return OkStatus();
}

// `tables` (optional): how many tables the family listed.
template <typename F>
Status HashFamily(int names_fd, int socket_fd, bool with_entries, uint64_t* hash,
                  size_t* tables = nullptr) {
  Result<std::vector<std::string>> names = ReadNames<F>(names_fd);
  if (!names.ok()) return names.error();
  if (tables != nullptr) *tables = names->size();
  HashValue(hash, F::kDomain);
  for (const std::string& table : *names) {
    HashBytes(hash, table.data(), table.size() + 1);
    Result<typename F::GetInfo> info = GetInfo<F>(socket_fd, table);
    if (!info.ok()) {
      // A table listed a moment ago may be gone; its absence is part of the fingerprint.
      HashValue(hash, info.error().error_number);
      continue;
    }
    HashValue(hash, info->valid_hooks);
    HashBytes(hash, info->hook_entry, sizeof(info->hook_entry));
    HashBytes(hash, info->underflow, sizeof(info->underflow));
    HashValue(hash, info->num_entries);
    HashValue(hash, info->size);
    if (with_entries) {
      if (Status hashed = HashEntries<F>(socket_fd, *info, hash); !hashed.ok()) {
        HashValue(hash, hashed.error().error_number);
      }
    }
  }
  return OkStatus();
}

template <typename F>
Result<std::pair<UniqueFd, UniqueFd>> OpenFamily() {
  UniqueFd names(::open(F::kNamesFile, O_RDONLY | O_CLOEXEC));
  if (!names.valid()) return ErrnoError(F::kSource, std::string("open(") + F::kNamesFile + ")");
  UniqueFd socket(::socket(F::kDomain, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  if (!socket.valid()) return ErrnoError(F::kSource, "socket(SOCK_RAW)");
  return std::make_pair(std::move(names), std::move(socket));
}

}  // namespace

Result<LegacyFingerprint> LegacyFingerprint::Open() {
  LegacyFingerprint fingerprint;
  auto ipv4 = OpenFamily<Ipv4>();
  auto ipv6 = OpenFamily<Ipv6>();
  if (!ipv4.ok() && !ipv6.ok()) return ipv4.error();
  if (ipv4.ok()) {
    fingerprint.ipv4_.names = std::move(ipv4->first);
    fingerprint.ipv4_.socket = std::move(ipv4->second);
  }
  if (ipv6.ok()) {
    fingerprint.ipv6_.names = std::move(ipv6->first);
    fingerprint.ipv6_.socket = std::move(ipv6->second);
  }
  return fingerprint;
}

Result<uint64_t> LegacyFingerprint::HashIpv4(bool with_entries, size_t* ipv4_tables) {
  uint64_t hash = kFnvOffset;
  HashValue(&hash, with_entries);
  if (ipv4_.names.valid()) {
    Status hashed =
        HashFamily<Ipv4>(ipv4_.names.get(), ipv4_.socket.get(), with_entries, &hash, ipv4_tables);
    if (!hashed.ok()) return hashed.error();
  }
  return hash;
}

Result<uint64_t> LegacyFingerprint::Gate() {
  size_t ipv4_tables = 0;
  Result<uint64_t> hash = HashIpv4(false, &ipv4_tables);
  if (!hash.ok() || !ipv6_.names.valid()) return hash;
  const bool quiet = ipv4_tables == 0 && quiet_ipv6_part_.has_value();
  if (!quiet || ++quiet_ipv6_gates_ >= kIpv6QuietEvery) {
    uint64_t part = kFnvOffset;
    size_t ipv6_tables = 0;
    quiet_ipv6_part_.reset();
    quiet_ipv6_gates_ = 0;
    Status hashed =
        HashFamily<Ipv6>(ipv6_.names.get(), ipv6_.socket.get(), false, &part, &ipv6_tables);
    if (!hashed.ok()) return hashed.error();
    if (ipv6_tables == 0) quiet_ipv6_part_ = part;
    HashValue(&*hash, part);
  } else {
    HashValue(&*hash, *quiet_ipv6_part_);
  }
  return hash;
}

Result<uint64_t> LegacyFingerprint::ContentHash() {
  Result<uint64_t> hash = HashIpv4(true, nullptr);
  if (!hash.ok() || !ipv6_.names.valid()) return hash;
  Status hashed = HashFamily<Ipv6>(ipv6_.names.get(), ipv6_.socket.get(), true, &*hash);
  if (!hashed.ok()) return hashed.error();
  return hash;
}

}  // namespace ad::watch
