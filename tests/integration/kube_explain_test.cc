// One pod's story (`explain pod NS/NAME`, `report --pod NAME -n NS`) on the real kernel: lab pods
// described by kube-api-sim, asked locally (a scan of the lab with the API source) and through the
// daemon (GetPod), as a table and as JSON (ambient-doctor.pod/v1): the verdict and exit code of an
// enrolled, a not-enrolled, an opted-out pod with and without rules, and of a pod on another node
// or unknown (exit 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "integration/kube_fixture.h"
#include "lab/lab.h"

namespace ad::test {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

constexpr char kNode[] = "node-kx";
constexpr char kOtherNode[] = "node-elsewhere";

struct PodAnswer {
  int exit_code = -1;
  std::string raw;
  std::optional<pb::PodReport> pod;
};

// Lab pods 0 and 1 carry Istio's in-pod rules, pods 2 and 3 none.
class KubeExplain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    lab::LabOptions options;
    options.prefix = LabPrefix("x");
    options.pods = 2;
    options.plain_pods = 2;
    lab_ = std::make_unique<lab::ScopedLab>(options);
    if (!lab_->ok()) return;
    sim_ = std::make_unique<KubeSim>();
    if (!sim_->Start(&sim_error_)) return;
    sim_->UpsertNamespace("shop", "ambient");
    sim_->UpsertNode(kNode, false);
    sim_->UpsertNode(kOtherNode, false);
    const auto& pods = lab_->node().pods;
    auto lab_pod = [&](int index, const std::string& name) {
      KubePodSpec spec{.ns = "shop", .name = name, .node = kNode, .uid = pods.at(index).pod_uid};
      spec.ips = {pods.at(index).ipv4};
      return spec;
    };
    KubePodSpec enrolled = lab_pod(0, "enrolled");
    enrolled.annotations["ambient.istio.io/redirection"] = "enabled";
    sim_->UpsertPod(enrolled);
    KubePodSpec meshed_opted_out = lab_pod(1, "meshed-opted-out");
    meshed_opted_out.labels["istio.io/dataplane-mode"] = "none";
    sim_->UpsertPod(meshed_opted_out);
    sim_->UpsertPod(lab_pod(2, "not-enrolled"));
    KubePodSpec opted_out = lab_pod(3, "opted-out");
    opted_out.labels["istio.io/dataplane-mode"] = "none";
    sim_->UpsertPod(opted_out);
    sim_->UpsertPod({.ns = "shop", .name = "elsewhere", .node = kOtherNode, .ips = {"10.99.0.8"}});
  }
  static void TearDownTestSuite() {
    sim_.reset();
    lab_.reset();
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    ASSERT_TRUE(lab_->ok()) << lab_->error().message;
    ASSERT_TRUE(sim_->running()) << sim_error_;
  }

  // The flags of a local scan of the lab with the API source.
  static Strings LocalFlags() {
    return {"--lab-prefix",     lab_->node().prefix, "--no-cri", "--kubeconfig",
            sim_->kubeconfig(), "--node-name",       kNode};
  }

  static PodAnswer Ask(Strings args, const Strings& where, bool json = true) {
    args.insert(args.end(), where.begin(), where.end());
    if (json) args.insert(args.end(), {"-o", "json"});
    const lab::CommandOutput out = RunDoctor(args);
    PodAnswer answer{out.exit_code, out.out + out.err, std::nullopt};
    if (json) answer.pod = ParsePodJson(out.out);
    return answer;
  }

  // Every question, answered from `where` (local scan flags, or the daemon's socket) and by
  // `source` ("local" or "daemon").
  static void ExpectStories(const Strings& where, const std::string& source) {
    SCOPED_TRACE(source);
    const auto& pods = lab_->node().pods;
    {
      PodAnswer a = Ask({"explain", "pod", "shop/enrolled"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 0) << a.raw;
      EXPECT_EQ(a.pod->schema(), "ambient-doctor.pod/v1");
      EXPECT_EQ(a.pod->origin().source(), source);
      EXPECT_EQ(a.pod->pod(), "shop/enrolled");
      EXPECT_EQ(a.pod->location(), "this_node");
      EXPECT_EQ(a.pod->node(), kNode);
      EXPECT_EQ(a.pod->verdict_code(), "in_mesh") << a.pod->verdict();
      EXPECT_EQ(a.pod->verdict(), "in the mesh");
      EXPECT_EQ(a.pod->uid(), pods.at(0).pod_uid);
      EXPECT_EQ(a.pod->desired_state(), "ambient");
      EXPECT_EQ(a.pod->desired_reason(), "namespace_ambient");
      EXPECT_TRUE(a.pod->judgeable()) << a.pod->judge_why();
      EXPECT_EQ(a.pod->pairing(), "pod_ip");
      EXPECT_NE(a.pod->pairing_detail().find(pods.at(0).ipv4), std::string::npos);
      EXPECT_EQ(a.pod->redirect(), "redirected") << a.pod->redirect_detail();
      EXPECT_EQ(a.pod->redirection_annotation(), "enabled");
      EXPECT_EQ(a.pod->netns().path(), pods.at(0).netns_path);
      EXPECT_TRUE(a.pod->findings().empty());
      EXPECT_TRUE(a.pod->kubernetes().healthy());
    }
    {
      PodAnswer a = Ask({"report", "--pod", "not-enrolled", "-n", "shop"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 1) << a.raw;
      EXPECT_EQ(a.pod->origin().source(), source);
      EXPECT_EQ(a.pod->verdict_code(), "not_in_mesh") << a.pod->verdict();
      EXPECT_NE(a.pod->verdict().find("should be in the mesh but is not"), std::string::npos)
          << a.pod->verdict();
      EXPECT_EQ(a.pod->redirect(), "absent") << a.pod->redirect_detail();
      EXPECT_EQ(a.pod->netns().path(), pods.at(2).netns_path);
      ASSERT_EQ(a.pod->findings_size(), 1) << a.raw;
      EXPECT_EQ(a.pod->findings(0).code(), "POD_NOT_ENROLLED");
      EXPECT_FALSE(a.pod->findings(0).hint().empty());
      if (source == "daemon") {
        EXPECT_TRUE(a.pod->findings(0).has_first_seen_unix_ms());
      }
    }
    {
      PodAnswer a = Ask({"explain", "pod", "shop/opted-out"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 0) << a.raw;
      EXPECT_EQ(a.pod->verdict_code(), "out_of_mesh") << a.pod->verdict();
      EXPECT_EQ(a.pod->desired_state(), "not_ambient");
      EXPECT_EQ(a.pod->desired_reason(), "pod_opted_out");
      EXPECT_NE(a.pod->desired_why().find("istio.io/dataplane-mode"), std::string::npos)
          << a.pod->desired_why();
      EXPECT_TRUE(a.pod->findings().empty());
    }
    {
      PodAnswer a = Ask({"explain", "pod", "shop/meshed-opted-out"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 1) << a.raw;
      EXPECT_EQ(a.pod->verdict_code(), "enrolled_against_intent") << a.pod->verdict();
      EXPECT_EQ(a.pod->redirect(), "redirected");
      ASSERT_EQ(a.pod->findings_size(), 1) << a.raw;
      EXPECT_EQ(a.pod->findings(0).code(), "POD_ENROLLED_AGAINST_INTENT");
    }
    {
      PodAnswer a = Ask({"explain", "pod", "shop/elsewhere"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 2) << a.raw;
      EXPECT_EQ(a.pod->location(), "other_node");
      EXPECT_EQ(a.pod->node(), kOtherNode);
      EXPECT_EQ(a.pod->verdict_code(), "elsewhere");
      EXPECT_NE(a.pod->verdict().find(kOtherNode), std::string::npos) << a.pod->verdict();
      PodAnswer table = Ask({"report", "--pod", "elsewhere", "-n", "shop"}, where, false);
      EXPECT_EQ(table.exit_code, 2) << table.raw;
      EXPECT_NE(table.raw.find(kOtherNode), std::string::npos) << table.raw;
    }
    {
      PodAnswer a = Ask({"explain", "pod", "shop/ghost"}, where);
      ASSERT_TRUE(a.pod) << a.raw;
      EXPECT_EQ(a.exit_code, 2) << a.raw;
      EXPECT_EQ(a.pod->location(), "not_found");
      EXPECT_EQ(a.pod->verdict_code(), "elsewhere");
    }
    {
      // The table: the verdict, the rule that decided, the pairing and the finding with its fix.
      PodAnswer a = Ask({"explain", "pod", "shop/not-enrolled"}, where, false);
      EXPECT_EQ(a.exit_code, 1) << a.raw;
      for (const std::string& text :
           {std::string("pod shop/not-enrolled"), std::string("should be in the mesh but is not"),
            std::string("namespace_ambient"), pods.at(2).netns_path, std::string("pod_ip"),
            std::string("POD_NOT_ENROLLED")}) {
        EXPECT_NE(a.raw.find(text), std::string::npos) << text << "\n" << a.raw;
      }
    }
  }

  static inline std::unique_ptr<lab::ScopedLab> lab_;
  static inline std::unique_ptr<KubeSim> sim_;
  static inline std::string sim_error_;
};

TEST_F(KubeExplain, Local) {
  Strings where = LocalFlags();
  where.push_back("--local");
  ExpectStories(where, "local");
}

TEST_F(KubeExplain, ThroughTheDaemon) {
  testing::ScopedTempDir dir("adt-kx");
  ServeProcess serve(dir.path(), LocalFlags());
  ASSERT_TRUE(serve.WaitReady(30s)) << serve.log();
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::optional<pb::Report> r = serve.Report();
        return r && r->kubernetes().healthy() && !FindingsWithCode(*r, "POD_NOT_ENROLLED").empty();
      },
      20s))
      << serve.log();
  ExpectStories({"--api-socket", serve.socket()}, "daemon");
}

TEST_F(KubeExplain, OnlyGetWasSent) {
  for (const auto& request : sim_->AllRequests()) {
    EXPECT_EQ(request.method, "GET") << request.target;
  }
}

}  // namespace
}  // namespace ad::test
