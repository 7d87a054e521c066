#include "scan/nft_node_source.h"

#include <sys/stat.h>

namespace ad {

std::vector<NftUserspaceNodeSource::Stamp> NftUserspaceNodeSource::Stamps() const {
  std::vector<Stamp> stamps;
  for (const char* path : {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", "/var/lib/dpkg/status",
                           "/usr/lib/x86_64-linux-gnu/libnftables.so.1",
                           "/usr/lib/aarch64-linux-gnu/libnftables.so.1"}) {
    struct stat st {};
    if (::stat((options_.host_root + path).c_str(), &st) != 0) {
      stamps.emplace_back(0, 0, 0, 0);
      continue;
    }
    stamps.emplace_back(st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
  return stamps;
}

namespace {

bool SomeTableNamesItsCreator(const NodeSnapshot& snapshot) {
  for (const NetnsSnapshot& netns : snapshot.netns) {
    for (const Table& table : netns.netfilter.tables) {
      if (!table.userdata.creator_version.empty()) return true;
    }
  }
  return false;
}

}  // namespace

void NftUserspaceNodeSource::Collect(NodeSnapshot& snapshot) {
  std::vector<Stamp> stamps = Stamps();
  const bool read_version = SomeTableNamesItsCreator(snapshot);
  if (last_ && last_->errors.empty() && stamps == last_stamps_ &&
      (last_read_version_ || !read_version)) {
    snapshot.nft_userspace = *last_;
    return;
  }
  ++reads_;
  nft::NftUserspaceOptions options = options_;
  options.read_version = read_version;
  snapshot.nft_userspace = nft::ReadNftUserspace(options);
  last_ = snapshot.nft_userspace;
  last_stamps_ = std::move(stamps);
  last_read_version_ = read_version;
}

}  // namespace ad
