//! The lockstep harness of the convergence tests (it lives in the what-if crate, which drives
//! the agent the same way), plus the tests' scenario files and coordinator settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use flink_autoscale_whatif::harness::*;

/// Scenario files of this crate (`tests/scenarios/`) and of the simulator.
pub fn scenario_path(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let own = root.join("scenarios").join(name);
    if own.exists() {
        own
    } else {
        root.join("../simulator/scenarios").join(name)
    }
}

pub fn scenario_text(name: &str) -> String {
    std::fs::read_to_string(scenario_path(name)).expect("scenario file")
}

/// The scenario file `name`, 15 s polls, [`SHORT_WINDOW`] plus `autoscaler_extra` lines,
/// and [`local_control`] with its state in `dir`.
pub async fn local_harness(name: &str, dir: &Path, autoscaler_extra: &str) -> Harness {
    let extra = format!("{SHORT_WINDOW}{autoscaler_extra}\n{}", local_control(dir));
    Harness::start(&scenario_text(name), Duration::from_secs(15), &extra).await
}

/// `[control]` for the tests with a coordinator at `url`: the adaptive-scheduler realizer,
/// the agent's token in `token_file`, a state file in `dir`.
pub fn coordinator_control(dir: &Path, url: &str, token_file: &Path, region: &str) -> String {
    format!(
        r#"
[control]
realizer = "adaptive-scheduler"
state_file = "{}"
region = "{region}"
cluster_id = "test-cluster"
disk_bytes_per_task_manager = 10737418240
verify_deadline = "10min"
refusal_backoff = "5min"
retry_initial = "15s"
retry_max = "2min"
[control.coordinator]
url = "{url}"
token_file = "{}"
request_timeout = "2s"
"#,
        dir.join("agent-state.json").display(),
        token_file.display()
    )
}
