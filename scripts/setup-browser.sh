#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for the console's browser test
# (coordinator/tests/console_browser.rs), if missing. Idempotent; scripts/test.sh runs it
# before `cargo test`.
set -euo pipefail

log() { printf '==> setup-browser: %s\n' "$*" >&2; }

if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  log "installing chromium and chromium-driver"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core
fi

if ! command -v chromedriver >/dev/null 2>&1; then
  log "chromedriver is missing: the console browser test will fail under CI=true and be skipped otherwise"
fi
