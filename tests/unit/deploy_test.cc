// deploy/ checked offline (no cluster, no root): YAML style, kustomize rendering with schema and
// strict unknown-field validation, the DaemonSet's conventions and least privilege (with the
// Kubernetes API access: read-only RBAC bound to the agent's ServiceAccount, a read-only token,
// none of it with the no-kube-api component), the alert rules (promtool check + unit tests of
// every alert), the runbooks and their agreement with the findings table, the example
// Alertmanager inhibit rules, the image's runtime packages against `ldd` of the built binary, and
// the Grafana dashboard's lint and PromQL. The checks live in tests/deploy/deploy_checks.py; the
// live Prometheus proof is tests/integration/alerts_live_test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "deploy/deploy_script.h"

namespace {

std::string Arguments(const std::string& check) {
  return check + " --source-dir " + AD_SOURCE_DIR + " --work-dir " + AD_BINARY_DIR +
         "/tests/deploy-work/" + check + " --binary " + AD_BINARY_DIR + "/agent/ambient-doctor";
}

TEST(DeployTest, YamlPassesYamllint) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("yamllint"));
}

TEST(DeployTest, KustomizationsRenderAndValidateStrictly) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("manifests"));
}

TEST(DeployTest, DaemonSetFollowsConventionsWithLeastPrivilege) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("conventions"));
}

TEST(DeployTest, AlertRulesPassPromtoolCheckAndUnitTests) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("rules"));
}

TEST(DeployTest, EveryAlertHasARunbook) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("runbooks"));
}

// The findings table's alert column (the built binary's `findings -o json`), the PrometheusRule
// and the runbooks agree; every critical code pages as critical.
TEST(DeployTest, FindingsTableAlertsAndRunbooksAgree) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("table"));
}

TEST(DeployTest, InhibitRulesExamplePassesAmtool) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("inhibit"));
}

TEST(DeployTest, ImageRuntimeStageInstallsExactlyTheLinkedLibraries) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("image"));
}

TEST(DeployTest, DashboardLintsAndEveryQueryParses) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("dashboard"));
}

// Broken copies of the DaemonSet, the image recipe, the dashboard, the rules and a rendered
// manifest are each caught by name: the checks above cannot pass vacuously.
TEST(DeployTest, ChecksCatchBrokenInputs) {
  AD_EXPECT_DEPLOY_SCRIPT("deploy_checks.py", Arguments("selftest"));
}

}  // namespace
