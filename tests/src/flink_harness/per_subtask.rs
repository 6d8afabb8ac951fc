//! The agent's figures checked against Flink's own: one `collect --once` poll bracketed by two
//! reads of every subtask's `subtasks/:i/metrics?get=…`. When both reads agree, no
//! MetricFetcher refresh happened in between and the agent saw the same snapshot, so each
//! figure it reports must equal the same aggregate of the per-subtask values.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::{job_in_round, run_collect, single, FlinkRest, HarnessError, Polls, VertexStatus};

const STEP: &str = "agent figures vs Flink's per-subtask values";
const AGENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Per vertex, per name: every subtask's value from `subtasks/:i/metrics?get=`.
pub type SubtaskValues = BTreeMap<String, BTreeMap<String, Vec<f64>>>;

/// Reads every subtask's values of `names[vertex]` (NaN where Flink has none).
pub async fn per_subtask_values(
    rest: &FlinkRest,
    jid: &str,
    names: &BTreeMap<String, Vec<String>>,
    vertices: &[VertexStatus],
) -> Result<SubtaskValues, HarnessError> {
    let mut all = SubtaskValues::new();
    for v in vertices {
        let wanted = names.get(&v.id).map(Vec::as_slice).unwrap_or_default();
        let mut by_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for subtask in 0..v.parallelism {
            let path = format!(
                "/jobs/{jid}/vertices/{}/subtasks/{subtask}/metrics?get={}",
                v.id,
                wanted.join(",")
            );
            let answer = rest.get(&path).await?;
            for name in wanted {
                let value = single(&answer, name).unwrap_or(f64::NAN);
                by_name.entry(name.clone()).or_default().push(value);
            }
        }
        all.insert(v.id.clone(), by_name);
    }
    Ok(all)
}

/// One `collect --once` round of the agent at `url`.
pub async fn collect_once(agent: &Path, url: &str) -> Result<Value, HarnessError> {
    let rounds = run_collect(agent, url, Polls::Once, AGENT_TIMEOUT).await?;
    rounds
        .into_iter()
        .next()
        .ok_or_else(|| HarnessError::new(STEP, "collect --once printed no round"))
}

/// The agent's view of job `jid` in `round`.
pub fn job_of<'a>(round: &'a Value, jid: &str) -> Result<&'a Value, HarnessError> {
    job_in_round(round, jid).ok_or_else(|| {
        HarnessError::new(STEP, format!("collect did not report job {jid}: {round}"))
    })
}

/// Per vertex, every metric name the agent resolved (sorted, each once).
pub fn resolved_names(job: &Value, vertices: &[VertexStatus]) -> BTreeMap<String, Vec<String>> {
    const SINGLE: [&str; 3] = ["busy", "backpressured", "idle"];
    const LISTS: [&str; 5] = [
        "records_in",
        "records_in_per_second",
        "records_out",
        "records_out_per_second",
        "source_records_out",
    ];
    vertices
        .iter()
        .map(|v| {
            let names = &job["names"][&v.id];
            let singles = SINGLE.iter().filter_map(|k| names[*k].as_str());
            let lists = LISTS
                .iter()
                .flat_map(|k| names[*k].as_array().into_iter().flatten())
                .filter_map(Value::as_str);
            let mut all: Vec<String> = singles.chain(lists).map(str::to_owned).collect();
            all.sort();
            all.dedup();
            (v.id.clone(), all)
        })
        .collect()
}

/// A `collect --once` round that fell inside one MetricFetcher snapshot, with Flink's
/// per-subtask values of that snapshot; tries `attempts` times.
pub async fn poll_within_one_snapshot(
    agent: &Path,
    rest: &FlinkRest,
    jid: &str,
    resolved: &BTreeMap<String, Vec<String>>,
    vertices: &[VertexStatus],
    attempts: usize,
) -> Result<(Value, SubtaskValues), HarnessError> {
    for attempt in 1..=attempts {
        let before = per_subtask_values(rest, jid, resolved, vertices).await?;
        let round = collect_once(agent, rest.base_url()).await?;
        let after = per_subtask_values(rest, jid, resolved, vertices).await?;
        // Compared as text: NaN (a value Flink did not have) equals itself there.
        let same_snapshot = format!("{before:?}") == format!("{after:?}");
        eprintln!("[collect] attempt {attempt}: same snapshot around the poll: {same_snapshot}");
        if same_snapshot {
            return Ok((round, before));
        }
    }
    Err(HarnessError::new(
        STEP,
        format!("no poll fell inside one MetricFetcher snapshot in {attempts} attempts"),
    ))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// How a sample field is computed from the per-subtask values of the names in `names[key]`.
#[derive(Clone, Copy)]
enum Reduce {
    Max,
    Avg,
    Sum,
}

impl Reduce {
    fn of(self, values: &[f64]) -> f64 {
        match self {
            Self::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Self::Avg => values.iter().sum::<f64>() / values.len() as f64,
            Self::Sum => values.iter().sum(),
        }
    }
}

/// (sample field as a JSON pointer below the vertex, key in `names`, reduction, required).
/// The agent may leave out fields it does not use (it asks Flink only for those); a field
/// it reports must match, and the ones every decision needs must be there.
const FIELDS: [(&str, &str, Reduce, bool); 9] = [
    ("/busy_time_ms_per_second/max", "busy", Reduce::Max, true),
    ("/busy_time_ms_per_second/avg", "busy", Reduce::Avg, true),
    ("/busy_time_ms_per_second/sum", "busy", Reduce::Sum, false),
    (
        "/backpressured_time_ms_per_second",
        "backpressured",
        Reduce::Avg,
        true,
    ),
    ("/idle_time_ms_per_second", "idle", Reduce::Avg, false),
    ("/num_records_in", "records_in", Reduce::Sum, true),
    ("/num_records_out", "records_out", Reduce::Sum, false),
    (
        "/num_records_in_per_second",
        "records_in_per_second",
        Reduce::Sum,
        false,
    ),
    (
        "/num_records_out_per_second",
        "records_out_per_second",
        Reduce::Sum,
        false,
    ),
];

/// The agent's sample vs the same figures computed from Flink's per-subtask values; returns
/// the mismatches, each described. Several names for one figure (a list) are summed.
pub fn compare(job: &Value, flink: &SubtaskValues) -> Vec<String> {
    let mut mismatches = Vec::new();
    for (vid, by_name) in flink {
        let sample = &job["sample"]["vertices"][vid];
        for (pointer, key, reduce, required) in FIELDS {
            let names = &job["names"][vid][key];
            let listed: Vec<&str> = match names {
                Value::String(name) => vec![name.as_str()],
                Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let Some(agent) = sample.pointer(pointer) else {
                if required {
                    mismatches.push(format!("vertex {vid}: no {pointer} in the agent's sample"));
                }
                continue;
            };
            let figure = |listed: &[&str]| -> f64 {
                listed
                    .iter()
                    .map(|name| {
                        reduce.of(by_name.get(*name).map(Vec::as_slice).unwrap_or_default())
                    })
                    .sum()
            };
            let mut expected = figure(&listed);
            // A source that counts no records in (datagen) reports its records out instead.
            if key == "records_in" && expected == 0.0 {
                let out: Vec<&str> = job["names"][vid]["source_records_out"]
                    .as_array()
                    .map(|l| l.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !out.is_empty() {
                    expected = figure(&out);
                }
            }
            if !agent.as_f64().is_some_and(|got| close(got, expected)) {
                mismatches.push(format!(
                    "vertex {vid} {pointer}: agent {agent}, Flink per-subtask {expected} ({listed:?})"
                ));
            }
        }
    }
    mismatches
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compares_each_reported_figure_with_the_per_subtask_aggregate() {
        let flink: SubtaskValues = [(
            "v".to_owned(),
            [
                ("busyTimeMsPerSecond".to_owned(), vec![100.0, 300.0]),
                ("backPressuredTimeMsPerSecond".to_owned(), vec![0.0, 10.0]),
                ("numRecordsIn".to_owned(), vec![5.0, 7.0]),
            ]
            .into(),
        )]
        .into();
        let job = |busy_max: f64| {
            json!({
                "names": {"v": {"busy": "busyTimeMsPerSecond",
                    "backpressured": "backPressuredTimeMsPerSecond",
                    "records_in": ["numRecordsIn"]}},
                "sample": {"vertices": {"v": {
                    "busy_time_ms_per_second": {"max": busy_max, "avg": 200.0},
                    "backpressured_time_ms_per_second": 5.0,
                    "num_records_in": 12.0}}}
            })
        };
        assert!(compare(&job(300.0), &flink).is_empty());
        let mismatches = compare(&job(299.0), &flink);
        assert_eq!(mismatches.len(), 1, "{mismatches:?}");
        assert!(mismatches[0].contains("busy_time_ms_per_second/max"));
        let mut missing = job(300.0);
        missing["sample"]["vertices"]["v"]
            .as_object_mut()
            .unwrap()
            .remove("num_records_in");
        assert!(compare(&missing, &flink)[0].contains("no /num_records_in"));
    }
}
