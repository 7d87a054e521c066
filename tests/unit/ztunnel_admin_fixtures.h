// Realistic ztunnel admin responses written from the documented shapes (values invented): the
// current /config_dump (workloads array), the older map shape, readiness bodies and /metrics.
#pragma once

namespace ad::testing {

// Current shape (workloads array, after ztunnel #923), trimmed to representative sections.
inline constexpr const char* kConfigDumpArray = R"json({
  "certificates": [
    {"identity": "spiffe://cluster.local/ns/demo/sa/echo", "state": "Available",
     "certChain": [{"pem": "LS0tLS1CRUdJTi...", "serialNumber": "4b1d",
                    "validFrom": "2026-08-20T10:00:00Z", "expirationTime": "2026-08-21T10:00:00Z"}],
     "rootCerts": []}
  ],
  "config": {"inpodUds": "/var/run/ztunnel/ztunnel.sock", "packetMark": 1337,
             "inboundAddr": "[::]:15008"},
  "policies": [],
  "services": [
    {"name": "echo", "namespace": "demo", "hostname": "echo.demo.svc.cluster.local",
     "vips": ["/10.96.40.10"], "ports": {"80": 8080},
     "endpoints": {"Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp": {
        "workloadUid": "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp", "port": {"80": 8080},
        "status": "Healthy"}},
     "subjectAltNames": [], "ipFamilies": "IPv4Only"}
  ],
  "stagedServices": {},
  "staticConfig": {"workloads": [], "services": []},
  "version": {"version": "1.30.3", "gitRevision": "a45c62f8", "rustVersion": "1.88.0",
              "buildProfile": "release", "buildStatus": "Clean", "istioVersion": "1.30.3",
              "cryptoProvider": "aws-lc"},
  "workloadState": {
    "5b0c2d7e-1f0a-4c55-9a3e-2d9f3c1e7a11": {
      "state": "Up",
      "connections": {
        "inbound":  [{"src": "10.244.1.12:43110", "originalDst": "echo.demo.svc.cluster.local",
                      "actualDst": "10.244.2.7:8080", "protocol": "HBONE"}],
        "outbound": [{"src": "10.244.2.7:51544", "originalDst": "10.96.40.10:80",
                      "actualDst": "10.244.1.9:15008", "protocol": "HBONE"}]
      },
      "info": {"name": "echo-6d5f8b7c9-x2kqp", "namespace": "demo", "serviceAccount": "echo"}
    },
    "c3a1f4e2-8b7d-4e6a-b0c9-5f2e1d3c4b5a": {
      "state": "Pending",
      "info": {"name": "job-abc-7xk2p", "namespace": "demo", "serviceAccount": "default"}
    }
  },
  "workloads": [
    {"workloadIps": ["10.244.2.7"], "protocol": "HBONE",
     "uid": "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp", "name": "echo-6d5f8b7c9-x2kqp",
     "namespace": "demo", "trustDomain": "cluster.local", "serviceAccount": "echo",
     "workloadName": "echo", "workloadType": "deployment", "canonicalName": "echo",
     "canonicalRevision": "v1", "clusterId": "Kubernetes", "node": "node-a",
     "status": "Healthy", "authorizationPolicies": [], "services": ["demo/echo.demo.svc.cluster.local"],
     "locality": {"region": "eu-west-1", "zone": "eu-west-1a"}, "capacity": 1},
    {"workloadIps": ["10.244.1.9", "fd00:10:244:1::9"], "protocol": "HBONE",
     "uid": "Kubernetes//Pod/demo/client-7c9d8b6f5-q8w2e", "name": "client-7c9d8b6f5-q8w2e",
     "namespace": "demo", "serviceAccount": "client", "node": "node-b", "status": "Healthy"},
    {"workloadIps": ["172.18.0.3"], "networkMode": "HostNetwork",
     "uid": "Kubernetes//Pod/kube-system/kube-proxy-9xk2p", "name": "kube-proxy-9xk2p",
     "namespace": "kube-system", "serviceAccount": "kube-proxy", "node": "node-a",
     "status": "Healthy"}
  ]
})json";

// The older shape (before ztunnel #923, Apr 2024): workloads and services as maps; one entry
// without "uid" (the key stands in), addresses with a network prefix.
inline constexpr const char* kConfigDumpMap = R"json({
  "workloads": {
    "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp": {
      "workloadIps": ["network1/10.244.2.7"], "protocol": "HBONE",
      "uid": "Kubernetes//Pod/demo/echo-6d5f8b7c9-x2kqp", "name": "echo-6d5f8b7c9-x2kqp",
      "namespace": "demo", "node": "node-a", "networkMode": "Standard"},
    "Kubernetes//Pod/demo/legacy-0": {
      "workloadIps": ["/fd00:10:244:0:0:0:0:5"], "protocol": "TCP",
      "name": "legacy-0", "namespace": "demo", "node": "node-a"}
  },
  "services": {"demo/echo.demo.svc.cluster.local": {"name": "echo", "namespace": "demo"}},
  "workloadState": {
    "5b0c2d7e-1f0a-4c55-9a3e-2d9f3c1e7a11": {
      "state": "Up",
      "info": {"name": "echo-6d5f8b7c9-x2kqp", "namespace": "demo", "serviceAccount": "echo"}
    }
  }
})json";

// A fresh ztunnel stuck before the ZDS snapshot: no proxies, nothing known.
inline constexpr const char* kConfigDumpEmptyState = R"json({
  "workloads": [], "services": [], "policies": [], "workloadState": {},
  "version": {"version": "1.29.5"}
})json";

inline constexpr const char* kReadinessNotReady = "not ready, pending: workload proxy manager";

inline constexpr const char* kMetrics =
    R"(# HELP workload_manager_active_proxy_count The count of active proxies (unstable).
# TYPE workload_manager_active_proxy_count gauge
workload_manager_active_proxy_count 3
# HELP workload_manager_pending_proxy_count The count of pending proxies (unstable).
# TYPE workload_manager_pending_proxy_count gauge
workload_manager_pending_proxy_count 1
# HELP workload_manager_proxies_started The total number of proxies started (unstable).
# TYPE workload_manager_proxies_started counter
workload_manager_proxies_started_total 5
# TYPE istio_tcp_connections_opened counter
istio_tcp_connections_opened_total{reporter="destination",source_workload="client",destination_workload="echo",response_flags="-",connection_security_policy="mutual_tls"} 17
# TYPE istio_build gauge
istio_build{component="ztunnel",tag="1.30.3"} 1
# EOF
)";

}  // namespace ad::testing
