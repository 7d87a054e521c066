// The bounded HTTP GET client against fake peers on 127.0.0.1 in the test's own netns (no root):
// every misbehaving peer ends in a clear error within the deadline, never a hang.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "../integration/fake_http_server.h"
#include "sources/ztunnel/http_get.h"

namespace ad::ztunnel {
namespace {

using ad::testing::ChunkedResponseText;
using ad::testing::FakeHttpServer;
using ad::testing::FakeReply;
using ad::testing::HttpResponseText;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kTestLimit = std::chrono::seconds(10);

HttpGetOptions FastOptions() {
  HttpGetOptions options;
  options.connect_timeout = milliseconds(300);
  options.total_timeout = milliseconds(400);
  options.max_response_bytes = 1u << 20;
  return options;
}

class HttpGetTest : public ::testing::Test {
 protected:
  // One server answering `path` with `reply`; GET it and return the result.
  Result<HttpResponse> Get(FakeReply reply, const HttpGetOptions& options = FastOptions(),
                           const std::string& path = "/x") {
    server_ = std::make_unique<FakeHttpServer>("", "127.0.0.1", 0,
                                               std::map<std::string, FakeReply>{{path, reply}});
    EXPECT_TRUE(server_->ok()) << server_->error();
    const auto start = Clock::now();
    auto result = HttpGet({"", "127.0.0.1", server_->port(), path}, options);
    elapsed_ = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    return result;
  }
  std::string Url(const std::string& path = "/x") const {
    return "GET http://127.0.0.1:" + std::to_string(server_->port()) + path + ": ";
  }

  ad::testing::Watchdog watchdog_{kTestLimit, nullptr};
  std::unique_ptr<FakeHttpServer> server_;
  milliseconds elapsed_{0};
};

TEST_F(HttpGetTest, ContentLengthBody) {
  auto r = Get(FakeReply::Send(HttpResponseText(200, "hello\n", "X-Extra:  yes \r\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->reason, "OK");
  EXPECT_EQ(r->body, "hello\n");
  EXPECT_EQ(r->Header("x-extra"), "yes");
  EXPECT_EQ(r->Header("content-type"), "text/plain");
}

TEST_F(HttpGetTest, ChunkedBodyIsDecoded) {
  auto r =
      Get(FakeReply::Send(ChunkedResponseText(200, {"{\"a\":", std::string(70000, ' '), "1}"})));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "{\"a\":" + std::string(70000, ' ') + "1}");
}

TEST_F(HttpGetTest, BodyUntilCloseWithoutLength) {
  auto r = Get(FakeReply::Send("HTTP/1.0 200 OK\r\n\r\nall of it"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "all of it");
}

TEST_F(HttpGetTest, ErrorStatusIsAResponseNotAnError) {
  auto r =
      Get(FakeReply::Send(HttpResponseText(500, "not ready, pending: workload proxy manager")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "not ready, pending: workload proxy manager");
}

TEST_F(HttpGetTest, GarbageIsAMalformedStatusLine) {
  auto r = Get(FakeReply::Send(std::string("\x16\x03\x01garbage\xff\r\n\r\n", 15)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().source(), "http");
  EXPECT_EQ(r.error().message, Url() + "malformed status line \"\\x16\\x03\\x01garbage\\xff\"");
}

TEST_F(HttpGetTest, GarbageFromASilentPeerFailsWithoutWaitingForTheDeadline) {
  auto r = Get(FakeReply::SendThenHang("SSH-2.0-OpenSSH_9.2\r\n"), HttpGetOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("malformed status line \"SSH-2.0"), std::string::npos);
  EXPECT_LT(elapsed_, milliseconds(1000));
}

TEST_F(HttpGetTest, TruncatedContentLengthBody) {
  auto r = Get(FakeReply::Send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "truncated body: got 10 of 100 bytes");
}

TEST_F(HttpGetTest, TruncatedChunkedBody) {
  auto r = Get(FakeReply::Send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "truncated chunked body after 3 bytes");
}

TEST_F(HttpGetTest, OversizedDeclaredBodyIsRefusedBeforeReadingIt) {
  auto r = Get(FakeReply::Send(HttpResponseText(200, std::string(2u << 20, 'x'))));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().error_number, EMSGSIZE);
  EXPECT_EQ(r.error().message, Url() + "response exceeds 1048576 bytes (Content-Length 2097152)");
}

TEST_F(HttpGetTest, OversizedUndeclaredBodyStopsAtTheLimit) {
  auto r = Get(FakeReply::Send("HTTP/1.1 200 OK\r\n\r\n" + std::string(3u << 20, 'x')));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "response exceeds 1048576 bytes");
}

TEST_F(HttpGetTest, OversizedChunk) {
  auto r = Get(FakeReply::Send(ChunkedResponseText(200, {std::string(1100000, 'x')})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "response exceeds 1048576 bytes (chunk of 1100000)");
}

TEST_F(HttpGetTest, OversizedHeaders) {
  auto r = Get(FakeReply::SendThenHang("HTTP/1.1 200 OK\r\nX-Big: " + std::string(70000, 'h')));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "response headers exceed 65536 bytes");
}

TEST_F(HttpGetTest, SilentPeerTimesOutAtTheDefaultDeadline) {
  auto r = Get(FakeReply::Hang(), HttpGetOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().error_number, ETIMEDOUT);
  EXPECT_EQ(r.error().message, Url() + "no response within 2000 ms");
  EXPECT_GE(elapsed_, milliseconds(1900));
  EXPECT_LT(elapsed_, milliseconds(3000));
}

TEST_F(HttpGetTest, PartialResponseThenSilenceTimesOut) {
  auto r = Get(FakeReply::SendThenHang("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, Url() + "response not complete within 400 ms (40 bytes received)");
  EXPECT_LT(elapsed_, milliseconds(1500));
}

TEST_F(HttpGetTest, PeerClosingImmediatelyIsAnErrorNotAHang) {
  auto r = Get(FakeReply::CloseImmediately());
  ASSERT_FALSE(r.ok());
  const std::string& message = r.error().message;
  // Depending on timing the close shows as EOF, a reset or a broken pipe.
  EXPECT_TRUE(message == Url() + "connection closed before a response" ||
              message == Url() + "recv: Connection reset by peer" ||
              message == Url() + "send: Broken pipe")
      << message;
  EXPECT_LT(elapsed_, milliseconds(1000));
}

TEST_F(HttpGetTest, ConnectionRefused) {
  uint16_t port = 0;
  {
    FakeHttpServer probe("", "127.0.0.1", 0, {});  // a port that was just free
    port = probe.port();
  }
  auto r = HttpGet({"", "127.0.0.1", port, "/config_dump"}, FastOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().error_number, ECONNREFUSED);
  EXPECT_EQ(r.error().message, "GET http://127.0.0.1:" + std::to_string(port) +
                                   "/config_dump: connect: Connection refused");
}

TEST_F(HttpGetTest, MissingNetnsPath) {
  auto r = HttpGet({"/nonexistent/adt-netns", "127.0.0.1", 15000, "/config_dump"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().error_number, ENOENT);
  EXPECT_EQ(r.error().message,
            "GET http://127.0.0.1:15000/config_dump: enter netns: "
            "open(/nonexistent/adt-netns): No such file or directory");
}

TEST_F(HttpGetTest, HostMustBeALiteralAddress) {
  auto r = HttpGet({"", "localhost", 15000, "/"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "GET http://localhost:15000/: host is not a literal IP address");
}

TEST_F(HttpGetTest, SendsAMinimalGetRequest) {
  // A raw listener that records the request bytes.
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::string request;
  std::thread peer([&] {
    UniqueFd connection(::accept(listener.get(), nullptr, nullptr));
    char buffer[512];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(connection.get(), buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    const std::string reply = HttpResponseText(200, "ok");
    (void)::send(connection.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
  });
  auto r = HttpGet({"", "127.0.0.1", ntohs(address.sin_port), "/healthz/ready"}, FastOptions());
  peer.join();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(request, "GET /healthz/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
}

// The parser on its own, fed in awkward pieces.
HttpResponseParser::Progress FeedBytewise(HttpResponseParser& parser, std::string_view bytes) {
  HttpResponseParser::Progress progress = parser.progress();
  for (char c : bytes) {
    progress = parser.Feed(std::string_view(&c, 1));
    if (progress != HttpResponseParser::Progress::kNeedMore) break;
  }
  return progress;
}

TEST(HttpResponseParser, ChunkedFedOneByteAtATimeWithExtensionsAndTrailer) {
  HttpResponseParser parser(1 << 20, 1 << 16);
  const std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
      "5;name=value\r\nhello\r\n1\n,\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  ASSERT_EQ(FeedBytewise(parser, wire), HttpResponseParser::Progress::kDone) << parser.error();
  EXPECT_EQ(parser.TakeResponse().body, "hello, world");
}

TEST(HttpResponseParser, InterimResponseIsSkipped) {
  HttpResponseParser parser(1 << 20, 1 << 16);
  ASSERT_EQ(
      parser.Feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
      HttpResponseParser::Progress::kDone);
  HttpResponse response = parser.TakeResponse();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok");
}

TEST(HttpResponseParser, NoContentNeedsNoBody) {
  HttpResponseParser parser(1 << 20, 1 << 16);
  EXPECT_EQ(parser.Feed("HTTP/1.1 204 No Content\r\n\r\n"), HttpResponseParser::Progress::kDone);
}

TEST(HttpResponseParser, BareLineFeedsAreTolerated) {
  HttpResponseParser parser(1 << 20, 1 << 16);
  EXPECT_EQ(parser.Feed("HTTP/1.1 200 OK\nContent-Length: 3\n\nabc"),
            HttpResponseParser::Progress::kDone);
}

TEST(HttpResponseParser, RejectsBadFraming) {
  struct Case {
    std::string wire;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1 2OO OK\r\n\r\n", "malformed status line \"HTTP/1.1 2OO OK\""},
      {"HTTP/2 200\r\n\r\n", "malformed status line \"HTTP/2 200\""},
      {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line \"no colon here\""},
      // Found by http_response_fuzz: the name trimmed to "" and was kept as a header.
      {"HTTP/1.1 200 OK\r\n\r: chunked\r\n\r\n", "malformed header line \"\\x0d: chunked\""},
      {"HTTP/1.1 200 OK\r\n \t: x\r\n\r\n", "malformed header line \" \\x09: x\""},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length \"-1\""},
      {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
       "invalid Content-Length \"4\""},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       "malformed chunk size line \"zz\""},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX",
       "missing CRLF after chunk data"},
  };
  for (const Case& c : cases) {
    HttpResponseParser parser(1 << 20, 1 << 16);
    EXPECT_EQ(parser.Feed(c.wire), HttpResponseParser::Progress::kError) << c.wire;
    EXPECT_EQ(parser.error(), c.error) << c.wire;
  }
}

TEST(HttpResponseParser, EofStates) {
  HttpResponseParser empty(1 << 20, 1 << 16);
  EXPECT_EQ(empty.PeerClosed(), HttpResponseParser::Progress::kError);
  EXPECT_EQ(empty.error(), "connection closed before a response");

  HttpResponseParser in_headers(1 << 20, 1 << 16);
  in_headers.Feed("HTTP/1.1 200 OK\r\nContent-");
  EXPECT_EQ(in_headers.PeerClosed(), HttpResponseParser::Progress::kError);
  EXPECT_EQ(in_headers.error(), "connection closed inside the response headers after 25 bytes");

  HttpResponseParser after_last_chunk(1 << 20, 1 << 16);
  after_last_chunk.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n");
  EXPECT_EQ(after_last_chunk.PeerClosed(), HttpResponseParser::Progress::kDone);
}

}  // namespace
}  // namespace ad::ztunnel
