#!/usr/bin/env bash
# The project's one test command: sets up what a fresh machine lacks, then runs every test.
# CI (.ci/run) calls exactly this. Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

# PostgreSQL: the coordinator suite runs against a real server. These machines start one on
# 127.0.0.1:5432; another can be named with FLINK_AUTOSCALE_TEST_POSTGRES_URL.
export FLINK_AUTOSCALE_TEST_POSTGRES_URL="${FLINK_AUTOSCALE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if ls /etc/postgresql >/dev/null 2>&1; then
    log "PostgreSQL is not answering; starting the local cluster"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
fi

# Optional set-up steps other parts of the suite need (each script is idempotent).
for setup in scripts/setup-*.sh; do
  [ -e "$setup" ] || continue
  log "running $setup"
  bash "$setup"
done

log "dependency rules (scripts/check-deps.sh)"
scripts/check-deps.sh

# The one build step: tests of one package run the binaries of the others (found by
# flink-autoscale-testkit in the same target directory), so every binary is built first.
build_profile=()
for arg in "$@"; do [ "$arg" = --release ] && build_profile=(--release); done
log "cargo build --workspace --bins"
cargo build --workspace --bins --locked "${build_profile[@]}"

log "cargo test --workspace"
cargo test --workspace --locked --no-fail-fast "$@"
