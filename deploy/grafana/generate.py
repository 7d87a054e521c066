#!/usr/bin/env python3
"""Writes ambient-doctor.json, the Grafana "redirect drift" dashboard (run after editing).

The dashboard is generated so panel ids and grid positions stay consistent; the JSON is what
users import and what tests/deploy/deploy_checks.py lints (and what the live test queries).
Panel queries never filter by value (no `> 0`): a query returns data whenever the metric and its
labels exist, so the live test can require data from every panel the lab feeds.

  deploy/grafana/generate.py    rewrite ambient-doctor.json

The same file is shipped as a ConfigMap for Grafana's dashboard sidecar by the kustomize
component in this directory (configMapGenerator: the JSON is never copied by hand).
"""
import json
import pathlib

DS = {"type": "prometheus", "uid": "${datasource}"}
# Our series carry the agent's target labels: `cluster` where the Prometheus has it (an external
# or relabelled label of multi-cluster setups; `=~".*"` also matches its absence), the agent's
# `namespace` and the `node`. ztunnel's and istio-cni's series are filtered by cluster and node
# only: they live in their own namespace, which need not be the agent's.
NODE = 'cluster=~"$cluster",namespace=~"$namespace",node=~"$node"'
PEER = 'cluster=~"$cluster",node=~"$node"'
# Finding codes of the eBPF flow tracer (serve runs it unless --no-flows).
TRACER_CODES = ["MESH_BYPASS", "HBONE_CONNECT_FAILURES"]
FAILED_OUTCOMES = "refused|reset|timeout|unreachable"
# The cause checks: why a pod is out of the mesh, not only that it is. Per code: the panel
# title and what an operator does about it (the finding's hint and runbook have the detail).
CAUSE_CODES = [
    ("DNS_CAPTURE_BROKEN", "DNS capture broken", "critical: DNS is redirected to 15053 but "
     "ztunnel's DNS proxy does not listen there (or the capture rules are half present)."),
    ("INPOD_PROXY_BLOCKED", "In-pod proxy blocked", "critical: the pod netns lacks what ztunnel "
     "binds (lo down, no ::1 with IPv6 on), so its in-pod proxy cannot start."),
    ("CNI_CHAIN_BROKEN", "CNI chain broken", "critical: the CNI config the runtime uses does not "
     "chain istio-cni (or its kubeconfig is missing); warning per pod started meanwhile."),
    ("PROBE_PATH_BROKEN", "Probe path broken", "warning: kubelet probes SNATed to the probe "
     "address stay unreplied in conntrack (eBPF CNI, security groups)."),
    ("ZTUNNEL_RESOURCE_PRESSURE", "ztunnel resource pressure", "warning: ztunnel near its open "
     "file or memory limit, or CLOSE_WAIT sockets growing."),
    ("ZTUNNEL_CERT_UNHEALTHY", "ztunnel certificates", "warning: a workload certificate is "
     "Unavailable or expires within the threshold (default 1 h)."),
    ("NFT_BACKEND_UNUSABLE", "nftables userspace", "info: the node's nft cannot print JSON "
     "(istio-cni then falls back to iptables), or Istio's tables were written by a newer nft."),
]



class Layout:
    """Places panels left to right in rows of 24 grid units and hands out ids."""

    def __init__(self):
        self.panels = []
        self.next_id = 1
        self.y = 0
        self.x = 0
        self.row_height = 0

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def row(self, title):
        self._newline()
        self.panels.append({"type": "row", "id": self._id(), "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def _newline(self):
        if self.x > 0:
            self.y += self.row_height
        self.x = 0
        self.row_height = 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_height = max(self.row_height, h)
        self.panels.append(panel)


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend or "__auto",
         "range": not instant, "instant": instant}
    if fmt:
        t["format"] = fmt
    return t


def timeseries(title, description, targets, unit="short", stack=False):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if stack else 0,
              "showPoints": "never", "spanNulls": False}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": targets,
            "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
            "options": {"legend": {"showLegend": True, "displayMode": "table",
                                   "placement": "right", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, description, expr, unit="short", thresholds=None):
    steps = thresholds or [{"color": "green", "value": None}, {"color": "red", "value": 1}]
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "targets": [target(expr, instant=True)],
            "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute",
                                                                      "steps": steps}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "area", "textMode": "auto"}}


def table(title, description, expr):
    return {"type": "table", "title": title, "description": description, "datasource": DS,
            "targets": [target(expr, instant=True, fmt="table")],
            "fieldConfig": {"defaults": {}, "overrides": []},
            "options": {"showHeader": True},
            "transformations": [{"id": "organize", "options": {
                "excludeByName": {"Time": True, "__name__": True}}}]}


def heatmap(title, description, expr):
    return {"type": "heatmap", "title": title, "description": description, "datasource": DS,
            "targets": [dict(target(expr, legend="{{le}}"), format="heatmap")],
            "fieldConfig": {"defaults": {}, "overrides": []},
            "options": {"calculate": False, "yAxis": {"unit": "s"},
                        "cellGap": 1, "color": {"scheme": "Oranges", "mode": "scheme"}}}


def text(title, content):
    return {"type": "text", "title": title, "options": {"mode": "markdown", "content": content}}


def build():
    lay = Layout()
    not_healthy = 'redirect_state!~"healthy|not_enrolled|out_of_mesh"'

    lay.row("Overview")
    lay.add(stat("Pods with redirect drift", "Enrolled pod netns whose redirect rules are not "
                 "Istio's healthy set (all selected nodes).",
                 f"sum(ambient_doctor_pods{{{NODE},{not_healthy}}})"), 6, 4)
    lay.add(stat("Nodes with a ZDS stall", "Nodes where istio-cni's hand-off to ztunnel is "
                 "stalled (ZDS_STALL open).", f"sum(ambient_doctor_zds_stall{{{NODE}}})"), 6, 4)
    lay.add(stat("Critical findings", "Open critical findings of the latest scans.",
                 f'sum(ambient_doctor_findings{{{NODE},severity="critical"}})'), 6, 4)
    lay.add(stat("Agents up", "Agents Prometheus scraped successfully.",
                 f'sum(up{{job=~"(.+/)?ambient-doctor",{NODE}}})',
                 thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}]),
            6, 4)

    lay.row("Redirect drift")
    lay.add(timeseries("Pods by redirect state", "Pod netns per node and redirect state (the "
                       "first that applies: host_enrolled, mixed_backend, conflict, incomplete, "
                       "listeners_missing, redirect_missing, duplicate, healthy).",
                       [target(f'sum by (node, redirect_state) (ambient_doctor_pods{{{NODE},'
                               f'redirect_state!~"not_enrolled|out_of_mesh"}})',
                               "{{node}} {{redirect_state}}")], stack=True), 12, 8)
    lay.add(timeseries("Drifted pods per node", "Enrolled pods not in the healthy state.",
                       [target(f"sum by (node) (ambient_doctor_pods{{{NODE},{not_healthy}}})",
                               "{{node}}")]), 12, 8)
    lay.add(timeseries("Pods by netfilter backend", "Pods holding in-pod ambient rules per "
                       "backend; a mixed-backend pod counts in each (istio#61020).",
                       [target(f"sum by (node, backend) (ambient_doctor_pods_by_backend{{{NODE}}})",
                               "{{node}} {{backend}}")]), 12, 8)
    lay.add(table("Redirect state now", "Current pod counts per node and state.",
                  f'sum by (node, redirect_state) (ambient_doctor_pods{{{NODE},'
                  f'redirect_state!~"not_enrolled|out_of_mesh"}})'), 12, 8)

    lay.row("Findings")
    lay.add(timeseries("Open findings by severity", "Open findings of the latest scan.",
                       [target(f"sum by (severity) (ambient_doctor_findings{{{NODE}}})",
                               "{{severity}}")]), 12, 8)
    lay.add(table("Open findings by code", "Per node and finding code, now (codes as in "
                  "`ambient-doctor findings`).",
                  f"sum by (node, code, severity) (ambient_doctor_findings{{{NODE}}})"), 12, 8)
    lay.add(timeseries("Findings opened", "Findings opened per code in each interval.",
                       [target(f"sum by (code) (increase(ambient_doctor_findings_opened_total"
                               f"{{{NODE}}}[$__rate_interval]))", "{{code}}")]), 24, 8)

    lay.row("ZDS hand-off")
    lay.add(timeseries("Hand-offs by state", "Pod netns by ZDS hand-off state "
                       "(handed_off, pending, stalled).",
                       [target(f"sum by (node, state) (ambient_doctor_zds_handoffs{{{NODE}}})",
                               "{{node}} {{state}}")]), 8, 8)
    lay.add(timeseries("Oldest pending hand-off", "Age of the oldest pending or stalled "
                       "hand-off; the stall threshold is 30 s by default.",
                       [target(f"max by (node) (ambient_doctor_zds_oldest_pending_handoff_age_seconds"
                               f"{{{NODE}}})", "{{node}}")], unit="s"), 8, 8)
    lay.add(timeseries("ZDS stall and ztunnel readiness", "1 while ZDS_STALL is open; ztunnel "
                       "ready on :15021 (1) or not (0); ztunnels connected to istio-cni's "
                       "ZDS socket.",
                       [target(f"max by (node) (ambient_doctor_zds_stall{{{NODE}}})",
                               "{{node}} stall"),
                        target(f"min by (node) (ambient_doctor_ztunnel_ready{{{NODE}}})",
                               "{{node}} ztunnel ready", "B"),
                        target(f"max by (node) (ambient_doctor_zds_connected_ztunnels{{{NODE}}})",
                               "{{node}} ztunnels connected", "C")]), 8, 8)
    lay.add(timeseries("ztunnel and istio-cni's own view", "Beside our series: ztunnel's "
                       "workload manager (pending should converge to 0) and istio-cni's "
                       "ztunnel_connected. Needs ztunnel's :15020 and istio-cni's metrics port "
                       "scraped with a node label (Istio's Prometheus addon adds it).",
                       [target(f"sum by (node) (workload_manager_active_proxy_count{{{PEER}}})",
                               "{{node}} ztunnel active proxies"),
                        target(f"sum by (node) (workload_manager_pending_proxy_count{{{PEER}}})",
                               "{{node}} ztunnel pending proxies", "B"),
                        target(f"sum by (node) (ztunnel_connected{{{PEER}}})",
                               "{{node}} istio-cni ztunnel_connected", "C")]), 24, 8)

    lay.row("Causes")
    for code, title, description in CAUSE_CODES:
        lay.add(timeseries(title, f"{code} findings open per node and severity; {description}",
                           [target(f'sum by (node, severity) (ambient_doctor_findings{{{NODE},'
                                   f'code="{code}"}})', "{{node}} {{severity}}")]), 6, 6)
    lay.add(table("Cause findings now", "Open findings of the cause checks per node, code and "
                  "severity.",
                  "sum by (node, code, severity) (ambient_doctor_findings{"
                  f'{NODE},code=~"{"|".join(code for code, _, _ in CAUSE_CODES)}"}})'), 6, 6)

    lay.row("HBONE flows")
    codes = "|".join(TRACER_CODES)
    lay.add(timeseries("Mesh bypass and HBONE connect failures (findings)", "REDIRECT_MISSING "
                       "(rules) beside the flow tracer's MESH_BYPASS and HBONE_CONNECT_FAILURES "
                       "(per pod netns, over the tracer's window).",
                       [target(f'sum by (node, code) (ambient_doctor_findings{{{NODE},'
                               f'code=~"REDIRECT_MISSING|{codes}"}})', "{{node}} {{code}}")]),
            12, 8)
    lay.add(timeseries("ztunnel connections by response flags", "ztunnel's own counter "
                       "(CONNECT = upstream connect failure, DENY = policy).",
                       [target(f"sum by (node, response_flags) (rate(istio_tcp_connections_opened_total"
                               f'{{{PEER},reporter="source"}}[$__rate_interval]))',
                               "{{node}} {{response_flags}}")], unit="cps"), 12, 8)
    lay.add(timeseries("HBONE flow rate by outcome", "HBONE (:15008) client connections "
                       "closing per second, by outcome (closed = established and ended with "
                       "FINs).",
                       [target("sum by (node, outcome) (rate(ambient_doctor_hbone_connections_total"
                               f"{{{NODE}}}[$__rate_interval]))", "{{node}} {{outcome}}")],
                       unit="cps", stack=True), 8, 8)
    lay.add(heatmap("HBONE connect latency", "SYN to ESTABLISHED time of HBONE client "
                    "connections, per latency bucket.",
                    "sum by (le) (increase(ambient_doctor_hbone_connect_latency_seconds_bucket"
                    f"{{{NODE}}}[$__rate_interval]))"), 8, 8)
    lay.add(timeseries("Same-node vs remote HBONE failures", "Failed HBONE connects (refused, "
                       "reset, timeout, unreachable) to pods of the same node or elsewhere: "
                       "same-node failures point at the node datapath, remote ones at the network "
                       "between nodes.",
                       [target("sum by (node, locality) (rate("
                               f'ambient_doctor_hbone_connections_total{{{NODE},'
                               f'outcome=~"{FAILED_OUTCOMES}"}}[$__rate_interval]))',
                               "{{node}} {{locality}}")], unit="cps"), 8, 8)

    lay.row("Agent cost")
    lay.add(timeseries("Netns re-read latency", "p50 / p99 of one changed-netns re-read.",
                       [target("histogram_quantile(0.5, sum by (le, node) (rate("
                               f"ambient_doctor_netns_reread_duration_seconds_bucket{{{NODE}}}"
                               "[$__rate_interval])))", "{{node}} p50"),
                        target("histogram_quantile(0.99, sum by (le, node) (rate("
                               f"ambient_doctor_netns_reread_duration_seconds_bucket{{{NODE}}}"
                               "[$__rate_interval])))", "{{node}} p99", "B")], unit="s"), 8, 8)
    lay.add(heatmap("Netns re-read latency distribution", "Re-reads per latency bucket.",
                    "sum by (le) (increase(ambient_doctor_netns_reread_duration_seconds_bucket"
                    f"{{{NODE}}}[$__rate_interval]))"), 8, 8)
    lay.add(timeseries("Scans and re-reads", "Scans published by trigger, netns re-reads.",
                       [target(f"sum by (trigger) (rate(ambient_doctor_scans_total{{{NODE}}}"
                               "[$__rate_interval]))", "scans {{trigger}}"),
                        target(f"sum by (trigger) (rate(ambient_doctor_netns_rereads_total"
                               f"{{{NODE}}}[$__rate_interval]))", "re-reads {{trigger}}", "B")],
                       unit="ops"), 8, 8)
    lay.add(timeseries("Lost events and missed results", "ENOBUFS on netlink event sockets "
                       "(each forces a resync) and published results the exporter never saw.",
                       [target(f"sum by (node) (increase(ambient_doctor_event_socket_overflows_total"
                               f"{{{NODE}}}[$__rate_interval]))", "{{node}} event overflows"),
                        target(f"sum by (node) (increase(ambient_doctor_results_missed_total"
                               f"{{{NODE}}}[$__rate_interval]))", "{{node}} results missed",
                               "B"),
                        target("sum by (node) (increase("
                               f"ambient_doctor_flow_tracer_lost_events_total{{{NODE}}}"
                               "[$__rate_interval]))", "{{node}} flow tracer lost events", "C")]),
            8, 8)
    lay.add(timeseries("Source errors", "Errors per typed source in the latest scan.",
                       [target(f"sum by (node, source) (ambient_doctor_source_errors{{{NODE}}})",
                               "{{node}} {{source}}")]), 8, 8)
    lay.add(timeseries("Scan age", "Seconds since the last scan that read a netns "
                       "(/healthz fails after 120 s).",
                       [target(f"time() - max by (node) (ambient_doctor_last_successful_scan_"
                               f"timestamp_seconds{{{NODE}}})", "{{node}}")], unit="s"), 8, 8)
    # cAdvisor's series carry the pod's namespace, so $namespace selects the agent's containers.
    agent = f'container="ambient-doctor",{NODE}'
    lay.add(timeseries("Agent memory", "Working set of the agent container (cAdvisor via the "
                       "kubelet; the agent exports no process metrics).",
                       [target(f"sum by (node) (container_memory_working_set_bytes{{{agent}}})",
                               "{{node}} working set")], unit="bytes"), 12, 8)
    lay.add(timeseries("Agent CPU", "CPU of the agent container in cores (cAdvisor via the "
                       "kubelet).",
                       [target("sum by (node) (rate(container_cpu_usage_seconds_total"
                               f"{{{agent}}}[$__rate_interval]))", "{{node}} cores")],
                       unit="short"), 12, 8)

    return {
        "uid": "ambient-doctor-redirect-drift",
        "title": "Istio ambient / ambient-doctor / Redirect drift",
        "description": "Is every pod really in the ambient mesh? ambient-doctor's node "
                       "findings: redirect drift, their causes, ZDS hand-off, HBONE, agent cost.",
        "tags": ["istio", "ambient", "ambient-doctor"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "utc",
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus", "current": {}, "hide": 0, "refresh": 1},
            # Single-valued: the panels aggregate by node, so pick one cluster when two share
            # node names. A Prometheus without a `cluster` label has no values; All (".*", the
            # default) then matches the absent label.
            {"name": "cluster", "label": "Cluster", "type": "query", "datasource": DS,
             "query": {"query": "label_values(ambient_doctor_build_info, cluster)",
                       "refId": "cluster"},
             "definition": "label_values(ambient_doctor_build_info, cluster)",
             "multi": False, "includeAll": True, "allValue": ".*", "current": {},
             "refresh": 2, "sort": 1, "hide": 0},
            {"name": "namespace", "label": "Agent namespace", "type": "query", "datasource": DS,
             "query": {"query": 'label_values(ambient_doctor_build_info{cluster=~"$cluster"}, '
                                'namespace)', "refId": "namespace"},
             "definition": 'label_values(ambient_doctor_build_info{cluster=~"$cluster"}, '
                           'namespace)',
             "multi": True, "includeAll": True, "allValue": ".*", "current": {},
             "refresh": 2, "sort": 1, "hide": 0},
            {"name": "node", "label": "Node", "type": "query", "datasource": DS,
             "query": {"query": 'label_values(ambient_doctor_build_info{cluster=~"$cluster",'
                                'namespace=~"$namespace"}, node)', "refId": "node"},
             "definition": 'label_values(ambient_doctor_build_info{cluster=~"$cluster",'
                           'namespace=~"$namespace"}, node)',
             "multi": True, "includeAll": True, "allValue": ".*", "current": {},
             "refresh": 2, "sort": 1, "hide": 0},
        ]},
        "annotations": {"list": []},
        "links": [],
        "panels": lay.panels,
    }


if __name__ == "__main__":
    out = pathlib.Path(__file__).with_name("ambient-doctor.json")
    out.write_text(json.dumps(build(), indent=2) + "\n")
    print(f"wrote {out}")
