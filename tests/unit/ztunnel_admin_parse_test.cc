// Parsers for ztunnel's /config_dump (both workloads shapes), /healthz/ready and /metrics:
// realistic fixtures, wrong types, garbage, truncated and oversized inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sources/ztunnel/admin_parse.h"
#include "ztunnel_admin_fixtures.h"

namespace ad::ztunnel {
namespace {

using ::testing::ElementsAre;

TEST(ParseConfigDump, CurrentArrayShape) {
  auto dump = ParseConfigDump(ad::testing::kConfigDumpArray);
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_TRUE(dump->has_workload_state);
  EXPECT_TRUE(dump->has_workloads);
  EXPECT_EQ(dump->skipped_entries, 0u);

  ASSERT_EQ(dump->workload_state.size(), 2u);  // sorted by pod UID
  const ZtunnelWorkloadState& up = dump->workload_state[0];
  EXPECT_EQ(up.pod_uid, "5b0c2d7e-1f0a-4c55-9a3e-2d9f3c1e7a11");
  EXPECT_EQ(up.state, "Up");
  EXPECT_EQ(up.name, "echo-6d5f8b7c9-x2kqp");
  EXPECT_EQ(up.namespace_name, "demo");
  EXPECT_EQ(up.service_account, "echo");
  EXPECT_EQ(dump->workload_state[1].pod_uid, "c3a1f4e2-8b7d-4e6a-b0c9-5f2e1d3c4b5a");
  EXPECT_EQ(dump->workload_state[1].state, "Pending");
  EXPECT_EQ(dump->workload_state[1].name, "job-abc-7xk2p");

  ASSERT_EQ(dump->workloads.size(), 3u);
  const ZtunnelWorkload& echo = dump->workloads[0];
  EXPECT_EQ(echo.uid, "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp");
  EXPECT_EQ(echo.name, "echo-6d5f8b7c9-x2kqp");
  EXPECT_EQ(echo.namespace_name, "demo");
  EXPECT_EQ(echo.node, "node-a");
  EXPECT_EQ(echo.protocol, "HBONE");
  EXPECT_EQ(echo.network_mode, "");  // omitted at its default
  EXPECT_THAT(echo.ips, ElementsAre("10.244.2.7"));
  EXPECT_THAT(dump->workloads[1].ips, ElementsAre("10.244.1.9", "fd00:10:244:1::9"));
  EXPECT_EQ(dump->workloads[2].network_mode, "HostNetwork");
  EXPECT_EQ(dump->workloads[2].protocol, "");
}

// The daemon keeps only what the hand-off checks read: this node's HBONE pods (and entries
// without a node, from older ztunnels); every entry is still counted.
TEST(ParseConfigDump, NodeFilterKeepsThisNodesHbonePods) {
  const std::string dump = R"({"workloads": [
    {"uid": "a", "name": "here", "node": "n1", "protocol": "HBONE", "workloadIps": ["10.0.0.1"]},
    {"uid": "b", "name": "there", "node": "n2", "protocol": "HBONE", "workloadIps": ["10.0.0.2"]},
    {"uid": "c", "name": "plain", "node": "n1", "workloadIps": ["10.0.0.3"]},
    {"uid": "d", "name": "host", "node": "n1", "protocol": "HBONE", "networkMode": "HostNetwork"},
    {"uid": "e", "name": "nodeless", "protocol": "HBONE", "workloadIps": ["10.0.0.5"]}]})";
  auto all = ParseConfigDump(dump);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->workloads.size(), 5u);
  EXPECT_EQ(all->workloads_seen, 5u);
  auto mine = ParseConfigDump(dump, {.node = "n1"});
  ASSERT_TRUE(mine.ok()) << mine.error().message;
  EXPECT_EQ(mine->workloads_seen, 5u);
  ASSERT_EQ(mine->workloads.size(), 2u);
  EXPECT_EQ(mine->workloads[0].name, "here");
  EXPECT_EQ(mine->workloads[1].name, "nodeless");
  EXPECT_EQ(mine->skipped_entries, 0u);
}

TEST(ParseConfigDump, OlderMapShape) {
  auto dump = ParseConfigDump(ad::testing::kConfigDumpMap);
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_EQ(dump->skipped_entries, 0u);
  ASSERT_EQ(dump->workloads.size(), 2u);
  EXPECT_EQ(dump->workloads[0].uid, "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp");
  EXPECT_THAT(dump->workloads[0].ips, ElementsAre("10.244.2.7"));  // "network1/" stripped
  EXPECT_EQ(dump->workloads[0].network_mode, "Standard");
  EXPECT_EQ(dump->workloads[1].uid, "Kubernetes//Pod/demo/legacy-0");  // from the map key
  EXPECT_EQ(dump->workloads[1].protocol, "TCP");
  EXPECT_THAT(dump->workloads[1].ips, ElementsAre("fd00:10:244::5"));  // canonical text
  ASSERT_EQ(dump->workload_state.size(), 1u);
  EXPECT_EQ(dump->workload_state[0].state, "Up");
}

TEST(ParseConfigDump, EmptyStateIsPresentButEmpty) {
  auto dump = ParseConfigDump(ad::testing::kConfigDumpEmptyState);
  ASSERT_TRUE(dump.ok());
  EXPECT_TRUE(dump->has_workload_state);
  EXPECT_TRUE(dump->workload_state.empty());
  EXPECT_TRUE(dump->workloads.empty());
}

TEST(ParseConfigDump, MissingSectionsAndUnknownFields) {
  auto dump = ParseConfigDump(R"({"future": {"x": [1, 2]}, "version": {"version": "9.9"}})");
  ASSERT_TRUE(dump.ok());
  EXPECT_FALSE(dump->has_workload_state);
  EXPECT_FALSE(dump->has_workloads);
  EXPECT_EQ(dump->skipped_entries, 0u);

  auto nulls = ParseConfigDump(R"({"workloadState": null, "workloads": null})");
  ASSERT_TRUE(nulls.ok());
  EXPECT_FALSE(nulls->has_workload_state);
  EXPECT_FALSE(nulls->has_workloads);
}

TEST(ParseConfigDump, WrongTypesAreSkippedAndCounted) {
  auto dump = ParseConfigDump(R"({
    "workloadState": {
      "uid-ok": {"state": "Up", "info": {"name": "a", "namespace": 7, "serviceAccount": null}},
      "uid-bad": "Up",
      "": {"state": "Up"},
      "uid-info": {"state": ["Up"], "info": "a/b"}
    },
    "workloads": [
      {"uid": "w1", "workloadIps": ["10.0.0.1", 42, "not-an-ip", "net/10.0.0.2"], "node": 3},
      "junk",
      null,
      {"uid": "w2", "workloadIps": "10.0.0.3"}
    ]
  })");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  ASSERT_EQ(dump->workload_state.size(), 2u);
  EXPECT_EQ(dump->workload_state[0].pod_uid, "uid-info");
  EXPECT_EQ(dump->workload_state[0].state, "");
  EXPECT_EQ(dump->workload_state[1].pod_uid, "uid-ok");
  EXPECT_EQ(dump->workload_state[1].name, "a");
  EXPECT_EQ(dump->workload_state[1].namespace_name, "");
  ASSERT_EQ(dump->workloads.size(), 2u);
  EXPECT_THAT(dump->workloads[0].ips, ElementsAre("10.0.0.1", "10.0.0.2"));
  EXPECT_EQ(dump->workloads[0].node, "");
  EXPECT_TRUE(dump->workloads[1].ips.empty());
  // namespace, uid-bad, "", state, info, 42, not-an-ip, node, "junk", null, workloadIps
  EXPECT_EQ(dump->skipped_entries, 11u);
  EXPECT_EQ(dump->warnings.size(), 8u);  // the first few reasons only
  EXPECT_EQ(dump->warnings[0], "workloadState[\"uid-ok\"].info.namespace: not a string");
  EXPECT_EQ(dump->warnings[1], "workloadState[\"uid-bad\"]: not an object");
}

TEST(ParseConfigDump, WrongSectionTypes) {
  auto dump = ParseConfigDump(R"({"workloadState": [1], "workloads": "none"})");
  ASSERT_TRUE(dump.ok());
  EXPECT_TRUE(dump->has_workload_state);
  EXPECT_EQ(dump->skipped_entries, 2u);
  EXPECT_THAT(dump->warnings, ElementsAre("workloadState: not an object",
                                          "workloads: neither an array nor an object"));
}

TEST(ParseConfigDump, DuplicateUidKeepsTheLastEntry) {
  auto dump =
      ParseConfigDump(R"({"workloadState": {"u": {"state": "Pending"}, "u": {"state": "Up"}}})");
  ASSERT_TRUE(dump.ok());
  ASSERT_EQ(dump->workload_state.size(), 1u);
  EXPECT_EQ(dump->workload_state[0].state, "Up");
}

TEST(ParseConfigDump, GarbageAndTruncatedInputAreErrors) {
  const std::string full = ad::testing::kConfigDumpArray;
  for (const std::string& bad :
       {std::string(), std::string("\x00\xff\xfe", 3), std::string("<html>502</html>"),
        std::string("[]"), std::string("\"workloadState\""), full.substr(0, full.size() / 2),
        full.substr(0, full.size() - 1)}) {
    auto dump = ParseConfigDump(bad);
    ASSERT_FALSE(dump.ok()) << bad;
    EXPECT_EQ(dump.error().source(), "ztunnel/config_dump");
  }
  auto not_object = ParseConfigDump("[]");
  EXPECT_EQ(not_object.error().message, "not a JSON object");
  auto truncated = ParseConfigDump(full.substr(0, 40));
  EXPECT_EQ(truncated.error().message.rfind("invalid JSON: offset ", 0), 0u)
      << truncated.error().message;
}

TEST(ParseConfigDump, LargeAndDeepInputs) {
  // 20000 workloads: the parser copes with a big cluster's dump.
  std::string big = R"({"workloads": [)";
  for (int i = 0; i < 20000; ++i) {
    big += (i ? "," : "") + std::string(R"({"uid": "Kubernetes//Pod/ns/p)") + std::to_string(i) +
           R"(", "workloadIps": ["10.)" + std::to_string(i / 256 % 256) + "." +
           std::to_string(i % 256) + R"(.1"]})";
  }
  big += "]}";
  auto dump = ParseConfigDump(big);
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->workloads.size(), 20000u);
  EXPECT_THAT(dump->workloads.back().ips, ElementsAre("10.78.31.1"));

  // Nesting beyond the JSON parser's depth limit is an error, not a stack overflow.
  const std::string deep =
      R"({"workloads": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_FALSE(ParseConfigDump(deep).ok());
}

TEST(CanonicalWorkloadIp, PrefixesAndForms) {
  EXPECT_EQ(CanonicalWorkloadIp("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(CanonicalWorkloadIp("network-1/10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(CanonicalWorkloadIp("/10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(CanonicalWorkloadIp("FD00:0:0::0001"), "fd00::1");
  EXPECT_EQ(CanonicalWorkloadIp("net/::ffff:10.0.0.1"), "::ffff:10.0.0.1");
  EXPECT_EQ(CanonicalWorkloadIp("10.1.2.3/32"), std::nullopt);
  EXPECT_EQ(CanonicalWorkloadIp("echo.demo.svc"), std::nullopt);
  EXPECT_EQ(CanonicalWorkloadIp(""), std::nullopt);
  EXPECT_EQ(CanonicalWorkloadIp(std::string(200, '1')), std::nullopt);
}

TEST(ParseReadiness, ReadyAndNotReady) {
  auto ready = ParseReadiness(200, "ready\n");
  ASSERT_TRUE(ready.ok());
  EXPECT_TRUE(ready->ready);
  EXPECT_TRUE(ready->pending_tasks.empty());

  auto pending = ParseReadiness(500, ad::testing::kReadinessNotReady);
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->ready);
  EXPECT_THAT(pending->pending_tasks, ElementsAre("workload proxy manager"));

  auto several =
      ParseReadiness(500, "not ready, pending: dns proxy, state manager, workload proxy manager\n");
  ASSERT_TRUE(several.ok());
  EXPECT_THAT(several->pending_tasks,
              ElementsAre("dns proxy", "state manager", "workload proxy manager"));

  auto braces = ParseReadiness(500, R"(not ready, pending: {"proxy", "state manager"})");
  ASSERT_TRUE(braces.ok());
  EXPECT_THAT(braces->pending_tasks, ElementsAre("proxy", "state manager"));

  auto no_list = ParseReadiness(500, "internal error");
  ASSERT_TRUE(no_list.ok());
  EXPECT_FALSE(no_list->ready);
  EXPECT_TRUE(no_list->pending_tasks.empty());

  auto empty_list = ParseReadiness(500, "not ready, pending: , ,");
  ASSERT_TRUE(empty_list.ok());
  EXPECT_TRUE(empty_list->pending_tasks.empty());
}

TEST(ParseReadiness, OtherStatusIsAnError) {
  auto r = ParseReadiness(404, "not found\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().source(), "ztunnel/readiness");
  EXPECT_EQ(r.error().message, "unexpected HTTP status 404 (body \"not found\")");
}

TEST(ParseMetrics, RealisticExposition) {
  const ZtunnelMetrics m = ParseMetrics(ad::testing::kMetrics);
  EXPECT_EQ(m.active_proxy_count, 3);
  EXPECT_EQ(m.pending_proxy_count, 1);
  EXPECT_EQ(m.malformed_lines, 0u);
}

TEST(ParseMetrics, LabelsTimestampsAndSums) {
  const ZtunnelMetrics m = ParseMetrics(
      "workload_manager_active_proxy_count{shard=\"a\",note=\"has } and \\\" inside\"} 2 "
      "1724140800000\r\n"
      "workload_manager_active_proxy_count{shard=\"b\"} 1.5e0\n"
      "workload_manager_active_proxy_count_created 1724140800\n"
      "  workload_manager_pending_proxy_count\t+0\n");
  EXPECT_EQ(m.active_proxy_count, 3.5);
  EXPECT_EQ(m.pending_proxy_count, 0);
  EXPECT_EQ(m.malformed_lines, 0u);
}

TEST(ParseMetrics, NanInfAndGarbage) {
  const ZtunnelMetrics m = ParseMetrics(
      "workload_manager_active_proxy_count NaN\n"
      "workload_manager_pending_proxy_count +Inf\n"
      "this is not a metric line\n"
      "workload_manager_active_proxy_count{unterminated=\"x} 3\n"
      "workload_manager_pending_proxy_count\n"
      "{no_name=\"x\"} 1\n"
      "workload_manager_pending_proxy_count 12abc\n"
      "\x01\x02\xff\n");
  EXPECT_FALSE(m.active_proxy_count.has_value());
  EXPECT_FALSE(m.pending_proxy_count.has_value());
  EXPECT_EQ(m.malformed_lines, 6u);
}

TEST(ParseMetrics, AbsentMetricsStayUnset) {
  const ZtunnelMetrics m = ParseMetrics("# only comments\n\nistio_build{tag=\"1\"} 1\n");
  EXPECT_FALSE(m.active_proxy_count.has_value());
  EXPECT_FALSE(m.pending_proxy_count.has_value());
  const ZtunnelMetrics truncated = ParseMetrics("workload_manager_active_proxy_count 4");
  EXPECT_EQ(truncated.active_proxy_count, 4);
}

// Certificates (ZTUNNEL_CERT_UNHEALTHY).
TEST(ParseConfigDump, Certificates) {
  auto dump = ParseConfigDump(R"({"certificates": [
    {"identity": "spiffe://cluster.local/ns/demo/sa/web", "state": "Unavailable: no CA",
     "certChain": [], "rootCerts": []},
    {"identity": "spiffe://cluster.local/ns/demo/sa/echo", "state": "Available",
     "certChain": [
       {"pem": "LS0t", "serialNumber": "1a", "validFrom": "2026-08-22T09:00:00+00:00",
        "expirationTime": "2026-08-23T09:00:00+00:00"},
       {"pem": "LS0t", "serialNumber": "2", "validFrom": "2026-01-01T00:00:00Z",
        "expirationTime": "2026-08-22T12:00:00Z"}],
     "rootCerts": [{"expirationTime": "2026-08-22T10:00:00Z"}]}],
    "workloadState": {}})");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_TRUE(dump->has_certificates);
  EXPECT_EQ(dump->skipped_entries, 0u);
  ASSERT_EQ(dump->certificates.size(), 2u);
  const ZtunnelCertificate& echo = dump->certificates[0];  // sorted by identity
  EXPECT_EQ(echo.identity, "spiffe://cluster.local/ns/demo/sa/echo");
  EXPECT_EQ(echo.state, "Available");
  EXPECT_EQ(echo.chain_length, 2u);
  // The earliest of the chain (the intermediate); root certificates are not the chain.
  EXPECT_EQ(echo.expires_unix_ms, ParseRfc3339UnixMs("2026-08-22T12:00:00Z"));
  const ZtunnelCertificate& web = dump->certificates[1];
  EXPECT_EQ(web.state, "Unavailable: no CA");
  EXPECT_EQ(web.chain_length, 0u);
  EXPECT_EQ(web.expires_unix_ms, 0);

  auto absent = ParseConfigDump(R"({"workloadState": {}})");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_certificates);
}

TEST(ParseConfigDump, GarbageCertificatesAreSkippedAndCounted) {
  auto dump = ParseConfigDump(R"({"certificates": [7, {"identity": 3}, {"state": "Available"},
    {"identity": "spiffe://x/ns/a/sa/b", "certChain": {"no": 1}},
    {"identity": "spiffe://x/ns/a/sa/c", "certChain": [1, {"expirationTime": "yesterday"},
       {"expirationTime": 12}, {"expirationTime": "2026-08-22T10:00:00Z"}]}]})");
  ASSERT_TRUE(dump.ok());
  ASSERT_EQ(dump->certificates.size(), 2u);
  EXPECT_EQ(dump->certificates[1].chain_length, 3u);
  EXPECT_EQ(dump->certificates[1].expires_unix_ms, ParseRfc3339UnixMs("2026-08-22T10:00:00Z"));
  EXPECT_EQ(dump->skipped_entries, 8u);
  auto not_array = ParseConfigDump(R"({"certificates": {"identity": "x"}})");
  ASSERT_TRUE(not_array.ok());
  EXPECT_TRUE(not_array->certificates.empty());
  EXPECT_EQ(not_array->skipped_entries, 1u);
}

// The dump is streamed an entry at a time; it still reads as a lookup in the whole document
// would: a repeated section or member counts once (the last), warnings come in section order.
TEST(ParseConfigDump, RepeatedNamesKeepTheLastAsALookupWould) {
  auto dump = ParseConfigDump(R"({
    "certificates": [7],
    "workloads": [{"uid": "first"}, 1],
    "workloadState": {"u2": {"state": "Up", "state": 5}, "u1": {"state": "Pending"}},
    "workloads": [{"uid": 3, "uid": "w", "name": "n", "workloadIps": [1], "workloadIps": []}],
    "certificates": null})");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_FALSE(dump->has_certificates);  // the last "certificates" is null
  ASSERT_EQ(dump->workloads.size(), 1u);
  EXPECT_EQ(dump->workloads[0].uid, "w");
  EXPECT_EQ(dump->workloads[0].name, "n");
  EXPECT_TRUE(dump->workloads[0].ips.empty());
  ASSERT_EQ(dump->workload_state.size(), 2u);  // sorted by pod UID
  EXPECT_EQ(dump->workload_state[0].pod_uid, "u1");
  EXPECT_EQ(dump->workload_state[1].state, "");
  EXPECT_THAT(dump->warnings, ElementsAre("workloadState[\"u2\"].state: not a string"));
  EXPECT_EQ(dump->skipped_entries, 1u);
}

TEST(ParseConfigDump, UnreadMembersAreSkippedWhateverTheirShape) {
  auto dump = ParseConfigDump(R"({"services": [{"workloads": [1]}], "workloadState": {
    "u": {"connections": {"inbound": [{"state": 1}]}, "info": {"name": "a", "x": [[{}]]},
          "state": "Up"}},
    "workloads": {"Kubernetes//Pod/a/b": {"services": {"s": [1, 2]}, "node": "n1"}},
    "config": {"certificates": 7}})");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_EQ(dump->skipped_entries, 0u);
  EXPECT_FALSE(dump->has_certificates);
  ASSERT_EQ(dump->workload_state.size(), 1u);
  EXPECT_EQ(dump->workload_state[0].state, "Up");
  EXPECT_EQ(dump->workload_state[0].name, "a");
  ASSERT_EQ(dump->workloads.size(), 1u);
  EXPECT_EQ(dump->workloads[0].uid, "Kubernetes//Pod/a/b");
  EXPECT_EQ(dump->workloads[0].node, "n1");
}

TEST(ParseConfigDump, StateInAnyOrderComesOutSorted) {
  auto dump = ParseConfigDump(R"({"workloadState": {"u5": {"state": "a"}, "u3": {"state": "b"},
    "u9": {}, "u1": {}, "u3": {"state": "c"}, "u7": {}, "u0": {}, "u8": {}}})");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  std::vector<std::string> uids;
  for (const ZtunnelWorkloadState& state : dump->workload_state) uids.push_back(state.pod_uid);
  EXPECT_THAT(uids, ElementsAre("u0", "u1", "u3", "u5", "u7", "u8", "u9"));
  EXPECT_EQ(dump->workload_state[2].state, "c");  // the second u3
  EXPECT_EQ(dump->workload_state[3].state, "a");
}

TEST(ParseRfc3339, ShapesAndGarbage) {
  EXPECT_EQ(ParseRfc3339UnixMs("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339UnixMs("2026-08-22T10:00:00Z"), 1787392800000);
  EXPECT_EQ(ParseRfc3339UnixMs("2026-08-22T12:00:00+02:00"), 1787392800000);
  EXPECT_EQ(ParseRfc3339UnixMs("2026-08-22T09:30:00-00:30"), 1787392800000);
  EXPECT_EQ(ParseRfc3339UnixMs("2026-08-22T10:00:00.250123Z"), 1787392800250);
  EXPECT_EQ(ParseRfc3339UnixMs("2000-02-29T00:00:00Z"), 951782400000);
  for (const char* bad :
       {"", "yesterday", "2026-08-22", "2026-08-22T10:00:00", "2026-13-01T00:00:00Z",
        "2026-08-22T24:00:00Z", "2026-08-22T10:00:00.Z", "2026-08-22T10:00:00+2:00",
        "2026-08-22T10:00:00Zjunk", "2026/08/22T10:00:00Z"}) {
    EXPECT_EQ(ParseRfc3339UnixMs(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace ad::ztunnel
