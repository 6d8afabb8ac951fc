//! Finding the agent's own rescale in Flink 2.3's rescale history and reading how it ended.
//! Pure: the adaptive-scheduler realizer fetches the answers, these functions read them.
//!
//! `PUT /jobs/:jid/resource-requirements` answers `{}` with no id, so a rescale is recognised
//! by what it is: triggered by a requirements update (`UPDATE_REQUIREMENT`), started after
//! the agent handed the plan over (allowing for clock skew between the agent and the
//! JobManager), and asking for exactly the approved parallelism of every vertex (its
//! details' `desiredParallelism`).

use std::collections::BTreeMap;

use flink_autoscale_core::protocol::RescaleReport;

use crate::flink::ids::printable;
use crate::flink::model::Rescale;

/// How far the JobManager's clock may be behind the agent's.
pub const CLOCK_SKEW_MS: u64 = 5_000;
/// History entries looked at per verification (newest first); each costs a details request.
pub const MAX_CANDIDATES: usize = 3;
/// The trigger cause of a rescale asked for through the resource requirements.
const UPDATE_REQUIREMENT: &str = "UPDATE_REQUIREMENT";

/// What the rescale history says about the rescale in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryFinding {
    /// Not served (Flink before 2.3, or `web.adaptive-scheduler.rescale-history.size` is 0),
    /// or the rescale is not listed (yet): verify by watching the job.
    Unknown,
    /// Listed, not ended yet.
    InProgress,
    /// Ended, with the parallelism each vertex ran at afterwards (when Flink says).
    Ended(EndedRescale),
}

/// A rescale that ended, as its details tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedRescale {
    pub report: RescaleReport,
    /// `postRescaleParallelism` per vertex id.
    pub post: BTreeMap<String, u32>,
    /// The first line of the exception a scheduler state recorded, if any.
    pub exception: Option<String>,
}

impl EndedRescale {
    pub fn completed(&self) -> bool {
        self.report.terminal_state == "COMPLETED"
    }

    /// In words, for the outcome: `Flink's rescale history: FAILED (EXCEPTION_OCCURRED) …`.
    pub fn describe(&self) -> String {
        let r = &self.report;
        let mut text = format!(
            "Flink's rescale history: rescale {} {} ({}), triggered by {}",
            r.rescale_uuid,
            r.terminal_state,
            r.terminated_reason.as_deref().unwrap_or("no reason given"),
            r.trigger_cause
        );
        if let Some(e) = &self.exception {
            text.push_str(": ");
            text.push_str(e);
        }
        text
    }
}

/// The history entries that may be the agent's rescale, newest first: requirement updates
/// started no earlier than `since_ms` (minus the clock skew allowance).
pub fn candidates(history: &[Rescale], since_ms: u64) -> Vec<&Rescale> {
    let earliest = i64::try_from(since_ms.saturating_sub(CLOCK_SKEW_MS)).unwrap_or(i64::MAX);
    history
        .iter()
        .filter(|r| r.trigger_cause.as_deref() == Some(UPDATE_REQUIREMENT))
        .filter(|r| r.start_ms.is_some_and(|t| t >= earliest))
        .take(MAX_CANDIDATES)
        .collect()
}

/// Whether `details` asked for exactly `wanted` (vertex id → parallelism).
pub fn asked_for(details: &Rescale, wanted: &BTreeMap<String, u32>) -> bool {
    !wanted.is_empty()
        && wanted.iter().all(|(id, p)| {
            details
                .vertices
                .iter()
                .find(|(vid, _)| vid.eq_ignore_ascii_case(id))
                .and_then(|(_, v)| v.desired)
                == Some(i64::from(*p))
        })
}

/// What the details of the agent's rescale say.
pub fn finding(details: &Rescale) -> HistoryFinding {
    let Some(state) = details.terminal_state.as_deref() else {
        return HistoryFinding::InProgress;
    };
    let text = |s: &str| printable(s.trim());
    let duration_ms = match (details.start_ms, details.end_ms) {
        (Some(start), Some(end)) if end >= start => u64::try_from(end - start).ok(),
        _ => None,
    };
    let post = details
        .vertices
        .iter()
        .filter_map(|(id, v)| {
            let p = u32::try_from(v.post?).ok()?;
            Some((id.to_ascii_lowercase(), p))
        })
        .collect();
    let exception = details
        .scheduler_states
        .iter()
        .filter_map(|s| s.exception.as_deref())
        .find_map(|e| e.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(|line| printable(&line.chars().take(300).collect::<String>()));
    HistoryFinding::Ended(EndedRescale {
        report: RescaleReport {
            rescale_uuid: text(&details.rescale_uuid),
            terminal_state: text(state),
            terminated_reason: details.terminated_reason.as_deref().map(text),
            trigger_cause: text(details.trigger_cause.as_deref().unwrap_or("unknown")),
            duration_ms,
        },
        post,
        exception,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flink::client::parse_json;
    use crate::flink::Endpoint;

    const SAMPLES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flink-rest-samples/rescale-history"
    );

    fn read<T: serde::de::DeserializeOwned>(file: &str) -> T {
        let body = std::fs::read(format!("{SAMPLES}/{file}")).expect("fixture");
        parse_json(Endpoint::RescaleHistory, &body).expect("parses")
    }

    fn plan(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
    }

    #[test]
    fn the_agents_rescale_is_recognised_in_a_real_history() {
        // Captured on Flink 2.3.0: the PUT went out at 1796180811080, the rescale started at
        // 1796180811165; the initial schedule is older and not a requirement update.
        let history: Vec<Rescale> = read("jobs_JID_rescales_history.json");
        let found = candidates(&history, 1_796_180_811_080);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rescale_uuid, "7f55c8b72e131394b399cfb2ee41d16a");
        assert!(
            candidates(&history, 1_796_180_820_000).is_empty(),
            "too late"
        );
        let details: Rescale = read("jobs_JID_rescales_details_UUID.json");
        let ours = plan(&[
            ("193d851ed39da35c23cfb60b0bc854bf", 4),
            ("2920cba0006be7ccf913d04908490463", 4),
            ("8f9f5112ed2d7a8745086a5aed920b28", 4),
            ("124d6e7ca5c4bdde48b6979784eb5c15", 3),
            ("944a180b15f418fe526e0a41072d55d4", 1),
        ]);
        assert!(asked_for(&details, &ours));
        let mut other = ours.clone();
        other.insert("2920cba0006be7ccf913d04908490463".into(), 5);
        assert!(!asked_for(&details, &other));
        let HistoryFinding::Ended(ended) = finding(&details) else {
            panic!("ended");
        };
        assert!(ended.completed());
        assert_eq!(ended.report.terminated_reason.as_deref(), Some("SUCCEEDED"));
        assert_eq!(ended.report.trigger_cause, "UPDATE_REQUIREMENT");
        assert_eq!(ended.report.duration_ms, Some(8_883));
        assert_eq!(ended.post, ours);
        assert_eq!(ended.exception, None);
    }

    #[test]
    fn in_progress_and_ignored_rescales() {
        let running: Vec<Rescale> = read("jobs_JID_rescales_history_in_progress.json");
        assert_eq!(finding(&running[0]), HistoryFinding::InProgress);
        let ignored: Vec<Rescale> = read("jobs_JID_rescales_history_ignored.json");
        let HistoryFinding::Ended(ended) = finding(
            ignored
                .iter()
                .find(|r| r.terminal_state.as_deref() == Some("IGNORED"))
                .expect("an ignored rescale"),
        ) else {
            panic!("ended");
        };
        assert!(!ended.completed());
        assert!(ended
            .describe()
            .contains("IGNORED (RESOURCE_REQUIREMENTS_UPDATED), triggered by UPDATE_REQUIREMENT"));
    }
}
