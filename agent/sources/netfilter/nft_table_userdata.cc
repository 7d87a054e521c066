#include "sources/netfilter/nft_table_userdata.h"

#include <cstring>
#include <string>

namespace ad::nft {

NftTableUserdata DecodeTableUserdata(std::span<const uint8_t> data) {
  NftTableUserdata userdata;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 2) {
      userdata.error = "userdata truncated: entry header at byte " + std::to_string(pos) + " of " +
                       std::to_string(data.size());
      return userdata;
    }
    const uint8_t type = data[pos];
    const uint8_t length = data[pos + 1];
    if (data.size() - pos - 2 < length) {
      userdata.error = "userdata truncated: entry type " + std::to_string(type) + " at byte " +
                       std::to_string(pos) + " claims " + std::to_string(length) + " bytes, " +
                       std::to_string(data.size() - pos - 2) + " left";
      return userdata;
    }
    const std::span<const uint8_t> value = data.subspan(pos + 2, length);
    pos += 2 + static_cast<size_t>(length);
    switch (type) {
      case kTableUdataComment:
        if (value.empty() || value.back() != '\0') {
          userdata.error = "userdata comment is not NUL-terminated";
          return userdata;
        }
        userdata.comment.assign(
            reinterpret_cast<const char*>(value.data()),
            ::strnlen(reinterpret_cast<const char*>(value.data()), value.size()));
        break;
      case kTableUdataCreatorVersion:
        if (value.size() != 4) {
          userdata.error =
              "userdata creator version has " + std::to_string(value.size()) + " bytes, expected 4";
          return userdata;
        }
        userdata.creator_version = std::to_string(value[0]) + "." + std::to_string(value[1]) + "." +
                                   std::to_string(value[2]);
        if (value[3] != 0) userdata.creator_version += "." + std::to_string(value[3]);
        break;
      case kTableUdataCreatorBuildTime: {
        if (value.size() != 8) {
          userdata.error = "userdata creator build time has " + std::to_string(value.size()) +
                           " bytes, expected 8";
          return userdata;
        }
        uint64_t seconds = 0;
        for (uint8_t byte : value) seconds = (seconds << 8) | byte;
        // A stamp beyond int64 is nonsense, not a time: keep it absent.
        if (seconds <= static_cast<uint64_t>(INT64_MAX)) {
          userdata.creator_build_time = static_cast<int64_t>(seconds);
        }
        break;
      }
      default:
        break;  // an entry this agent does not know: skipped, as nft skips it
    }
  }
  return userdata;
}

}  // namespace ad::nft
