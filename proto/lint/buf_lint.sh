#!/usr/bin/env bash
# `buf lint` of proto/ (config: proto/buf.yaml). Uses the buf that scripts/setup installs with npm
# in proto/lint/node_modules, else one on PATH; exits 77 (ctest: skipped) with the reason when
# there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
buf=lint/node_modules/.bin/buf
if [[ ! -x $buf ]]; then
  if ! buf=$(command -v buf); then
    echo "SKIP: buf is not installed (scripts/setup installs it with npm into proto/lint)"
    exit 77
  fi
fi
"$buf" lint
echo "buf lint: clean ($("$buf" --version))"
