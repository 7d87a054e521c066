#!/usr/bin/python3
"""Offline checks of deploy/ (manifests, alerts, runbooks, image recipe, dashboard).

usage: deploy_checks.py CHECK --source-dir DIR --work-dir DIR [--binary PATH]
CHECK: yamllint | manifests | conventions | rules | runbooks | table | inhibit | image |
       dashboard | selftest
Exit 0 = pass, 1 = failures (listed), 77 = skipped (the reason is the last line: "SKIP: ...").
Run through tests/unit/deploy_test.cc (ctest); /usr/bin/python3 because it has PyYAML.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import yaml

SKIP = 77
# Finding codes of the flow tracer (serve exports them unless --no-flows; every code is a label
# value of ambient_doctor_findings anyway).
TRACER_CODES = {"MESH_BYPASS", "HBONE_CONNECT_FAILURES"}
# Metrics the dashboard and rules may use that other exporters provide (not ambient-doctor).
EXTERNAL_METRICS = {
    "up": "Prometheus (scrape health)",
    "workload_manager_active_proxy_count": "ztunnel :15020",
    "workload_manager_pending_proxy_count": "ztunnel :15020",
    "istio_tcp_connections_opened_total": "ztunnel :15020",
    "ztunnel_connected": "istio-cni metrics",
    "container_memory_working_set_bytes": "kubelet cAdvisor",
    "container_cpu_usage_seconds_total": "kubelet cAdvisor",
    "kube_daemonset_status_number_unavailable": "kube-state-metrics",
    "kube_daemonset_status_updated_number_scheduled": "kube-state-metrics",
}
EXPECTED_CAPABILITIES = {"SYS_ADMIN", "NET_ADMIN", "NET_RAW", "SYS_PTRACE", "DAC_READ_SEARCH"}
# In this order on every page.
RUNBOOK_SECTIONS = ["## Meaning", "## Impact", "## Confirm", "## Likely causes", "## Remediation",
                    "## Escalation"]
# Labels every aggregation of an alert keeps, so Alertmanager can route and inhibit by them and
# one cluster's or node's data never fires or clears another's alert.
ALERT_LABELS = ("cluster", "namespace")
# The redirect states of ambient_doctor_pods and the finding code each comes from
# (agent/report/redirect_state.h, docs/metrics.md "Redirect state").
STATE_CODES = {
    "host_enrolled": "HOST_NETNS_ENROLLED", "mixed_backend": "MIXED_BACKEND",
    "conflict": "DATAPLANE_CONFLICT", "incomplete": "INCOMPLETE_RULESET",
    "listeners_missing": "ZTUNNEL_LISTENERS_MISSING", "redirect_missing": "REDIRECT_MISSING",
    "duplicate": "DUPLICATE_RULE", "healthy": None, "not_enrolled": None,
}
# Metrics that are one finding code each.
METRIC_CODES = {"ambient_doctor_zds_stall": "ZDS_STALL"}


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, condition, message):
        if not condition:
            self.failures.append(message)
        return condition

    def finish(self, what):
        for failure in self.failures:
            print(f"FAIL {failure}")
        print(f"{what}: {len(self.failures)} failure(s)")
        return 1 if self.failures else 0


def skip(reason):
    print(f"SKIP: {reason}")
    return SKIP


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


# ---------------------------------------------------------------------------------------------
# PromQL helpers (shared with alerts_live.py)

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and",
    "or", "unless", "inf", "nan", "le",
}


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|`[^`]*`', '""', expr)


def metric_names(expr):
    """The metric names an expression selects (functions, keywords and label lists removed)."""
    text = strip_strings(expr)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range durations
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"(?<![A-Za-z0-9_:])\d[\w.]*", " ", text)  # numbers and durations (5m, 0.99)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or name in PROMQL_WORDS:
            continue  # a function call or keyword
        names.add(name)
    return names


def label_matchers(expr):
    """(metric, label, op, value) for every matcher of every selector with a metric name."""
    out = []
    for match in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", expr):
        metric = match.group(1)
        for m in re.finditer(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"',
                             match.group(2)):
            out.append((metric, m.group(1), m.group(2), m.group(3)))
    return out


def substitute_grafana(expr, node_value="x"):
    expr = re.sub(r"\$__(rate_interval|interval|range)", "5m", expr)
    expr = re.sub(r"\$\{?node\}?", node_value, expr)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[\[[A-Za-z_][A-Za-z0-9_]*\]\]", "x", expr)


def dashboard_queries(dashboard):
    """(panel id, title, refId, expr) for every target of every panel, rows walked."""
    out = []

    def walk(panels):
        for panel in panels:
            for t in panel.get("targets", []):
                if "expr" in t:
                    out.append((panel.get("id"), panel.get("title", ""), t.get("refId"), t["expr"]))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            inner = re.fullmatch(r"\s*(?:label_values|query_result)\((.*?)(?:,\s*\w+)?\)\s*", query)
            out.append((None, f"variable ${variable['name']}", "var",
                        inner.group(1) if inner else query))
    return out


def alert_rules(source):
    groups = extract_rule_groups(source)
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def extract_rule_groups(source):
    path = source / "deploy/monitoring/prometheusrule.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "PrometheusRule"]
    return [g for d in docs for g in d["spec"]["groups"]]


def write_rule_file(groups, path):
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))


def promtool_check_expressions(named_exprs, work):
    """Parses every expression with promtool (as recording rules); returns error lines."""
    rules = [{"record": f"check:expr_{i}", "expr": expr} for i, (_, expr) in enumerate(named_exprs)]
    work.mkdir(parents=True, exist_ok=True)
    path = work / "expressions.rules.yaml"
    write_rule_file([{"name": "expressions", "rules": rules}], path)
    result = run(["promtool", "check", "rules", str(path)])
    if result.returncode == 0:
        return []
    # promtool reports only the first error per run; check one by one to name each.
    errors = []
    for i, (name, expr) in enumerate(named_exprs):
        single = work / f"expr_{i}.rules.yaml"
        write_rule_file([{"name": "one", "rules": [{"record": "check:one", "expr": expr}]}], single)
        one = run(["promtool", "check", "rules", str(single)])
        if one.returncode != 0:
            detail = (one.stdout + one.stderr).strip().splitlines()
            errors.append(f"{name}: PromQL error: {detail[-1] if detail else '?'}")
    return errors or [f"promtool: {(result.stdout + result.stderr).strip()}"]


# ---------------------------------------------------------------------------------------------
# Checks

def check_yamllint(args):
    if not shutil.which("yamllint"):
        return skip("yamllint not installed (scripts/setup)")
    deploy = args.source_dir / "deploy"
    result = run(["yamllint", "-f", "parsable", "-c", str(deploy / ".yamllint"), str(deploy),
                  str(args.source_dir / "tests/deploy/alerts_test.yaml")])
    print(result.stdout + result.stderr)
    return 0 if result.returncode == 0 else 1


KUSTOMIZATIONS = ["base", "examples/kube-prometheus-stack", "examples/all"]
# deploy/components/<platform>, each rendered through deploy/examples/<platform>: the node paths
# the agent must be told and have mounted (docs/deploy.md "Platforms"; the sources are
# ../shared facts: Istio's platform profiles, the runtimes' defaults). `cni` is --cni-conf-dir
# (a host path), `cri` the socket behind --cri-endpoint, `netns` the --netns-dir host paths.
PLATFORMS = {
    "k3s": {"cni": "/var/lib/rancher/k3s/agent/etc/cni/net.d",
            "cri": "/run/k3s/containerd/containerd.sock",
            "netns": ["/var/run/netns", "/run/k3s/containerd/io.containerd.grpc.v1.cri/netns"]},
    "rke2": {"cni": "/etc/cni/net.d", "cri": "/run/k3s/containerd/containerd.sock",
             "netns": ["/var/run/netns", "/run/k3s/containerd/io.containerd.grpc.v1.cri/netns"]},
    "microk8s": {"cni": "/var/snap/microk8s/current/args/cni-network",
                 "cri": "/var/snap/microk8s/common/run/containerd.sock",
                 "netns": ["/var/run/netns", "/var/snap/microk8s/common/run/containerd/"
                           "io.containerd.grpc.v1.cri/netns"]},
    # Multus runs istio-cni unchained there: the chain check is off.
    "openshift": {"cni": "off", "cri": "/run/crio/crio.sock",
                  "netns": ["/var/run/netns"]},
    "minikube": {"cni": "/etc/cni/net.d", "cri": "/var/run/cri-dockerd.sock",
                 "netns": ["/var/run/docker/netns"]},
}
CONTAINERD = {"cni": "/etc/cni/net.d", "cri": "/run/containerd/containerd.sock",
              "netns": ["/var/run/netns", "/run/containerd/io.containerd.grpc.v1.cri/netns"]}
PLATFORMS.update({"k3d": PLATFORMS["k3s"], "gke": CONTAINERD, "eks": CONTAINERD,
                  "aks": CONTAINERD, "kind": CONTAINERD})
POLICY_EXAMPLES = ["examples/kyverno", "examples/gatekeeper"]
# The renderings without Kubernetes API access (deploy/components/no-kube-api).
NO_KUBE_API_EXAMPLES = ["examples/no-kube-api"]
KUSTOMIZATIONS += [f"examples/{name}" for name in PLATFORMS] + POLICY_EXAMPLES + \
    NO_KUBE_API_EXAMPLES
# Kinds without a namespace (the rest of deploy/ lives in istio-system).
CLUSTER_SCOPED = {"SecurityContextConstraints", "ClusterRole", "ClusterRoleBinding"}
# The Kubernetes API access of deploy/base: istio-cni's own read rule (its chart's ClusterRole
# istio-cni), the in-cluster credentials' directory, and the token's lifetime (the kubelet's own
# for the automount; it rotates the token at 80 %).
KUBE_READ_RULE = {"apiGroups": [""], "resources": ["namespaces", "nodes", "pods"],
                  "verbs": ["get", "list", "watch"]}
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3607
RBAC_KINDS = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def render(source, work, name):
    env = dict(os.environ, KUBECONFIG="/nonexistent")
    result = run(["kubectl", "kustomize", str(source / "deploy" / name)], env=env)
    if result.returncode != 0:
        return None, result.stderr.strip()
    out = work / (name.replace("/", "_") + ".rendered.yaml")
    out.write_text(result.stdout)
    return out, ""


def check_manifests(args):
    c = Checker()
    if not shutil.which("kubectl"):
        return skip("kubectl not installed: kustomize rendering needs `kubectl kustomize`")
    validate_dir = args.source_dir / "deploy/validate"
    if not (validate_dir / "node_modules/kubernetes-models").is_dir():
        return skip("deploy/validate/node_modules missing (scripts/setup runs npm ci there)")
    if not shutil.which("node"):
        return skip("node not installed")
    rendered = []
    volume_kinds = set()  # of every rendered DaemonSet
    gatekeeper_docs = []
    for name in KUSTOMIZATIONS:
        path, error = render(args.source_dir, args.work_dir, name)
        if c.check(path is not None, f"kubectl kustomize deploy/{name}: {error}"):
            rendered.append(path)
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
            print(f"deploy/{name}: {', '.join(kinds)}")
            for d in docs:
                cluster_scoped = (d["kind"] in CLUSTER_SCOPED or
                                  d["apiVersion"].startswith("constraints.gatekeeper.sh/"))
                c.check(d["metadata"].get("namespace") ==
                        (None if cluster_scoped else "istio-system"),
                        f"deploy/{name}: {d['kind']}/{d['metadata']['name']} "
                        f"{'has a namespace' if cluster_scoped else 'not in istio-system'}")
            platform = name.split("/", 1)[1] if name.split("/", 1)[-1] in PLATFORMS else None
            if platform:
                check_platform(c, platform, docs, args)
            if name in POLICY_EXAMPLES:
                check_policy_example(c, name, docs)
            else:
                check_kube_api_access(c, f"deploy/{name}", docs, name not in NO_KUBE_API_EXAMPLES)
                volume_kinds |= {k for d in docs if d["kind"] == "DaemonSet"
                                 for v in d["spec"]["template"]["spec"]["volumes"]
                                 for k in v if k != "name"}
            if name in NO_KUBE_API_EXAMPLES:
                check_daemon_accepts_args(c, f"deploy/{name}", docs, args)
            if name == "examples/gatekeeper":
                gatekeeper_docs = docs
            if name == "base":
                c.check(not any(d["apiVersion"].startswith("monitoring.coreos.com") for d in docs),
                        "the base must install without prometheus-operator CRDs")
            if name == "examples/kube-prometheus-stack":
                for d in docs:
                    if d["apiVersion"].startswith("monitoring.coreos.com"):
                        c.check(d["metadata"].get("labels", {}).get("release") ==
                                "kube-prometheus-stack",
                                f"{d['kind']} lacks the release label kube-prometheus-stack selects")
            if name in ("examples/all", "examples/kube-prometheus-stack"):  # the monitoring ones
                check_dashboard_configmap(c, args.source_dir, docs, name)
            if name == "examples/all":
                ds = next(d for d in docs if d["kind"] == "DaemonSet")
                caps = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"][
                    "capabilities"]["add"]
                c.check({"BPF", "PERFMON"} <= set(caps), f"tracer component: capabilities {caps}")
    check_gatekeeper_volumes(c, gatekeeper_docs, volume_kinds)
    # Every component is rendered: through its platform's example, inside another component, or
    # by an example the checks render.
    for component in sorted((args.source_dir / "deploy/components").iterdir()):
        used = any(f"../{component.name}" in k.read_text()
                   for k in (args.source_dir / "deploy/components").glob("*/kustomization.yaml"))
        rendered_by = any(f"components/{component.name}\n" in
                          (args.source_dir / "deploy" / k / "kustomization.yaml").read_text()
                          for k in KUSTOMIZATIONS if k.startswith("examples/"))
        c.check(component.name in PLATFORMS or used or rendered_by,
                f"deploy/components/{component.name}: no example renders it (PLATFORMS, "
                "KUSTOMIZATIONS)")
    if rendered:
        result = run(["node", str(validate_dir / "validate.mjs"), "--work-dir",
                      str(args.work_dir / "ts")] + [str(p) for p in rendered])
        print(result.stdout + result.stderr)
        c.check(result.returncode == 0, "schema / strict validation failed (above)")
    return c.finish("manifests")


def check_gatekeeper_volumes(c, gatekeeper_docs, volume_kinds):
    """Gatekeeper's volume types admit every volume kind of every rendered DaemonSet."""
    allowed = next((d["spec"]["parameters"]["volumes"] for d in gatekeeper_docs
                    if d["kind"] == "K8sPSPVolumeTypes"), [])
    c.check(volume_kinds <= set(allowed), f"examples/gatekeeper: K8sPSPVolumeTypes {allowed} "
            f"lacks {sorted(volume_kinds - set(allowed))}")


def check_dashboard_configmap(c, source, docs, name):
    """The Grafana sidecar's ConfigMap: labelled for the sidecar, the committed JSON verbatim."""
    cm = next((d for d in docs if d["kind"] == "ConfigMap" and
               d["metadata"]["name"] == "ambient-doctor-dashboard"), None)
    if not c.check(cm is not None, f"deploy/{name}: no dashboard ConfigMap"):
        return
    c.check(cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1",
            f"deploy/{name}: dashboard ConfigMap lacks the label grafana_dashboard: \"1\"")
    c.check(cm.get("data", {}).get("ambient-doctor.json") ==
            (source / "deploy/grafana/ambient-doctor.json").read_text(),
            f"deploy/{name}: dashboard ConfigMap differs from deploy/grafana/ambient-doctor.json")


def cmake_version(source_dir):
    text = (source_dir / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*\S+\s+VERSION\s+([0-9][^\s)]*)", text)
    return match.group(1) if match else None


def parse_flags(text):
    """(name, value) per flag line of an agent.flags file (comments and blank lines skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            out.append((name, value.strip()))
    return out


def host_mounts(ds):
    """{mountPath: (host path, volume type, mount)} of the DaemonSet's hostPath mounts."""
    spec = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    out = {}
    for mount in spec["containers"][0]["volumeMounts"]:
        host = volumes.get(mount["name"], {}).get("hostPath")
        if host:
            out[mount["mountPath"]] = (host["path"], host.get("type", ""), mount)
    return out


def check_host_volumes(c, where, ds):
    """Every hostPath volume mounted read-only at /host<path> (or its own path); none that the
    kubelet or the runtime would have to create where nothing can be created."""
    spec = ds["spec"]["template"]["spec"]
    mounted = {m["name"] for m in spec["containers"][0]["volumeMounts"]}
    for volume in spec["volumes"]:
        c.check(volume["name"] in mounted, f"{where}: volume {volume['name']} is not mounted")
        host = volume.get("hostPath")
        if not host:
            continue
        c.check(host.get("type") in ("Directory", "DirectoryOrCreate", "Socket", "File"),
                f"{where}: hostPath {host['path']} has no explicit type")
        if host["path"].startswith(("/sys/", "/proc/")) or host["path"] in ("/sys",):
            c.check(not host.get("type", "").endswith("OrCreate") and host.get("type"),
                    f"{where}: hostPath {host['path']} is {host.get('type') or 'untyped'}: nothing "
                    "can be created in sysfs or procfs, the pod would stay in ContainerCreating")
    for path, (host, _, mount) in host_mounts(ds).items():
        c.check(mount.get("readOnly") is True, f"{where}: hostPath mount {path} not read-only")
        c.check(path in ("/host" + host, host), f"{where}: {path} mounts the host's {host}: "
                "the agent resolves host paths under --host-root /host")


def covered_by_mount(path, mounts):
    """The container path `path` lies in a hostPath mount (the mount itself or below it)."""
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def check_platform(c, platform, docs, args):
    where = f"components/{platform}"
    want = PLATFORMS[platform]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    flags = parse_flags(configmap["data"]["agent.flags"])
    base = parse_flags(yaml.safe_load(
        (args.source_dir / "deploy/base/configmap.yaml").read_text())["data"]["agent.flags"])
    # The component's flags file is a whole copy: it must keep every base flag that is not a
    # path of the node (those are the component's to set).
    for name, value in base:
        if not value.startswith("/host/"):
            c.check((name, value) in flags, f"{where}: flags lost the base's {name} {value}")
    given = {}
    for name, value in flags:
        given.setdefault(name, []).append(value)
    c.check(given.get("--cni-conf-dir") == [want["cni"]],
            f"{where}: --cni-conf-dir {given.get('--cni-conf-dir')} != {want['cni']}")
    c.check(given.get("--cri-endpoint") == ["unix:///host" + want["cri"]],
            f"{where}: --cri-endpoint {given.get('--cri-endpoint')} != unix:///host{want['cri']}")
    c.check(sorted(given.get("--netns-dir", [])) == sorted("/host" + p for p in want["netns"]),
            f"{where}: --netns-dir {given.get('--netns-dir')} != /host + {want['netns']}")
    # Every path the flags name is inside a read-only hostPath mount of that same host path.
    mounts = host_mounts(ds)
    named = (["/host" + want["cni"]] if want["cni"].startswith("/") else []) + \
        ["/host" + want["cri"]] + ["/host" + p for p in want["netns"]]
    for path in named:
        c.check(covered_by_mount(path, mounts), f"{where}: {path} is not inside any hostPath mount")
    for path in ["/host" + p for p in want["netns"]] + ["/host" + os.path.dirname(want["cri"])]:
        holder = max((m for m in mounts if covered_by_mount(path, [m])), key=len, default=None)
        if holder and holder != "/host/proc":
            c.check(mounts[holder][2].get("mountPropagation") == "HostToContainer",
                    f"{where}: {holder} needs HostToContainer (new netns pins, a restarted "
                    "runtime)")
    check_host_volumes(c, where, ds)
    spec = ds["spec"]["template"]["spec"]
    if platform == "openshift":
        check_openshift(c, where, docs, ds)
    if platform == "gke":
        quota = [d for d in docs if d["kind"] == "ResourceQuota"]
        c.check(any(e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and
                    spec["priorityClassName"] in e.get("values", [])
                    for q in quota for e in q["spec"].get("scopeSelector", {})
                    .get("matchExpressions", [])),
                f"{where}: no ResourceQuota scoped to priority class {spec['priorityClassName']}")
    # The real binary accepts the component's flags file.
    if args.binary and pathlib.Path(args.binary).exists():
        flags_file = args.work_dir / f"{platform}.flags"
        flags_file.write_text(configmap["data"]["agent.flags"])
        result = run([args.binary, "report", "--config", str(flags_file), "--help"], timeout=20)
        text = result.stdout + result.stderr
        c.check(result.returncode == 0 and "unknown" not in text.lower(),
                f"{where}: report rejects the flags: {text.strip()[:300]}")


def check_kube_api_access(c, where, docs, with_api):
    """Read-only Kubernetes API access: istio-cni's read rule and nothing else, bound to the
    DaemonSet's ServiceAccount, the credentials in a read-only projected volume with a bound,
    expiring token; or, without API access, no RBAC for it, no token and `--no-kube-api`."""
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    container = spec["containers"][0]
    account = spec.get("serviceAccountName")
    subject = {"kind": "ServiceAccount", "name": account, "namespace": "istio-system"}
    sa = next((d for d in docs if d["kind"] == "ServiceAccount" and
               d["metadata"]["name"] == account), None)
    c.check(sa is not None, f"{where}: no ServiceAccount {account} (the DaemonSet's)")
    # The token reaches the agent only through the explicit volume below, never the automount.
    c.check(spec.get("automountServiceAccountToken") is False and sa is not None and
            sa.get("automountServiceAccountToken") is False,
            f"{where}: automountServiceAccountToken must be false on the pod and the "
            "ServiceAccount")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("ClusterRole", "Role")}
    for name, role in roles.items():
        for rule in role.get("rules", []):
            scc_use = (rule.get("apiGroups") == ["security.openshift.io"] and
                       rule.get("resources") == ["securitycontextconstraints"] and
                       rule.get("verbs") == ["use"] and
                       rule.get("resourceNames") == ["ambient-doctor"])
            read = {k: sorted(v) for k, v in rule.items()} == KUBE_READ_RULE
            c.check(scc_use or (read and with_api),
                    f"{where}: {role['kind']} {name} grants {rule}: " +
                    ("only get, list and watch on pods, namespaces and nodes (and OpenShift's SCC "
                     "`use`)" if with_api else "only OpenShift's SCC `use` without API access"))
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    reader = [b for b in bindings if b["roleRef"]["name"] == "ambient-doctor"]
    mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == SA_DIR]
    volumes = {v["name"]: v for v in spec["volumes"]}
    tokens = [v["name"] for v in spec["volumes"]
              if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))]
    args = container.get("args", [])
    if not with_api:
        c.check(not reader and "ambient-doctor" not in roles,
                f"{where}: RBAC for the Kubernetes API without API access")
        c.check(not mounts and not tokens, f"{where}: a service-account token without API access")
        c.check("--no-kube-api" in args, f"{where}: the daemon lacks --no-kube-api")
        return
    c.check("--no-kube-api" not in args, f"{where}: --no-kube-api with API access")
    c.check(roles.get("ambient-doctor", {}).get("kind") == "ClusterRole" and
            [{k: sorted(v) for k, v in r.items()} for r in roles["ambient-doctor"]["rules"]] ==
            [KUBE_READ_RULE],
            f"{where}: no ClusterRole ambient-doctor with exactly {KUBE_READ_RULE}")
    c.check(len(reader) == 1 and reader[0]["kind"] == "ClusterRoleBinding" and
            reader[0]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                     "kind": "ClusterRole", "name": "ambient-doctor"} and
            reader[0].get("subjects") == [subject],
            f"{where}: the ClusterRoleBinding of ambient-doctor does not bind exactly {subject}")
    if not c.check(len(mounts) == 1, f"{where}: no mount at {SA_DIR}"):
        return
    c.check(mounts[0].get("readOnly") is True, f"{where}: the token mount {SA_DIR} not read-only")
    sources = volumes.get(mounts[0]["name"], {}).get("projected", {}).get("sources", [])
    token = next((s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s), {})
    c.check(token.get("path") == "token" and token.get("expirationSeconds") == TOKEN_SECONDS and
            "audience" not in token,
            f"{where}: {SA_DIR}/token is not a bound token of the API server's audience expiring "
            f"after {TOKEN_SECONDS} s: {token}")
    c.check({"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}} in sources,
            f"{where}: {SA_DIR}/ca.crt is not the kube-root-ca.crt ConfigMap's ca.crt")
    c.check({"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}} in sources,
            f"{where}: {SA_DIR}/namespace is not the pod's namespace (downward API)")
    c.check(tokens == [mounts[0]["name"]], f"{where}: token volumes {tokens}: one, mounted")


def check_daemon_accepts_args(c, where, docs, args):
    """The real binary accepts the rendered DaemonSet's args with its ConfigMap's flags file."""
    if not (args.binary and pathlib.Path(args.binary).exists()):
        return
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    flags_file = args.work_dir / (where.replace("/", "_") + ".flags")
    flags_file.write_text(configmap["data"]["agent.flags"])
    argv = [args.binary] + [str(flags_file) if a == "/etc/ambient-doctor/agent.flags" else a
                            for a in ds["spec"]["template"]["spec"]["containers"][0]["args"]]
    result = run(argv + ["--help"], timeout=20)
    text = result.stdout + result.stderr
    c.check(result.returncode == 0 and "unknown" not in text.lower(),
            f"{where}: serve rejects the DaemonSet's args: {text.strip()[:300]}")


def check_openshift(c, where, docs, ds):
    spec = ds["spec"]["template"]["spec"]
    c.check(spec.get("securityContext", {}).get("seLinuxOptions", {}).get("type") == "spc_t",
            f"{where}: pod SELinux type is not spc_t")
    scc = next((d for d in docs if d["kind"] == "SecurityContextConstraints"), None)
    if not c.check(scc is not None, f"{where}: no SecurityContextConstraints"):
        return
    container = spec["containers"][0]
    caps = set(container["securityContext"]["capabilities"]["add"])
    c.check(caps | {"BPF", "PERFMON"} == set(scc.get("allowedCapabilities") or []),
            f"{where}: SCC allowedCapabilities {scc.get('allowedCapabilities')} != the "
            f"DaemonSet's {sorted(caps)} + the tracer's BPF, PERFMON")
    c.check(scc.get("allowHostPID") is True and scc.get("allowHostDirVolumePlugin") is True,
            f"{where}: SCC must allow hostPID and hostPath")
    c.check(not scc.get("allowPrivilegedContainer") and not scc.get("allowHostNetwork"),
            f"{where}: SCC allows more than the DaemonSet needs")
    kinds = {k for v in spec["volumes"] for k in v if k != "name"}
    c.check(kinds <= set(scc.get("volumes") or []), f"{where}: SCC volumes lack {kinds}")
    c.check(scc.get("runAsUser", {}).get("type") == "RunAsAny", f"{where}: SCC must admit uid 0")
    role = next((d for d in docs if d["kind"] == "ClusterRole" and any(
        "securitycontextconstraints" in r.get("resources", []) and "use" in r.get("verbs", []) and
        scc["metadata"]["name"] in r.get("resourceNames", []) for r in d["rules"])), None)
    binding = role and next((d for d in docs if d["kind"] == "RoleBinding" and
                             d["roleRef"]["name"] == role["metadata"]["name"]), None)
    c.check(binding is not None and {"kind": "ServiceAccount", "name": spec["serviceAccountName"],
                                     "namespace": "istio-system"} in binding["subjects"],
            f"{where}: the ServiceAccount is not granted `use` of the SCC")


def check_policy_example(c, name, docs):
    """The exceptions name the agent's objects in istio-system only."""
    for d in docs:
        where = f"deploy/{name}: {d['kind']}/{d['metadata']['name']}"
        if d["kind"] == "PolicyException":
            for entry in d["spec"]["match"].get("any", []):
                resources = entry["resources"]
                c.check(resources.get("namespaces") == ["istio-system"] and
                        all(n.startswith("ambient-doctor") for n in resources.get("names", [""])),
                        f"{where}: matches more than the agent's objects in istio-system")
            for exception in d["spec"]["exceptions"]:
                rules = exception["ruleNames"]
                c.check(all(f"autogen-{r}" in rules for r in rules if not r.startswith("autogen-")),
                        f"{where}: {exception['policyName']}: the DaemonSet needs the autogen- "
                        "rules")
        elif d["apiVersion"].startswith("constraints.gatekeeper.sh/"):
            match = d["spec"]["match"]
            c.check(match.get("namespaces") == ["istio-system"] and
                    match.get("labelSelector", {}).get("matchLabels") == {"app": "ambient-doctor"},
                    f"{where}: applies beyond the agent's pods in istio-system")


def check_conventions(args, ds_text=None):
    c = Checker()
    base = args.source_dir / "deploy/base"
    ds_text = ds_text if ds_text is not None else (base / "daemonset.yaml").read_text()
    ds = yaml.safe_load(ds_text)
    meta_labels = ds["metadata"].get("labels", {})
    pod = ds["spec"]["template"]
    labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    container = spec["containers"][0]
    security = container["securityContext"]
    c.check(ds["spec"]["selector"]["matchLabels"] == {"app": "ambient-doctor"}, "selector app")
    c.check(meta_labels.get("app") == "ambient-doctor", "DaemonSet label app")
    c.check(labels.get("sidecar.istio.io/inject") == "false", "pod label sidecar.istio.io/inject")
    c.check(labels.get("istio.io/dataplane-mode") == "none", "pod label istio.io/dataplane-mode")
    c.check(labels.get("app.kubernetes.io/name") == "ambient-doctor", "app.kubernetes.io/name")
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    c.check(kustomization.get("namespace") == "istio-system", "namespace istio-system")
    common = {k: v for entry in kustomization.get("labels", []) for k, v in entry["pairs"].items()}
    c.check(common.get("app.kubernetes.io/part-of") == "istio", "app.kubernetes.io/part-of")
    # The release version (CMake's) labels the objects and tags the placeholder image.
    version = cmake_version(args.source_dir)
    c.check(common.get("app.kubernetes.io/version") == version,
            f"label app.kubernetes.io/version {common.get('app.kubernetes.io/version')} != {version}")
    images = {i.get("name"): i for i in kustomization.get("images", [])}
    image = images.get(container["image"], {})
    c.check(str(image.get("newTag")) == version, f"image tag {image.get('newTag')} != {version}")
    c.check(str(image.get("newName", "")).endswith("/ambient-doctor"),
            "image newName is <registry>/ambient-doctor (a placeholder users override)")
    c.check(spec.get("priorityClassName") == "system-node-critical", "priorityClassName")
    c.check(spec.get("nodeSelector") == {"kubernetes.io/os": "linux"}, "linux nodes only")
    tolerations = spec.get("tolerations", [])
    c.check({"effect": "NoSchedule", "operator": "Exists"} in tolerations and
            {"effect": "NoExecute", "operator": "Exists"} in tolerations and
            {"key": "CriticalAddonsOnly", "operator": "Exists"} in tolerations,
            "tolerate every taint")
    strategy = ds["spec"].get("updateStrategy", {})
    c.check(strategy.get("type") == "RollingUpdate" and
            "maxUnavailable" in strategy.get("rollingUpdate", {}), "rolling update maxUnavailable")
    c.check(spec.get("hostPID") is True, "hostPID: true")
    c.check(not spec.get("hostNetwork"), "no hostNetwork")
    c.check(security.get("privileged") is False, "not privileged")
    # Kubernetes counts CAP_SYS_ADMIN as privilege escalation: ztunnel says so with `true`; a
    # container without it has no reason to allow escalation.
    escalates = "SYS_ADMIN" in security.get("capabilities", {}).get("add", [])
    c.check(security.get("allowPrivilegeEscalation") is escalates,
            f"allowPrivilegeEscalation must be {escalates} (SYS_ADMIN {'' if escalates else 'not '}added)")
    c.check(security.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    caps = security.get("capabilities", {})
    c.check(caps.get("drop") == ["ALL"], "drop ALL")
    c.check(set(caps.get("add", [])) == EXPECTED_CAPABILITIES,
            f"capabilities {caps.get('add')} != {sorted(EXPECTED_CAPABILITIES)}")
    # Every added capability carries a comment saying why (on its line).
    for cap in caps.get("add", []):
        line = next((l for l in ds_text.splitlines() if re.match(rf"\s*- {cap}\b", l)), "")
        c.check("#" in line and len(line.split("#", 1)[1].strip()) > 10,
                f"capability {cap} has no comment saying why")
    # Probes and the metrics port agree with the args.
    args_list = container["args"]
    c.check(args_list[0] == "serve", "the container runs `serve`")
    address = args_list[args_list.index("--metrics-address") + 1]
    port = int(address.rsplit(":", 1)[1])
    c.check(port == 9977, "metrics on :9977")
    c.check(container["ports"][0]["containerPort"] == port, "containerPort matches --metrics-address")
    c.check(pod["metadata"]["annotations"].get("prometheus.io/port") == str(port), "scrape annotation")
    for probe in ("livenessProbe", "readinessProbe"):
        get = container.get(probe, {}).get("httpGet", {})
        c.check(get.get("path") == "/healthz" and get.get("port") == port, f"{probe} on /healthz")
    env = {e["name"]: e for e in container.get("env", [])}
    c.check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") ==
            "spec.nodeName", "NODE_NAME from the downward API")
    resources = container.get("resources", {})
    c.check(set(resources.get("requests", {})) == {"cpu", "memory"} and
            set(resources.get("limits", {})) == {"cpu", "memory"}, "requests and limits")
    # Mounts: every hostPath read-only; netns pins with HostToContainer propagation.
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            c.check(mount.get("readOnly") is True, f"hostPath mount {mount['mountPath']} read-only")
    for path, host in [("/host/proc", "/proc"), ("/host/var/run/netns", "/var/run/netns"),
                       ("/host/var/run/ztunnel", "/var/run/ztunnel"),
                       ("/host/etc/cni/net.d", "/etc/cni/net.d"),
                       ("/host/run/containerd", "/run/containerd"), ("/host/run/crio", "/run/crio")]:
        mount = mounts.get(path)
        if c.check(mount is not None, f"mount {path}"):
            c.check(volumes[mount["name"]].get("hostPath", {}).get("path") == host,
                    f"{path} is the host's {host}")
    for path in ("/host/var/run/netns", "/host/run/containerd"):
        c.check(mounts.get(path, {}).get("mountPropagation") == "HostToContainer",
                f"{path} HostToContainer")
    # Host volumes: typed, mounted read-only under /host, none the runtime cannot create (BTF
    # comes from the container's own sysfs: a /sys/kernel/btf hostPath would block the pod on a
    # kernel without BTF).
    check_host_volumes(c, "base", ds)
    c.check(not any(v.get("hostPath", {}).get("path", "").startswith("/sys/kernel/btf")
                    for v in spec["volumes"]), "no /sys/kernel/btf hostPath")
    api = mounts.get("/run/ambient-doctor")
    c.check(api is not None and "emptyDir" in volumes[api["name"]], "emptyDir for the API socket")
    # The flags file and the daemon's flags are accepted by the real binary.
    flags = yaml.safe_load((base / "configmap.yaml").read_text())["data"]["agent.flags"]
    flags_file = args.work_dir / "agent.flags"
    flags_file.write_text(flags)
    sa = yaml.safe_load((base / "serviceaccount.yaml").read_text())
    c.check(sa.get("automountServiceAccountToken") is False and
            spec.get("automountServiceAccountToken") is False,
            "no automounted token (the DaemonSet mounts its own, read-only)")
    token = mounts.get(SA_DIR)
    c.check(token is not None and token.get("readOnly") is True and
            "projected" in volumes.get(token["name"], {}),
            f"the token volume at {SA_DIR}: projected, mounted read-only")
    if args.binary and pathlib.Path(args.binary).exists():
        # Unknown flags fail at parse time (exit 2 with "unknown flag"); a scan of the missing
        # host paths fails later with its own message, which is fine here.
        for command in (["report"], args_list):
            argv = [args.binary] + [a if a != "/etc/ambient-doctor/agent.flags" else str(flags_file)
                                    for a in command]
            if command == ["report"]:
                argv += ["--config", str(flags_file)]
            argv += ["--help"] if command != ["report"] else []
            result = run(argv, timeout=20)
            text = result.stdout + result.stderr
            c.check("unknown" not in text.lower() and "usage error" not in text.lower(),
                    f"{' '.join(command[:1])} rejects the deploy flags: {text.strip()[:300]}")
        # The flags file's commented examples ("#   --flag value") are flags report accepts
        # (given as arguments: --help skips checking a --config file's flags).
        examples = [w for line in flags.splitlines()
                    if re.match(r"\s*#\s+--[a-z]", line) for w in line.strip("# ").split()]
        c.check(examples, "agent.flags has no commented flag examples")
        result = run([args.binary, "report", "--config", str(flags_file)] + examples + ["--help"],
                     timeout=20)
        text = result.stdout + result.stderr
        c.check(result.returncode == 0 and "unknown" not in text.lower(),
                f"report rejects agent.flags' commented examples {examples}: {text.strip()[:300]}")
    return c.finish("conventions")


def check_rules(args):
    c = Checker()
    if not shutil.which("promtool"):
        return skip("promtool not installed (Debian prometheus, scripts/setup)")
    groups = extract_rule_groups(args.source_dir)
    rules_file = args.work_dir / "rules.yaml"
    write_rule_file(groups, rules_file)
    result = run(["promtool", "check", "rules", str(rules_file)])
    print(result.stdout + result.stderr)
    c.check(result.returncode == 0, "promtool check rules")
    shutil.copy(args.source_dir / "tests/deploy/alerts_test.yaml", args.work_dir / "alerts_test.yaml")
    result = run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=args.work_dir)
    print(result.stdout + result.stderr)
    c.check(result.returncode == 0, "promtool test rules")
    tests = yaml.safe_load((args.source_dir / "tests/deploy/alerts_test.yaml").read_text())["tests"]
    tested = {}
    for test in tests:
        for case in test.get("alert_rule_test", []):
            tested.setdefault(case["alertname"], []).append(bool(case.get("exp_alerts")))
    for rule in (r for g in groups for r in g["rules"] if "alert" in r):
        name = rule["alert"]
        cases = tested.get(name, [])
        c.check(True in cases and False in cases,
                f"{name}: needs a unit test that fires and one that does not")
        for problem in aggregation_problems(rule["expr"]):
            c.check(False, f"{name}: {problem}")
        c.check(rule.get("labels", {}).get("severity") in {"critical", "warning", "info"},
                f"{name}: severity label")
        url = rule.get("annotations", {}).get("runbook_url", "")
        c.check(url.endswith(f"/docs/runbooks/{name}.md"), f"{name}: runbook_url {url}")
        c.check("for" in rule, f"{name}: no `for:` (pages on a blip)")
    return c.finish("rules")


def aggregation_problems(expr):
    """Every aggregation keeps cluster and namespace, and some keep node (a node-level alert)."""
    problems = []
    text = strip_strings(expr)
    groupings = re.findall(r"\b(?:sum|max|min|avg|count)\s+by\s*\(([^)]*)\)", text)
    if re.search(r"\b(?:sum|max|min|avg|count)\s*\(", text):
        problems.append("an aggregation without `by (...)` drops every label")
    for grouping in groupings:
        labels = {l.strip() for l in grouping.split(",")}
        missing = [l for l in ALERT_LABELS if l not in labels]
        if missing:
            problems.append(f"`by ({grouping})` drops {', '.join(missing)}")
    if not any("node" in {l.strip() for l in g.split(",")} for g in groupings):
        problems.append("no aggregation keeps the node label")
    return problems


def check_runbooks(args):
    c = Checker()
    for rule in alert_rules(args.source_dir):
        page = args.source_dir / "docs/runbooks" / f"{rule['alert']}.md"
        if not c.check(page.exists(), f"{page} missing"):
            continue
        text = page.read_text()
        c.check(text.startswith(f"# {rule['alert']}\n"), f"{page.name}: title")
        headings = [h for h in re.findall(r"^## .*", text, re.M) if h in RUNBOOK_SECTIONS]
        for section in RUNBOOK_SECTIONS:
            c.check(section in headings, f"{page.name}: section '{section}' missing")
        c.check(headings == [s for s in RUNBOOK_SECTIONS if s in headings],
                f"{page.name}: sections out of order {headings} (want {RUNBOOK_SECTIONS})")
        escalation = text.split("## Escalation", 1)[-1]
        c.check("ambient-doctor" in escalation and "github.com/" in escalation,
                f"{page.name}: escalation must say what to collect and where to file it")
        confirm = text.split("## Confirm", 1)[-1].split("## ", 1)[0]
        c.check("ambient-doctor report" in confirm, f"{page.name}: confirm with ambient-doctor report")
        causes = text.split("## Likely causes", 1)[-1].split("## ", 1)[0]
        # Mesh alerts cite the Istio releases/issues behind them; the agent's own alerts cannot.
        c.check(rule["alert"].startswith("AmbientDoctor") or re.search(r"#\d{3,}|1\.\d\d\.\d", causes) is not None,
                f"{page.name}: likely causes cite no Istio release or issue")
    pages = {p.stem for p in (args.source_dir / "docs/runbooks").glob("*.md")} - {"README"}
    for orphan in sorted(pages - {r["alert"] for r in alert_rules(args.source_dir)}):
        c.check(False, f"docs/runbooks/{orphan}.md has no alert in the PrometheusRule")
    return c.finish("runbooks")


def codes_covered(expr):
    """Finding codes an alert expression selects: code matchers of ambient_doctor_findings,
    redirect states of ambient_doctor_pods (a negative matcher covers every other state), and
    one-code metrics."""
    covered = set()
    for metric, label, op, value in label_matchers(expr):
        values = set(value.split("|"))
        if metric == "ambient_doctor_findings" and label == "code" and op in ("=", "=~"):
            covered |= values
        elif metric == "ambient_doctor_pods" and label == "redirect_state":
            states = values if op in ("=", "=~") else set(STATE_CODES) - values
            covered |= {STATE_CODES[s] for s in states if STATE_CODES.get(s)}
    covered |= {code for metric, code in METRIC_CODES.items() if metric in metric_names(expr)}
    return covered


def table_problems(rules, codes):
    """The findings table (`findings -o json`) and the PrometheusRule disagree: a named alert is
    missing or does not select its code, a code an expression names maps to another alert, or a
    critical code does not page as critical."""
    problems = []
    by_name = {r["alert"]: r for r in rules}
    for entry in codes:
        code, alert = entry["code"], entry.get("alert", "")
        if not alert:
            if entry["severity"] == "critical":
                problems.append(f"{code} is critical but no alert pages for it")
            continue
        if entry.get("runbook") != f"docs/runbooks/{alert}.md":
            problems.append(f"{code}: runbook {entry.get('runbook')} is not {alert}'s page")
        rule = by_name.get(alert)
        if rule is None:
            problems.append(f"{code}: its alert {alert} is not in the PrometheusRule")
            continue
        if code not in codes_covered(rule["expr"]):
            problems.append(f"{code}: its alert {alert} does not select it ({rule['expr']})")
        if entry["severity"] == "critical" and rule.get("labels", {}).get("severity") != "critical":
            problems.append(f"{code} is critical but its alert {alert} pages as "
                            f"{rule.get('labels', {}).get('severity')}")
    table = {e["code"]: e.get("alert", "") for e in codes}
    for rule in rules:
        for metric, label, op, value in label_matchers(rule["expr"]):
            if metric != "ambient_doctor_findings" or label != "code" or op not in ("=", "=~"):
                continue
            for code in value.split("|"):
                if code not in table:
                    problems.append(f"{rule['alert']}: unknown finding code {code}")
                elif table[code] != rule["alert"]:
                    problems.append(f"{rule['alert']} selects {code}, whose alert column says "
                                    f"{table[code] or 'no alert'}")
    return problems


def check_table(args):
    """The findings table, the PrometheusRule and the runbooks agree (the alert tables of the
    README and the runbook index are generated from them: docs_test runs scripts/gen-docs
    --check)."""
    c = Checker()
    if not args.binary or not pathlib.Path(args.binary).exists():
        return skip(f"binary {args.binary} not built")
    result = run([args.binary, "findings", "-o", "json"])
    if not c.check(result.returncode == 0, f"findings -o json: {result.stderr.strip()}"):
        return c.finish("table")
    codes = json.loads(result.stdout)
    rules = alert_rules(args.source_dir)
    for problem in table_problems(rules, codes):
        c.check(False, problem)
    paged = {e["alert"] for e in codes if e.get("alert")}
    print(f"{len(codes)} codes, {len(paged)} of the {len(rules)} alerts page for codes")
    return c.finish("table")


INHIBIT_EXAMPLE = "deploy/monitoring/alertmanager-inhibit.example.yaml"


def inhibit_problems(config, rules):
    """The example inhibit rules mute AmbientRedirectDrift under the critical alerts, on the
    same cluster and node, and name only alerts that exist."""
    problems = []
    names = {r["alert"] for r in rules}
    critical = {r["alert"] for r in rules if r.get("labels", {}).get("severity") == "critical"}
    inhibits = config.get("inhibit_rules") or []
    drift = [r for r in inhibits if 'alertname="AmbientRedirectDrift"' in r.get("target_matchers", [])]
    if not drift:
        problems.append("no inhibit rule targets AmbientRedirectDrift")
    for rule in drift:
        sources = rule.get("source_matchers", [])
        if 'severity="critical"' not in sources:
            problems.append(f"the drift inhibit rule's sources are not the critical alerts: {sources}")
        pattern = next((m.split("=~", 1)[1].strip('"') for m in sources
                        if m.startswith("alertname=~")), ".*")
        muted_by = {n for n in critical if re.fullmatch(pattern, n)}
        for name in sorted(critical - muted_by):
            problems.append(f"the critical alert {name} does not inhibit drift")
        if not {"cluster", "node"} <= set(rule.get("equal", [])):
            problems.append(f"the drift inhibit rule must be per cluster and node: {rule.get('equal')}")
    for rule in inhibits:
        for matcher in rule.get("source_matchers", []) + rule.get("target_matchers", []):
            if matcher.startswith("alertname=") and not matcher.startswith("alertname=~"):
                name = matcher.split("=", 1)[1].strip('"')
                if name not in names:
                    problems.append(f"inhibit rule names the unknown alert {name}")
    return problems


def check_inhibit(args):
    c = Checker()
    path = args.source_dir / INHIBIT_EXAMPLE
    config = yaml.safe_load(path.read_text())
    for problem in inhibit_problems(config, alert_rules(args.source_dir)):
        c.check(False, problem)
    if shutil.which("amtool"):
        result = run(["amtool", "check-config", str(path)])
        print(result.stdout + result.stderr)
        c.check(result.returncode == 0, f"amtool check-config {INHIBIT_EXAMPLE}")
    else:
        print("SKIP-PART: amtool not installed; alerts_live_test loads the file into Alertmanager")
    return c.finish("inhibit")


def runtime_packages(containerfile_text, stage="runtime"):
    """The packages a stage of the Containerfile installs with apt-get."""
    stages = re.split(r"(?m)^FROM\s+", containerfile_text)
    runtime = next((s for s in stages if re.match(r"\S+\s+AS\s+" + stage, s, re.I)), "")
    joined = re.sub(r"\\\n", " ", runtime)
    packages = set()
    for match in re.finditer(r"apt-get install ([^&\n]*)", joined):
        packages |= {t for t in match.group(1).split() if not t.startswith("-")}
    return packages


def owner_package(library):
    candidates = [library, os.path.realpath(library)]
    for path in list(candidates):
        if path.startswith("/usr/lib/"):
            candidates.append(path[len("/usr"):])
        elif path.startswith("/lib"):
            candidates.append("/usr" + path)
    for path in candidates:
        result = run(["dpkg", "-S", path])
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].strip()
    return None


def check_image(args):
    c = Checker()
    if not shutil.which("dpkg") or not shutil.which("ldd"):
        return skip("dpkg/ldd not available (not a Debian machine)")
    binary = pathlib.Path(args.binary or "")
    if not binary.exists():
        return skip(f"binary {binary} not built")
    result = run(["ldd", str(binary)])
    c.check(result.returncode == 0, f"ldd failed: {result.stderr}")
    needed = {}
    for line in result.stdout.splitlines():
        match = re.search(r"=>\s*(/\S+)|^\s*(/\S+)\s+\(", line)
        if not match:
            continue  # linux-vdso
        library = match.group(1) or match.group(2)
        package = owner_package(library)
        if c.check(package is not None, f"no Debian package owns {library}"):
            needed.setdefault(package, []).append(os.path.basename(library))
    containerfile = (args.source_dir / "deploy/Containerfile").read_text()
    listed = runtime_packages(containerfile)
    compare_packages(c, needed, listed)
    # The build stage needs every build package scripts/setup installs for the agent (libraries,
    # compilers, the BPF toolchain), or the image build fails where CI cannot see it.
    build = runtime_packages(containerfile, "build")
    for package in setup_build_packages(args.source_dir / "scripts/setup"):
        c.check(package in build, f"build stage lacks {package} (scripts/setup installs it)")
    return c.finish("image")


# Packages of scripts/setup that only tests, fuzzing, the lab or formatting use.
NOT_FOR_THE_IMAGE_BUILD = {"clang-format", "libclang-rt-14-dev"}


def setup_build_packages(setup_path):
    """-dev packages and toolchain packages from scripts/setup's PACKAGES list."""
    text = setup_path.read_text()
    match = re.search(r"PACKAGES=\((.*?)\)", text, re.S)
    names = match.group(1).split() if match else []
    toolchain = {"build-essential", "cmake", "pkg-config", "ninja-build", "clang", "llvm",
                 "bpftool", "protobuf-compiler", "protobuf-compiler-grpc"}
    return sorted(n for n in names if (n.endswith("-dev") or n in toolchain)
                  and n not in NOT_FOR_THE_IMAGE_BUILD)


def compare_packages(c, needed, listed):
    for package, libraries in sorted(needed.items()):
        print(f"{package}: {', '.join(libraries)}")
        c.check(package in listed, f"runtime stage lacks {package} ({', '.join(libraries)})")
    for package in sorted(listed - set(needed)):
        c.check(False, f"runtime stage installs {package}, which no linked library needs")


def check_dashboard(args):
    c = Checker()
    path = args.source_dir / "deploy/grafana/ambient-doctor.json"
    try:
        dashboard = json.loads(path.read_text())
    except ValueError as error:
        print(f"FAIL {path}: invalid JSON: {error}")
        return 1
    lint_dashboard(c, dashboard, args.work_dir, finding_codes(args.binary))
    # The generator and the committed JSON agree (nobody edited one and forgot the other).
    generated = run(["/usr/bin/python3", "-c",
                     "import json,sys; sys.path.insert(0, sys.argv[1]); import generate; "
                     "print(json.dumps(generate.build(), indent=2))",
                     str(args.source_dir / "deploy/grafana")])
    c.check(generated.returncode == 0 and generated.stdout == path.read_text(),
            "ambient-doctor.json differs from deploy/grafana/generate.py's output (run it)")
    return c.finish("dashboard")


def finding_codes(binary):
    """The finding codes the built binary knows (`findings -o json`); None when not built."""
    if not binary or not pathlib.Path(binary).exists():
        print("SKIP-PART: binary not built, finding codes of the panels not checked")
        return None
    result = run([binary, "findings", "-o", "json"])
    if result.returncode != 0:
        return set()  # every code in a panel then fails, naming the cause
    return {entry["code"] for entry in json.loads(result.stdout)}


def lint_dashboard(c, dashboard, work, codes=None):
    c.check(isinstance(dashboard.get("uid"), str) and 0 < len(dashboard["uid"]) <= 40, "uid")
    c.check(bool(dashboard.get("title")), "title")
    c.check(isinstance(dashboard.get("schemaVersion"), int), "numeric schemaVersion")
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    c.check(variables.get("datasource", {}).get("type") == "datasource", "$datasource variable")
    c.check(variables.get("datasource", {}).get("query") == "prometheus", "$datasource prometheus")
    c.check("node" in variables, "$node variable")
    c.check(variables.get("cluster", {}).get("type") == "query", "$cluster variable")
    builtins = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
    ids = set()

    def walk(panels):
        for panel in panels:
            where = f"panel {panel.get('id')} \"{panel.get('title', '')}\""
            c.check(isinstance(panel.get("id"), int), f"{where}: no id")
            c.check(panel.get("id") not in ids, f"{where}: duplicate panel id")
            ids.add(panel.get("id"))
            c.check("gridPos" in panel, f"{where}: no gridPos")
            for holder in [panel] + panel.get("targets", []):
                ds = holder.get("datasource")
                if isinstance(ds, dict):
                    c.check(ds.get("uid") in ("${datasource}", "$datasource", "-- Mixed --",
                                              "-- Grafana --"),
                            f"{where}: hard-coded datasource {json.dumps(ds)}")
            unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
            if unit == "bytes":
                for t in panel.get("targets", []):
                    for name in metric_names(substitute_grafana(t.get("expr", ""))):
                        c.check("bytes" in name, f"{where}: unit bytes for {name}")
            for t in panel.get("targets", []):
                for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", t.get("expr", "")):
                    c.check(var in variables or var in builtins,
                            f"{where} ref {t.get('refId')}: uses undefined variable ${var}")
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    queries = dashboard_queries(dashboard)
    for panel_id, title, ref, expr in queries:
        # The agent's namespace is the user's choice: a literal one is a panel without data.
        for metric, label, op, value in label_matchers(expr):
            c.check(label != "namespace" or value.startswith("$"),
                    f"panel {panel_id} \"{title}\" ref {ref}: hard-coded {label}{op}\"{value}\"")
        for name in metric_names(substitute_grafana(expr)):
            c.check(name.startswith("ambient_doctor_") or name in EXTERNAL_METRICS,
                    f"panel {panel_id} \"{title}\" ref {ref}: unknown metric {name}")
        if codes is None:
            continue
        # A misspelt or renamed code is a panel that stays at "no data" forever.
        for metric, label, op, value in label_matchers(substitute_grafana(expr)):
            if metric.startswith("ambient_doctor_") and label == "code" and op in ("=", "=~"):
                for code in value.split("|"):
                    c.check(code in codes, f"panel {panel_id} \"{title}\" ref {ref}: unknown "
                            f"finding code {code} (not in `ambient-doctor findings`)")
    if not shutil.which("promtool"):
        print("SKIP-PART: promtool not installed, PromQL not parsed")
    else:
        named = [(f"panel {p} \"{t}\" ref {r}", substitute_grafana(e)) for p, t, r, e in queries]
        for error in promtool_check_expressions(named, work):
            c.check(False, error)
    print(f"{len(ids)} panels, {len(queries)} queries")


def check_selftest(args):
    """The checks are not vacuous: broken copies of each input must be caught, by name."""
    c = Checker()

    def expect(failures, wanted, what):
        text = "\n".join(failures)
        for needle in wanted:
            c.check(needle in text, f"{what}: no failure mentioning {needle!r} in: {text[:600]}")

    # PromQL reference extraction.
    names = metric_names('sum by (node, code) (rate(foo_total{a="b",c=~"x|y"}[5m])) > 0 '
                         'and on (node) histogram_quantile(0.9, bar_bucket) offset 5m')
    c.check(names == {"foo_total", "bar_bucket"}, f"metric_names: {names}")
    c.check(label_matchers('m{a="b", c=~"x|y"}') == [("m", "a", "=", "b"), ("m", "c", "=~", "x|y")],
            "label_matchers")

    # DaemonSet conventions.
    ds = (args.source_dir / "deploy/base/daemonset.yaml").read_text()
    broken = (ds.replace("privileged: false", "privileged: true")
                .replace("allowPrivilegeEscalation: true", "allowPrivilegeEscalation: false")
                .replace("hostPID: true", "hostPID: false\n      hostNetwork: true")
                .replace("- NET_RAW  #", "- NET_RAW\n                - SYS_MODULE  #")
                .replace("readOnly: true\n              mountPropagation: HostToContainer",
                         "mountPropagation: HostToContainer", 1)
                .replace("automountServiceAccountToken: false",
                         "automountServiceAccountToken: true")
                .replace(f"mountPath: {SA_DIR}\n              readOnly: true",
                         f"mountPath: {SA_DIR}"))
    broken = re.sub(r"(- SYS_PTRACE)\s+#.*", r"\1", broken)
    original_finish = Checker.finish
    Checker.finish = lambda self, what: self.failures  # collect instead of printing
    try:
        failures = check_conventions(argparse.Namespace(source_dir=args.source_dir,
                                                        work_dir=args.work_dir, binary=""), broken)
    finally:
        Checker.finish = original_finish
    expect(failures, ["not privileged", "allowPrivilegeEscalation must be True", "hostPID: true", "no hostNetwork", "SYS_MODULE",
                      "capability SYS_PTRACE has no comment",
                      "hostPath mount /host/var/run/netns read-only", "no automounted token",
                      f"the token volume at {SA_DIR}: projected, mounted read-only"], "conventions")

    # Image packages: a missing and a superfluous package.
    sub = Checker()
    listed = runtime_packages("FROM x AS build\nRUN apt-get install -y gcc\n"
                              "FROM y AS runtime\nRUN apt-get install -y --no-install-recommends \\\n"
                              "      libc6 \\\n      curl \\\n && rm -rf /var/lib/apt/lists/*\n")
    c.check(listed == {"libc6", "curl"}, f"runtime_packages: {listed}")
    compare_packages(sub, {"libc6": ["libc.so.6"], "libmnl0": ["libmnl.so.0"]}, listed)
    expect(sub.failures, ["lacks libmnl0", "installs curl"], "image")

    # Dashboard lint.
    dashboard = json.loads((args.source_dir / "deploy/grafana/ambient-doctor.json").read_text())
    panels = dashboard["panels"]
    panels[2]["id"] = panels[1]["id"]
    panels[3]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
    panels[4]["targets"][0]["expr"] = "sum(up{node=~\"$nodes\"})"
    panels[6]["targets"][0]["expr"] = "sum by (node (ambient_doctor_pods)"
    panels[7]["targets"][0]["expr"] = "sum(ambient_doctor_podz) + sum(renamed_metric)"
    del panels[8]["gridPos"]
    panels[9]["targets"][0]["expr"] = 'sum(ambient_doctor_findings{code=~"ZDS_STALL|DNS_BROKEN"})'
    cpu = next(p for p in panels if p.get("title") == "Agent CPU")
    cpu["fieldConfig"]["defaults"]["unit"] = "bytes"
    backend = next(p for p in panels if p.get("title") == "Pods by netfilter backend")
    backend["targets"][0]["expr"] = 'sum(ambient_doctor_pods{namespace="istio-system"})'
    sub = Checker()
    if shutil.which("promtool"):
        lint_dashboard(sub, dashboard, args.work_dir / "selftest-dashboard",
                       {"ZDS_STALL", "DNS_CAPTURE_BROKEN"})
        expect(sub.failures, ["duplicate panel id", "hard-coded datasource",
                              "undefined variable $nodes", "PromQL error", "unknown metric renamed_metric",
                              "no gridPos", "unknown finding code DNS_BROKEN",
                              "unit bytes for container_cpu_usage_seconds_total",
                              'hard-coded namespace="istio-system"'], "dashboard")
        c.check("unknown finding code ZDS_STALL" not in "\n".join(sub.failures),
                "dashboard: a known code was reported unknown")

    # Rules: an expression without `by (node)` fires for the wrong node in the unit tests.
    if shutil.which("promtool"):
        groups = extract_rule_groups(args.source_dir)
        for group in groups:
            for rule in group["rules"]:
                rule["expr"] = rule["expr"].replace(
                    "max by (cluster, namespace, node) (ambient_doctor_zds_stall)",
                    "max(ambient_doctor_zds_stall)")
        work = args.work_dir / "selftest-rules"
        work.mkdir(parents=True, exist_ok=True)
        write_rule_file(groups, work / "rules.yaml")
        shutil.copy(args.source_dir / "tests/deploy/alerts_test.yaml", work / "alerts_test.yaml")
        result = run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=work)
        c.check(result.returncode != 0 and "AmbientZdsStall" in result.stdout + result.stderr,
                "promtool test rules did not catch an alert that lost its node label")
    expect(aggregation_problems("max(a) > 0") + aggregation_problems("sum by (node) (a)") +
           aggregation_problems("sum by (cluster, namespace) (a)"),
           ["without `by (...)`", "drops cluster, namespace", "no aggregation keeps the node"],
           "aggregation labels")
    c.check(not aggregation_problems("max by (cluster, namespace, node) (time() - a) > 300"),
            "aggregation labels: a good expression was reported")

    # The findings table against the rules: a critical code paging as warning, a critical code
    # without an alert, an alert selecting a code the table maps elsewhere, a renamed alert.
    rules = [{"alert": "A", "expr": 'sum by (cluster, namespace, node) (ambient_doctor_findings'
              '{code=~"X|Y"}) > 0', "labels": {"severity": "warning"}},
             {"alert": "S", "expr": 'sum by (cluster, namespace, node) (ambient_doctor_pods'
              '{redirect_state!~"healthy|not_enrolled|duplicate"}) > 0',
              "labels": {"severity": "critical"}}]
    codes = [{"code": "X", "severity": "critical", "alert": "A", "runbook": "docs/runbooks/A.md"},
             {"code": "Y", "severity": "warning", "alert": "B", "runbook": "docs/runbooks/B.md"},
             {"code": "Z", "severity": "critical", "alert": "", "runbook": ""},
             {"code": "MIXED_BACKEND", "severity": "critical", "alert": "S",
              "runbook": "docs/runbooks/S.md"},
             {"code": "DUPLICATE_RULE", "severity": "warning", "alert": "S",
              "runbook": "docs/runbooks/S.md"}]
    expect(table_problems(rules, codes),
           ["X is critical but its alert A pages as warning", "Y: its alert B is not in",
            "A selects Y, whose alert column says B", "Z is critical but no alert pages",
            "DUPLICATE_RULE: its alert S does not select it"], "table")
    c.check(not [p for p in table_problems(rules, codes) if p.startswith("MIXED_BACKEND")],
            "table: a code covered through its redirect state was reported")

    # Inhibit rules: drift muted by only some critical alerts, across nodes, unknown names.
    broken_inhibit = {"inhibit_rules": [
        {"source_matchers": ['alertname=~"AmbientZds.+"', 'severity="critical"'],
         "target_matchers": ['alertname="AmbientRedirectDrift"'], "equal": ["node"]},
        {"source_matchers": ['alertname="AmbientGone"'],
         "target_matchers": ['alertname="AmbientRedirectDrift"'], "equal": ["node"]}]}
    expect(inhibit_problems(broken_inhibit, alert_rules(args.source_dir)),
           ["AmbientRedirectMixedBackend does not inhibit drift", "per cluster and node",
            "unknown alert AmbientGone", "sources are not the critical alerts"], "inhibit")
    c.check(not inhibit_problems(yaml.safe_load((args.source_dir / INHIBIT_EXAMPLE).read_text()),
                                 alert_rules(args.source_dir)), "inhibit: the example fails")

    # Manifests: strict validation catches a misspelled field the schemas allow.
    validate = args.source_dir / "deploy/validate"
    if shutil.which("kubectl") and shutil.which("node") and (validate / "node_modules").is_dir():
        path, _ = render(args.source_dir, args.work_dir, "base")
        if c.check(path is not None, "render base"):
            bad = args.work_dir / "selftest-bad.yaml"
            bad.write_text(path.read_text().replace("hostPID: true", "hostPid: true"))
            result = run(["node", str(validate / "validate.mjs"), "--work-dir",
                          str(args.work_dir / "selftest-ts"), str(bad)])
            c.check(result.returncode == 1 and "hostPid" in result.stdout,
                    f"validate.mjs missed a misspelled field: {result.stdout}")
            selftest_schemas(c, args, path, validate)
    selftest_platforms(c, args, expect)
    selftest_kube_api(c, args, expect)
    return c.finish("selftest")


def selftest_kube_api(c, args, expect):
    """More RBAC than the read rule, a binding of another account, a writable or automounted
    token, and a no-kube-api rendering that kept RBAC or lost the flag are caught by name."""
    if not shutil.which("kubectl"):
        return
    path, error = render(args.source_dir, args.work_dir, "base")
    if not c.check(path is not None, f"render base: {error}"):
        return
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    sub = Checker()
    check_kube_api_access(sub, "base", docs, True)
    c.check(not sub.failures, f"kube API access: the base fails: {sub.failures}")
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    role["rules"][0]["verbs"].append("patch")
    role["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    binding["subjects"][0]["name"] = "default"
    spec = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    spec["automountServiceAccountToken"] = True
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == SA_DIR)
    del mount["readOnly"]
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = 86400 * 365
    sub = Checker()
    check_kube_api_access(sub, "base", docs, True)
    expect(sub.failures, ["'verbs': ['get', 'list', 'watch', 'patch']", "'resources': ['secrets']",
                          "no ClusterRole ambient-doctor with exactly",
                          "does not bind exactly {'kind': 'ServiceAccount', 'name': "
                          "'ambient-doctor'",
                          "automountServiceAccountToken must be false",
                          f"the token mount {SA_DIR} not read-only", "expiring after 3607 s"],
           "kube API access")
    # Without API access: the base's role and binding left in, the flag lost.
    path, error = render(args.source_dir, args.work_dir, NO_KUBE_API_EXAMPLES[0])
    if not c.check(path is not None, f"render {NO_KUBE_API_EXAMPLES[0]}: {error}"):
        return
    off = [d for d in yaml.safe_load_all(path.read_text()) if d]
    sub = Checker()
    check_kube_api_access(sub, "no-kube-api", off, False)
    c.check(not sub.failures, f"kube API access: {NO_KUBE_API_EXAMPLES[0]} fails: {sub.failures}")
    base = [d for d in yaml.safe_load_all(render(args.source_dir, args.work_dir, "base")[0]
                                          .read_text()) if d]
    off += [d for d in base if d["kind"] in RBAC_KINDS]
    spec = next(d for d in off if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    spec["containers"][0]["args"].remove("--no-kube-api")
    sub = Checker()
    check_kube_api_access(sub, "no-kube-api", off, False)
    expect(sub.failures, ["grants {'apiGroups': ['']", "RBAC for the Kubernetes API without",
                          "the daemon lacks --no-kube-api"], "no-kube-api")
    sub = Checker()
    check_gatekeeper_volumes(sub, [{"kind": "K8sPSPVolumeTypes", "spec": {"parameters": {
        "volumes": ["hostPath", "configMap", "emptyDir"]}}}], {"hostPath", "projected"})
    expect(sub.failures, ["lacks ['projected']"], "gatekeeper volumes")


def selftest_schemas(c, args, base_rendered, validate):
    """A field newer than 1.28 and misspelled custom-resource fields fail validate.mjs."""
    newer = args.work_dir / "selftest-newer.yaml"
    newer.write_text(base_rendered.read_text().replace(
        "seccompProfile:", "appArmorProfile:\n            type: Unconfined\n          seccompProfile:", 1))
    result = run(["node", str(validate / "validate.mjs"), "--work-dir",
                  str(args.work_dir / "selftest-ts-newer"), str(newer)])
    c.check(result.returncode == 1 and "Kubernetes 1.28" in result.stdout and
            "appArmorProfile" in result.stdout and "strict:" not in result.stdout,
            f"validate.mjs: a 1.30 field must fail on 1.28 only: {result.stdout}")
    bad = args.work_dir / "selftest-crds.yaml"
    texts = []
    for name in ("kyverno/policyexception.yaml", "gatekeeper/constraints.yaml"):
        texts.append((args.source_dir / "deploy/examples" / name).read_text())
    text = "\n---\n".join(texts).replace("ruleNames:", "rules:", 1)
    text = text.replace("allowedCapabilities:", "allowedCapabilites:", 1)
    scc = (args.source_dir / "deploy/components/openshift/scc.yaml").read_text()
    text += "\n---\n" + scc.split("\n---\n")[0].replace("allowHostPID: true", "allowHostPID: yes please")
    bad.write_text(text)
    result = run(["node", str(validate / "validate.mjs"), "--work-dir",
                  str(args.work_dir / "selftest-ts-crds"), str(bad)])
    for needle in ("kyverno-policyexception.json", "(rules)", "gatekeeper-psp-constraints.json",
                   "(allowedCapabilites)", "openshift-scc.json", "/allowHostPID"):
        c.check(needle in result.stdout, f"validate.mjs missed {needle}: {result.stdout}")


def selftest_platforms(c, args, expect):
    """A platform component that lost a base flag or a mount, and a sysfs hostPath that would
    have to be created, are caught by name."""
    path, error = render(args.source_dir, args.work_dir, "examples/k3s")
    if not c.check(path is not None, f"render examples/k3s: {error}"):
        return
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    configmap["data"]["agent.flags"] = configmap["data"]["agent.flags"].replace(
        "--zds-stall-threshold 30s\n", "")
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [
        m for m in spec["containers"][0]["volumeMounts"] if "rancher" not in m["mountPath"]]
    spec["volumes"].append({"name": "btf", "hostPath": {"path": "/sys/kernel/btf",
                                                         "type": "DirectoryOrCreate"}})
    spec["containers"][0]["volumeMounts"].append(
        {"name": "btf", "mountPath": "/sys/kernel/btf", "readOnly": True})
    sub = Checker()
    check_platform(sub, "k3s", docs, argparse.Namespace(
        source_dir=args.source_dir, work_dir=args.work_dir, binary=""))
    expect(sub.failures, ["lost the base's --zds-stall-threshold",
                          "/host/var/lib/rancher/k3s/agent/etc/cni/net.d is not inside any",
                          "volume cni-netd is not mounted", "nothing can be created in sysfs"],
           "platforms")
    # Exceptions that reach beyond the agent's objects in istio-system.
    sub = Checker()
    exception = yaml.safe_load((args.source_dir / "deploy/examples/kyverno/policyexception.yaml")
                               .read_text())
    exception["spec"]["match"]["any"][0]["resources"]["namespaces"] = ["istio-system", "default"]
    exception["spec"]["exceptions"][0]["ruleNames"] = ["host-namespaces"]
    constraint = next(yaml.safe_load_all((args.source_dir / "deploy/examples/gatekeeper/"
                                          "constraints.yaml").read_text()))
    del constraint["spec"]["match"]["namespaces"]
    check_policy_example(sub, "examples/selftest", [exception, constraint])
    expect(sub.failures, ["PolicyException/ambient-doctor: matches more than",
                          "needs the autogen- rules",
                          "K8sPSPCapabilities/ambient-doctor-capabilities: applies beyond"],
           "policy exceptions")


CHECKS = {
    "selftest": check_selftest,
    "yamllint": check_yamllint,
    "manifests": check_manifests,
    "conventions": check_conventions,
    "rules": check_rules,
    "runbooks": check_runbooks,
    "table": check_table,
    "inhibit": check_inhibit,
    "image": check_image,
    "dashboard": check_dashboard,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("--source-dir", type=pathlib.Path, required=True)
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    parser.add_argument("--binary", default="")
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    return CHECKS[args.check](args)


if __name__ == "__main__":
    sys.exit(main())
