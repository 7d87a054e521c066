#!/usr/bin/env python3
"""Documentation currency, checked against the built binary and the sources (no root, no network):

  findings  docs/findings.md and the alert tables of README.md and docs/runbooks/README.md equal
            what scripts/gen-docs writes from `findings` and the PrometheusRule
  commands  every command of `ambient-doctor --help` has a section in docs/cli.md, and every flag
            of every command's --help is documented there
  codes     every finding code of `findings -o json` is named in README.md
  metrics   every metric name the agent's sources register is documented in docs/metrics.md
  alerts    every alert of the PrometheusRule is in README.md and the runbook index, and
            docs/deploy.md links the index
  links     every relative link of every Markdown file resolves (file, and heading anchor), and
            the README links every page of docs/
  wording   README.md, docs/, deploy/ and bench/README.md speak of the product, not of its
            development ("issue N", "session", "lands", "milestone")
  selftest  a broken copy of the docs fails each check above (none passes vacuously)

  doc_checks.py --source-dir DIR --binary PATH [check ...]   (default: all checks + selftest)
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


class Failures:
    def __init__(self):
        self.messages = []

    def check(self, ok, message):
        if not ok:
            self.messages.append(message)


def run(binary, *args):
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    return result.stdout + result.stderr


def check_findings(root, binary, fail):
    result = subprocess.run([sys.executable, str(root / "scripts" / "gen-docs"), "--check",
                             "--source-dir", str(root), "--binary", str(binary)],
                            capture_output=True, text=True, check=False)
    fail.check(result.returncode == 0,
               "generated docs are stale (run scripts/gen-docs):\n" + result.stdout[-3000:] +
               result.stderr)


def commands(binary):
    """The command names of the top-level help: the indented words under "Commands:" (or
    "Subcommands:", any case), up to the next unindented line."""
    text = run(binary, "--help")
    parts = re.split(r"^\s*(?:sub)?commands:\s*$", text, maxsplit=1, flags=re.M | re.I)
    block = re.split(r"^\S", parts[1], maxsplit=1, flags=re.M)[0] if len(parts) == 2 else ""
    names = re.findall(r"^\s{1,4}([a-z][a-z-]+)(?:\s{2,}|\s*$)", block, re.M)
    return [n for n in names if n != "help"]


def check_commands(root, binary, fail):
    cli = (root / "docs" / "cli.md").read_text()
    documented = set()  # flags named inside inline code spans (tables and prose)
    for span in re.findall(r"`([^`\n]+)`", cli):
        documented.update(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span))
    names = commands(binary)
    fail.check(len(names) >= 6, f"cannot read the commands of `ambient-doctor --help`: {names}")
    for name in names:
        fail.check(re.search(rf"^## {re.escape(name)}\b", cli, re.M) is not None,
                   f"docs/cli.md has no '## {name}' section")
        if name == "version":
            continue
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", run(binary, name, "--help")))
        fail.check(len(flags) >= 2, f"cannot read the flags of `ambient-doctor {name} --help`")
        for flag in sorted(flags - documented):
            fail.check(False, f"`{name} {flag}` is not documented in docs/cli.md")


def check_codes(root, binary, fail):
    try:
        codes = [c["code"] for c in json.loads(run(binary, "findings", "-o", "json"))]
    except (ValueError, KeyError, TypeError) as error:
        fail.check(False, f"cannot read `findings -o json`: {error}")
        return
    readme = (root / "README.md").read_text()
    fail.check(len(codes) >= 20, f"only {len(codes)} finding codes")
    for code in codes:
        fail.check(f"`{code}`" in readme, f"README.md does not name the finding code {code}")


def check_metrics(root, binary, fail):
    del binary
    names = set()
    for source in (root / "agent").rglob("*"):
        if source.suffix in (".cc", ".h") and not source.name.endswith("_test.cc"):
            names.update(re.findall(r'"(ambient_doctor_[a-z_]+)"', source.read_text()))
    fail.check(len(names) >= 20, f"only {len(names)} metric names found in agent/")
    metrics = (root / "docs" / "metrics.md").read_text()
    for name in sorted(names):
        fail.check(f"`{name}`" in metrics, f"docs/metrics.md does not document {name}")


def check_alerts(root, binary, fail):
    del binary
    rules = (root / "deploy" / "monitoring" / "prometheusrule.yaml").read_text()
    alerts = re.findall(r"^\s*-?\s*alert:\s*(\w+)", rules, re.M)
    fail.check(len(alerts) >= 5, f"only {len(alerts)} alerts in the PrometheusRule")
    for page in ("README.md", "docs/runbooks/README.md"):
        text = (root / page).read_text()
        for alert in alerts:
            fail.check(f"`{alert}`" in text, f"{page} does not list the alert {alert}")
    deploy = (root / "docs" / "deploy.md").read_text()
    fail.check("(runbooks/README.md)" in deploy, "docs/deploy.md does not link the runbook index")


def markdown_files(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard",
                             "*.md"], capture_output=True, text=True, check=False).stdout.split()
    files = [root / f for f in listed if not f.startswith(("build", "node_modules"))]
    if not files:  # not a git checkout (the selftest's copy)
        files = [p for p in root.rglob("*.md") if "node_modules" not in p.parts and
                 not p.relative_to(root).parts[0].startswith("build")]
    return [f for f in files if f.exists() and "node_modules" not in f.parts]


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, result = {}, set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        match = re.match(r"^#{1,6}\s+(.*)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def check_links(root, binary, fail):
    del binary
    files = markdown_files(root)
    fail.check(len(files) >= 10, f"only {len(files)} Markdown files found")
    for page in files:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            name = page.relative_to(root)
            path_part, _, fragment = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.exists():
                fail.check(False, f"{name}: link {target} does not resolve")
                continue
            if fragment and resolved.suffix == ".md":
                fail.check(fragment in anchors(resolved),
                           f"{name}: link {target}: no heading #{fragment} in that page")
    readme = (root / "README.md").read_text()
    for page in sorted((root / "docs").glob("*.md")):
        fail.check(f"(docs/{page.name}" in readme, f"README.md does not link docs/{page.name}")


# "session" alone is process wording; a TLS or HTTP session is a technical one.
WORDING = re.compile(r"\bissues? #?\d|\b(?<!TLS )(?<!HTTP )sessions?\b|\blands?\b|\blanded\b|"
                     r"\bmilestones?\b", re.I)


def check_wording(root, binary, fail):
    del binary
    pages = [root / "README.md", root / "bench" / "README.md"]
    for folder in ("docs", "deploy"):
        pages += [p for p in (root / folder).rglob("*")
                  if p.is_file() and "node_modules" not in p.parts and
                  p.suffix in (".md", ".yaml", ".yml", ".py", ".json", ".ts", "") and
                  p.name != "package-lock.json"]
    for page in pages:
        if not page.exists():
            continue
        for number, line in enumerate(page.read_text(errors="replace").splitlines(), 1):
            match = WORDING.search(line)
            fail.check(match is None,
                       f"{page.relative_to(root)}:{number}: development-process wording "
                       f"{match.group(0) if match else ''!r}: {line.strip()[:120]}")


CHECKS = {"findings": check_findings, "commands": check_commands, "codes": check_codes,
          "metrics": check_metrics, "alerts": check_alerts, "links": check_links,
          "wording": check_wording}


def copy_tree(root, into):
    """The parts of the checkout the checks read."""
    for part in ("README.md", "CHANGELOG.md", "LICENSE", "docs", "bench/README.md",
                 "deploy/README.md", "deploy/monitoring/prometheusrule.yaml", "scripts/gen-docs",
                 "agent/metrics", "proto/README.md"):
        source, target = root / part, into / part
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def edit(path, old, new):
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"selftest: {path}: {old!r} not found (update the selftest)")
    path.write_text(text.replace(old, new))


def selftest(root, binary, fail):
    """Each breakage must fail exactly the check named beside it."""
    breakages = [
        ("findings", lambda t: edit(t / "docs/findings.md", "| `ZDS_STALL` |", "| `ZDS_STAL` |")),
        ("commands", lambda t: edit(t / "docs/cli.md", "--flow-window", "--flow-windo")),
        ("commands", lambda t: edit(t / "docs/cli.md", "\n## rules", "\n## the rules")),
        ("codes", lambda t: edit(t / "README.md", "`MULTIPLE_ZTUNNELS`", "MULTIPLE_ZTUNNELS")),
        ("metrics", lambda t: edit(t / "docs/metrics.md", "`ambient_doctor_zds_stall`", "zds")),
        ("findings", lambda t: edit(t / "docs/runbooks/README.md", "| critical | 2m |",
                                    "| warning | 2m |")),
        ("findings", lambda t: edit(t / "README.md", "`INPOD_PROXY_BLOCKED` |", "— |")),
        ("alerts", lambda t: edit(t / "docs/runbooks/README.md", "[`AmbientZdsStall`]",
                                  "[AmbientZdsStall]")),
        ("alerts", lambda t: edit(t / "docs/deploy.md", "(runbooks/README.md)", "(runbooks/)")),
        ("links", lambda t: edit(t / "README.md", "(docs/cli.md)", "(docs/cli-missing.md)")),
        ("links", lambda t: edit(t / "README.md", "(docs/cli.md)", "(docs/cli.md#no-such)")),
        ("links", lambda t: (t / "docs/orphan.md").write_text("# Orphan\n")),
        ("wording", lambda t: edit(t / "docs/lab.md", "# The lab node", "# The lab (issue 4)")),
        ("wording", lambda t: edit(t / "bench/README.md", "|", "| this session's |")),
    ]
    for name, breakage in breakages:
        with tempfile.TemporaryDirectory() as temp:
            copy = Path(temp)
            copy_tree(root, copy)
            clean = Failures()
            CHECKS[name](copy, binary, clean)
            fail.check(not clean.messages,
                       f"selftest: {name} fails on an unbroken copy: {clean.messages[:3]}")
            breakage(copy)
            broken = Failures()
            CHECKS[name](copy, binary, broken)
            fail.check(bool(broken.messages), f"selftest: {name} did not catch a breakage")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source-dir", type=Path, required=True)
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("checks", nargs="*", default=[*CHECKS, "selftest"])
    args = parser.parse_args()
    root = args.source_dir.resolve()
    fail = Failures()
    for name in args.checks:
        (selftest if name == "selftest" else CHECKS[name])(root, args.binary, fail)
    for message in fail.messages:
        print("FAIL", message)
    print(f"doc_checks: {len(args.checks)} checks, {len(fail.messages)} failures")
    return 1 if fail.messages else 0


if __name__ == "__main__":
    sys.exit(main())
