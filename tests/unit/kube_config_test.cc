// Where the agent finds the Kubernetes API: in-cluster environment and service-account files, or
// a kubeconfig as kubectl writes it (sources/kube/kube_config.h).
#include "sources/kube/kube_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace ad::kube {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ad-kube-config-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name) << text;
    return path_ + "/" + name;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

GetEnv Env(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(KubeConfigTest, InCluster) {
  TempDir sa;
  sa.Write("token", "  tok-1\n");
  sa.Write("ca.crt", "pem");
  auto result = InClusterConfig(Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                     {"KUBERNETES_SERVICE_PORT", "443"},
                                     {"NODE_NAME", "node-a"}}),
                                sa.path(), "");
  ASSERT_TRUE(result.config) << result.message;
  EXPECT_EQ(result.config->server, "https://10.96.0.1:443");
  EXPECT_EQ(result.config->ca_file, sa.path() + "/ca.crt");
  EXPECT_EQ(result.config->node_name, "node-a");
  EXPECT_EQ(CurrentToken(*result.config), "tok-1");
  sa.Write("token", "tok-2");  // rotated by the kubelet: read again
  EXPECT_EQ(CurrentToken(*result.config), "tok-2");

  auto ipv6 = InClusterConfig(
      Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}), sa.path(),
      "node-b");
  ASSERT_TRUE(ipv6.config) << ipv6.message;
  EXPECT_EQ(ipv6.config->server, "https://[fd00::1]:443");
  EXPECT_EQ(ipv6.config->node_name, "node-b");
}

TEST(KubeConfigTest, InClusterWithoutWhatItNeeds) {
  TempDir sa;
  auto outside = InClusterConfig(Env({}), sa.path(), "n");
  EXPECT_EQ(outside.reason, KubeApiReason::kNoCredentials);
  auto no_token = InClusterConfig(
      Env({{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}}), sa.path(), "n");
  EXPECT_EQ(no_token.reason, KubeApiReason::kNoCredentials);
  EXPECT_NE(no_token.message.find("token"), std::string::npos);
  sa.Write("token", "t");
  auto no_node = InClusterConfig(
      Env({{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}}), sa.path(), "");
  EXPECT_EQ(no_node.reason, KubeApiReason::kBadConfig);
}

TEST(KubeConfigTest, KubeconfigAsKubectlWritesIt) {
  TempDir dir;
  dir.Write("token", "file-token\n");
  // "pem" and "cert" in base64.
  const std::string path = dir.Write("config", R"(apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: cGVt
    server: https://127.0.0.1:6443/
  name: lab
- cluster:
    server: https://other:6443
  name: other
contexts:
- context:
    cluster: other
    user: other
  name: other
- context:
    cluster: lab
    user: "lab-admin"
  name: lab
current-context: lab
kind: Config
preferences: {}
users:
- name: lab-admin
  user:
    tokenFile: token
    client-certificate-data: Y2VydA==
- name: other
  user:
    token: other-token
)");
  auto result = KubeconfigFileConfig(path, Env({{"NODE_NAME", "node-a"}}), "");
  ASSERT_TRUE(result.config) << result.message;
  EXPECT_EQ(result.config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(result.config->ca_pem, "pem");
  EXPECT_EQ(result.config->token_file, dir.path() + "/token");
  EXPECT_EQ(result.config->client_cert_pem, "cert");
  EXPECT_EQ(CurrentToken(*result.config), "file-token");
  EXPECT_EQ(result.config->node_name, "node-a");
}

TEST(KubeConfigTest, KubeconfigProblems) {
  TempDir dir;
  EXPECT_EQ(KubeconfigFileConfig(dir.path() + "/absent", Env({}), "n").reason,
            KubeApiReason::kBadConfig);
  const std::string plugin = dir.Write("plugin", R"(clusters:
- cluster:
    server: https://x
  name: c
contexts:
- context:
    cluster: c
    user: u
  name: ctx
current-context: ctx
users:
- name: u
  user:
    exec:
      command: aws
)");
  auto result = KubeconfigFileConfig(plugin, Env({}), "n");
  EXPECT_EQ(result.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(result.message.find("plugins"), std::string::npos);
  const std::string anonymous = dir.Write("anonymous", R"(clusters:
- cluster:
    server: https://x
  name: c
contexts:
- context:
    cluster: c
  name: ctx
current-context: ctx
)");
  EXPECT_EQ(KubeconfigFileConfig(anonymous, Env({}), "n").reason, KubeApiReason::kNoCredentials);
}

}  // namespace
}  // namespace ad::kube
