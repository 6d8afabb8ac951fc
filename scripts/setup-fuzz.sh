#!/usr/bin/env bash
# Installs schemathesis (from PyPI, into .tmp/schemathesis, a virtual environment) for the
# coordinator's API fuzz run (tests/tests/openapi_fuzz.rs), if missing. Idempotent;
# scripts/test.sh runs it before `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> setup-fuzz: %s\n' "$*" >&2; }

VERSION=4.32.5
VENV=.tmp/schemathesis
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$VERSION"; then
  log "installing schemathesis $VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$VERSION"
fi
