#!/usr/bin/env bash
# Fleet-scale benchmark: the release agent on its default settings (poll interval 15 s,
# jobmanager.max_concurrent_requests = 4) against one simulated JobManager serving a session
# cluster of N jobs of 10 subtasks (simulator/scenarios/fleet-10k.toml). Measured from the
# JobManager's side (GET /_sim/polls): after a warm-up, over two poll intervals, every job's
# longest wait between two reads of its metric values (also before the first and after the
# last), and the agent's CPU seconds, RSS and log bytes. The baseline, in the same run, is the
# same fleet of 1,000 jobs; the ratios are 10,000 / 1,000.
#
#   scripts/bench-fleet.sh [JOBS...]      (default: 1000 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p flink-autoscale-agent -p flink-autoscale-simulator
SIM=target/release/flink-sim
AGENT=target/release/flink-autoscale-agent
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
INTERVAL=15
WARMUP=${WARMUP:-20}
WINDOW=$((2 * INTERVAL))
TICK=$(getconf CLK_TCK)

cpu_s() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
metric() { curl -sf "http://$AGENT_ADDR/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

phase() {
  local jobs=$1 simport=$2 agentport=$3
  sed "s/^jobs = .*/jobs = $jobs/" simulator/scenarios/fleet-10k.toml > "$WORK/fleet-$jobs.toml"
  "$SIM" --scenario "$WORK/fleet-$jobs.toml" --listen "127.0.0.1:$simport" > "$WORK/sim-$jobs.log" 2>&1 &
  local sim=$!; PIDS+=("$sim")
  local jm="http://127.0.0.1:$simport"
  for _ in $(seq 100); do curl -sf "$jm/jobs/overview" -o /dev/null && break; sleep 0.1; done
  AGENT_ADDR="127.0.0.1:$agentport"
  local started; started=$(date +%s.%N)
  "$AGENT" run --jobmanager "$jm" --listen "$AGENT_ADDR" > "$WORK/agent-$jobs.out" 2> "$WORK/agent-$jobs.log" &
  local agent=$!; PIDS+=("$agent")
  # Until every job was read once (bounded by 2 intervals), then the warm-up.
  local covered=""
  for _ in $(seq $((20 * INTERVAL))); do
    local n; n=$(curl -sf "$jm/_sim/polls" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')
    if [ "$n" -ge "$jobs" ]; then covered=$(echo "$(date +%s.%N) - $started" | bc); break; fi
    sleep 0.1
  done
  sleep "$WARMUP"
  curl -sf -X DELETE "$jm/_sim/stats" > /dev/null
  local cpu0 log0; cpu0=$(cpu_s "$agent"); log0=$(stat -c %s "$WORK/agent-$jobs.log")
  sleep "$WINDOW"
  curl -sf "$jm/_sim/polls" > "$WORK/polls-$jobs.json"
  local cpu1 log1; cpu1=$(cpu_s "$agent"); log1=$(stat -c %s "$WORK/agent-$jobs.log")
  local rss hwm eff inrat keep watched
  rss=$(rss_kib "$agent"); hwm=$(hwm_kib "$agent")
  eff=$(metric flink_autoscale_agent_poll_interval_effective_seconds)
  inrat=$(metric flink_autoscale_agent_jobs_polled_in_time_ratio)
  keep=$(metric flink_autoscale_agent_keeping_up)
  watched=$(metric flink_autoscale_agent_jobs_watched)
  local simcpu; simcpu=$(cpu_s "$sim")
  kill "$agent" "$sim"; wait "$agent" "$sim" 2>/dev/null || true
  python3 - "$WORK/polls-$jobs.json" "$jobs" "$WINDOW" "$INTERVAL" <<PY
import json, sys
r = json.load(open(sys.argv[1])); jobs = int(sys.argv[2]); window = int(sys.argv[3]); interval = int(sys.argv[4])
el = r["elapsed_ms"]
waits = sorted(max(j["max_gap_ms"], j["first_ms"], el - j["last_ms"]) for j in r["jobs"].values())
waits += [float("inf")] * (jobs - len(waits))
reads = sum(j["reads"] for j in r["jobs"].values())
within = sum(1 for w in waits if w <= 2000 * interval)
cpu = float("$cpu1") - float("$cpu0")
print(f"jobs={jobs} watched=${watched} first_full_coverage_s=${covered:-never} "
      f"window_s={el/1000:.1f} reads={reads} reads_per_s={reads/(el/1000):.0f} "
      f"jobs_read_within_2x_interval={within}/{jobs} longest_wait_ms_p50={waits[len(waits)//2]} "
      f"p99={waits[len(waits)*99//100]} max={waits[-1]} "
      f"effective_interval_s=${eff} in_time_ratio=${inrat} keeping_up=${keep} "
      f"agent_cpu_s={cpu:.1f} agent_cpu_share={cpu/(el/1000):.3f} agent_rss_mib={int('$rss')/1024:.1f} "
      f"agent_peak_rss_mib={int('$hwm')/1024:.1f} agent_log_bytes={int('$log1')-int('$log0')} sim_cpu_s_total=${simcpu}")
PY
}

RESULTS=()
port=0
for jobs in "${@:-1000 10000}"; do
  for j in $jobs; do
    line=$(phase "$j" $((18181 + port)) $((19349 + port)))
    port=$((port + 1))
    echo "$line"
    RESULTS+=("$line")
  done
done
if [ "${#RESULTS[@]}" -eq 2 ]; then
  python3 - "${RESULTS[0]}" "${RESULTS[1]}" <<'PY'
import sys
a = dict(kv.split("=", 1) for kv in sys.argv[1].split())
b = dict(kv.split("=", 1) for kv in sys.argv[2].split())
for k in ["reads_per_s", "agent_cpu_s", "agent_rss_mib", "agent_peak_rss_mib"]:
    print(f"ratio {k}: {float(b[k]) / max(float(a[k]), 1e-9):.2f} ({b['jobs']} jobs / {a['jobs']} jobs)")
PY
fi
