#!/usr/bin/env bash
# Runs the whole system locally on embedded defaults: a simulated JobManager, the coordinator
# (SQLite in a temporary folder) and the agent with the adaptive-scheduler realizer, on
# loopback. Ctrl-C stops everything. Extra arguments go to the demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bins -p flink-autoscale-simulator -p flink-autoscale-agent -p flink-autoscale-coordinator -p flink-autoscale-demo
exec target/release/demo "$@"
