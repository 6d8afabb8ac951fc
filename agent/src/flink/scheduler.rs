//! Which scheduler runs a job, as the JobManager tells it. Only Flink's adaptive scheduler
//! rescales in place (`PUT /jobs/:jid/resource-requirements`); for any other the
//! adaptive-scheduler realizer must not try. Pure: each function reads one answer.
//!
//! Where each version says it, most direct first:
//! - Flink 2.3: `schedulerType` in `/jobs/overview` and `/jobs/:jid` (`Default`, `Adaptive`,
//!   `AdaptiveBatch`);
//! - every version: `job-type: BATCH` in `/jobs/:jid` (batch jobs never run the adaptive
//!   scheduler);
//! - every version: the job's `jobmanager.scheduler` (or `scheduler-mode: reactive`) in
//!   `/jobs/:jid/jobmanager/config`, when set (absent is not proof: defaults differ);
//! - Flink 1.18+: `GET /jobs/:jid/resource-requirements`, which answers 200 only under the
//!   adaptive scheduler and 500 `UnsupportedOperationException: The DefaultScheduler does not
//!   support changing the parallelism …` otherwise (read at actuation when nothing above
//!   told).

use serde::Serialize;

use super::ids::printable;
use super::model::ConfigEntry;

/// A job's scheduler and where the agent read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scheduler {
    /// As Flink names it (`Adaptive`, `Default`, `AdaptiveBatch`), or a description.
    pub name: String,
    /// Whether it is the adaptive scheduler, the one that rescales in place.
    pub adaptive: bool,
    /// Where it was read, for the operator: `schedulerType`, `job-type`,
    /// `jobmanager.scheduler`, `scheduler-mode` or `resource-requirements`.
    pub source: &'static str,
}

impl Scheduler {
    fn new(name: impl Into<String>, adaptive: bool, source: &'static str) -> Self {
        Scheduler {
            name: name.into(),
            adaptive,
            source,
        }
    }

    /// Why the adaptive-scheduler realizer cannot rescale a job with this scheduler.
    pub fn refusal(&self) -> Option<String> {
        (!self.adaptive).then(|| {
            format!(
                "not applicable: the job runs the {} scheduler (from {}); rescaling in place \
                 through PUT /jobs/:jid/resource-requirements needs the adaptive scheduler \
                 (jobmanager.scheduler: adaptive, streaming jobs): set it, or use \
                 control.realizer \"exec\" or \"kubernetes-operator\"",
                self.name, self.source
            )
        })
    }
}

/// From `schedulerType` (Flink 2.3's `/jobs/overview` and `/jobs/:jid`).
pub fn from_scheduler_type(scheduler_type: &str) -> Scheduler {
    let name = printable(scheduler_type.trim());
    let adaptive = name.eq_ignore_ascii_case("adaptive");
    Scheduler::new(name, adaptive, "schedulerType")
}

/// From `job-type` of `/jobs/:jid`: a batch job never runs the adaptive scheduler.
pub fn from_job_type(job_type: &str) -> Option<Scheduler> {
    job_type
        .trim()
        .eq_ignore_ascii_case("batch")
        .then(|| Scheduler::new("batch (AdaptiveBatch or Default)", false, "job-type"))
}

/// From the job's configuration, when it says: `scheduler-mode: reactive` (which uses the
/// adaptive scheduler) or an explicit `jobmanager.scheduler`.
pub fn from_job_config(entries: &[ConfigEntry]) -> Option<Scheduler> {
    let value = |key: &str| {
        entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.trim().to_ascii_lowercase())
    };
    if value("scheduler-mode").as_deref() == Some("reactive") {
        return Some(Scheduler::new("Adaptive", true, "scheduler-mode"));
    }
    let configured = value("jobmanager.scheduler")?;
    Some(match configured.as_str() {
        "adaptive" => Scheduler::new("Adaptive", true, "jobmanager.scheduler"),
        "default" => Scheduler::new("Default", false, "jobmanager.scheduler"),
        "adaptivebatch" => Scheduler::new("AdaptiveBatch", false, "jobmanager.scheduler"),
        other => Scheduler::new(printable(other), false, "jobmanager.scheduler"),
    })
}

/// From an answer of `GET /jobs/:jid/resource-requirements`: 200 means the adaptive
/// scheduler; a 500 naming the unsupported operation means another one; anything else
/// (job not found, an older Flink without the endpoint) tells nothing.
pub fn from_requirements_answer(status: u16, body: &[u8]) -> Option<Scheduler> {
    const UNSUPPORTED: &str = "does not support changing the parallelism";
    match status {
        200 => Some(Scheduler::new("Adaptive", true, "resource-requirements")),
        500 => {
            let text = String::from_utf8_lossy(body);
            text.contains(UNSUPPORTED).then(|| {
                let name = ["DefaultScheduler", "AdaptiveBatchScheduler"]
                    .into_iter()
                    .find(|n| text.contains(&format!("The {n} ")))
                    .map_or("non-adaptive", |n| n.trim_end_matches("Scheduler"));
                Scheduler::new(name, false, "resource-requirements")
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flink-rest-samples"
    );

    fn entries(pairs: &[(&str, &str)]) -> Vec<ConfigEntry> {
        pairs
            .iter()
            .map(|(k, v)| ConfigEntry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect()
    }

    #[test]
    fn each_answer_names_the_scheduler_and_its_source() {
        let default = from_scheduler_type("Default");
        assert!(!default.adaptive);
        assert!(default
            .refusal()
            .unwrap()
            .contains("runs the Default scheduler (from schedulerType)"));
        assert!(from_scheduler_type("Adaptive").adaptive);
        assert!(from_scheduler_type("Adaptive").refusal().is_none());
        assert!(!from_scheduler_type("AdaptiveBatch").adaptive);
        assert_eq!(from_job_type("STREAMING"), None);
        assert!(!from_job_type("BATCH").unwrap().adaptive);
        let config = |pairs: &[(&str, &str)]| from_job_config(&entries(pairs));
        assert_eq!(
            config(&[("rest.port", "8081")]),
            None,
            "absent is not proof"
        );
        assert!(
            config(&[("jobmanager.scheduler", "adaptive")])
                .unwrap()
                .adaptive
        );
        assert!(
            !config(&[("jobmanager.scheduler", "default")])
                .unwrap()
                .adaptive
        );
        let reactive = config(&[
            ("jobmanager.scheduler", "default"),
            ("scheduler-mode", "REACTIVE"),
        ]);
        assert!(reactive.unwrap().adaptive);
    }

    #[test]
    fn the_resource_requirements_answer_of_a_real_default_scheduler() {
        let body = std::fs::read(format!(
            "{SAMPLES}/errors/PUT_resource-requirements_default-scheduler.json"
        ))
        .expect("fixture");
        let s = from_requirements_answer(500, &body).expect("told");
        assert_eq!((s.name.as_str(), s.adaptive), ("Default", false));
        assert!(from_requirements_answer(200, b"{}").unwrap().adaptive);
        let not_found = br#"{"errors":["Internal server error.","<Exception on server side:\norg.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job"]}"#;
        assert_eq!(from_requirements_answer(500, not_found), None);
        assert_eq!(from_requirements_answer(404, b"{}"), None);
    }
}
