// ztunnel's three HTTP ports, minimal HTTP/1.1 (one request per connection, Connection: close).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <thread>

#include "base/unique_fd.h"
#include "ztunnel_sim/ztunnel_sim.h"

namespace ad::sim {
namespace {

constexpr SourceKind kSource = SourceKind::kLab;
constexpr size_t kMaxRequestBytes = 8192;

enum class Port : uint8_t { kAdmin, kStats, kReadiness };

Result<UniqueFd> ListenTcp(const char* address, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(kSource, "socket");
  const int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in bind_address{};
  bind_address.sin_family = AF_INET;
  bind_address.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &bind_address.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&bind_address), sizeof(bind_address)) !=
      0) {
    return ErrnoError(kSource, "bind " + std::string(address) + ":" + std::to_string(port));
  }
  if (::listen(fd.get(), 64) != 0) return ErrnoError(kSource, "listen");
  return fd;
}

struct Reply {
  int code = 404;
  std::string content_type = "text/plain";
  std::string body = "not found\n";
};

Reply Route(const ZtunnelSim& sim, Port port, const std::string& method, const std::string& path) {
  if (method != "GET") return {405, "text/plain", "method not allowed\n"};
  switch (port) {
    case Port::kAdmin:
      if (path == "/config_dump") return {200, "application/json", sim.ConfigDumpJson()};
      if (path == "/") {
        return {200, "text/html",
                "<html><body>ztunnel-sim admin: <a href=\"/config_dump\">"
                "/config_dump</a></body></html>\n"};
      }
      break;
    case Port::kStats:
      if (path == "/metrics" || path == "/stats/prometheus") {
        return {200, "application/openmetrics-text; version=1.0.0; charset=utf-8",
                sim.MetricsText()};
      }
      break;
    case Port::kReadiness:
      if (path == "/healthz/ready") return {sim.ReadinessCode(), "text/plain", sim.ReadinessBody()};
      break;
  }
  return {};
}

void Serve(const ZtunnelSim& sim, Port port, int client) {
  timeval timeout{2, 0};
  ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string request;
  std::array<char, 1024> buffer{};
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const ssize_t n = ::recv(client, buffer.data(), buffer.size(), 0);
    if (n <= 0) return;
    request.append(buffer.data(), static_cast<size_t>(n));
  }
  const size_t method_end = request.find(' ');
  const size_t path_end = request.find(' ', method_end + 1);
  if (method_end == std::string::npos || path_end == std::string::npos) return;
  const std::string method = request.substr(0, method_end);
  std::string path = request.substr(method_end + 1, path_end - method_end - 1);
  path = path.substr(0, path.find('?'));
  const Reply reply = Route(sim, port, method, path);
  const char* reason = reply.code == 200   ? "OK"
                       : reply.code == 500 ? "Internal Server Error"
                       : reply.code == 405 ? "Method Not Allowed"
                                           : "Not Found";
  const std::string response = "HTTP/1.1 " + std::to_string(reply.code) + " " + reason +
                               "\r\ncontent-type: " + reply.content_type +
                               "\r\ncontent-length: " + std::to_string(reply.body.size()) +
                               "\r\nconnection: close\r\n\r\n" + reply.body;
  size_t written = 0;
  while (written < response.size()) {
    const ssize_t n =
        ::send(client, response.data() + written, response.size() - written, MSG_NOSIGNAL);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

}  // namespace

struct AdminServer::State {
  const ZtunnelSim* sim = nullptr;
  std::array<UniqueFd, 3> listeners;  // indexed by Port
  UniqueFd wake;
  std::thread thread;

  void Run() {
    for (;;) {
      std::array<pollfd, 4> fds{};
      for (size_t i = 0; i < listeners.size(); ++i) fds[i] = {listeners[i].get(), POLLIN, 0};
      fds[3] = {wake.get(), POLLIN, 0};
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
      if (fds[3].revents != 0) return;
      for (size_t i = 0; i < listeners.size(); ++i) {
        if ((fds[i].revents & POLLIN) == 0) continue;
        UniqueFd client(::accept4(listeners[i].get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (client.valid()) Serve(*sim, static_cast<Port>(i), client.get());
      }
    }
  }
};

AdminServer::AdminServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<AdminServer>> AdminServer::Start(const ZtunnelSim& sim, AdminPorts ports) {
  auto state = std::make_unique<State>();
  state->sim = &sim;
  // Admin on localhost only, stats and readiness on the wildcard address, like ztunnel.
  const std::array<std::pair<const char*, uint16_t>, 3> binds = {
      std::pair{"127.0.0.1", ports.admin}, std::pair{"0.0.0.0", ports.stats},
      std::pair{"0.0.0.0", ports.readiness}};
  for (size_t i = 0; i < binds.size(); ++i) {
    Result<UniqueFd> listener = ListenTcp(binds[i].first, binds[i].second);
    if (!listener.ok()) return listener.error();
    state->listeners[i] = std::move(listener).value();
  }
  state->wake = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!state->wake.valid()) return ErrnoError(kSource, "eventfd");
  State* raw = state.get();
  state->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(state)));
}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Stop() {
  if (!state_->thread.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(state_->wake.get(), &one, sizeof(one));
  state_->thread.join();
}

}  // namespace ad::sim
