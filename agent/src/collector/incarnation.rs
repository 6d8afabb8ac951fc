//! Telling one incarnation of a job from the next. `/jobs/overview` is read every poll for
//! all jobs at once; only when a job's entry there changed is `/jobs/:jid` read again, and a
//! new RUNNING timestamp, a parallelism change or a topology change starts a new
//! incarnation (names, slices and the window start over). Pure.

use std::collections::HashMap;

use crate::flink::model::{JobDetails, JobOverview};
use flink_autoscale_core::samples::{Input, VertexSpec};

/// What changes on `/jobs/overview` when a job restarts or rescales, or when some of its
/// subtasks finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverviewMark {
    state: String,
    last_modification: Option<i64>,
    total_tasks: Option<i64>,
    finished_tasks: Option<i64>,
}

impl OverviewMark {
    pub fn of(overview: &JobOverview) -> Self {
        OverviewMark {
            state: overview.state.clone(),
            last_modification: overview.last_modification,
            total_tasks: overview.tasks.as_ref().and_then(|t| t.total),
            finished_tasks: overview.tasks.as_ref().and_then(|t| t.finished),
        }
    }
}

/// One incarnation of a job: the RUNNING timestamp and the topology with parallelism.
#[derive(Debug, Clone, PartialEq)]
pub struct Incarnation {
    pub running_since_ms: Option<i64>,
    pub topology: Vec<VertexSpec>,
}

impl Incarnation {
    pub fn of(details: &JobDetails) -> Self {
        Incarnation {
            running_since_ms: details.running_since_ms(),
            topology: topology_of(details),
        }
    }
}

/// What the latest job details said about the incarnation.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The same incarnation as before.
    Same,
    /// The first incarnation this collector sees.
    First,
    /// A restart, rescale or topology change, described for the log.
    New(String),
}

/// How often, at most, the job details are re-read because the subtasks reporting
/// disagree with the known parallelism.
pub const TOPOLOGY_RECHECK_EVERY_MS: u64 = 60_000;

/// The job's last overview entry and incarnation.
#[derive(Debug, Default)]
pub struct IncarnationTracker {
    mark: Option<OverviewMark>,
    current: Option<Incarnation>,
    force_details: bool,
    last_recheck_ms: Option<u64>,
}

impl IncarnationTracker {
    /// Whether the job details must be read this poll: the first time, when the job's
    /// overview entry changed, or when forced.
    pub fn needs_details(&self, mark: &OverviewMark) -> bool {
        self.force_details || self.current.is_none() || self.mark.as_ref() != Some(mark)
    }

    /// Remembers the overview entry the job details (or the job's state) were read for.
    pub fn note_mark(&mut self, mark: OverviewMark) {
        self.mark = Some(mark);
        self.force_details = false;
    }

    /// Folds in freshly read job details of a RUNNING job.
    pub fn note_details(&mut self, details: &JobDetails) -> Change {
        let incarnation = Incarnation::of(details);
        let change = match &self.current {
            None => Change::First,
            Some(old) if *old == incarnation => return Change::Same,
            Some(old) => Change::New(describe_change(old, &incarnation)),
        };
        self.current = Some(incarnation);
        change
    }

    /// Reads the job details on the next poll whatever the overview says (a counter went
    /// backwards without a visible change).
    pub fn force_details(&mut self) {
        self.force_details = true;
    }

    /// The subtasks reporting disagree with the known parallelism: the job details read
    /// when the overview changed may have lagged it (the REST handlers cache the execution
    /// graph), so they are read again on the next poll, at most once per
    /// [`TOPOLOGY_RECHECK_EVERY_MS`] while the disagreement lasts.
    pub fn recheck_topology(&mut self, now_ms: u64) {
        let due = self
            .last_recheck_ms
            .is_none_or(|last| now_ms.saturating_sub(last) >= TOPOLOGY_RECHECK_EVERY_MS);
        if due {
            self.last_recheck_ms = Some(now_ms);
            self.force_details = true;
        }
    }

    pub fn current(&self) -> Option<&Incarnation> {
        self.current.as_ref()
    }
}

/// How many subtasks of each vertex FINISHED, by vertex id (read with the job details; not
/// part of the incarnation: subtasks finish while the job runs on).
pub fn finished_subtasks(details: &JobDetails) -> HashMap<String, u32> {
    details
        .vertices
        .iter()
        .map(|v| (v.id.clone(), v.finished_subtasks()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The engine's view of the job graph: vertices with parallelism and input edges.
pub fn topology_of(details: &JobDetails) -> Vec<VertexSpec> {
    let inputs: HashMap<&str, Vec<Input>> = details
        .plan
        .iter()
        .flat_map(|p| p.nodes.iter())
        .map(|n| {
            let inputs = n
                .inputs
                .iter()
                .flatten()
                .map(|i| Input {
                    id: i.id.clone(),
                    ship_strategy: ship_strategy(i.ship_strategy.as_deref()),
                })
                .collect();
            (n.id.as_str(), inputs)
        })
        .collect();
    details
        .vertices
        .iter()
        .map(|v| VertexSpec {
            id: v.id.clone(),
            name: v.name.clone(),
            parallelism: v.parallelism,
            max_parallelism: v.max_parallelism,
            source_partitions: 0,
            inputs: inputs.get(v.id.as_str()).cloned().unwrap_or_default(),
            finished_subtasks: 0,
        })
        .collect()
}

/// Known partitioner names, upper-cased; anything else is UNKNOWN (as the operator does).
fn ship_strategy(raw: Option<&str>) -> String {
    let s = raw.unwrap_or("").trim().to_ascii_uppercase();
    match s.as_str() {
        "FORWARD" | "HASH" | "REBALANCE" | "RESCALE" | "BROADCAST" | "GLOBAL" | "SHUFFLE"
        | "CUSTOM" => s,
        _ => "UNKNOWN".into(),
    }
}

fn describe_change(old: &Incarnation, new: &Incarnation) -> String {
    if old.running_since_ms != new.running_since_ms {
        return format!(
            "job restarted (RUNNING since {:?}, was {:?})",
            new.running_since_ms, old.running_since_ms
        );
    }
    let ids = |i: &Incarnation| i.topology.iter().map(|v| v.id.clone()).collect::<Vec<_>>();
    if ids(old) != ids(new) {
        return "topology changed".into();
    }
    let changed: Vec<String> = old
        .topology
        .iter()
        .zip(&new.topology)
        .filter(|(a, b)| a.parallelism != b.parallelism)
        .map(|(a, b)| format!("{} {}->{}", a.id, a.parallelism, b.parallelism))
        .collect();
    if changed.is_empty() {
        "job graph changed".into()
    } else {
        format!("rescaled: {}", changed.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details(running: i64, parallelism: &[u32]) -> JobDetails {
        let vertices: Vec<serde_json::Value> = parallelism
            .iter()
            .enumerate()
            .map(|(i, p)| serde_json::json!({"id": format!("v{i}"), "parallelism": p, "maxParallelism": 128}))
            .collect();
        let nodes: Vec<serde_json::Value> = (0..parallelism.len())
            .map(|i| match i {
                0 => serde_json::json!({"id": "v0"}),
                _ => serde_json::json!({"id": format!("v{i}"), "inputs": [{"id": format!("v{}", i - 1), "ship_strategy": "hash"}]}),
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "jid": "j", "state": "RUNNING", "timestamps": {"RUNNING": running},
            "vertices": vertices, "plan": {"nodes": nodes}
        }))
        .unwrap()
    }

    fn overview(state: &str, modified: i64) -> JobOverview {
        serde_json::from_value(serde_json::json!({
            "jid": "j", "state": state, "last-modification": modified, "tasks": {"total": 3}
        }))
        .unwrap()
    }

    #[test]
    fn details_are_read_first_then_only_when_the_overview_changes_or_is_forced() {
        let mut t = IncarnationTracker::default();
        let (first, second) = (
            OverviewMark::of(&overview("RUNNING", 1)),
            OverviewMark::of(&overview("RUNNING", 2)),
        );
        assert!(t.needs_details(&first));
        t.note_mark(first.clone());
        assert!(t.needs_details(&first), "no incarnation known yet");
        assert_eq!(t.note_details(&details(100, &[2, 4])), Change::First);
        assert!(!t.needs_details(&first));
        assert!(t.needs_details(&second), "a failed read keeps asking");
        t.force_details();
        assert!(t.needs_details(&first));
        t.note_mark(second.clone());
        assert_eq!(t.note_details(&details(100, &[2, 4])), Change::Same);
        assert!(!t.needs_details(&second));
        assert!(t.needs_details(&OverviewMark::of(&overview("RESTARTING", 2))));
    }

    #[test]
    fn a_parallelism_disagreement_rereads_the_details_at_most_once_a_minute() {
        let mut t = IncarnationTracker::default();
        let mark = OverviewMark::of(&overview("RUNNING", 1));
        t.note_mark(mark.clone());
        t.note_details(&details(100, &[2, 2]));
        assert!(!t.needs_details(&mark));
        t.recheck_topology(1_000);
        assert!(t.needs_details(&mark), "the details are read again");
        t.note_mark(mark.clone());
        assert_eq!(
            t.note_details(&details(100, &[2, 1])),
            Change::New("rescaled: v1 2->1".into())
        );
        t.recheck_topology(30_000);
        assert!(!t.needs_details(&mark), "not again within the minute");
        t.recheck_topology(1_000 + TOPOLOGY_RECHECK_EVERY_MS);
        assert!(t.needs_details(&mark));
    }

    #[test]
    fn finishing_subtasks_change_the_mark_but_not_the_incarnation() {
        let mut running = overview("RUNNING", 1);
        let before = OverviewMark::of(&running);
        running.tasks = Some(crate::flink::model::TaskCounts {
            total: Some(3),
            finished: Some(2),
        });
        let after = OverviewMark::of(&running);
        assert_ne!(before, after, "the details are read again");
        let mut t = IncarnationTracker::default();
        let mut d = details(100, &[4, 4]);
        t.note_details(&d);
        d.vertices[0].tasks = Some(crate::flink::model::VertexTaskCounts { finished: Some(2) });
        assert_eq!(t.note_details(&d), Change::Same);
        assert_eq!(finished_subtasks(&d).get("v0"), Some(&2));
        assert_eq!(finished_subtasks(&d).get("v1"), None);
    }

    #[test]
    fn changes_are_told_apart() {
        let cases: [(JobDetails, &str); 3] = [
            (
                details(200, &[2, 4]),
                "job restarted (RUNNING since Some(200), was Some(100))",
            ),
            (details(100, &[2, 8]), "rescaled: v1 4->8"),
            (details(100, &[2, 4, 1]), "topology changed"),
        ];
        for (next, expected) in cases {
            let mut t = IncarnationTracker::default();
            t.note_details(&details(100, &[2, 4]));
            assert_eq!(t.note_details(&next), Change::New(expected.into()));
            assert_eq!(t.current().unwrap().topology.len(), next.vertices.len());
        }
    }

    #[test]
    fn the_topology_carries_edges_and_known_partitioners() {
        let topology = topology_of(&details(1, &[2, 4]));
        assert!(topology[0].inputs.is_empty());
        assert_eq!(topology[1].inputs[0].id, "v0");
        assert_eq!(topology[1].inputs[0].ship_strategy, "HASH");
        assert_eq!(ship_strategy(Some(" forward ")), "FORWARD");
        assert_eq!(ship_strategy(Some("POINTWISE")), "UNKNOWN");
        assert_eq!(ship_strategy(None), "UNKNOWN");
    }
}
