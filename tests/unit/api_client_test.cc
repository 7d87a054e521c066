// The API client's failures without a daemon (no root needed: unix sockets in a temp dir): each is
// a value naming the socket and the cause, and none waits longer than its deadline.
#include "client/api_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace ad::client {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "adt-client-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A listening unix socket that accepts and then does `behaviour` with each connection.
class FakePeer {
 public:
  enum class Behaviour { kSilent, kGarbage };
  FakePeer(const std::string& path, Behaviour behaviour) : behaviour_(behaviour) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    ok_ = fd_ >= 0 &&
          ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
          ::listen(fd_, 8) == 0;
    if (behaviour_ == Behaviour::kGarbage) thread_ = std::thread([this] { Serve(); });
  }
  ~FakePeer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  void Serve() {
    while (!stopping_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      static const char kJunk[] = "HTTP/1.1 400 Bad Request\r\n\r\n\x00\x01\x02 not http2";
      (void)!::send(c, kJunk, sizeof(kJunk), MSG_NOSIGNAL);  // the client may be gone already
      ::close(c);
    }
  }
  Behaviour behaviour_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

ClientOptions Options(const std::string& path) {
  ClientOptions options;
  options.socket_path = path;
  options.connect_timeout = std::chrono::milliseconds(300);
  options.call_timeout = std::chrono::milliseconds(300);
  return options;
}

TEST(ApiClient, NoSocketFile) {
  TempDir dir;
  auto client = ApiClient::Connect(Options(dir.path() + "/api.sock"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.error().error_number, ENOENT);
  EXPECT_EQ(client.error().message, "no daemon socket at " + dir.path() + "/api.sock");
}

TEST(ApiClient, NotASocket) {
  TempDir dir;
  std::ofstream(dir.path() + "/api.sock") << "x";
  auto client = ApiClient::Connect(Options(dir.path() + "/api.sock"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.error().error_number, ENOTSOCK);
  EXPECT_NE(client.error().message.find("is not a socket"), std::string::npos);
}

TEST(ApiClient, StaleSocketNobodyListensOn) {
  TempDir dir;
  const std::string path = dir.path() + "/api.sock";
  { FakePeer gone(path, FakePeer::Behaviour::kSilent); }  // closed: the file stays behind
  ASSERT_TRUE(fs::exists(path));
  auto client = ApiClient::Connect(Options(path));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.error().error_number, ECONNREFUSED);
  EXPECT_NE(client.error().message.find("stale daemon socket " + path), std::string::npos)
      << client.error().message;
}

TEST(ApiClient, PeerThatAcceptsButNeverAnswers) {
  TempDir dir;
  const std::string path = dir.path() + "/api.sock";
  FakePeer silent(path, FakePeer::Behaviour::kSilent);
  ASSERT_TRUE(silent.ok());
  auto client = ApiClient::Connect(Options(path));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.error().error_number, ETIMEDOUT);
  EXPECT_NE(client.error().message.find("no answer within 300 ms"), std::string::npos)
      << client.error().message;
}

TEST(ApiClient, GarbageFromThePeer) {
  TempDir dir;
  const std::string path = dir.path() + "/api.sock";
  FakePeer garbage(path, FakePeer::Behaviour::kGarbage);
  ASSERT_TRUE(garbage.ok());
  auto client = ApiClient::Connect(Options(path));
  ASSERT_FALSE(client.ok());
  // Depending on when gRPC notices, the handshake fails or never completes: never a hang.
  EXPECT_TRUE(client.error().error_number == EPROTO || client.error().error_number == ETIMEDOUT)
      << client.error().message;
}

TEST(ApiClient, AnsweredNoIsTellable) {
  EXPECT_TRUE(IsAnsweredNo(SourceError{SourceKind::kApi, "NOT_FOUND", ENOENT}));
  EXPECT_TRUE(IsAnsweredNo(SourceError{SourceKind::kApi, "INVALID_ARGUMENT", EINVAL}));
  EXPECT_FALSE(IsAnsweredNo(SourceError{SourceKind::kApi, "UNAVAILABLE", EAGAIN}));
  EXPECT_FALSE(IsAnsweredNo(SourceError{SourceKind::kApi, "DEADLINE_EXCEEDED", ETIMEDOUT}));
}

}  // namespace
}  // namespace ad::client
