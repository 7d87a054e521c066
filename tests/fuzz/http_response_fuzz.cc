// Fuzz target: the bounded HTTP/1.1 response parser of the ztunnel admin client. The first byte
// picks the limits and whether the peer closes at the end, the second how the rest is split
// into Feed() calls (0: one call). The same bytes are also fed in one call: when both runs end,
// they must agree, since how TCP segments a response must not change what it means.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/ztunnel/http_get.h"

namespace {

using Parser = ad::ztunnel::HttpResponseParser;

struct Outcome {
  Parser::Progress progress;
  int error_number;
  ad::ztunnel::HttpResponse response;
};

Outcome Run(std::string_view bytes, size_t piece, bool peer_closes, size_t max_response,
            size_t max_header) {
  Parser parser(max_response, max_header);
  Parser::Progress progress = Parser::Progress::kNeedMore;
  for (size_t at = 0; at < bytes.size() && progress == Parser::Progress::kNeedMore; at += piece) {
    progress = parser.Feed(bytes.substr(at, piece));
  }
  if (peer_closes) progress = parser.PeerClosed();
  if (parser.bytes_received() > max_response) std::abort();
  if (progress == Parser::Progress::kError && parser.error().empty()) std::abort();
  Outcome outcome{progress, parser.error_number(), {}};
  if (progress == Parser::Progress::kDone) outcome.response = parser.TakeResponse();
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr size_t kMaxHeader[] = {64u << 10, 256, 64, 16};
  static constexpr size_t kMaxResponse[] = {16u << 20, 4096, 512, 128};
  const size_t max_header = kMaxHeader[data[0] & 3];
  const size_t max_response = kMaxResponse[(data[0] >> 2) & 3];
  const bool peer_closes = (data[0] & 0x10) == 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t piece = data[1] == 0 ? bytes.size() + 1 : data[1];

  Outcome split = Run(bytes, piece, peer_closes, max_response, max_header);
  if (split.progress == Parser::Progress::kDone) {
    const ad::ztunnel::HttpResponse& response = split.response;
    if (response.status < 100 || response.status > 999) std::abort();
    if (response.body.size() > max_response) std::abort();
    for (const auto& [name, value] : response.headers) {
      if (name.empty()) std::abort();
    }
  }
  if (piece > bytes.size()) return 0;
  Outcome whole = Run(bytes, bytes.size() + 1, peer_closes, max_response, max_header);
  // One call holds every byte at once, so it may exceed a limit that a response completed
  // before its trailing bytes arrived never reached; anything else must match.
  if (whole.progress == Parser::Progress::kError && whole.error_number == EMSGSIZE) return 0;
  if (whole.progress != split.progress) std::abort();
  if (whole.progress == Parser::Progress::kDone &&
      (whole.response.status != split.response.status ||
       whole.response.body != split.response.body ||
       whole.response.headers != split.response.headers)) {
    std::abort();
  }
  return 0;
}
