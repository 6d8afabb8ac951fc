#!/usr/bin/env bash
# Installs the tools the packaging and systemd tests (tests/tests/ops_*.rs) need, if missing.
# Idempotent; scripts/test.sh runs it before `cargo test`.
#   cargo-deb       builds the .deb packages (ops_deb)
#   systemd-analyze verifies the units and rates their hardening (ops_systemd)
#   dpkg-deb        inspects the built packages (ops_deb); part of every Debian system
#   prometheus, promtool  check and unit-test the alert rules, evaluate the dashboard's
#                   queries in a real Prometheus (ops_prometheus); Debian's prometheus package
set -euo pipefail

log() { printf '==> setup-ops: %s\n' "$*" >&2; }

CARGO_DEB_VERSION=3.8.0

if ! cargo deb --version >/dev/null 2>&1; then
  log "installing cargo-deb $CARGO_DEB_VERSION"
  # Build in cargo's own temporary directory, not in the workspace's target dir.
  env -u CARGO_TARGET_DIR cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi

if ! command -v systemd-analyze >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  log "installing systemd (for systemd-analyze)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd
fi

if ! { command -v prometheus && command -v promtool; } >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  log "installing prometheus (prometheus and promtool)"
  apt-get update -qq
  # The package's own service is not wanted: the test starts its own on loopback.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
fi

if ! command -v dpkg-deb >/dev/null 2>&1; then
  log "dpkg-deb is missing: the .deb inspection test will be skipped"
fi
