#!/usr/bin/env python3
"""kubectl-sim: a `kubectl` stand-in for the kubectl plugin's tests, put first on PATH as `kubectl`.

It answers the few commands the plugin runs, in kubectl's output shape, from kube-api-sim (the
kube-apiserver emulator) reached with the kubeconfig kubectl would use (--kubeconfig, else
$KUBECONFIG: server, certificate-authority, tokenFile, contexts):

  get pods -n NS -l K=V[,K=V] [--field-selector spec.nodeName=N] -o json   a List of Pods
  get pod NAME [-n NS] -o json                                            one Pod (404: kubectl's
                                                                          NotFound message, exit 1)
  get nodes -o json                                                       a List of Nodes
  exec -n NS POD -c CONTAINER -- ambient-doctor ARGS...                    on the pod's node

`exec` looks the pod up, takes its spec.nodeName and does what $AD_KUBECTL_SIM (a JSON file,
re-read on every call) says for that node:
  {"doctor": "/path/to/ambient-doctor", "log": "/path/calls.log",
   "nodes": {"node-a": {"mode": "serve", "socket": "/path/api.sock", "flags": "/path/a.flags"},
             "node-b": {"mode": "hang"}}}
modes: serve (default): execs `doctor ARGS --api-socket SOCKET` (a `--config FILE` in ARGS, the
agent container's flags file, becomes the node's "flags"), or fails as kubectl does when the
agent container is gone if nothing accepts on the socket; hang: never answers; garbage: prints a
proxy's HTML page; refuse: fails as kubectl does without the pods/exec permission; local: as
serve, but with a socket nothing listens on (the agent's daemon does not answer: the command scans
the node itself with the node's "flags").
Every call is appended to "log" as one JSON array of its arguments.
"""
import json
import os
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def parse_kubeconfig(path):
    """The few fields of a block-style kubeconfig kubectl-sim needs (no YAML library needed)."""
    config = {"contexts": [], "dir": os.path.dirname(os.path.abspath(path))}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().lstrip("- ").partition(":")
            value = value.strip()
            if key == "server":
                config["server"] = value
            elif key == "certificate-authority":
                config["ca"] = value
            elif key == "tokenFile":
                config["token_file"] = value
            elif key == "name" and line.startswith("  name:") and "contexts_seen" in config:
                config["contexts"].append(value)
            elif key == "contexts":
                config["contexts_seen"] = True
            elif key == "current-context":
                config["current"] = value
            elif key == "users":
                config.pop("contexts_seen", None)
    return config


class Api:
    def __init__(self, config):
        self.server = config["server"]
        ca = config["ca"]
        self.context = ssl.create_default_context(
            cafile=ca if os.path.isabs(ca) else os.path.join(config["dir"], ca))
        token_file = config["token_file"]
        if not os.path.isabs(token_file):
            token_file = os.path.join(config["dir"], token_file)
        with open(token_file) as f:
            self.token = f.read().strip()

    def get(self, path):
        """(status, parsed body)."""
        request = urllib.request.Request(self.server + path,
                                         headers={"Authorization": "Bearer " + self.token})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=10) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)


def take(args, *names):
    """Removes a flag and its value from args ("--name value" or "--name=value"); its value."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
                del args[i:i + 2]
                return value
            if arg.startswith(name + "="):
                del args[i]
                return arg[len(name) + 1:]
    return None


def matches_labels(obj, selector):
    labels = obj.get("metadata", {}).get("labels", {})
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def typed(obj, kind):
    return dict({"apiVersion": "v1", "kind": kind}, **obj)


def print_list(items):
    # kubectl's shape for `get ... -o json` of a collection.
    print(json.dumps({"apiVersion": "v1", "items": items, "kind": "List",
                      "metadata": {"resourceVersion": ""}}, indent=4))


def get_pod(api, namespace, name):
    status, body = api.get("/api/v1/namespaces/%s/pods/%s" % (namespace, name))
    if status == 404:
        fail('Error from server (NotFound): pods "%s" not found' % name)
    if status != 200:
        fail("Error from server: %s" % body.get("message", status))
    return body


def run_get(api, args, default_namespace):
    namespace = take(args, "-n", "--namespace")
    selector = take(args, "-l", "--selector")
    field = take(args, "--field-selector")
    if take(args, "-o", "--output") != "json":
        fail("kubectl-sim: only -o json")
    resource, names = args[0], args[1:]
    if resource in ("pod", "pods") and names:
        print(json.dumps(typed(get_pod(api, namespace or default_namespace, names[0]), "Pod"),
                         indent=4))
        return
    if resource in ("pod", "pods"):
        status, body = api.get("/api/v1/pods")
        items = [p for p in body.get("items", [])
                 if p["metadata"].get("namespace") == (namespace or default_namespace)
                 and matches_labels(p, selector)]
        if field:
            key, _, value = field.partition("=")
            if key != "spec.nodeName":
                fail("kubectl-sim: field selector %s" % key)
            items = [p for p in items if p.get("spec", {}).get("nodeName") == value]
        print_list([typed(p, "Pod") for p in items])
        return
    if resource in ("node", "nodes"):
        status, body = api.get("/api/v1/nodes")
        if status != 200:
            fail("Error from server (%s): %s" % (body.get("reason"), body.get("message")))
        print_list([typed(n, "Node") for n in body.get("items", []) if matches_labels(n, selector)])
        return
    fail("kubectl-sim: cannot get %s" % resource)


def accepting(path):
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def run_exec(api, args, sim):
    dash = args.index("--")
    command = args[dash + 1:]
    args = args[:dash]
    namespace = take(args, "-n", "--namespace")
    container = take(args, "-c", "--container")
    pod = get_pod(api, namespace, args[0])
    node = pod.get("spec", {}).get("nodeName", "")
    behaviour = sim.get("nodes", {}).get(node, {})
    mode = behaviour.get("mode", "serve")
    if mode == "hang":
        time.sleep(3600)
    if mode == "garbage":
        print("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")
        return
    if mode == "refuse":
        fail('Error from server (Forbidden): pods "%s" is forbidden: User "dev" cannot create '
             'resource "pods/exec" in API group "" in the namespace "%s"' % (args[0], namespace))
    socket_path = behaviour.get("socket", "")
    if mode == "local":
        socket_path = os.path.join(os.path.dirname(socket_path), "no-daemon.sock")
    elif not socket_path or not accepting(socket_path):
        fail('error: unable to upgrade connection: container not found ("%s")' % container)
    if command[:1] != ["ambient-doctor"]:
        fail("kubectl-sim: exec only runs ambient-doctor, not %s" % command[:1], 126)
    # The agent container's flags file (--config /etc/ambient-doctor/agent.flags) is the lab
    # node's own agent flags here.
    arguments = command[1:]
    if "--config" in arguments and behaviour.get("flags"):
        arguments[arguments.index("--config") + 1] = behaviour["flags"]
    doctor = sim["doctor"]
    os.execv(doctor, [doctor] + arguments + ["--api-socket", socket_path])


def main():
    args = sys.argv[1:]
    with open(os.environ["AD_KUBECTL_SIM"]) as f:
        sim = json.load(f)
    if sim.get("log"):
        with open(sim["log"], "a") as log:
            log.write(json.dumps(args) + "\n")
    kubeconfig = take(args, "--kubeconfig") or os.environ.get("KUBECONFIG", "")
    context = take(args, "--context")
    if not kubeconfig:
        fail("error: no kubeconfig (kubectl-sim needs --kubeconfig or $KUBECONFIG)")
    config = parse_kubeconfig(kubeconfig)
    if context and context not in config["contexts"]:
        fail('error: context "%s" does not exist' % context)
    api = Api(config)
    if args[:1] == ["get"]:
        run_get(api, args[1:], "default")
    elif args[:1] == ["exec"]:
        run_exec(api, args[1:], sim)
    else:
        fail("kubectl-sim: unsupported command %s" % args[:1])


if __name__ == "__main__":
    main()
