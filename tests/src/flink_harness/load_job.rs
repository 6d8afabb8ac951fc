//! The load job (`tests/flink/job/src/loadjob/LoadJob.java`): its settings, its submission
//! through the REST API, and the rate file that moves its load while it runs.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::rest::FlinkRest;
use super::HarnessError;

const STEP: &str = "submit load job";
const ENTRY_CLASS: &str = "loadjob.LoadJob";

/// Vertex names as Flink reports them in `/jobs/:jid` (operator names joined by chaining).
pub mod vertex {
    pub const SOURCE: &str = "Source: datagen-source";
    pub const CPU_MAP: &str = "cpu-map";
    pub const FILTER: &str = "filter";
    pub const KEYED_SUM: &str = "keyed-sum";
    pub const SINK: &str = "discard-sink: Writer";
}

/// Program arguments of the load job. Parallelisms are the job's starting ones.
#[derive(Debug, Clone)]
pub struct LoadJobSpec {
    pub name: String,
    /// Records per second over all source subtasks at start; [`LoadJob::set_rate`] changes it.
    pub rate: f64,
    /// CPU work per record in cpu-map (LCG iterations); ~0.02 ms of CPU per 10 000 here.
    pub work: u32,
    /// A wait per record in cpu-map (µs), like a call to an external service: busy time
    /// without CPU use, so overload fits on a 2-core machine.
    pub sleep_micros: u64,
    pub keys: u32,
    pub source_parallelism: u32,
    pub map_parallelism: u32,
    pub keyed_parallelism: u32,
    pub sink_parallelism: u32,
    pub max_parallelism: u32,
    pub checkpoint_interval_ms: u64,
    /// Make the source → cpu-map edge REBALANCE, so cpu-map and filter rescale without the
    /// source (the datagen source cannot grow past the splits it started with).
    pub rebalance_after_source: bool,
}

impl Default for LoadJobSpec {
    fn default() -> Self {
        Self {
            name: "flink-autoscale-load".to_owned(),
            rate: 100.0,
            work: 20_000,
            sleep_micros: 0,
            keys: 1000,
            source_parallelism: 2,
            map_parallelism: 2,
            keyed_parallelism: 3,
            sink_parallelism: 1,
            max_parallelism: 128,
            checkpoint_interval_ms: 10_000,
            rebalance_after_source: false,
        }
    }
}

impl LoadJobSpec {
    /// The default job at `rate` records per second.
    pub fn at_rate(rate: f64) -> Self {
        Self {
            rate,
            ..Self::default()
        }
    }

    fn program_args(&self, rate_file: &Path) -> Vec<String> {
        let pairs = [
            ("name", self.name.clone()),
            ("rate-file", rate_file.display().to_string()),
            ("rate", self.rate.to_string()),
            ("work", self.work.to_string()),
            ("sleep-micros", self.sleep_micros.to_string()),
            ("keys", self.keys.to_string()),
            ("p-source", self.source_parallelism.to_string()),
            ("p-map", self.map_parallelism.to_string()),
            ("p-agg", self.keyed_parallelism.to_string()),
            ("p-sink", self.sink_parallelism.to_string()),
            ("max-parallelism", self.max_parallelism.to_string()),
            ("checkpoint-ms", self.checkpoint_interval_ms.to_string()),
            ("source-rebalance", self.rebalance_after_source.to_string()),
        ];
        pairs
            .into_iter()
            .flat_map(|(key, value)| [format!("--{key}"), value])
            .collect()
    }
}

/// A submitted load job.
#[derive(Debug, Clone)]
pub struct LoadJob {
    pub job_id: String,
    pub spec: LoadJobSpec,
    rate_file: PathBuf,
}

impl LoadJob {
    /// Uploads `jar` and runs it with `spec`; returns once Flink accepted the job (not yet
    /// RUNNING). The rate file lives in `run_dir`, which the TaskManager can read.
    pub async fn submit(
        rest: &FlinkRest,
        jar: &Path,
        spec: &LoadJobSpec,
        run_dir: &Path,
    ) -> Result<Self, HarnessError> {
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

    /// Runs this job again under the same job id, for example on a restarted JobManager
    /// (without HA it has forgotten its jobs and jars), restoring `restore_from` (a
    /// checkpoint or savepoint folder) when given. The rate file keeps its current rate.
    pub async fn resubmit(
        &self,
        rest: &FlinkRest,
        jar: &Path,
        restore_from: Option<&Path>,
    ) -> Result<(), HarnessError> {
        let mut body = json!({
            "entryClass": ENTRY_CLASS,
            "programArgsList": self.spec.program_args(&self.rate_file),
            "jobId": self.job_id,
        });
        if let Some(path) = restore_from {
            body["savepointPath"] = Value::from(path.display().to_string());
        }
        let job_id = upload_and_run(rest, jar, body).await?;
        if job_id == self.job_id {
            Ok(())
        } else {
            Err(HarnessError::new(
                STEP,
                format!("resubmitted job {} came back as {job_id}", self.job_id),
            ))
        }
    }

    /// The entry class and program arguments this job was run with (`/jars/:id/run` fields),
    /// for tests that resubmit it themselves.
    pub fn run_request(&self) -> Value {
        json!({
            "entryClass": ENTRY_CLASS,
            "programArgsList": self.spec.program_args(&self.rate_file),
        })
    }

    /// Sets the total input rate (records per second); the source picks it up within ~1 s.
    /// 0 pauses the source.
    pub fn set_rate(&self, records_per_second: f64) -> Result<(), HarnessError> {
        write_rate(&self.rate_file, records_per_second)
    }

    pub fn rate_file(&self) -> &Path {
        &self.rate_file
    }
}

/// Uploads the jar, runs it with `body` (a `/jars/:id/run` request), returns the job id.
pub(super) async fn upload_and_run(
    rest: &FlinkRest,
    jar: &Path,
    body: Value,
) -> Result<String, HarnessError> {
    let bytes = std::fs::read(jar)
        .map_err(|e| HarnessError::new(STEP, format!("cannot read {}: {e}", jar.display())))?;
    let jar_id = rest.upload_jar("loadjob.jar", bytes).await?;
    let answer = rest
        .send_json(hyper::Method::POST, &format!("/jars/{jar_id}/run"), &body)
        .await?;
    answer["jobid"].as_str().map(str::to_owned).ok_or_else(|| {
        HarnessError::new(
            STEP,
            format!("POST /jars/{jar_id}/run answered without a jobid: {answer}"),
        )
    })
}

pub(super) fn write_rate(path: &Path, records_per_second: f64) -> Result<(), HarnessError> {
    if !(records_per_second.is_finite() && records_per_second >= 0.0) {
        return Err(HarnessError::new(
            "set rate",
            format!("rate must be a finite number >= 0, got {records_per_second}"),
        ));
    }
    // Written whole and renamed: the job reads it every second and must never see half.
    let tmp = path.with_extension("rate.tmp");
    std::fs::write(&tmp, format!("{records_per_second}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| HarnessError::new("set rate", format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_args_carry_every_setting() {
        let args = LoadJobSpec::default().program_args(Path::new("/r/load.rate"));
        let pos = |flag: &str| args.iter().position(|a| a == flag).expect(flag);
        assert_eq!(args[pos("--rate-file") + 1], "/r/load.rate");
        assert_eq!(args[pos("--p-agg") + 1], "3");
        assert_eq!(args[pos("--source-rebalance") + 1], "false");
        assert_eq!(args.len(), 26);
    }

    #[test]
    fn refuses_a_negative_rate() {
        let dir = tempfile::tempdir().expect("temp dir");
        let err = write_rate(&dir.path().join("x.rate"), -1.0).expect_err("negative");
        assert!(err.to_string().contains("rate must be"), "{err}");
    }
}
