// ParseRuntimeCniConfig: the runtime's CNI config directory and loaded networks from the verbose
// CRI Status info, on the real containerd 1.6.20 capture (tests/unit/golden/cri/) and on the
// shapes of containerd 2.x and CRI-O, plus malformed and hostile values. CRI-O's network_dir from
// its GET /config TOML, parsed and fetched from a fake CRI-O HTTP endpoint on a unix socket.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "sources/cri/crio_config.h"
#include "sources/cri/runtime_status.h"

namespace ad::cri {
namespace {

std::string ReadGolden(const std::string& name) {
  std::ifstream in(std::string(AD_SOURCE_DIR) + "/tests/unit/golden/cri/" + name);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The real capture: containerd 1.6.20 with conf_dir = /etc/cni/net.d (rewritten from the test
// installation's private directory) and one bridge conflist.
TEST(RuntimeCniConfig, Containerd16RealCapture) {
  const std::string config = ReadGolden("containerd-1.6.20-Status-verbose-config.json");
  const std::string cniconfig = ReadGolden("containerd-1.6.20-Status-verbose-cniconfig.json");
  ASSERT_FALSE(config.empty());
  ASSERT_FALSE(cniconfig.empty());
  const auto parsed = ParseRuntimeCniConfig(config, cniconfig, "OK");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->conf_dir, "/etc/cni/net.d");
  EXPECT_EQ(parsed->conf_dir_key, "config.cni.confDir");
  EXPECT_EQ(parsed->networks, std::vector<std::string>{"adt-cri"});  // cni-loopback left out
  EXPECT_EQ(parsed->pod_network, "adt-cri");
  EXPECT_EQ(parsed->last_load_status, "OK");
  // cniconfig alone gives the same directory.
  const auto alone = ParseRuntimeCniConfig({}, cniconfig, {});
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_EQ(alone->conf_dir, "/etc/cni/net.d");
  EXPECT_EQ(alone->conf_dir_key, "cniconfig.PluginConfDir");
}

// containerd 2.1+: bin_dirs is an array; the directory keys are unchanged.
TEST(RuntimeCniConfig, Containerd2Shape) {
  const auto parsed = ParseRuntimeCniConfig(
      R"({"cni": {"binDir": "", "binDirs": ["/opt/cni/bin"],
                  "confDir": "/var/lib/rancher/k3s/agent/etc/cni/net.d", "maxConfNum": 1,
                  "setupSerially": false, "useInternalLoopback": true},
          "containerdRootDir": "/var/lib/rancher/k3s/agent/containerd"})",
      R"({"PluginDirs": ["/var/lib/rancher/k3s/data/cni"],
          "PluginConfDir": "/var/lib/rancher/k3s/agent/etc/cni/net.d", "PluginMaxConfNum": 1,
          "Prefix": "eth",
          "Networks": [{"Config": {"Name": "cbr0", "CNIVersion": "1.0.0", "Plugins": [
              {"Network": {"type": "flannel"}, "Source": "{\"type\":\"flannel\"}"},
              {"Network": {"type": "istio-cni"}, "Source": "{\"type\":\"istio-cni\"}"}],
              "Source": "{}"}, "IFName": "eth0"}]})",
      "OK");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->conf_dir, "/var/lib/rancher/k3s/agent/etc/cni/net.d");
  EXPECT_EQ(parsed->networks, std::vector<std::string>{"cbr0"});
  EXPECT_EQ(parsed->pod_network, "cbr0");
}

// CRI-O (since 1.27): info.config is {"sandboxImage", "crio"}: no CNI directory.
TEST(RuntimeCniConfig, CrioReportsNoDirectory) {
  const auto parsed = ParseRuntimeCniConfig(
      R"({"sandboxImage": "registry.k8s.io/pause:3.9",
          "crio": {"root": "/var/lib/containers/storage", "runroot": "/run/containers/storage"}})",
      {}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->conf_dir, "");
  EXPECT_TRUE(parsed->networks.empty());
}

// Not loaded: containerd says why; the directory is still the one to read.
TEST(RuntimeCniConfig, LoadFailureKeepsTheDirectoryAndTheReason) {
  const auto parsed = ParseRuntimeCniConfig(
      R"({"cni": {"confDir": "/etc/cni/net.d"}})",
      R"({"PluginConfDir": "/etc/cni/net.d", "Networks": [{"Config": {"Name": "cni-loopback"},
          "IFName": "lo"}]})",
      "cni config load failed: no network config found in /etc/cni/net.d: cni plugin not "
      "initialized: failed to load cni config");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->conf_dir, "/etc/cni/net.d");
  EXPECT_TRUE(parsed->networks.empty());
  EXPECT_EQ(parsed->pod_network, "");
  EXPECT_NE(parsed->last_load_status.find("no network config found"), std::string::npos);
}

TEST(RuntimeCniConfig, UnusableDirectoriesAreNotTaken) {
  for (const std::string& dir :
       {std::string("etc/cni/net.d"), std::string(""), std::string(5000, '/')}) {
    const std::string config = R"({"cni": {"confDir": ")" + dir + R"("}})";
    const auto parsed = ParseRuntimeCniConfig(config, {}, {});
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(parsed->conf_dir, "") << dir.substr(0, 20);
  }
  const auto nul = ParseRuntimeCniConfig(R"({"cni": {"confDir": "/etc/cni\u0000/x"}})", {}, {});
  ASSERT_TRUE(nul.ok()) << nul.error().message;
  EXPECT_EQ(nul->conf_dir, "");
  // Not a string, not an object: ignored.
  const auto typed = ParseRuntimeCniConfig(R"({"cni": {"confDir": 7}})", R"([1, 2])", {});
  ASSERT_TRUE(typed.ok()) << typed.error().message;
  EXPECT_EQ(typed->conf_dir, "");
}

TEST(RuntimeCniConfig, MalformedIsAnErrorOnlyWithoutADirectory) {
  const auto bad = ParseRuntimeCniConfig(R"({"cni": {"confDir": )", {}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("config: "), std::string::npos) << bad.error().message;
  // One malformed document, the other gives the directory: usable.
  const auto half =
      ParseRuntimeCniConfig(R"({"cni": )", R"({"PluginConfDir": "/etc/cni/net.d"})", {});
  ASSERT_TRUE(half.ok()) << half.error().message;
  EXPECT_EQ(half->conf_dir, "/etc/cni/net.d");
  const auto deep = ParseRuntimeCniConfig(std::string(200, '[') + std::string(200, ']'), {}, {});
  EXPECT_FALSE(deep.ok());
}

TEST(RuntimeCniConfig, BoundedOutput) {
  std::string networks;
  for (int i = 0; i < 100; ++i) {
    networks += std::string(networks.empty() ? "" : ",") + R"({"Config": {"Name": "n)" +
                std::to_string(i) + R"("}, "IFName": "eth)" + std::to_string(i) + R"("})";
  }
  const auto parsed = ParseRuntimeCniConfig(
      {}, R"({"PluginConfDir": "/etc/cni/net.d", "Networks": [)" + networks + "]}",
      std::string(5000, 'x'));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->networks.size(), 64u);
  EXPECT_EQ(parsed->pod_network, "n0");
  EXPECT_EQ(parsed->last_load_status.size(), kMaxLoadStatusBytes + 3);
}

// As `crio config` / `crio status config` lays it out (CRI-O 1.30, abridged).
constexpr char kCrioConfig[] =
    R"(# The CRI-O configuration file specifies all of the available configuration
[crio]
root = "/var/lib/containers/storage"
[crio.runtime]
default_runtime = "runc"
default_sysctls = [
]
[crio.runtime.runtimes.runc]
runtime_path = "/usr/libexec/crio/runc"
[crio.network]

# The default CNI network name to be selected. If not set or "", then
# CRI-O will pick-up the first one found in network_dir.
# cni_default_network = ""

# Path to the directory where CNI configuration files are located.
network_dir = "/etc/kubernetes/cni/net.d/"

# Paths to directories where CNI plugin binaries are located.
plugin_dirs = [
	"/var/lib/cni/bin",
	"/usr/libexec/cni",
]
[crio.metrics]
enable_metrics = true
)";

TEST(CrioNetworkDir, FromItsConfig) {
  const auto dir = ParseCrioNetworkDir(kCrioConfig);
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  EXPECT_EQ(*dir, "/etc/kubernetes/cni/net.d");
  // Only under [crio.network]; literal strings too; absent: empty.
  EXPECT_EQ(
      ParseCrioNetworkDir("network_dir = \"/x\"\n[crio.runtime]\nnetwork_dir = \"/y\"\n").value(),
      "");
  EXPECT_EQ(ParseCrioNetworkDir("[ crio.network ]\n  network_dir='/etc/cni/net.d/' # c\n").value(),
            "/etc/cni/net.d");
  EXPECT_EQ(ParseCrioNetworkDir("[crio.network]\nnetwork_dirs = \"/x\"\n").value(), "");
  for (const char* bad :
       {"[crio.network]\nnetwork_dir = \"/etc\\u002f\"\n",
        "[crio.network]\nnetwork_dir = \"\"\"\n/x\"\"\"\n", "[crio.network]\nnetwork_dir = \"/x\n",
        "[crio.network]\nnetwork_dir = 7\n", "[crio.network]\nnetwork_dir = \"etc/cni\"\n"}) {
    EXPECT_FALSE(ParseCrioNetworkDir(bad).ok()) << bad;
  }
}

// A fake CRI-O: answers one HTTP request on a unix socket with `reply`, records the request.
class FakeCrio {
 public:
  explicit FakeCrio(std::string reply) {
    char pattern[] = "/tmp/ad-crio-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    path_ = dir_ + "/crio.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    ok_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
          ::listen(listener_, 1) == 0;
    server_ = std::thread([this, reply = std::move(reply)] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      char buffer[4096];
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n > 0) request_.assign(buffer, static_cast<size_t>(n));
      (void)!::write(fd, reply.data(), reply.size());
      ::close(fd);
    });
  }
  ~FakeCrio() {
    ::shutdown(listener_, SHUT_RDWR);
    if (server_.joinable()) server_.join();
    ::close(listener_);
    std::filesystem::remove_all(dir_);
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  // What the client sent; waits for the server thread (after the client's answer only).
  std::string Request() {
    if (server_.joinable()) server_.join();
    return request_;
  }

 private:
  std::string dir_;
  std::string path_;
  int listener_ = -1;
  bool ok_ = false;
  std::thread server_;
  std::string request_;
};

TEST(CrioNetworkDir, FetchedWithAGetOnItsSocket) {
  const std::string body = kCrioConfig;
  std::string dir_or_error;
  std::string request;
  {
    FakeCrio crio("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
    ASSERT_TRUE(crio.ok());
    const auto dir = ReadCrioNetworkDir(crio.path(), std::chrono::milliseconds(2000));
    dir_or_error = dir.ok() ? *dir : "error: " + dir.error().message;
    request = crio.Request();
  }
  EXPECT_EQ(dir_or_error, "/etc/kubernetes/cni/net.d");
  EXPECT_TRUE(request.starts_with("GET /config HTTP/1.1\r\n")) << request;
  {
    FakeCrio crio("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    ASSERT_TRUE(crio.ok());
    const auto dir = ReadCrioNetworkDir(crio.path(), std::chrono::milliseconds(2000));
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.error().message.find("HTTP 404"), std::string::npos) << dir.error().message;
  }
  const auto absent = ReadCrioNetworkDir("/nonexistent/crio.sock", std::chrono::milliseconds(500));
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.error().message.find("unix:/nonexistent/crio.sock"), std::string::npos)
      << absent.error().message;
}

}  // namespace
}  // namespace ad::cri
