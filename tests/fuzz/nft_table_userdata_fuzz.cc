// Fuzzes the nf_tables table userdata decoder (NFTA_TABLE_USERDATA as the kernel returns it: the
// TLVs some nft wrote). Seeds: an empty userdata, a comment, the creator version and build time
// newer nftables writes, and malformed lengths.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sources/netfilter/nft_table_userdata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ad::NftTableUserdata userdata = ad::nft::DecodeTableUserdata({data, size});
  // Touch everything the decoder produced so sanitizers see any bad write.
  volatile size_t sink = userdata.comment.size() + userdata.creator_version.size() +
                         userdata.error.size() + static_cast<size_t>(userdata.creator_build_time);
  (void)sink;
  return 0;
}
