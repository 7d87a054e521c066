#include "sources/ztunnel/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "base/unique_fd.h"
#include "sources/netns/netns_guard.h"
#include "sources/netns/netns_workers.h"

namespace ad::ztunnel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64u << 10;
constexpr size_t kMaxChunkSizeLine = 1024;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Peer bytes quoted for an error message: printable ASCII kept, the rest as \xNN, at most 48.
std::string Quote(std::string_view bytes) {
  constexpr size_t kMaxShown = 48;
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  if (bytes.size() > kMaxShown) out += "...";
  return out + "\"";
}

// "HTTP/1.x SSS[ reason]"; false when malformed.
bool ParseStatusLine(std::string_view line, HttpResponse& response) {
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." ||
      !std::isdigit(static_cast<unsigned char>(line[7])) || line[8] != ' ') {
    return false;
  }
  int status = 0;
  const char* first = line.data() + 9;
  auto [end, ec] = std::from_chars(first, first + 3, status);
  if (ec != std::errc() || end != first + 3 || status < 100 || status > 999) return false;
  if (line.size() > 12 && line[12] != ' ') return false;
  response.status = status;
  response.reason = std::string(Trim(line.size() > 12 ? line.substr(13) : std::string_view()));
  return true;
}

// Could `prefix` still become a valid status line? Lets garbage fail fast instead of timing out.
bool CouldBeStatusLine(std::string_view prefix) {
  constexpr std::string_view kStart = "HTTP/1.";
  const size_t n = std::min(prefix.size(), kStart.size());
  return prefix.substr(0, n) == kStart.substr(0, n);
}

bool ParseDecimal(std::string_view text, size_t& value) {
  text = Trim(text);
  if (text.empty() || text.size() > 19) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseChunkSize(std::string_view line, size_t& value) {
  line = Trim(line.substr(0, line.find(';')));  // chunk extensions are ignored
  if (line.empty() || line.size() > 15) return false;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value, 16);
  return ec == std::errc() && end == line.data() + line.size();
}

// The line starting at `from` without its "\n" / "\r\n"; npos `next` when incomplete.
std::string_view LineAt(const std::string& raw, size_t from, size_t& next) {
  const size_t nl = raw.find('\n', from);
  if (nl == std::string::npos) {
    next = std::string::npos;
    return {};
  }
  next = nl + 1;
  std::string_view line(raw.data() + from, nl - from);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Waits until `fd` has `events` or the deadline passes. 1 ready, 0 timed out, -1 poll error.
int WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return 0;
    pollfd pfd{fd, events, 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

Result<UniqueFd> OpenSocket(int family) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(SourceKind::kHttp, "socket");
  return fd;
}

// The socket must be created inside the target netns; only socket() runs there, on a netns
// worker thread, so the caller's thread never changes netns. The socket stays in the target.
Result<UniqueFd> OpenSocketIn(const std::string& netns_path, int family) {
  if (netns_path.empty()) return OpenSocket(family);
  std::optional<Result<UniqueFd>> opened;
  NetnsWorkers::Shared().Run([&] {
    auto guard = NetnsGuard::Enter(netns_path);
    if (!guard.ok()) {
      opened.emplace(guard.error());
      return;
    }
    opened.emplace(OpenSocket(family));
  });
  return std::move(*opened);
}

}  // namespace

std::string_view HttpResponse::Header(std::string_view lower_name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (it->first == lower_name) return it->second;
  }
  return {};
}

HttpResponseParser::HttpResponseParser(size_t max_response_bytes, size_t max_header_bytes)
    : max_response_bytes_(max_response_bytes), max_header_bytes_(max_header_bytes) {}

HttpResponseParser::Progress HttpResponseParser::Fail(int error_number, std::string message) {
  error_number_ = error_number;
  error_ = std::move(message);
  progress_ = Progress::kError;
  return progress_;
}

HttpResponseParser::Progress HttpResponseParser::Done() {
  progress_ = Progress::kDone;
  return progress_;
}

HttpResponseParser::Progress HttpResponseParser::Feed(std::string_view bytes) {
  if (progress_ != Progress::kNeedMore) return progress_;
  if (bytes.size() > max_response_bytes_ - received_) {
    return Fail(EMSGSIZE, "response exceeds " + std::to_string(max_response_bytes_) + " bytes");
  }
  received_ += bytes.size();
  raw_.append(bytes);
  const Progress progress = Advance();
  // The body of a chunked answer is copied out chunk by chunk: drop what was consumed, so a
  // large /config_dump is held once (in the body), not twice.
  if (progress == Progress::kNeedMore && phase_ != Phase::kHeaders && cursor_ > 0 &&
      phase_ != Phase::kLengthBody && phase_ != Phase::kUntilClose) {
    raw_.erase(0, cursor_);
    cursor_ = 0;
  }
  return progress;
}

void HttpResponseParser::TakeBody(size_t length) {
  // The received bytes become the body in place (the headers cut off the front): no copy of a
  // body that may be megabytes.
  raw_.erase(0, cursor_);
  raw_.resize(length);
  response_.body = std::move(raw_);
  raw_.clear();
  cursor_ = 0;
}

HttpResponseParser::Progress HttpResponseParser::PeerClosed() {
  if (progress_ != Progress::kNeedMore) return progress_;
  peer_closed_ = true;
  return Advance();
}

HttpResponseParser::Progress HttpResponseParser::Advance() {
  for (;;) {
    const Phase before = phase_;
    const size_t cursor_before = cursor_;
    Progress progress = Progress::kNeedMore;
    switch (phase_) {
      case Phase::kHeaders:
        progress = ParseHeaders();
        break;
      case Phase::kLengthBody:
        if (raw_.size() - cursor_ >= content_length_) {
          TakeBody(content_length_);
          return Done();
        }
        if (peer_closed_) {
          return Fail(EPROTO, "truncated body: got " + std::to_string(raw_.size() - cursor_) +
                                  " of " + std::to_string(content_length_) + " bytes");
        }
        return progress_;
      case Phase::kUntilClose:
        if (!peer_closed_) return progress_;
        TakeBody(raw_.size() - cursor_);
        return Done();
      case Phase::kChunkSize:
      case Phase::kChunkData:
      case Phase::kChunkTrailer:
        progress = ParseChunks();
        break;
    }
    if (progress != Progress::kNeedMore) return progress;
    if (phase_ == before && cursor_ == cursor_before) break;  // no progress: wait for bytes
  }
  if (peer_closed_) {
    switch (phase_) {
      case Phase::kHeaders:
        if (raw_.size() == cursor_) return Fail(ECONNRESET, "connection closed before a response");
        return Fail(EPROTO, "connection closed inside the response headers after " +
                                std::to_string(raw_.size()) + " bytes");
      case Phase::kChunkTrailer:
        return Done();  // every chunk arrived; a missing final CRLF loses nothing
      default:
        return Fail(EPROTO, "truncated chunked body after " +
                                std::to_string(response_.body.size()) + " bytes");
    }
  }
  return progress_;
}

HttpResponseParser::Progress HttpResponseParser::ParseHeaders() {
  const std::string_view pending(raw_.data() + cursor_, raw_.size() - cursor_);
  size_t next = 0;
  const std::string_view status_line = LineAt(raw_, cursor_, next);
  if (next == std::string::npos) {
    if (!CouldBeStatusLine(pending) || (peer_closed_ && !pending.empty())) {
      return Fail(EPROTO, "malformed status line " + Quote(pending));
    }
    if (pending.size() > max_header_bytes_) {
      return Fail(EMSGSIZE,
                  "response headers exceed " + std::to_string(max_header_bytes_) + " bytes");
    }
    return Progress::kNeedMore;
  }
  HttpResponse response;
  if (!ParseStatusLine(status_line, response)) {
    return Fail(EPROTO, "malformed status line " + Quote(status_line));
  }
  // Header lines are re-scanned only while the block is incomplete, and it is at most
  // max_header_bytes_ long, so the cost stays bounded.
  size_t line_start = next;
  for (;;) {
    const std::string_view line = LineAt(raw_, line_start, next);
    if (next == std::string::npos || next - cursor_ > max_header_bytes_) {
      if (raw_.size() - cursor_ > max_header_bytes_) {
        return Fail(EMSGSIZE,
                    "response headers exceed " + std::to_string(max_header_bytes_) + " bytes");
      }
      return Progress::kNeedMore;
    }
    line_start = next;
    if (line.empty()) break;
    const size_t colon = line.find(':');
    // A name of only blanks or CRs trims to nothing: as malformed as no name at all.
    const std::string_view name =
        colon == std::string_view::npos ? std::string_view() : Trim(line.substr(0, colon));
    if (name.empty()) {
      return Fail(EPROTO, "malformed header line " + Quote(line));
    }
    response.headers.emplace_back(Lower(name), std::string(Trim(line.substr(colon + 1))));
  }
  cursor_ = line_start;
  response_ = std::move(response);
  if (response_.status < 200) {
    return Progress::kNeedMore;  // interim 1xx response: the real one follows
  }
  if (response_.status == 204 || response_.status == 304) return Done();
  const std::string coding = Lower(response_.Header("transfer-encoding"));
  if (coding.size() >= 7 && coding.compare(coding.size() - 7, 7, "chunked") == 0) {
    phase_ = Phase::kChunkSize;
    return Progress::kNeedMore;
  }
  bool has_length = false;
  for (const auto& [name, value] : response_.headers) {
    if (name != "content-length") continue;
    size_t length = 0;
    if (!ParseDecimal(value, length) || (has_length && length != content_length_)) {
      return Fail(EPROTO, "invalid Content-Length " + Quote(value));
    }
    has_length = true;
    content_length_ = length;
  }
  if (!has_length) {
    phase_ = Phase::kUntilClose;
    return Progress::kNeedMore;
  }
  if (content_length_ > max_response_bytes_ - cursor_) {
    return Fail(EMSGSIZE, "response exceeds " + std::to_string(max_response_bytes_) +
                              " bytes (Content-Length " + std::to_string(content_length_) + ")");
  }
  phase_ = Phase::kLengthBody;
  raw_.reserve(cursor_ + content_length_);  // one allocation, not a doubling string
  return Progress::kNeedMore;
}

HttpResponseParser::Progress HttpResponseParser::ParseChunks() {
  for (;;) {
    size_t next = 0;
    switch (phase_) {
      case Phase::kChunkSize: {
        const std::string_view line = LineAt(raw_, cursor_, next);
        if (next == std::string::npos) {
          if (raw_.size() - cursor_ > kMaxChunkSizeLine) {
            return Fail(EPROTO, "malformed chunk size line");
          }
          return Progress::kNeedMore;
        }
        size_t size = 0;
        if (!ParseChunkSize(line, size)) {
          return Fail(EPROTO, "malformed chunk size line " + Quote(line));
        }
        cursor_ = next;
        if (size == 0) {
          phase_ = Phase::kChunkTrailer;
          break;
        }
        if (size > max_response_bytes_ - response_.body.size()) {
          return Fail(EMSGSIZE, "response exceeds " + std::to_string(max_response_bytes_) +
                                    " bytes (chunk of " + std::to_string(size) + ")");
        }
        chunk_remaining_ = size;
        phase_ = Phase::kChunkData;
        break;
      }
      case Phase::kChunkData: {
        const size_t take = std::min(raw_.size() - cursor_, chunk_remaining_);
        response_.body.append(raw_, cursor_, take);
        cursor_ += take;
        chunk_remaining_ -= take;
        if (chunk_remaining_ > 0) return Progress::kNeedMore;
        // Chunk data ends with CRLF (a bare LF is tolerated).
        if (cursor_ == raw_.size()) return Progress::kNeedMore;
        if (raw_[cursor_] == '\n') {
          cursor_ += 1;
        } else if (raw_[cursor_] == '\r') {
          if (cursor_ + 1 == raw_.size()) return Progress::kNeedMore;
          if (raw_[cursor_ + 1] != '\n') return Fail(EPROTO, "missing CRLF after chunk data");
          cursor_ += 2;
        } else {
          return Fail(EPROTO, "missing CRLF after chunk data");
        }
        phase_ = Phase::kChunkSize;
        break;
      }
      case Phase::kChunkTrailer: {
        const std::string_view line = LineAt(raw_, cursor_, next);
        if (next == std::string::npos) return Progress::kNeedMore;
        cursor_ = next;
        if (line.empty()) return Done();
        break;  // a trailer field: ignored
      }
      default:
        return Progress::kNeedMore;
    }
  }
}

namespace {

// The peer's address (IPv4, IPv6 or a unix socket path); an explanation when it is not usable.
std::string PeerAddress(const HttpGetRequest& request, sockaddr_storage& address,
                        socklen_t& address_len) {
  if (!request.unix_socket.empty()) {
    auto* un = reinterpret_cast<sockaddr_un*>(&address);
    un->sun_family = AF_UNIX;
    if (request.unix_socket.size() >= sizeof(un->sun_path)) return "unix socket path too long";
    std::memcpy(un->sun_path, request.unix_socket.data(), request.unix_socket.size());
    address_len =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + request.unix_socket.size() + 1);
    return {};
  }
  if (request.host.find(':') != std::string::npos) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(request.port);
    if (::inet_pton(AF_INET6, request.host.c_str(), &in6->sin6_addr) != 1) {
      return "host is not a literal IP address";
    }
    address_len = sizeof(sockaddr_in6);
    return {};
  }
  auto* in4 = reinterpret_cast<sockaddr_in*>(&address);
  in4->sin_family = AF_INET;
  in4->sin_port = htons(request.port);
  if (::inet_pton(AF_INET, request.host.c_str(), &in4->sin_addr) != 1) {
    return "host is not a literal IP address";
  }
  address_len = sizeof(sockaddr_in);
  return {};
}

}  // namespace

Result<HttpResponse> HttpGet(const HttpGetRequest& request, const HttpGetOptions& options) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + options.total_timeout;
  const Clock::time_point connect_deadline = std::min(deadline, start + options.connect_timeout);

  sockaddr_storage address{};
  socklen_t address_len = 0;
  const bool ipv6 = request.host.find(':') != std::string::npos;
  const std::string url =
      request.unix_socket.empty()
          ? "http://" + (ipv6 ? "[" + request.host + "]" : request.host) + ":" +
                std::to_string(request.port) + request.path
          : "http://localhost" + request.path + " (unix:" + request.unix_socket + ")";
  auto error = [&url](int error_number, const std::string& what) {
    return SourceError{SourceKind::kHttp, "GET " + url + ": " + what, error_number};
  };
  if (std::string why = PeerAddress(request, address, address_len); !why.empty()) {
    return error(EINVAL, why);
  }

  auto socket = OpenSocketIn(request.netns_path, static_cast<int>(address.ss_family));
  if (!socket.ok()) {
    return error(socket.error().error_number, "enter netns: " + socket.error().message);
  }
  const int fd = socket->get();

  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), address_len) != 0) {
    if (errno != EINPROGRESS) return error(errno, std::string("connect: ") + std::strerror(errno));
    const int ready = WaitFor(fd, POLLOUT, connect_deadline);
    if (ready == 0) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::min(options.connect_timeout, options.total_timeout));
      return error(ETIMEDOUT,
                   "connect: no connection within " + std::to_string(waited.count()) + " ms");
    }
    if (ready < 0) return error(errno, std::string("poll: ") + std::strerror(errno));
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) return error(so_error, std::string("connect: ") + std::strerror(so_error));
  }

  const std::string wire =
      "GET " + request.path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  const std::string no_response =
      "no response within " + std::to_string(options.total_timeout.count()) + " ms";
  for (size_t sent = 0; sent < wire.size();) {
    const ssize_t n = ::send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const int ready = WaitFor(fd, POLLOUT, deadline);
      if (ready == 0) return error(ETIMEDOUT, no_response);
      if (ready < 0) return error(errno, std::string("poll: ") + std::strerror(errno));
    } else if (errno != EINTR) {
      return error(errno, std::string("send: ") + std::strerror(errno));
    }
  }

  HttpResponseParser parser(options.max_response_bytes, options.max_header_bytes);
  std::string buffer(kReadChunk, '\0');
  for (;;) {
    const int ready = WaitFor(fd, POLLIN, deadline);
    if (ready == 0) {
      if (parser.bytes_received() == 0) return error(ETIMEDOUT, no_response);
      return error(ETIMEDOUT, "response not complete within " +
                                  std::to_string(options.total_timeout.count()) + " ms (" +
                                  std::to_string(parser.bytes_received()) + " bytes received)");
    }
    if (ready < 0) return error(errno, std::string("poll: ") + std::strerror(errno));
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    HttpResponseParser::Progress progress;
    if (n > 0) {
      progress = parser.Feed(std::string_view(buffer.data(), static_cast<size_t>(n)));
    } else if (n == 0) {
      progress = parser.PeerClosed();
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      continue;
    } else {
      return error(errno, std::string("recv: ") + std::strerror(errno));
    }
    if (progress == HttpResponseParser::Progress::kDone) return parser.TakeResponse();
    if (progress == HttpResponseParser::Progress::kError) {
      return error(parser.error_number(), parser.error());
    }
  }
}

}  // namespace ad::ztunnel
