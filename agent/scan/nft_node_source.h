// The nftables userspace as a node source (NFT_BACKEND_UNUSABLE). The probe forks and execs, so
// its answer is kept until the nft binary, its library or the package database changes (one stat
// each per collection); a failed probe is retried at the next collection. It runs after the netns
// reads: when a table records the nft that created it, the node's version is read too.
#pragma once

#include <string>
#include <string_view>
#include <tuple>

#include "scan/node_source.h"
#include "sources/netfilter/nft_userspace.h"

namespace ad {

class NftUserspaceNodeSource : public NodeSource {
 public:
  explicit NftUserspaceNodeSource(nft::NftUserspaceOptions options)
      : options_(std::move(options)) {}
  std::string_view name() const override { return "nft-userspace"; }
  void Collect(NodeSnapshot& snapshot) override;
  uint64_t reads() const { return reads_; }

 private:
  using Stamp = std::tuple<uint64_t, uint64_t, int64_t, int64_t>;  // per file: ino, size, mtime
  std::vector<Stamp> Stamps() const;

  nft::NftUserspaceOptions options_;
  std::optional<NftUserspaceState> last_;
  std::vector<Stamp> last_stamps_;
  bool last_read_version_ = false;
  uint64_t reads_ = 0;
};

}  // namespace ad
