// Fuzz target: the capture file decoder (capture/capture.h). The input is read twice: as a file
// (gzip header, deflate, CRC, the decoded-size bound) and as the payload inside a file (past the
// CRC that guards it, so mutations reach the protobuf parser and the model conversion). Malformed
// input must give a "capture" error, never a crash; what decodes must encode again, and its
// encoding must be a fixed point (decode and encode once more: the same bytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "capture/capture.h"
#include "capture/capture_proto.h"

namespace {

// Small enough that the fuzzer reaches it with a short input (a run of zeros).
constexpr size_t kFuzzMaxDecoded = size_t{4} << 20;

void CheckDecoded(const ad::Result<ad::capture::Capture>& decoded) {
  if (!decoded) {
    if (decoded.error().kind != ad::SourceKind::kCapture || decoded.error().message.empty()) {
      std::abort();
    }
    return;
  }
  ad::Result<std::string> once = ad::capture::Encode(*decoded);
  if (!once) std::abort();
  ad::Result<ad::capture::Capture> again = ad::capture::Decode(*once);
  if (!again) std::abort();
  ad::Result<std::string> twice = ad::capture::Encode(*again);
  if (!twice || *twice != *once) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckDecoded(ad::capture::Decode(bytes, kFuzzMaxDecoded));
  CheckDecoded(ad::capture::DecodePayload(bytes));
  return 0;
}
