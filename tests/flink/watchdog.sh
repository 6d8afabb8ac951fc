#!/usr/bin/env bash
# watchdog.sh OWNER_PID DEADLINE_EPOCH_SECONDS PGID_FILE
#
# Last line of defence for the real-Flink harness: the Rust Drop guard stops the cluster in
# the normal and the panicking case, but not when the test process is killed (SIGKILL, a CI
# timeout) or hangs. This watchdog runs in its own process group and, once the owner is gone
# or the deadline has passed, sends SIGTERM and then SIGKILL to every process group listed
# in PGID_FILE (one id per line; the harness keeps the file current). The harness kills the
# watchdog itself after a clean stop.
set -u
owner="$1"
deadline="$2"
pgid_file="$3"

while :; do
  sleep 1
  if ! kill -0 "$owner" 2>/dev/null; then reason="test process $owner is gone"; break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then reason="deadline reached"; break; fi
done

groups=$(cat "$pgid_file" 2>/dev/null || true)
[ -n "$groups" ] || exit 0
echo "[flink-watchdog] $reason: stopping process groups $(echo $groups)" >&2
for g in $groups; do kill -TERM -- "-$g" 2>/dev/null; done
for _ in $(seq 1 20); do
  alive=0
  for g in $groups; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && exit 0
  sleep 0.5
done
for g in $groups; do kill -KILL -- "-$g" 2>/dev/null; done
exit 0
