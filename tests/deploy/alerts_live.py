#!/usr/bin/python3
"""The alerts and the dashboard proven live: Debian's real prometheus and prometheus-alertmanager
on loopback scrape the real `ambient-doctor serve` on a lab node.

1. Lab node (3 pods, ZDS emulators), `serve` on it, Prometheus with the rule groups extracted
   from deploy/monitoring/prometheusrule.yaml (test-only override: every `for:` is 5 s, scrape and
   evaluation every second), Alertmanager receiving from it.
2. Healthy node: no alert pending or firing.
3. The lab's ZDS server deadlocks (cni-sim restarted with the pre-1.29.6 deadlock fault):
   AmbientZdsStall goes pending, then firing in Prometheus' API, and arrives in Alertmanager's;
   after the repair (cni-sim restarted healthy, like restarting istio-cni) it resolves in both.
   The same for AmbientZdsDisconnected with ztunnel-sim stopped (istio-cni listens, no ztunnel
   is connected), repaired by starting it again (it reconnects and gets istio-cni's snapshot, as
   a restarted ztunnel does).
4. A backend flip in one lab pod (Istio's in-pod rules loaded a second time with
   iptables-legacy): the same for AmbientRedirectMixedBackend; repaired by flushing the legacy copy.
   The flip also fires the catch-all AmbientRedirectDrift, which Alertmanager, loaded with the
   inhibit rules of deploy/monitoring/alertmanager-inhibit.example.yaml, must hold suppressed
   (inhibited by the critical alert) instead of notifying.
5. Every PromQL expression of the dashboard and the rules references only metrics (and label
   values) the real scrape exports, or documented external ones; every dashboard query the lab
   can feed returns data over the test's time range.

usage: alerts_live.py --source-dir DIR --binary-dir DIR --work-dir DIR [--prefix P]
Exit 0 pass, 1 fail, 77 skip (last line "SKIP: reason"). Bounded: every wait has a deadline.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import deploy_checks  # noqa: E402

import yaml  # noqa: E402

SKIP = 77
TEST_FOR = "5s"  # the test-only override of every alert's `for:`
WAIT_SECONDS = 60  # per state transition (threshold 5 s + for 5 s + scrape/eval/send slack)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def get_json(url):
    return json.loads(http_get(url))


def wait_for(what, condition, timeout=WAIT_SECONDS, interval=0.25):
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except (OSError, ValueError) as error:  # not up yet
            last_error = error
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}"
                       + (f" (last error: {last_error})" if last_error else ""))


class Processes:
    """Every process this test starts, stopped by pid (never by name) on exit."""

    def __init__(self):
        self.started = []

    def start(self, name, argv, log_path, env=None):
        log_file = open(log_path, "ab")
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log_file.close()
        self.started.append((name, process))
        return process

    def stop_all(self):
        for name, process in reversed(self.started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


class Lab:
    def __init__(self, binary_dir, prefix, work):
        self.tool = str(binary_dir / "tests/sim/ambient-lab")
        self.cni_sim = str(binary_dir / "tests/sim/cni-sim")
        self.ztunnel_sim = str(binary_dir / "tests/sim/ztunnel-sim")
        self.prefix = prefix
        self.work = work
        self.run_dir = pathlib.Path("/run/ambient-lab") / prefix

    def up(self):
        result = subprocess.run([self.tool, "up", "--prefix", self.prefix, "--pods", "3", "--zds"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"ambient-lab up failed: {result.stdout}{result.stderr}")

    def down(self):
        subprocess.run([self.tool, "down", "--prefix", self.prefix], capture_output=True,
                       timeout=60)

    def restart_cni_sim(self, deadlock):
        """Stops the lab's cni-sim and starts it again (with or without the deadlock fault).

        The new pid goes into the lab's pid file, so `ambient-lab down` stops it like the first.
        ztunnel-sim reconnects by itself, as ztunnel does when istio-cni restarts.
        """
        self.stop_cni_sim()
        pid_file = self.run_dir / "cni-sim.pid"
        argv = ["nsenter", f"--net=/run/netns/{self.prefix}-host", self.cni_sim,
                "--socket", str(self.run_dir / "ztunnel.sock"),
                "--pods-file", str(self.run_dir / "pods.txt"),
                "--stats-file", str(self.run_dir / "cni-sim.stats")]
        if deadlock:
            argv += ["--fault", "deadlock"]
        log_file = open(self.run_dir / "cni-sim.log", "ab")
        # Detached like the lab's own daemons; nsenter execs cni-sim, so the pid is cni-sim's.
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        log_file.close()
        pid_file.write_text(f"{process.pid}\n")
        wait_for("cni-sim to run", lambda: pathlib.Path(f"/proc/{process.pid}/comm").read_text()
                 .strip() == "cni-sim", 10)
        return process

    def stop_cni_sim(self):
        """Stops the lab's cni-sim (istio-cni gone: ztunnel keeps running, nothing listens)."""
        pid_file = self.run_dir / "cni-sim.pid"
        old = int(pid_file.read_text().split()[0])
        if pathlib.Path(f"/proc/{old}/comm").read_text().strip() == "cni-sim":
            os.kill(old, signal.SIGTERM)
            wait_for("the old cni-sim to exit", lambda: not pathlib.Path(f"/proc/{old}").exists()
                     or "Z" in pathlib.Path(f"/proc/{old}/stat").read_text().split()[2], 10)

    def stop_ztunnel_sim(self):
        pid = int((self.run_dir / "ztunnel-sim.pid").read_text().split()[0])
        if pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "ztunnel-sim":
            os.kill(pid, signal.SIGTERM)
            wait_for("ztunnel-sim to exit", lambda: not pathlib.Path(f"/proc/{pid}").exists()
                     or "Z" in pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2], 10)

    def start_ztunnel_sim(self):
        """ztunnel-sim as the lab starts it (no faults), in the lab's ztunnel netns."""
        argv = ["nsenter", f"--net=/run/netns/{self.prefix}-ztunnel", self.ztunnel_sim,
                "--zds", str(self.run_dir / "ztunnel.sock"), "--node", f"{self.prefix}-node"]
        log_file = open(self.run_dir / "ztunnel-sim.log", "ab")
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        log_file.close()
        (self.run_dir / "ztunnel-sim.pid").write_text(f"{process.pid}\n")
        wait_for("ztunnel-sim to run", lambda: pathlib.Path(f"/proc/{process.pid}/comm")
                 .read_text().strip() == "ztunnel-sim", 10)

    def pod_netns(self, index):
        return f"/run/netns/{self.prefix}-pod-{index:03d}"

    def legacy_rules(self):
        result = subprocess.run([self.tool, "rules", "--backend", "legacy"], capture_output=True,
                                text=True, check=True)
        return "".join(l + "\n" for l in result.stdout.splitlines() if not l.startswith("#"))

    def flip(self, index):
        """The istio-cni backend flip: the in-pod rules once more, with iptables-legacy."""
        subprocess.run(["nsenter", f"--net={self.pod_netns(index)}", "iptables-legacy-restore",
                        "--noflush", "--wait=30"], input=self.legacy_rules(), text=True,
                       check=True, capture_output=True)

    def unflip(self, index):
        tables = re.findall(r"^\*\s*(\w+)", self.legacy_rules(), re.M)
        flush = "".join(f"*{t}\nCOMMIT\n" for t in tables)  # no --noflush: empties each table
        subprocess.run(["nsenter", f"--net={self.pod_netns(index)}", "iptables-legacy-restore",
                        "--wait=30"], input=flush, text=True, check=True, capture_output=True)


def test_rule_groups(source):
    groups = deploy_checks.extract_rule_groups(source)
    for group in groups:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = TEST_FOR
    return groups


def alerts_in_prometheus(prom, name):
    alerts = get_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"].get("alertname") == name]


def alerts_in_alertmanager(am, name):
    alerts = get_json(f"{am}/api/v2/alerts")
    return [a for a in alerts if a["labels"].get("alertname") == name
            and a.get("status", {}).get("state") == "active"]


def prove_alert(prom, am, name, node, inject, repair, while_active=None):
    log(f"{name}: injecting the fault")
    inject()
    pending = wait_for(f"{name} pending", lambda: [a for a in alerts_in_prometheus(prom, name)
                                                   if a["state"] in ("pending", "firing")])
    if pending[0]["state"] != "pending":
        raise AssertionError(f"{name} was never seen pending (first seen: {pending[0]['state']})")
    log(f"{name}: pending in Prometheus {pending[0]['labels']}")
    firing = wait_for(f"{name} firing", lambda: [a for a in alerts_in_prometheus(prom, name)
                                                 if a["state"] == "firing"])
    labels = firing[0]["labels"]
    if labels.get("node") != node:
        raise AssertionError(f"{name} fired with node {labels.get('node')}, want {node}")
    if not firing[0]["annotations"].get("runbook_url", "").endswith(f"/docs/runbooks/{name}.md"):
        raise AssertionError(f"{name}: runbook_url {firing[0]['annotations']}")
    log(f"{name}: firing in Prometheus, annotations {firing[0]['annotations']['summary']!r}")
    received = wait_for(f"{name} in Alertmanager", lambda: alerts_in_alertmanager(am, name))
    if received[0]["labels"].get("node") != node:
        raise AssertionError(f"Alertmanager got {received[0]['labels']}")
    log(f"{name}: active in Alertmanager {received[0]['labels']}")
    if while_active:
        while_active()
    log(f"{name}: repairing")
    repair()
    wait_for(f"{name} resolved in Prometheus", lambda: not alerts_in_prometheus(prom, name))
    log(f"{name}: resolved in Prometheus")
    wait_for(f"{name} resolved in Alertmanager", lambda: not alerts_in_alertmanager(am, name))
    log(f"{name}: resolved in Alertmanager")


def prove_inhibited(am, name, by):
    """`name` reaches Alertmanager but is held suppressed, inhibited by the active `by`."""
    def suppressed():
        alerts = get_json(f"{am}/api/v2/alerts")
        source = [a["fingerprint"] for a in alerts if a["labels"].get("alertname") == by]
        target = [a for a in alerts if a["labels"].get("alertname") == name]
        return [a for a in target if a.get("status", {}).get("state") == "suppressed"
                and set(a["status"].get("inhibitedBy", [])) & set(source)]
    held = wait_for(f"{name} inhibited by {by} in Alertmanager", suppressed)
    log(f"{name}: suppressed in Alertmanager, inhibited by {by} {held[0]['labels']}")


def alertmanager_config(source):
    """A test receiver, plus the shipped example's inhibit rules, as they are."""
    example = yaml.safe_load((source / deploy_checks.INHIBIT_EXAMPLE).read_text())
    return {"route": {"receiver": "test", "group_by": ["alertname", "node"], "group_wait": "1s",
                      "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "test"}],
            "inhibit_rules": example["inhibit_rules"]}


def scraped_series(metrics_text):
    """metric name -> {label: set(values)} from the exposition text."""
    series = {}
    for line in metrics_text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s", line)
        if not match:
            continue
        labels = series.setdefault(match.group(1), {})
        for m in re.finditer(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""):
            labels.setdefault(m.group(1), set()).add(m.group(2))
    return series


def check_references(exprs, series, failures, waiting):
    """Metric names and label values against the real scrape."""
    scraped_plain = set(series)
    for where, expr in exprs:
        for name in deploy_checks.metric_names(expr):
            if name.startswith("ambient_doctor_"):
                if name not in scraped_plain:
                    failures.append(f"{where}: {name} is not exported by serve")
            elif name not in deploy_checks.EXTERNAL_METRICS:
                failures.append(f"{where}: unknown metric {name}")
        for metric, label, op, value in deploy_checks.label_matchers(expr):
            if not metric.startswith("ambient_doctor_") or metric not in series:
                continue
            if label in ("node", "job", "instance", "cluster", "namespace"):
                continue  # target labels added by Prometheus, not the exporter
            values = value.split("|") if re.fullmatch(r"[A-Za-z0-9_|-]+", value) else []
            if op in ("=", "!=") and not values:
                values = [value]
            for v in values:
                if v in series[metric].get(label, set()):
                    continue
                if label == "code" and v in deploy_checks.TRACER_CODES:
                    waiting.add(f"{where}: {label}={v} (tracer code, not in this scrape)")
                else:
                    failures.append(f"{where}: {metric}{{{label}={v!r}}} is not exported "
                                    f"(exported: {sorted(series[metric].get(label, set()))})")


def run_dashboard_queries(prom, dashboard, node, start, end, failures, waiting):
    produced = 0
    for panel_id, title, ref, expr in deploy_checks.dashboard_queries(dashboard):
        where = f"panel {panel_id} \"{title}\" ref {ref}"
        query = re.sub(r"\$__(rate_interval|interval|range)", "10s", expr)
        query = re.sub(r"\$\{?node\}?", node, query)
        query = re.sub(r"\$\{?(cluster|namespace)\}?", ".*", query)  # All: the lab has neither
        names = deploy_checks.metric_names(query)
        external = sorted(n for n in names if not n.startswith("ambient_doctor_") and n != "up")
        if external:
            waiting.add(f"{where}: needs {', '.join(external)} (not produced by the lab)")
            continue
        url = f"{prom}/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "1"})
        try:
            answer = get_json(url)
        except OSError as error:
            failures.append(f"{where}: query failed: {error} ({query})")
            continue
        if answer.get("status") != "success":
            failures.append(f"{where}: {answer.get('error')} ({query})")
        elif not answer["data"]["result"]:
            failures.append(f"{where}: no data over the test ({query})")
        else:
            produced += 1
    return produced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", type=pathlib.Path, required=True)
    parser.add_argument("--binary-dir", type=pathlib.Path, required=True)
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    parser.add_argument("--prefix", default="addeploy")
    args = parser.parse_args()

    if os.geteuid() != 0:
        print("SKIP: needs root (lab netns, the real iptables and the daemon's scans)")
        return SKIP
    for tool in ("prometheus", "prometheus-alertmanager", "nsenter", "iptables-legacy-restore"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed (scripts/setup)")
            return SKIP
    for binary in ("agent/ambient-doctor", "tests/sim/ambient-lab", "tests/sim/cni-sim",
                   "tests/sim/ztunnel-sim"):
        if not (args.binary_dir / binary).exists():
            print(f"SKIP: {binary} not built")
            return SKIP

    work = args.work_dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    node = f"{args.prefix}-node"
    processes = Processes()
    lab = Lab(args.binary_dir, args.prefix, work)
    failures = []
    try:
        log(f"lab {args.prefix} up")
        lab.up()
        metrics_port, prom_port, am_port = free_port(), free_port(), free_port()
        serve = processes.start("serve", [
            str(args.binary_dir / "agent/ambient-doctor"), "serve", "--lab-prefix", args.prefix,
            "--interval", "1s", "--zds-stall-threshold", "5s",
            "--metrics-address", f"127.0.0.1:{metrics_port}",
            "--api-socket", str(work / "api.sock"), "--log-format", "json"],
            work / "serve.log", env=dict(os.environ, NODE_NAME=node))
        metrics_url = f"http://127.0.0.1:{metrics_port}"
        wait_for("serve /healthz", lambda: http_get(f"{metrics_url}/healthz").startswith("ok"), 30)

        rules_file = work / "rules.yaml"
        deploy_checks.write_rule_file(test_rule_groups(args.source_dir), rules_file)
        (work / "alertmanager.yml").write_text(yaml.safe_dump(alertmanager_config(args.source_dir)))
        (work / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [str(rules_file)],
            "alerting": {"alertmanagers": [{"static_configs": [
                {"targets": [f"127.0.0.1:{am_port}"]}]}]},
            # The PodMonitor's relabeling gives every series its pod's node; a static label here.
            "scrape_configs": [{"job_name": "ambient-doctor", "static_configs": [
                {"targets": [f"127.0.0.1:{metrics_port}"], "labels": {"node": node}}]}]}))
        check = subprocess.run(["promtool", "check", "config", str(work / "prometheus.yml")],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"promtool check config: {check.stdout}{check.stderr}")
        processes.start("alertmanager", [
            "prometheus-alertmanager", f"--config.file={work / 'alertmanager.yml'}",
            f"--storage.path={work / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address="], work / "alertmanager.log")
        processes.start("prometheus", [
            "prometheus", f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}"], work / "prometheus.log")
        prom, am = f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}"
        wait_for("Alertmanager ready", lambda: http_get(f"{am}/-/ready") is not None, 30)
        wait_for("the scrape target up", lambda: any(
            t["health"] == "up" for t in get_json(f"{prom}/api/v1/targets")["data"]["activeTargets"]),
            30)
        wait_for("rules loaded", lambda: len(get_json(f"{prom}/api/v1/rules")["data"]["groups"]) > 0,
                 30)
        start = time.time()
        time.sleep(4)  # a few scrapes and evaluations of the healthy node
        alerts = get_json(f"{prom}/api/v1/alerts")["data"]["alerts"]
        if alerts:
            failures.append(f"healthy lab node raised alerts: {[a['labels'] for a in alerts]}")
        log(f"healthy node: {len(alerts)} alert(s) pending or firing")

        prove_alert(prom, am, "AmbientZdsStall", node,
                    lambda: lab.restart_cni_sim(deadlock=True),
                    lambda: lab.restart_cni_sim(deadlock=False))
        prove_alert(prom, am, "AmbientZdsDisconnected", node,
                    lab.stop_ztunnel_sim, lab.start_ztunnel_sim)
        prove_alert(prom, am, "AmbientRedirectMixedBackend", node,
                    lambda: lab.flip(0), lambda: lab.unflip(0),
                    lambda: prove_inhibited(am, "AmbientRedirectDrift",
                                            "AmbientRedirectMixedBackend"))

        # Every expression against the real scrape, and every dashboard query against Prometheus.
        time.sleep(2)
        end = time.time()
        series = scraped_series(http_get(f"{metrics_url}/metrics"))
        dashboard = json.loads((args.source_dir / "deploy/grafana/ambient-doctor.json").read_text())
        exprs = [(f"panel {p} \"{t}\" ref {r}", deploy_checks.substitute_grafana(e, node))
                 for p, t, r, e in deploy_checks.dashboard_queries(dashboard)]
        exprs += [(f"alert {r['alert']}", r["expr"])
                  for r in deploy_checks.alert_rules(args.source_dir)]
        waiting = set()
        check_references(exprs, series, failures, waiting)
        produced = run_dashboard_queries(prom, dashboard, node, start, end, failures, waiting)
        log(f"dashboard: {produced} queries returned lab data")
        for item in sorted(waiting):
            log(f"not checked against the lab: {item}")
        if serve.poll() is not None:
            failures.append(f"serve exited with {serve.returncode}")
    except (TimeoutError, AssertionError, RuntimeError, subprocess.CalledProcessError,
            OSError) as error:
        failures.append(str(error))
        for name in ("serve.log", "prometheus.log", "alertmanager.log"):
            path = work / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-8:]
                print(f"--- {name} (tail)\n" + "\n".join(tail))
    finally:
        processes.stop_all()
        lab.down()
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"alerts_live: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
