#include "kube_api/kube_api_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

namespace ad::kube_sim {
namespace {

using Clock = std::chrono::steady_clock;

struct Object {
  int64_t rv = 0;
  std::string json;
  std::string node_name;  // pods: spec.nodeName
  std::string name;
};

struct Event {
  int64_t rv = 0;
  Resource resource;
  std::string type;  // ADDED, MODIFIED, DELETED
  Object object;
};

struct Request {
  std::string method;
  std::string target;
  std::string path;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names

  std::string Param(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? "" : it->second;
  }
  // A bool query parameter as the apiserver reads it: absent, "0" or "false" is false.
  bool Flag(const std::string& name) const {
    auto it = query.find(name);
    return it != query.end() && it->second != "0" && it->second != "false";
  }
};

std::string_view KindOf(Resource resource) {
  switch (resource) {
    case Resource::kPods:
      return "Pod";
    case Resource::kNamespaces:
      return "Namespace";
    case Resource::kNodes:
      return "Node";
  }
  return "";
}
std::string_view PluralOf(Resource resource) {
  switch (resource) {
    case Resource::kPods:
      return "pods";
    case Resource::kNamespaces:
      return "namespaces";
    case Resource::kNodes:
      return "nodes";
  }
  return "";
}

std::string Escape(std::string_view text) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return buffer.GetString();
}

// A metav1.Status body (AM pkg/apis/meta/v1/types.go).
std::string StatusBody(int code, std::string_view reason, std::string_view message,
                       std::string_view details = "") {
  std::string body = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)";
  body += "\"message\":" + Escape(message) + ",\"reason\":" + Escape(reason);
  if (!details.empty()) body += ",\"details\":" + std::string(details);
  body += ",\"code\":" + std::to_string(code) + "}";
  return body;
}

std::string ReasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 410:
      return "Gone";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
  }
  return "Error";
}

int FromHex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && FromHex(text[i + 1]) >= 0 &&
        FromHex(text[i + 2]) >= 0) {
      out += static_cast<char>(FromHex(text[i + 1]) * 16 + FromHex(text[i + 2]));
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

std::string HexEncode(std::string_view text) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}
std::optional<std::string> HexDecode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = FromHex(text[i]), low = FromHex(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
  }
  return out;
}

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string NowRfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// One TLS connection; every write goes out whole or fails.
class Connection {
 public:
  Connection(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~Connection() {
    SSL_free(ssl_);
    ::close(fd_);
  }
  bool Write(std::string_view data) {
    while (!data.empty()) {
      const int n = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads one request head (and discards a Content-Length body); nullopt at EOF or error.
  std::optional<Request> ReadRequest() {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > (64u << 10) || !Fill()) return std::nullopt;
    }
    std::string head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    Request request;
    size_t line_end = head.find("\r\n");
    const std::string line = head.substr(0, line_end);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp2 <= sp1) return std::nullopt;
    request.method = line.substr(0, sp1);
    request.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    while (line_end != std::string::npos) {
      const size_t next = head.find("\r\n", line_end + 2);
      const std::string header = head.substr(line_end + 2, next - line_end - 2);
      line_end = next;
      const size_t colon = header.find(':');
      if (colon == std::string::npos) continue;
      std::string name = header.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t value = header.find_first_not_of(' ', colon + 1);
      request.headers[name] = value == std::string::npos ? "" : header.substr(value);
    }
    const size_t body = ParseInt(request.headers["content-length"]).value_or(0);
    while (buffer_.size() < body) {
      if (!Fill()) return std::nullopt;
    }
    buffer_.erase(0, body);
    const size_t question = request.target.find('?');
    request.path = request.target.substr(0, question);
    if (question != std::string::npos) ParseQuery(request.target.substr(question + 1), request);
    return request;
  }
  // The client presented a certificate that verified against the client CA.
  bool ClientCertVerified() const {
    X509* cert = SSL_get1_peer_certificate(ssl_);
    if (cert == nullptr) return false;
    X509_free(cert);
    return SSL_get_verify_result(ssl_) == X509_V_OK;
  }
  // The peer closed its side (polled between watch events).
  bool PeerGone() const {
    pollfd pfd{fd_, POLLRDHUP, 0};
    return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

 private:
  static void ParseQuery(std::string_view query, Request& request) {
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      const size_t eq = pair.find('=');
      request.query[PercentDecode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  bool Fill() {
    char chunk[4096];
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  SSL* ssl_;
  int fd_;
  std::string buffer_;
};

// Which objects a request selects: a field selector of the forms the apiserver supports here.
struct Selector {
  std::string node_name;  // spec.nodeName= (pods)
  std::string name;       // metadata.name=
  bool Matches(const Object& object) const {
    return (node_name.empty() || object.node_name == node_name) &&
           (name.empty() || object.name == name);
  }
};

}  // namespace

struct KubeApiServer::State {
  KubeApiServerOptions options;
  SSL_CTX* ctx = nullptr;
  int listen_fd = -1;
  uint16_t port = 0;
  std::thread acceptor;

  mutable std::mutex mu;
  std::condition_variable changed;
  bool stopping = false;
  int64_t rv = 1000;
  int64_t compacted_rv = 0;
  std::map<std::string, Object> objects[3];  // by Resource, keyed "namespace/name"
  std::deque<Event> history;
  std::string token;
  bool forbidden[3] = {false, false, false};
  int throttle_left = 0;
  int retry_after = 1;
  bool hang = false;
  bool stall = false;
  bool garbage = false;
  uint64_t drop_generation = 0;
  int open_watches = 0;
  std::vector<RequestRecord> requests;
  std::vector<std::thread> workers;
  std::vector<int> connection_fds;

  ~State() {
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  void AcceptLoop();
  void Serve(int fd);
  // Answers one request; false when the connection must close.
  bool Handle(Connection& connection, const Request& request);
  bool Respond(Connection& connection, size_t record, int code, std::string_view body,
               std::string_view extra_headers = "");
  size_t Record(const Request& request);
  void SetStatus(size_t record, int code) {
    std::lock_guard lock(mu);
    if (record < requests.size()) requests[record].status = code;  // ClearRequests may run
  }
  std::optional<Resource> Route(const Request& request, std::string* get_namespace,
                                std::string* get_name) const;
  bool List(Connection& connection, size_t record, Resource resource, const Request& request,
            const Selector& selector);
  bool Watch(Connection& connection, size_t record, Resource resource, const Request& request,
             const Selector& selector);
  bool StreamEvents(Connection& connection, Resource resource, const Selector& selector,
                    int64_t from_rv, bool bookmarks, Clock::time_point deadline);
  std::string Bookmark(Resource resource, int64_t rv, bool initial_end) const;
};

namespace {

std::string EventLine(std::string_view type, std::string_view object) {
  return "{\"type\":\"" + std::string(type) + "\",\"object\":" + std::string(object) + "}\n";
}
std::string Chunk(std::string_view data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + std::string(data) + "\r\n";
}

}  // namespace

size_t KubeApiServer::State::Record(const Request& request) {
  std::lock_guard lock(mu);
  requests.push_back({request.method, request.target, 0});
  return requests.size() - 1;
}

bool KubeApiServer::State::Respond(Connection& connection, size_t record, int code,
                                   std::string_view body, std::string_view extra_headers) {
  SetStatus(record, code);
  std::string head = "HTTP/1.1 " + std::to_string(code) + " " + ReasonPhrase(code) +
                     "\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\n" +
                     std::string(extra_headers) + "Content-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n";
  return connection.Write(head + std::string(body));
}

std::optional<Resource> KubeApiServer::State::Route(const Request& request,
                                                    std::string* get_namespace,
                                                    std::string* get_name) const {
  // GET of one pod: /api/v1/namespaces/NS/pods/NAME.
  static constexpr std::string_view kNamespaced = "/api/v1/namespaces/";
  if (request.path.compare(0, kNamespaced.size(), kNamespaced) == 0) {
    const std::string rest = request.path.substr(kNamespaced.size());
    const size_t pods = rest.find("/pods/");
    if (pods != std::string::npos && pods > 0 && rest.find('/', pods + 6) == std::string::npos &&
        rest.size() > pods + 6) {
      *get_namespace = rest.substr(0, pods);
      *get_name = rest.substr(pods + 6);
      return Resource::kPods;
    }
  }
  static const std::pair<std::string_view, Resource> kCollections[] = {
      {"/api/v1/pods", Resource::kPods},
      {"/api/v1/namespaces", Resource::kNamespaces},
      {"/api/v1/nodes", Resource::kNodes}};
  for (const auto& [path, resource] : kCollections) {
    if (request.path == path) return resource;
    // GET of one namespace or node: /api/v1/nodes/NAME.
    if (resource != Resource::kPods && request.path.size() > path.size() + 1 &&
        request.path.compare(0, path.size(), path) == 0 && request.path[path.size()] == '/' &&
        request.path.find('/', path.size() + 1) == std::string::npos) {
      *get_name = request.path.substr(path.size() + 1);
      return resource;
    }
  }
  return std::nullopt;
}

bool KubeApiServer::State::Handle(Connection& connection, const Request& request) {
  const size_t record = Record(request);
  std::unique_lock lock(mu);
  if (hang) {
    // Read, never answered: the client's deadline is all that ends this.
    changed.wait(lock, [&] { return stopping || !hang; });
    return false;
  }
  const bool token_ok = request.headers.count("authorization") != 0 &&
                        request.headers.at("authorization") == "Bearer " + token;
  if (!token_ok && !connection.ClientCertVerified()) {
    lock.unlock();
    return Respond(connection, record, 401, StatusBody(401, "Unauthorized", "Unauthorized"));
  }
  if (request.method != "GET") {
    lock.unlock();
    return Respond(connection, record, 405,
                   StatusBody(405, "MethodNotAllowed",
                              "the server does not allow this method on the requested resource"));
  }
  if (throttle_left > 0) {
    --throttle_left;
    const std::string seconds = std::to_string(retry_after);
    lock.unlock();
    return Respond(connection, record, 429,
                   StatusBody(429, "TooManyRequests", "storage is (re)initializing",
                              "{\"retryAfterSeconds\":" + seconds + "}"),
                   "Retry-After: " + seconds + "\r\n");
  }
  std::string get_namespace, get_name;
  const std::optional<Resource> resource = Route(request, &get_namespace, &get_name);
  if (!resource) {
    lock.unlock();
    return Respond(connection, record, 404,
                   StatusBody(404, "NotFound", "the server could not find the requested resource"));
  }
  const bool watch = request.Flag("watch");
  if (forbidden[static_cast<int>(*resource)]) {
    const std::string plural(PluralOf(*resource));
    lock.unlock();
    return Respond(
        connection, record, 403,
        StatusBody(403, "Forbidden",
                   plural +
                       " is forbidden: User \"system:serviceaccount:istio-system:ambient-doctor\" "
                       "cannot " +
                       (watch ? "watch" : "list") + " resource \"" + plural +
                       "\" in API group \"\" at the cluster scope",
                   "{\"kind\":\"" + plural + "\"}"));
  }
  if (garbage) {
    lock.unlock();
    return Respond(connection, record, 200, "<html><body>not the API</body></html>");
  }
  lock.unlock();
  Selector selector;
  selector.name = get_name;
  const std::string field_selector = request.Param("fieldSelector");
  if (!field_selector.empty()) {
    const size_t eq = field_selector.find('=');
    const std::string field = field_selector.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : field_selector.substr(eq + 1);
    if (field == "spec.nodeName" && *resource == Resource::kPods) {
      selector.node_name = value;
    } else if (field == "metadata.name") {
      selector.name = value;
    } else {
      return Respond(connection, record, 400,
                     StatusBody(400, "BadRequest", "field label not supported: " + field));
    }
  }
  if (!get_name.empty()) {
    lock.lock();
    auto& collection = objects[static_cast<int>(*resource)];
    auto it = collection.find(get_namespace + "/" + get_name);
    if (it == collection.end()) {
      lock.unlock();
      return Respond(
          connection, record, 404,
          StatusBody(404, "NotFound",
                     std::string(PluralOf(*resource)) + " \"" + get_name + "\" not found"));
    }
    const std::string json = it->second.json;
    lock.unlock();
    return Respond(connection, record, 200, json);
  }
  return watch ? Watch(connection, record, *resource, request, selector)
               : List(connection, record, *resource, request, selector);
}

bool KubeApiServer::State::List(Connection& connection, size_t record, Resource resource,
                                const Request& request, const Selector& selector) {
  std::unique_lock lock(mu);
  int64_t list_rv = rv;
  std::string after;  // the key the previous page ended with
  const std::string continue_token = request.Param("continue");
  if (!continue_token.empty()) {
    const std::optional<std::string> decoded = HexDecode(continue_token);
    const size_t slash = decoded ? decoded->find('|') : std::string::npos;
    const std::optional<int64_t> token_rv =
        slash == std::string::npos ? std::nullopt : ParseInt(decoded->substr(0, slash));
    if (!token_rv) {
      lock.unlock();
      return Respond(connection, record, 400,
                     StatusBody(400, "BadRequest", "continue key is not valid"));
    }
    if (*token_rv <= compacted_rv) {
      lock.unlock();
      return Respond(connection, record, 410,
                     StatusBody(410, "Expired",
                                "The provided continue parameter is too old to display a "
                                "consistent list result. You can start a new list without the "
                                "continue parameter."));
    }
    list_rv = *token_rv;
    after = decoded->substr(slash + 1);
  } else {
    const std::string requested = request.Param("resourceVersion");
    const std::optional<int64_t> requested_rv = ParseInt(requested);
    if (!requested.empty() && requested != "0" && requested_rv && *requested_rv < compacted_rv) {
      lock.unlock();
      return Respond(connection, record, 410,
                     StatusBody(410, "Expired",
                                "too old resource version: " + requested + " (" +
                                    std::to_string(compacted_rv) + ")"));
    }
  }
  const int64_t limit = ParseInt(request.Param("limit")).value_or(0);
  std::string items;
  int64_t count = 0;
  std::string last_key;
  int64_t remaining = 0;
  const auto& collection = objects[static_cast<int>(resource)];
  for (auto it = collection.upper_bound(after); it != collection.end(); ++it) {
    if (!selector.Matches(it->second)) continue;
    if (limit > 0 && count == limit) {
      ++remaining;
      continue;
    }
    if (count > 0) items += ",";
    items += it->second.json;
    last_key = it->first;
    ++count;
  }
  lock.unlock();
  std::string metadata = "\"resourceVersion\":\"" + std::to_string(list_rv) + "\"";
  if (remaining > 0) {
    metadata += ",\"continue\":\"" + HexEncode(std::to_string(list_rv) + "|" + last_key) + "\"";
    // Omitted when a selector is used (the apiserver cannot count without reading them all).
    if (selector.node_name.empty() && selector.name.empty()) {
      metadata += ",\"remainingItemCount\":" + std::to_string(remaining);
    }
  }
  const std::string body = "{\"kind\":\"" + std::string(KindOf(resource)) +
                           "List\",\"apiVersion\":\"v1\",\"metadata\":{" + metadata +
                           "},\"items\":[" + items + "]}";
  return Respond(connection, record, 200, body);
}

std::string KubeApiServer::State::Bookmark(Resource resource, int64_t at, bool initial_end) const {
  std::string metadata = "{\"resourceVersion\":\"" + std::to_string(at) + "\"";
  if (initial_end) metadata += ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";
  metadata += "}";
  return EventLine("BOOKMARK", "{\"kind\":\"" + std::string(KindOf(resource)) +
                                   "\",\"apiVersion\":\"v1\",\"metadata\":" + metadata + "}");
}

bool KubeApiServer::State::Watch(Connection& connection, size_t record, Resource resource,
                                 const Request& request, const Selector& selector) {
  const std::string requested = request.Param("resourceVersion");
  const bool initial_events = request.Flag("sendInitialEvents");
  if (initial_events && !options.watch_list) {
    return Respond(
        connection, record, 422,
        StatusBody(422, "Invalid",
                   "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: "
                   "sendInitialEvents is forbidden for watch unless the WatchList feature gate "
                   "is enabled",
                   "{\"kind\":\"ListOptions\",\"group\":\"meta.k8s.io\"}"));
  }
  const int64_t timeout_s = ParseInt(request.Param("timeoutSeconds")).value_or(1800);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(timeout_s);
  const bool bookmarks = request.Flag("allowWatchBookmarks");
  SetStatus(record, 200);
  if (!connection.Write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        "Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n\r\n")) {
    return false;
  }
  std::unique_lock lock(mu);
  int64_t from = 0;
  const std::optional<int64_t> requested_rv = ParseInt(requested);
  if (initial_events || requested.empty() || requested == "0") {
    // Synthetic ADDED for every object, then changes from now on (a watch "from any version").
    std::string added;
    for (const auto& [key, object] : objects[static_cast<int>(resource)]) {
      if (selector.Matches(object)) added += EventLine("ADDED", object.json);
    }
    from = rv;
    if (initial_events) added += Bookmark(resource, rv, true);
    lock.unlock();
    if (!added.empty() && !connection.Write(Chunk(added))) return false;
  } else if (!requested_rv || *requested_rv < compacted_rv) {
    const std::string status = StatusBody(
        410, "Expired",
        "too old resource version: " + requested + " (" + std::to_string(compacted_rv) + ")");
    lock.unlock();
    return connection.Write(Chunk(EventLine("ERROR", status))) && connection.Write("0\r\n\r\n");
  } else {
    from = *requested_rv;
    lock.unlock();
  }
  if (!StreamEvents(connection, resource, selector, from, bookmarks, deadline)) return false;
  return connection.Write("0\r\n\r\n");
}

// Sends events newer than `from_rv` until the deadline, a drop, Stop or a write failure (false).
bool KubeApiServer::State::StreamEvents(Connection& connection, Resource resource,
                                        const Selector& selector, int64_t from_rv, bool bookmarks,
                                        Clock::time_point deadline) {
  std::unique_lock lock(mu);
  ++open_watches;
  const uint64_t drops = drop_generation;
  Clock::time_point next_bookmark = Clock::now() + options.bookmark_interval;
  bool ok = true;
  while (ok && !stopping && drop_generation == drops && Clock::now() < deadline) {
    std::string out;
    if (!stall) {
      for (const Event& event : history) {
        if (event.rv <= from_rv || event.resource != resource) continue;
        if (selector.Matches(event.object)) out += EventLine(event.type, event.object.json);
      }
      if (!history.empty()) from_rv = std::max(from_rv, history.back().rv);
      if (bookmarks && Clock::now() >= next_bookmark) {
        out += Bookmark(resource, rv, false);
        next_bookmark = Clock::now() + options.bookmark_interval;
      }
    }
    if (!out.empty()) {
      lock.unlock();
      ok = connection.Write(Chunk(out));
      lock.lock();
      continue;
    }
    const Clock::time_point wake =
        std::min({deadline, next_bookmark, Clock::now() + std::chrono::milliseconds(100)});
    changed.wait_until(lock, wake);
    if (connection.PeerGone()) ok = false;
  }
  --open_watches;
  return ok && !stopping && drop_generation == drops;
}

void KubeApiServer::State::Serve(int fd) {
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  Connection connection(ssl, fd);
  // Forget the fd before the connection closes it, so Stop never shuts down a reused number.
  struct Forget {
    State* state;
    int fd;
    ~Forget() {
      std::lock_guard lock(state->mu);
      std::erase(state->connection_fds, fd);
    }
  } forget{this, fd};
  if (SSL_accept(ssl) != 1) return;
  while (true) {
    std::optional<Request> request = connection.ReadRequest();
    if (!request || !Handle(connection, *request)) break;
    auto it = request->headers.find("connection");
    if (it != request->headers.end() && it->second == "close") break;
  }
  SSL_shutdown(ssl);
}

void KubeApiServer::State::AcceptLoop() {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard lock(mu);
    if (stopping) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) continue;
    connection_fds.push_back(fd);
    workers.emplace_back([this, fd] { Serve(fd); });
  }
}

KubeApiServer::KubeApiServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

std::unique_ptr<KubeApiServer> KubeApiServer::Start(const KubeApiServerOptions& options,
                                                    std::string* error) {
  // A client that goes away mid-write must not kill the test process.
  ::signal(SIGPIPE, SIG_IGN);
  auto state = std::make_unique<State>();
  state->options = options;
  state->token = options.token;
  state->ctx = SSL_CTX_new(TLS_server_method());
  if (state->ctx == nullptr ||
      SSL_CTX_use_certificate_chain_file(state->ctx, options.cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(state->ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    *error =
        "TLS setup with " + options.cert_file + ": " + ERR_error_string(ERR_get_error(), nullptr);
    return nullptr;
  }
  if (!options.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(state->ctx, options.client_ca_file.c_str(), nullptr) != 1) {
      *error =
          "client CA " + options.client_ca_file + ": " + ERR_error_string(ERR_get_error(), nullptr);
      return nullptr;
    }
    // Asked for, not required: token clients present none.
    SSL_CTX_set_verify(state->ctx, SSL_VERIFY_PEER, nullptr);
  }
  state->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(state->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(options.port);
  socklen_t length = sizeof address;
  if (::inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1 ||
      ::bind(state->listen_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(state->listen_fd, 64) != 0 ||
      ::getsockname(state->listen_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    *error = "listen on " + options.host + ": " + std::strerror(errno);
    ::close(state->listen_fd);
    return nullptr;
  }
  state->port = ntohs(address.sin_port);
  State* raw = state.get();
  state->acceptor = std::thread([raw] { raw->AcceptLoop(); });
  return std::unique_ptr<KubeApiServer>(new KubeApiServer(std::move(state)));
}

KubeApiServer::~KubeApiServer() { Stop(); }

void KubeApiServer::Stop() {
  State& s = *state_;
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(s.mu);
    if (s.stopping) return;
    s.stopping = true;
    ::shutdown(s.listen_fd, SHUT_RDWR);
    for (int fd : s.connection_fds) ::shutdown(fd, SHUT_RDWR);
  }
  s.changed.notify_all();
  s.acceptor.join();
  {
    std::lock_guard lock(s.mu);
    workers.swap(s.workers);
  }
  for (std::thread& worker : workers) worker.join();
  ::close(s.listen_fd);
}

uint16_t KubeApiServer::port() const { return state_->port; }
std::string KubeApiServer::url() const {
  return "https://" + state_->options.host + ":" + std::to_string(state_->port);
}

std::string KubeApiServer::Upsert(Resource resource, std::string_view json) {
  rapidjson::Document document;
  document.Parse(json.data(), json.size());
  if (document.HasParseError() || !document.IsObject()) return "";
  auto& allocator = document.GetAllocator();
  if (!document.HasMember("metadata") || !document["metadata"].IsObject()) return "";
  rapidjson::Value& metadata = document["metadata"];
  auto text = [&](rapidjson::Value& object, const char* key) -> std::string {
    auto it = object.FindMember(key);
    return it != object.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
  };
  const std::string name = text(metadata, "name");
  const std::string ns = resource == Resource::kPods ? text(metadata, "namespace") : "";
  if (name.empty() || (resource == Resource::kPods && ns.empty())) return "";
  std::lock_guard lock(state_->mu);
  const std::string key = ns + "/" + name;
  auto& collection = state_->objects[static_cast<int>(resource)];
  const bool exists = collection.count(key) != 0;
  const int64_t rv = ++state_->rv;
  auto set = [&](const char* field, const std::string& value, bool keep) {
    if (metadata.HasMember(field)) {
      if (keep) return;
      metadata.RemoveMember(field);
    }
    metadata.AddMember(
        rapidjson::Value(field, allocator),
        rapidjson::Value(value.c_str(), static_cast<rapidjson::SizeType>(value.size()), allocator),
        allocator);
  };
  set("resourceVersion", std::to_string(rv), false);
  set("uid", "uid-" + ns + "-" + name, true);
  set("creationTimestamp", NowRfc3339(), true);
  document.RemoveMember("kind");
  document.RemoveMember("apiVersion");
  const std::string_view kind = KindOf(resource);
  document.AddMember(
      "kind",
      rapidjson::Value(kind.data(), static_cast<rapidjson::SizeType>(kind.size()), allocator),
      allocator);
  document.AddMember("apiVersion", "v1", allocator);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  document.Accept(writer);
  Object object{rv, buffer.GetString(), "", name};
  if (document.HasMember("spec") && document["spec"].IsObject()) {
    object.node_name = text(document["spec"], "nodeName");
  }
  collection[key] = object;
  state_->history.push_back({rv, resource, exists ? "MODIFIED" : "ADDED", object});
  state_->changed.notify_all();
  return std::to_string(rv);
}

bool KubeApiServer::Delete(Resource resource, std::string_view namespace_name,
                           std::string_view name) {
  std::lock_guard lock(state_->mu);
  auto& collection = state_->objects[static_cast<int>(resource)];
  auto it = collection.find(std::string(namespace_name) + "/" + std::string(name));
  if (it == collection.end()) return false;
  Object object = it->second;
  collection.erase(it);
  const int64_t rv = ++state_->rv;
  // DELETED carries the last state, under the deletion's version.
  const std::string old_rv = "\"resourceVersion\":\"" + std::to_string(object.rv) + "\"";
  const size_t at = object.json.find(old_rv);
  if (at != std::string::npos) {
    object.json.replace(at, old_rv.size(), "\"resourceVersion\":\"" + std::to_string(rv) + "\"");
  }
  object.rv = rv;
  state_->history.push_back({rv, resource, "DELETED", object});
  state_->changed.notify_all();
  return true;
}

std::string KubeApiServer::ResourceVersion() const {
  std::lock_guard lock(state_->mu);
  return std::to_string(state_->rv);
}

void KubeApiServer::Compact() {
  std::lock_guard lock(state_->mu);
  state_->compacted_rv = state_->rv;
}
void KubeApiServer::SetToken(std::string token) {
  std::lock_guard lock(state_->mu);
  state_->token = std::move(token);
}
void KubeApiServer::SetForbidden(Resource resource, bool forbidden) {
  std::lock_guard lock(state_->mu);
  state_->forbidden[static_cast<int>(resource)] = forbidden;
}
void KubeApiServer::Throttle(int requests, int retry_after_seconds) {
  std::lock_guard lock(state_->mu);
  state_->throttle_left = requests;
  state_->retry_after = retry_after_seconds;
}
void KubeApiServer::SetHang(bool hang) {
  std::lock_guard lock(state_->mu);
  state_->hang = hang;
  state_->changed.notify_all();
}
void KubeApiServer::SetStallWatches(bool stall) {
  std::lock_guard lock(state_->mu);
  state_->stall = stall;
  state_->changed.notify_all();
}
void KubeApiServer::SetGarbage(bool garbage) {
  std::lock_guard lock(state_->mu);
  state_->garbage = garbage;
}
void KubeApiServer::DropWatches() {
  std::lock_guard lock(state_->mu);
  ++state_->drop_generation;
  state_->changed.notify_all();
}
std::vector<RequestRecord> KubeApiServer::Requests() const {
  std::lock_guard lock(state_->mu);
  return state_->requests;
}
void KubeApiServer::ClearRequests() {
  std::lock_guard lock(state_->mu);
  state_->requests.clear();
}
int KubeApiServer::OpenWatches() const {
  std::lock_guard lock(state_->mu);
  return state_->open_watches;
}

}  // namespace ad::kube_sim
