#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <list>
#include <vector>

#include "base/thread_name.h"

namespace ad {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Connection {
  UniqueFd fd;
  int64_t deadline_ms = 0;
  std::string in;
  std::string out;
  size_t written = 0;
  bool responding = false;  // request read, response queued
};

std::string Render(const HttpResponse& response, bool head) {
  std::string text = "HTTP/1.1 " + std::to_string(response.status) + " " +
                     std::string(HttpReasonPhrase(response.status)) + "\r\n";
  text += "Content-Type: " + response.content_type + "\r\n";
  text += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  text += "Connection: close\r\n\r\n";
  if (!head) text += response.body;
  return text;
}

HttpResponse Error(int status) {
  return {status, "text/plain; charset=utf-8", std::string(HttpReasonPhrase(status)) + "\n"};
}

}  // namespace

std::string_view HttpReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Start() {
  if (thread_.joinable()) {
    return SourceError{SourceKind::kHttp, "metrics listener: already started", EALREADY};
  }
  sockaddr_storage address{};
  socklen_t address_len = 0;
  const std::string& host = options_.bind_address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(options_.port);
    address_len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(options_.port);
    address_len = sizeof(sockaddr_in6);
  } else {
    return SourceError{SourceKind::kHttp, "metrics bind address " + host + ": not an IP literal",
                       EINVAL};
  }
  const std::string where = "metrics listener " + host + ":" + std::to_string(options_.port);
  UniqueFd listener(socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return ErrnoError(SourceKind::kHttp, "socket(" + where + ")");
  const int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&address), address_len) != 0) {
    return ErrnoError(SourceKind::kHttp, "bind(" + where + ")");
  }
  if (listen(listener.get(), 64) != 0)
    return ErrnoError(SourceKind::kHttp, "listen(" + where + ")");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return ErrnoError(SourceKind::kHttp, "eventfd(" + where + ")");
  listener_ = std::move(listener);
  wake_ = std::move(wake);
  thread_ = std::thread([this] {
    NameThisThread("ad-http");
    Run();
  });
  return port;
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_.get(), &one, sizeof(one));
  thread_.join();
  listener_.Reset();
  wake_.Reset();
}

void HttpServer::Run() {
  std::list<Connection> connections;
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;
  // Out of fds or memory, accept fails while the listener stays readable: pause it for a moment
  // instead of spinning on it.
  int64_t accept_paused_until_ms = 0;
  for (;;) {
    const int64_t now = NowMs();
    // Expired connections go first, so the deadline also bounds a client that never reads.
    connections.remove_if([now](const Connection& c) { return c.deadline_ms <= now; });
    const bool accepting = accept_paused_until_ms <= now;
    int timeout_ms = accepting ? -1 : static_cast<int>(accept_paused_until_ms - now);
    fds.clear();
    polled.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), static_cast<short>(accepting ? POLLIN : 0), 0});
    for (Connection& c : connections) {
      fds.push_back({c.fd.get(), static_cast<short>(c.responding ? POLLOUT : POLLIN), 0});
      polled.push_back(&c);
      const int64_t left = c.deadline_ms - now;
      if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;  // Stop(): every connection closes with the list

    if (fds[1].revents & POLLIN) {
      for (;;) {
        UniqueFd client(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!client.valid()) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused_until_ms = NowMs() + 100;
          }
          break;
        }
        if (static_cast<int>(connections.size()) >= options_.max_connections) {
          // Full: the oldest connection makes room, so idle clients cannot lock scrapers out.
          // Closed now, erased at the next turn (this turn's poll results still point at it).
          auto oldest = connections.end();
          for (auto it = connections.begin(); it != connections.end(); ++it) {
            if (it->deadline_ms > 0 &&
                (oldest == connections.end() || it->deadline_ms < oldest->deadline_ms)) {
              oldest = it;
            }
          }
          if (oldest == connections.end()) continue;
          oldest->fd.Reset();
          oldest->deadline_ms = 0;
        }
        connections.push_back(Connection{
            std::move(client), NowMs() + options_.connection_timeout_ms, {}, {}, 0, false});
      }
    }

    for (size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      if (!c.responding) {
        char buffer[4096];
        const ssize_t n = read(c.fd.get(), buffer, sizeof(buffer));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          c.deadline_ms = 0;  // peer closed or failed: drop at the next turn
          continue;
        }
        c.in.append(buffer, static_cast<size_t>(n));
        // The end of the headers; bare LF line ends are accepted too (RFC 9112 §2.2).
        const size_t end = std::min(c.in.find("\r\n\r\n"), c.in.find("\n\n"));
        HttpResponse response;
        bool head = false;
        if (end == std::string::npos) {
          if (c.in.size() <= options_.max_request_bytes) continue;
          response = Error(431);
        } else if (end > options_.max_request_bytes) {
          response = Error(431);
        } else {
          // "METHOD SP target SP HTTP/x.y"
          std::string_view line = std::string_view(c.in).substr(0, c.in.find('\n'));
          if (line.ends_with('\r')) line.remove_suffix(1);
          const size_t sp1 = line.find(' ');
          const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
          if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.") ||
              line.substr(sp1 + 1, 1) != "/") {
            response = Error(400);
          } else {
            const std::string_view method = line.substr(0, sp1);
            std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
            target = target.substr(0, target.find('?'));
            head = method == "HEAD";
            response = (method == "GET" || head) ? handler_(target) : Error(405);
          }
        }
        c.out = Render(response, head);
        c.responding = true;
        shutdown(c.fd.get(), SHUT_RD);
        continue;
      }
      const ssize_t n = send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        c.deadline_ms = 0;
        continue;
      }
      c.written += static_cast<size_t>(n);
      if (c.written == c.out.size()) c.deadline_ms = 0;  // done: close
    }
  }
}

}  // namespace ad
