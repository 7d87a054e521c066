#!/usr/bin/env python3
"""The per-layer include roots refuse what a layer must not see.

For each layer below, one of its sources' compile commands (compile_commands.json) is reused on a
probe file that includes a single header: headers the layer may reach must compile, headers of the
layers it must not reach must fail with "No such file or directory". A layer that starts seeing
the kernel sources (a PUBLIC link that leaks an include root) fails here, not in review.
"""
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile

# layer source file -> (headers it may include, headers the build must refuse)
LAYERS = {
    "agent/api/api_server.cc": (
        ["engine/engine.h", "base/unique_fd.h", "base/thread_name.h", "report/finding_alerts.h"],
        ["sources/netns/discovery.h", "sources/netfilter/readers.h", "sources/unique_fd.h",
         "scan/zds_node_source.h"]),
    "agent/metrics/metrics_exporter.cc": (
        ["engine/engine.h", "base/unique_fd.h", "base/agent_version.h"],
        ["sources/netns/discovery.h", "sources/route/route_reader.h", "sources/thread_name.h"]),
    "agent/cli/report_command.cc": (
        ["engine/engine.h", "scan/netns_read.h", "daemon/serve_app.h", "tracing/live_tcp.h",
         "client/api_client.h"],
        ["sources/netns/discovery.h", "sources/netns/netns_workers.h",
         "sources/netfilter/readers.h", "sources/cri/cri_client.h"]),
    "agent/tracing/flow_tracer.cc": (
        ["flows/flow_table.h", "sources/netns/discovery.h"],
        ["engine/engine.h", "scan/scanner.h", "daemon/daemon.h"]),
    "agent/analysis/rule_checks.cc": (
        ["model/istio_facts.h", "model/finding.h"],
        ["sources/netns/discovery.h", "scan/scanner.h", "engine/engine.h", "text/rule_text.h"]),
    "agent/capture/capture_codec.cc": (
        ["analysis/history.h", "model/snapshot.h", "ambientdoctor/v1/capture.pb.h"],
        ["engine/engine.h", "scan/scanner.h", "sources/netns/discovery.h",
         "sources/kube/kube_api_source.h"]),
    "agent/model/finding.cc": (
        ["base/unique_fd.h"],
        ["analysis/analysis.h", "sources/netns/discovery.h"]),
}


def main():
    source_dir, build_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    commands = {pathlib.Path(entry["file"]).resolve(): entry
                for entry in json.loads((build_dir / "compile_commands.json").read_text())}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for layer_source, (allowed, refused) in LAYERS.items():
            entry = commands.get((source_dir / layer_source).resolve())
            if entry is None:
                failures.append(f"{layer_source}: not in compile_commands.json")
                continue
            args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
            base = []
            skip = False
            for arg in args:  # drop -o/-c/-MF outputs and the source itself
                if skip:
                    skip = False
                    continue
                if arg in ("-o", "-MF", "-MT", "-MQ", "-c"):
                    skip = arg != "-c"
                    continue
                if arg in ("-MD", "-MMD") or arg.endswith(layer_source.split("/")[-1]):
                    continue
                base.append(arg)
            if base and base[0].endswith("ccache"):
                base = base[1:]
            for header, want_ok in [(h, True) for h in allowed] + [(h, False) for h in refused]:
                probe = pathlib.Path(tmp) / "probe.cc"
                probe.write_text(f'#include "{header}"\n')
                result = subprocess.run(base + ["-fsyntax-only", str(probe)],
                                        cwd=entry["directory"], capture_output=True, text=True)
                missing = "No such file or directory" in result.stderr
                if want_ok and result.returncode != 0:
                    failures.append(f"{layer_source}: {header} should compile:\n{result.stderr}")
                elif not want_ok and (result.returncode == 0 or not missing):
                    failures.append(f"{layer_source}: {header} should be refused by the include "
                                    f"roots, got rc={result.returncode}\n{result.stderr[:400]}")
                else:
                    print(f"ok  {layer_source}: {header} {'compiles' if want_ok else 'refused'}")
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
