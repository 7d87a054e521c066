// The Kubernetes API decoders (sources/kube/kube_decode.h): lists, watch events and Status bodies
// as the apiserver writes them, keeping only the fields the enrollment checks read.
#include "sources/kube/kube_decode.h"

#include <gtest/gtest.h>

namespace ad::kube {
namespace {

constexpr char kPod[] = R"({"kind":"Pod","apiVersion":"v1",
  "metadata":{"name":"web-1","namespace":"shop","uid":"u-1","resourceVersion":"1201",
    "creationTimestamp":"2026-12-03T20:00:00Z","deletionTimestamp":"2026-12-03T20:05:00Z",
    "labels":{"app":"web","istio.io/dataplane-mode":"ambient","other":"x"},
    "annotations":{"ambient.istio.io/redirection":"enabled","sidecar.istio.io/status":"{}"},
    "managedFields":[{"manager":"kubelet","fieldsV1":{"f:status":{"f:podIPs":{}}}}]},
  "spec":{"nodeName":"node-a","hostNetwork":true,"containers":[{"name":"c","image":"i"}],
    "taints":[{"key":"not-for-pods"}]},
  "status":{"phase":"Running","podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.9"},{"ip":"fd00::9"}],
    "conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}]}})";

TEST(KubeDecodeTest, PodKeepsTheFieldsThePredicateReads) {
  std::string error;
  auto event = DecodeWatchEvent(std::string(R"({"type":"ADDED","object":)") + kPod + "}\n",
                                KubeKind::kPod, &error);
  ASSERT_TRUE(event) << error;
  EXPECT_EQ(event->type, WatchEventType::kAdded);
  const KubePod& pod = event->object.pod;
  EXPECT_EQ(pod.name, "web-1");
  EXPECT_EQ(pod.namespace_name, "shop");
  EXPECT_EQ(pod.uid, "u-1");
  EXPECT_EQ(pod.resource_version, "1201");
  EXPECT_EQ(pod.node_name, "node-a");
  EXPECT_EQ(pod.dataplane_mode, "ambient");
  EXPECT_EQ(pod.redirection, "enabled");
  EXPECT_TRUE(pod.has_sidecar_status);
  EXPECT_EQ(pod.app_label, "web");
  EXPECT_TRUE(pod.host_network);
  EXPECT_EQ(pod.phase, "Running");
  EXPECT_EQ(pod.pod_ips, (std::vector<std::string>{"10.0.0.9", "fd00::9"}));
  EXPECT_TRUE(pod.ready);
  EXPECT_EQ(pod.creation_unix_s, 1796328000);
  EXPECT_EQ(pod.deletion_unix_s, 1796328300);
  EXPECT_EQ(event->object.key(), "shop/web-1");
}

TEST(KubeDecodeTest, PodWithoutOptionalFields) {
  std::string error;
  auto event = DecodeWatchEvent(
      R"({"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"7",
      "labels":{"istio.io/dataplane-mode":"none"}},"status":{"phase":"Pending","podIP":"10.1.1.1",
      "conditions":[{"type":"Ready","status":"False"}]}}})",
      KubeKind::kPod, &error);
  ASSERT_TRUE(event) << error;
  const KubePod& pod = event->object.pod;
  EXPECT_EQ(pod.dataplane_mode, "none");
  EXPECT_FALSE(pod.redirection.has_value());
  EXPECT_FALSE(pod.has_sidecar_status);
  EXPECT_FALSE(pod.host_network);
  EXPECT_FALSE(pod.ready);
  EXPECT_EQ(pod.pod_ips, std::vector<std::string>{"10.1.1.1"});  // podIP when podIPs is absent
  EXPECT_FALSE(pod.deletion_unix_s.has_value());
}

TEST(KubeDecodeTest, ListWithContinueAndItems) {
  std::string error;
  auto list = DecodeList(
      std::string(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1300",
      "continue":"abc"},"items":[)") +
          kPod + "," + kPod + "]}",
      KubeKind::kPod, &error);
  ASSERT_TRUE(list) << error;
  EXPECT_EQ(list->resource_version, "1300");
  EXPECT_EQ(list->continue_token, "abc");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].pod.pod_ips.size(), 2u);
}

TEST(KubeDecodeTest, NamespacesAndNodeTaints) {
  std::string error;
  auto namespaces = DecodeList(
      R"({"metadata":{"resourceVersion":"5"},"items":[
      {"metadata":{"name":"shop","resourceVersion":"3","labels":{"istio.io/dataplane-mode":"ambient"}}},
      {"metadata":{"name":"kube-system","resourceVersion":"4"}}]})",
      KubeKind::kNamespace, &error);
  ASSERT_TRUE(namespaces) << error;
  ASSERT_EQ(namespaces->items.size(), 2u);
  EXPECT_EQ(namespaces->items[0].ns, (KubeNamespace{"shop", "3", "ambient"}));
  EXPECT_EQ(namespaces->items[1].ns, (KubeNamespace{"kube-system", "4", std::nullopt}));

  auto node = DecodeWatchEvent(
      R"({"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"node-a","resourceVersion":"9"},
      "spec":{"taints":[{"key":"cni.istio.io/not-ready","effect":"NoSchedule"},
      {"key":"k","value":"v","effect":"NoExecute","timeAdded":"2026-12-03T20:00:00Z"}]}}})",
      KubeKind::kNode, &error);
  ASSERT_TRUE(node) << error;
  EXPECT_EQ(node->object.node.name, "node-a");
  EXPECT_EQ(node->object.node.taints,
            (std::vector<KubeTaint>{{"cni.istio.io/not-ready", "", "NoSchedule"},
                                    {"k", "v", "NoExecute"}}));
}

TEST(KubeDecodeTest, BookmarkAndErrorEvents) {
  std::string error;
  auto bookmark = DecodeWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12746",
      "annotations":{"k8s.io/initial-events-end":"true"}}}})",
      KubeKind::kPod, &error);
  ASSERT_TRUE(bookmark) << error;
  EXPECT_EQ(bookmark->type, WatchEventType::kBookmark);
  EXPECT_EQ(bookmark->object.resource_version(), "12746");
  EXPECT_TRUE(bookmark->initial_events_end);

  auto expired = DecodeWatchEvent(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
      "message":"too old resource version: 5 (10)","reason":"Expired","code":410}})j",
      KubeKind::kPod, &error);
  ASSERT_TRUE(expired) << error;
  EXPECT_EQ(expired->type, WatchEventType::kError);
  EXPECT_EQ(expired->status.code, 410);
  EXPECT_EQ(expired->status.reason, "Expired");
  EXPECT_EQ(expired->status.message, "too old resource version: 5 (10)");
}

TEST(KubeDecodeTest, StatusBodies) {
  std::string error;
  auto throttled = DecodeStatus(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down",
      "reason":"TooManyRequests","details":{"retryAfterSeconds":3},"code":429})",
      &error);
  ASSERT_TRUE(throttled) << error;
  EXPECT_EQ(throttled->code, 429);
  EXPECT_EQ(throttled->retry_after_seconds, 3);
  EXPECT_FALSE(DecodeStatus("Too many requests, please try again later.", &error));
  EXPECT_FALSE(DecodeStatus(R"({"kind":"PodList"})", &error));
  EXPECT_EQ(error, "not a Status");
}

TEST(KubeDecodeTest, GarbageIsAnErrorNeverACrash) {
  std::string error;
  for (const char* text :
       {"", "<html>", "{\"type\":\"ADDED\"}", "{\"type\":\"NOPE\",\"object\":{}}", "[1,2]",
        "{\"type\":\"ADDED\",\"object\":{}} trailing", "\"s\"",
        "{\"type\":\"ADDED\",\"object\":[]}"}) {
    error.clear();
    EXPECT_FALSE(DecodeWatchEvent(text, KubeKind::kPod, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
  EXPECT_FALSE(DecodeList(R"({"items":[]})", KubeKind::kPod, &error));  // no resourceVersion
  EXPECT_FALSE(DecodeList(std::string(100, '['), KubeKind::kPod, &error));
}

TEST(KubeDecodeTest, OneObject) {
  std::string error;
  auto object = DecodeObject(kPod, KubeKind::kPod, &error);
  ASSERT_TRUE(object) << error;
  EXPECT_EQ(object->pod.node_name, "node-a");
  EXPECT_FALSE(DecodeObject(R"({"kind":"Status","code":404})", KubeKind::kPod, &error));
  EXPECT_FALSE(DecodeObject("[]", KubeKind::kPod, &error));
}

TEST(KubeDecodeTest, Rfc3339) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339("1970-01-01T01:00:00.123456Z"), 3600);
  EXPECT_EQ(ParseRfc3339("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00-00:30"), 1800);
  EXPECT_FALSE(ParseRfc3339("1970-01-01 00:00:00Z"));
  EXPECT_FALSE(ParseRfc3339("1970-13-01T00:00:00Z"));
  EXPECT_FALSE(ParseRfc3339("yesterday"));
}

}  // namespace
}  // namespace ad::kube
