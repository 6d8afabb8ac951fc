#!/usr/bin/env bash
# Installs the cargo tools scripts/check-deps.sh needs, if missing. Idempotent; scripts/test.sh
# runs it before the dependency checks.
#   cargo-machete  finds dependencies a crate declares but never uses
set -euo pipefail

CARGO_MACHETE_VERSION=0.9.2

if [ "$(cargo machete --version 2>/dev/null)" != "$CARGO_MACHETE_VERSION" ]; then
  printf '==> setup-tools: installing cargo-machete %s\n' "$CARGO_MACHETE_VERSION" >&2
  # Build in cargo's own temporary directory, not in the workspace's target dir.
  env -u CARGO_TARGET_DIR cargo install cargo-machete --locked --version "$CARGO_MACHETE_VERSION"
fi
