//! The wide job (`tests/flink/job/src/loadjob/WideJob.java`): many subtasks and little work,
//! for measuring what the JobManager's metric handling costs at high parallelism.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::load_job::{upload_and_run, write_rate};
use super::rest::FlinkRest;
use super::HarnessError;

const ENTRY_CLASS: &str = "loadjob.WideJob";

/// Vertex names as Flink reports them in `/jobs/:jid`.
pub mod wide_vertex {
    pub const SOURCE: &str = "Source: datagen-source";
    /// The stage that waits `sleep_micros` per record.
    pub const SLOW_STAGE: &str = "stage-1";
    pub const SINK: &str = "discard-sink: Writer";
}

/// Program arguments of the wide job.
#[derive(Debug, Clone)]
pub struct WideJobSpec {
    pub name: String,
    /// Records per second over all source subtasks; [`WideJob::set_rate`] changes it.
    pub rate: f64,
    /// A wait per record in stage-1 (µs): busy time without CPU use.
    pub sleep_micros: u64,
    /// Job vertices (at least 4): the source, `vertices - 2` stages and the sink.
    pub vertices: u32,
    /// Parallelism of every vertex.
    pub parallelism: u32,
    pub max_parallelism: u32,
    /// 0 turns checkpoints off.
    pub checkpoint_interval_ms: u64,
}

impl Default for WideJobSpec {
    fn default() -> Self {
        Self {
            name: "flink-autoscale-wide".to_owned(),
            rate: 1000.0,
            sleep_micros: 0,
            vertices: 8,
            parallelism: 128,
            max_parallelism: 128,
            checkpoint_interval_ms: 0,
        }
    }
}

impl WideJobSpec {
    pub fn subtasks(&self) -> u32 {
        self.vertices * self.parallelism
    }

    fn program_args(&self, rate_file: &Path) -> Vec<String> {
        let pairs = [
            ("name", self.name.clone()),
            ("rate-file", rate_file.display().to_string()),
            ("rate", self.rate.to_string()),
            ("sleep-micros", self.sleep_micros.to_string()),
            ("vertices", self.vertices.to_string()),
            ("parallelism", self.parallelism.to_string()),
            ("max-parallelism", self.max_parallelism.to_string()),
            ("checkpoint-ms", self.checkpoint_interval_ms.to_string()),
        ];
        pairs
            .into_iter()
            .flat_map(|(key, value)| [format!("--{key}"), value])
            .collect()
    }
}

/// A submitted wide job.
#[derive(Debug, Clone)]
pub struct WideJob {
    pub job_id: String,
    pub spec: WideJobSpec,
    rate_file: PathBuf,
}

impl WideJob {
    /// Uploads `jar` and runs the wide job with `spec`; returns once Flink accepted it (not
    /// yet RUNNING). The rate file lives in `run_dir`.
    pub async fn submit(
        rest: &FlinkRest,
        jar: &Path,
        spec: &WideJobSpec,
        run_dir: &Path,
    ) -> Result<Self, HarnessError> {
        if spec.vertices < 4 {
            return Err(HarnessError::new(
                "submit wide job",
                format!("vertices must be at least 4, got {}", spec.vertices),
            ));
        }
        let rate_file = run_dir.join(format!("{}.rate", spec.name));
        write_rate(&rate_file, spec.rate)?;
        let body = json!({
            "entryClass": ENTRY_CLASS,
            "programArgsList": spec.program_args(&rate_file),
        });
        let job_id = upload_and_run(rest, jar, body).await?;
        Ok(Self {
            job_id,
            spec: spec.clone(),
            rate_file,
        })
    }

    /// Sets the total input rate (records per second); the source picks it up within ~1 s.
    pub fn set_rate(&self, records_per_second: f64) -> Result<(), HarnessError> {
        write_rate(&self.rate_file, records_per_second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_args_carry_every_setting() {
        let spec = WideJobSpec {
            parallelism: 16,
            ..WideJobSpec::default()
        };
        let args = spec.program_args(Path::new("/r/w.rate"));
        let pos = |flag: &str| args.iter().position(|a| a == flag).expect(flag);
        assert_eq!(args[pos("--rate-file") + 1], "/r/w.rate");
        assert_eq!(args[pos("--parallelism") + 1], "16");
        assert_eq!(args[pos("--vertices") + 1], "8");
        assert_eq!(args.len(), 16);
        assert_eq!(spec.subtasks(), 128);
    }
}
