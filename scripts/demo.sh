#!/usr/bin/env bash
# Runs the whole system locally on embedded defaults (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release --locked -p flink-autoscale-simulator --bin flink-sim -- \
  --scenario simulator/scenarios/demo.toml --listen 127.0.0.1:8081 "$@"
