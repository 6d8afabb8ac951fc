#!/usr/bin/env bash
# An `exec` realizer for a Flink session cluster whose job cannot be rescaled in place: stop
# the job with a savepoint, run its jar again from that savepoint, and give the new job the
# approved parallelism. The agent runs it with the approved decision as JSON on stdin (see
# docs/operations.md, "The exec realizer"):
#
#   [control]
#   realizer = "exec"
#   [control.exec]
#   command = ["/usr/local/bin/session-cluster-resubmit.sh"]
#   timeout = "10min"
#
# Environment (put it in the agent's unit environment or a wrapper):
#   FLINK_REST_URL           the JobManager, e.g. http://127.0.0.1:8081 (required)
#   FLINK_JAR_ID             the job's jar as uploaded to the cluster (GET /jars) (required)
#   FLINK_ENTRY_CLASS        the jar's entry class (optional: the jar manifest's)
#   FLINK_PROGRAM_ARGS_JSON  the job's program arguments as a JSON array (optional)
#   FLINK_SAVEPOINT_DIR      where the savepoint goes (optional: state.savepoints.dir)
#   FLINK_SAVEPOINT_TIMEOUT  seconds to wait for the savepoint (default 300)
#   FLINK_CURL_OPTS          extra curl options, e.g. "--cacert ca.pem --cert agent.pem --key agent.key"
#
# The parallelism: `/jars/:id/run` gets `pipeline.jobvertex-parallelism-overrides` in its
# `flinkConfiguration`, but Flink 2.x ignores it there: the jar's job reaches the Dispatcher as
# a StreamGraph and the Dispatcher applies the overrides to JobGraphs only (FLINK-38770). So
# when the new job does not already have the approved parallelism, the script sets it with
# `PUT /jobs/:jid/resource-requirements`, which needs `jobmanager.scheduler: adaptive`. Sent
# while the new job waits for its slots, the job starts at the new parallelism; later, the
# adaptive scheduler rescales it once more.
#
# Flink refuses a second submission under the same job id ("Application has already been
# submitted"), so the resubmitted job gets a new id; it is printed on stdout. The agent sees
# it as a new job (a fresh window), and reports the old proposal's outcome as not confirmed
# (timed_out) once control.verify_deadline passes. Exit 0 once the job is resubmitted with the
# approved parallelism requested; non-zero (with the reason on stderr) if any step fails. If
# the run fails after the stop, the savepoint path is printed: resubmit by hand. Needs bash,
# curl and jq.
set -euo pipefail

die() { printf 'session-cluster-resubmit: %s\n' "$*" >&2; exit 1; }
: "${FLINK_REST_URL:?set FLINK_REST_URL}" "${FLINK_JAR_ID:?set FLINK_JAR_ID}"
base=${FLINK_REST_URL%/}
read -r -a curl_opts <<<"${FLINK_CURL_OPTS:-}"
api() { # method path [json body]
  local out
  if [ $# -ge 3 ]; then
    out=$(curl -sS --fail-with-body "${curl_opts[@]}" -X "$1" -H 'Content-Type: application/json' \
      --data "$3" "$base$2") || die "$1 $2 failed: $out"
  else
    out=$(curl -sS --fail-with-body "${curl_opts[@]}" -X "$1" "$base$2") || die "$1 $2 failed: $out"
  fi
  printf '%s' "$out"
}

decision=$(cat)
job_id=$(jq -er '.job_id' <<<"$decision") || die "no job_id in the decision on stdin"
overrides=$(jq -er '.flink_configuration["pipeline.jobvertex-parallelism-overrides"]' <<<"$decision") ||
  die "no pipeline.jobvertex-parallelism-overrides in the decision"

# 1. Stop with a savepoint (one atomic step: no records are processed after the savepoint).
stop_body=$(jq -nc --arg dir "${FLINK_SAVEPOINT_DIR:-}" '{drain: false} + (if $dir == "" then {} else {targetDirectory: $dir} end)')
trigger=$(api POST "/jobs/$job_id/stop" "$stop_body" | jq -er '."request-id"') || die "no request-id from /jobs/$job_id/stop"
deadline=$(( $(date +%s) + ${FLINK_SAVEPOINT_TIMEOUT:-300} ))
while :; do
  status=$(api GET "/jobs/$job_id/savepoints/$trigger")
  if [ "$(jq -r '.status.id' <<<"$status")" = COMPLETED ]; then
    failure=$(jq -r '.operation."failure-cause"."stack-trace" // empty' <<<"$status")
    [ -z "$failure" ] || die "stop-with-savepoint of $job_id failed: ${failure%%$'\n'*}"
    savepoint=$(jq -er '.operation.location' <<<"$status") || die "no savepoint location: $status"
    break
  fi
  [ "$(date +%s)" -lt "$deadline" ] || die "no savepoint of $job_id within ${FLINK_SAVEPOINT_TIMEOUT:-300} s"
  sleep 1
done
printf 'session-cluster-resubmit: %s stopped with savepoint %s\n' "$job_id" "$savepoint" >&2

# 2. Run the jar again from the savepoint with the approved parallelism.
run_body=$(jq -nc --arg sp "$savepoint" --arg ov "$overrides" \
  --arg entry "${FLINK_ENTRY_CLASS:-}" --argjson args "${FLINK_PROGRAM_ARGS_JSON:-[]}" \
  '{savepointPath: $sp, programArgsList: $args,
    flinkConfiguration: {"pipeline.jobvertex-parallelism-overrides": $ov}}
   + (if $entry == "" then {} else {entryClass: $entry} end)')
answer=$(curl -sS --fail-with-body "${curl_opts[@]}" -X POST -H 'Content-Type: application/json' \
  --data "$run_body" "$base/jars/$FLINK_JAR_ID/run") || {
  # Flink's error is a Java stack trace; its last "Caused by:" line says why.
  reason=$(jq -r '.errors[0] // empty' <<<"$answer" 2>/dev/null | grep 'Caused by' | tail -n1)
  die "POST /jars/$FLINK_JAR_ID/run failed: ${reason:-$answer}; the job is stopped, resubmit it from $savepoint"
}
new_id=$(jq -er '.jobid' <<<"$answer") || die "no jobid in $answer; resubmit from $savepoint"
printf 'session-cluster-resubmit: %s resubmitted as %s from %s\n' "$job_id" "$new_id" "$savepoint" >&2

# 3. The approved parallelism, unless Flink applied the overrides (it does for JobGraphs).
wanted=$(jq -ec '.parallelism | select(length > 0)' <<<"$decision") || die "no parallelism map in the decision"
now=$(api GET "/jobs/$new_id" | jq -c '[.vertices[] | {key: .id, value: .parallelism}] | from_entries')
missing=$(jq -nr --argjson w "$wanted" --argjson n "$now" '$w | keys - ($n | keys) | join(",")')
[ -z "$missing" ] || die "job $new_id has no vertex $missing: its graph is not the decision's (changed operator uids?)"
if [ "$(jq -n --argjson w "$wanted" --argjson n "$now" '$n + $w == $n')" = true ]; then
  printf 'session-cluster-resubmit: %s runs at %s (overrides applied)\n' "$new_id" "$wanted" >&2
  printf '%s\n' "$new_id"
  exit 0
fi
# Start from the job's own requirements so that vertices outside the plan keep theirs.
current=$(api GET "/jobs/$new_id/resource-requirements") ||
  die "job $new_id runs at its old parallelism and its resource requirements cannot be read (needs jobmanager.scheduler: adaptive)"
body=$(jq -c --argjson w "$wanted" '. + ($w | map_values({parallelism: {lowerBound: 1, upperBound: .}}))' <<<"$current")
# A 409 means another update is in progress: retry briefly.
deadline=$(( $(date +%s) + 60 ))
until out=$(curl -sS --fail-with-body "${curl_opts[@]}" -X PUT -H 'Content-Type: application/json' \
  --data "$body" "$base/jobs/$new_id/resource-requirements"); do
  [ "$(date +%s)" -lt "$deadline" ] ||
    die "PUT /jobs/$new_id/resource-requirements failed: $out; job $new_id runs at its old parallelism"
  sleep 1
done
got=$(api GET "/jobs/$new_id/resource-requirements" | jq -c 'map_values(.parallelism.upperBound)')
[ "$(jq -n --argjson w "$wanted" --argjson g "$got" '$g + $w == $g')" = true ] ||
  die "job $new_id did not take the requirements: asked $wanted, has $got"
printf 'session-cluster-resubmit: %s set to %s (resource requirements)\n' "$new_id" "$wanted" >&2
printf '%s\n' "$new_id"
