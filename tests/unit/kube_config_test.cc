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

// The same configuration in the other forms YAML allows: flow style, comments, quoted keys and
// values, an anchor reused by an alias, a literal block for certificate data, the name after
// the body.
TEST(KubeConfigTest, KubeconfigInFlowStyleWithCommentsAndQuotes) {
  TempDir dir;
  const std::string path = dir.Write("config", R"(# written by hand
apiVersion: v1
"clusters": [{name: lab, cluster: {server: 'https://127.0.0.1:6443', "certificate-authority": ca.crt}}]
contexts:
  - {name: lab, context: {cluster: lab, user: &who "lab-admin"}}  # the one in use
  - name: "other # not a comment"
    context: {cluster: lab, user: *who}
current-context: "lab"
users:
  - user:
      'token': "tok #1"
      client-certificate-data: |
        Y2Vy
        dA==
    name: lab-admin
)");
  auto result = KubeconfigFileConfig(path, Env({}), "node-a");
  ASSERT_TRUE(result.config) << result.message;
  EXPECT_EQ(result.config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(result.config->ca_file, dir.path() + "/ca.crt");
  EXPECT_EQ(result.config->token, "tok #1");
  EXPECT_EQ(CurrentToken(*result.config), "tok #1");
  EXPECT_EQ(result.config->client_cert_pem, "cert");
  EXPECT_EQ(result.config->node_name, "node-a");
}

// Client certificates by file, relative to the kubeconfig's directory or absolute; a key given
// inline; insecure-skip-tls-verify is not honoured (verification stays on, the CA fields empty).
TEST(KubeConfigTest, KubeconfigClientCertificateFiles) {
  TempDir dir;
  const std::string path = dir.Write("config", R"(clusters:
- name: c
  cluster: {server: "https://x:6443", insecure-skip-tls-verify: true}
contexts:
- {name: ctx, context: {cluster: c, user: u}}
current-context: ctx
users:
- name: u
  user:
    client-certificate: pki/node.crt
    client-key: /etc/node.key
    client-key-data: a2V5
)");
  auto result = KubeconfigFileConfig(path, Env({}), "n");
  ASSERT_TRUE(result.config) << result.message;
  EXPECT_EQ(result.config->client_cert_file, dir.path() + "/pki/node.crt");
  EXPECT_EQ(result.config->client_key_file, "/etc/node.key");
  EXPECT_EQ(result.config->client_key_pem, "key");
  EXPECT_TRUE(result.config->ca_file.empty());
  EXPECT_TRUE(result.config->ca_pem.empty());
  EXPECT_TRUE(result.config->token.empty());
}

// A context that names a cluster or user the file does not have is a configuration error that
// names it (not "no server" or "no credentials").
TEST(KubeConfigTest, KubeconfigContextNamesAMissingClusterOrUser) {
  TempDir dir;
  const std::string no_cluster = dir.Write("no-cluster", R"(clusters:
- {name: c, cluster: {server: "https://x"}}
contexts:
- {name: ctx, context: {cluster: gone, user: u}}
current-context: ctx
users:
- {name: u, user: {token: t}}
)");
  auto cluster = KubeconfigFileConfig(no_cluster, Env({}), "n");
  EXPECT_EQ(cluster.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(cluster.message.find("cluster \"gone\""), std::string::npos) << cluster.message;
  const std::string no_user = dir.Write("no-user", R"(clusters:
- {name: c, cluster: {server: "https://x"}}
contexts:
- {name: ctx, context: {cluster: c, user: nobody}}
current-context: ctx
users:
- {name: u, user: {token: t}}
)");
  auto user = KubeconfigFileConfig(no_user, Env({}), "n");
  EXPECT_EQ(user.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(user.message.find("user \"nobody\""), std::string::npos) << user.message;
  const std::string no_server = dir.Write("no-server", R"(clusters:
- {name: c, cluster: {certificate-authority: ca.crt}}
contexts:
- {name: ctx, context: {cluster: c, user: u}}
current-context: ctx
users:
- {name: u, user: {token: t}}
)");
  auto server = KubeconfigFileConfig(no_server, Env({}), "n");
  EXPECT_EQ(server.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(server.message.find("cluster \"c\" has no server"), std::string::npos)
      << server.message;
  const std::string no_context = dir.Write("no-context", R"(clusters: []
contexts: []
current-context: elsewhere
)");
  auto context = KubeconfigFileConfig(no_context, Env({}), "n");
  EXPECT_EQ(context.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(context.message.find("\"elsewhere\""), std::string::npos) << context.message;
}

// Input that is not a kubeconfig: a clear kBadConfig naming the file, never a crash or an
// exception out of the parser.
TEST(KubeConfigTest, KubeconfigThatIsNotYaml) {
  TempDir dir;
  const std::map<std::string, std::string> bad = {
      {"unclosed", "clusters: [{name: c, cluster: {server: x}\n"},
      {"tabs", "clusters:\n\t- name: c\n"},
      {"binary", std::string("\x7f"
                             "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0",
                             20)},
      {"json-garbage", "{\"a\": [1, 2,, }"},
      {"scalar", "just some words\n"},
      {"list", "- a\n- b\n"},
      {"empty", ""},
      {"alias", "a: *undefined\n"},
      {"deep", std::string(100000, '[')},
      {"wrong-type", "current-context: [a, b]\n"},
      {"server-is-a-map",
       "clusters:\n- {name: c, cluster: {server: {url: x}}}\ncontexts:\n- {name: ctx, context: "
       "{cluster: c, user: u}}\ncurrent-context: ctx\nusers:\n- {name: u, user: {token: t}}\n"},
  };
  for (const auto& [name, text] : bad) {
    auto result = KubeconfigFileConfig(dir.Write(name, text), Env({}), "n");
    EXPECT_FALSE(result.config) << name;
    EXPECT_EQ(result.reason, KubeApiReason::kBadConfig) << name << ": " << result.message;
    EXPECT_NE(result.message.find(dir.path() + "/" + name), std::string::npos) << result.message;
  }
  auto server = KubeconfigFileConfig(dir.path() + "/server-is-a-map", Env({}), "n");
  EXPECT_NE(server.message.find("server is not a string"), std::string::npos) << server.message;
  auto unclosed = KubeconfigFileConfig(dir.path() + "/unclosed", Env({}), "n");
  EXPECT_NE(unclosed.message.find("line 2"), std::string::npos) << unclosed.message;
  auto deep = KubeconfigFileConfig(dir.path() + "/deep", Env({}), "n");
  EXPECT_NE(deep.message.find("nested deeper"), std::string::npos) << deep.message;
  // The text form: the same answer without a file name.
  auto text = KubeconfigTextConfig("clusters: [", "/etc", Env({}), "n");
  EXPECT_EQ(text.reason, KubeApiReason::kBadConfig);
  EXPECT_EQ(text.message.rfind("not valid YAML", 0), 0u) << text.message;
}

// Certificate data must be padded standard base64, as kubectl requires: a byte outside the
// alphabet (one >= 0x80 too, which Debian's yaml-cpp 0.7 decoder would read out of bounds on),
// a truncated group or padding in the middle is refused by name; whitespace (a wrapped value)
// is skipped.
TEST(KubeConfigTest, KubeconfigDataThatIsNotBase64) {
  TempDir dir;
  const auto with_ca = [&](const std::string& name, const std::string& data) {
    return KubeconfigFileConfig(
        dir.Write(name,
                  "clusters:\n- {name: c, cluster: {server: \"https://x\", "
                  "certificate-authority-data: \"" +
                      data +
                      "\"}}\ncontexts:\n- {name: ctx, context: {cluster: c, user: "
                      "u}}\ncurrent-context: ctx\nusers:\n- {name: u, user: {token: "
                      "t}}\n"),
        Env({}), "n");
  };
  for (const std::string data :
       {"not*base64", "cGVt\xc3\xa9", "Y2VydA", "Y2=VydA=", "====", "  "}) {
    auto result = with_ca("bad", data);
    EXPECT_EQ(result.reason, KubeApiReason::kBadConfig) << data;
    EXPECT_NE(result.message.find("certificate-authority-data is not base64"), std::string::npos)
        << data << ": " << result.message;
  }
  for (const std::string data : {"Y2Vy\\ndA==", "Y2Vy dA= ="}) {  // "\\n": a YAML escape
    auto wrapped = with_ca("wrapped", data);
    ASSERT_TRUE(wrapped.config) << data << ": " << wrapped.message;
    EXPECT_EQ(wrapped.config->ca_pem, "cert") << data;
  }
}

// The file is read up to a bound: a valid kubeconfig padded with comments to a few hundred KiB
// is read; one over 1 MiB is refused without being parsed.
TEST(KubeConfigTest, KubeconfigSizeIsBounded) {
  TempDir dir;
  const std::string config = R"(clusters:
- {name: c, cluster: {server: "https://x"}}
contexts:
- {name: ctx, context: {cluster: c, user: u}}
current-context: ctx
users:
- {name: u, user: {token: t}}
)";
  std::string padding;
  for (int i = 0; i < 5000; ++i) padding += "# " + std::string(60, 'x') + "\n";
  auto large = KubeconfigFileConfig(dir.Write("large", padding + config), Env({}), "n");
  ASSERT_TRUE(large.config) << large.message;
  EXPECT_EQ(large.config->token, "t");
  std::string huge = config;
  while (huge.size() <= (1u << 20)) huge += padding;
  auto refused = KubeconfigFileConfig(dir.Write("huge", huge), Env({}), "n");
  EXPECT_EQ(refused.reason, KubeApiReason::kBadConfig);
  EXPECT_NE(refused.message.find("larger than"), std::string::npos) << refused.message;
}

}  // namespace
}  // namespace ad::kube
