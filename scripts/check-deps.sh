#!/usr/bin/env bash
# Dependency rules the compiler cannot enforce (see docs/architecture.md):
#  - flink-autoscale-core stays pure: nothing in its normal dependency tree may do I/O, keep a
#    clock, log, or run async code;
#  - the sidecar binary stays lean: no database driver and no simulator in the agent;
#  - the test kit stays out of every shipped binary;
#  - no crate declares a dependency it does not use (cargo-machete, from scripts/setup-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
forbidden_io='^(tokio|tokio-[a-z-]+|hyper|hyper-[a-z-]+|h2|mio|socket2|reqwest|ureq|sqlx|sqlx-[a-z-]+|libsqlite3-sys|tokio-postgres|tracing|tracing-[a-z-]+|log|metrics|metrics-[a-z-]+|rustls|ring|rand|getrandom|chrono|time|notify|clap) v'
core_tree=$(cargo tree -p flink-autoscale-core -e normal --prefix none)
if bad=$(grep -E "$forbidden_io" <<<"$core_tree" | sort -u) && [ -n "$bad" ]; then
  echo "check-deps: flink-autoscale-core must stay pure, but its dependency tree has:" >&2
  echo "$bad" >&2
  fail=1
fi

agent_tree=$(cargo tree -p flink-autoscale-agent -e normal --prefix none)
if bad=$(grep -E '^(sqlx|sqlx-[a-z-]+|libsqlite3-sys|tokio-postgres|flink-autoscale-simulator) v' <<<"$agent_tree" | sort -u) && [ -n "$bad" ]; then
  echo "check-deps: the agent (sidecar) must not link a database driver or the simulator:" >&2
  echo "$bad" >&2
  fail=1
fi

# The test kit is test plumbing: a dev-dependency of the shipped crates, never in a release binary.
for shipped in flink-autoscale-core flink-autoscale-shared flink-autoscale-agent flink-autoscale-coordinator flink-autoscale-simulator; do
  if cargo tree -p "$shipped" -e normal --prefix none | grep -q '^flink-autoscale-testkit v'; then
    echo "check-deps: $shipped links flink-autoscale-testkit; it may only be a dev-dependency" >&2
    fail=1
  fi
done

if ! cargo machete >/tmp/check-deps-machete.$$ 2>&1; then
  echo "check-deps: unused dependencies (remove them, or list a false positive under [package.metadata.cargo-machete] ignored):" >&2
  grep -E '^(flink-autoscale|\s)' /tmp/check-deps-machete.$$ >&2 || cat /tmp/check-deps-machete.$$ >&2
  fail=1
fi
rm -f /tmp/check-deps-machete.$$

[ "$fail" = 0 ] && echo "check-deps: core is pure; the agent links no database driver and no simulator; no shipped crate links the test kit; no unused dependencies"
exit "$fail"
