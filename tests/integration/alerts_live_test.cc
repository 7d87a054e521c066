// The alerts proven live: Debian's real prometheus and prometheus-alertmanager on
// loopback scrape the real `ambient-doctor serve` on a lab node; a ZDS deadlock, a stopped ztunnel
// and a backend flip injected into the lab raise AmbientZdsStall, AmbientZdsDisconnected and
// AmbientRedirectMixedBackend (pending, firing, in Alertmanager, resolved after the repair), and
// the example inhibit rules hold the AmbientRedirectDrift of the flip suppressed; every dashboard
// and rule expression references only what the real scrape exports, and every dashboard query
// the lab feeds returns data.
// Driven by tests/deploy/alerts_live.py (about 40 s; ctest label `prometheus`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "deploy/deploy_script.h"

namespace {

TEST(AlertsLiveTest, ZdsStallAndMixedBackendFireInPrometheusAndAlertmanager) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (lab netns, real iptables, the daemon)";
  const std::string arguments = std::string("--source-dir ") + AD_SOURCE_DIR + " --binary-dir " +
                                AD_BINARY_DIR + " --work-dir " + AD_BINARY_DIR +
                                "/tests/deploy-work/alerts-live --prefix addeploy";
  AD_EXPECT_DEPLOY_SCRIPT("alerts_live.py", arguments);
}

}  // namespace
