//! Gets Java, the Flink distribution and the load job jar onto the machine by running
//! `tests/flink/prepare.sh`, which caches them so that later runs take about a second.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::HarnessError;

const STEP: &str = "prepare (Java 17, Flink wheels from PyPI, load job)";

/// A fresh machine may need apt-get and two downloads of ~330 MB in total.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(900);

/// What `prepare.sh` reported.
#[derive(Debug, Clone)]
pub struct Installation {
    pub flink_home: PathBuf,
    pub flink_version: String,
    pub load_job_jar: PathBuf,
    pub java_version: String,
    /// The install cache; run folders of failed tests are kept under `<cache_dir>/runs`.
    pub cache_dir: PathBuf,
}

/// The folder holding the harness's shell scripts and the load job sources.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("flink")
}

/// Installs what is missing and returns where it is. Fails, never skips, when Java or the
/// wheels cannot be had; the error carries the script's own explanation.
pub async fn prepare(
    flink_version: &str,
    cache_dir: Option<&Path>,
) -> Result<Installation, HarnessError> {
    let script = scripts_dir().join("prepare.sh");
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .env("FLINK_VERSION", flink_version)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cache_dir {
        command.env("FLINK_HARNESS_CACHE", dir);
    }
    let output = tokio::time::timeout(PREPARE_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            HarnessError::new(
                STEP,
                format!(
                    "{} did not finish within {} s",
                    script.display(),
                    PREPARE_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|e| {
            HarnessError::new(STEP, format!("cannot run bash {}: {e}", script.display()))
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(HarnessError::new(
            STEP,
            format!(
                "{} failed ({}); a real-Flink test needs Java 11+ (17 recommended) and the \
                 apache-flink/apache-flink-libraries=={flink_version} wheels. Its output:\n{}",
                script.display(),
                output.status,
                stderr.trim_end()
            ),
        ));
    }
    parse_report(&String::from_utf8_lossy(&output.stdout))
}

fn parse_report(stdout: &str) -> Result<Installation, HarnessError> {
    let value = |key: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
            .ok_or_else(|| {
                HarnessError::new(
                    STEP,
                    format!("prepare.sh printed no {key}= line; its output was:\n{stdout}"),
                )
            })
    };
    Ok(Installation {
        flink_home: PathBuf::from(value("FLINK_HOME")?),
        flink_version: value("FLINK_VERSION")?,
        load_job_jar: PathBuf::from(value("LOAD_JOB_JAR")?),
        java_version: value("JAVA_VERSION")?,
        cache_dir: PathBuf::from(value("CACHE_DIR")?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key_of_the_report() {
        let report = "FLINK_HOME=/c/dist-2.3.0/pyflink\nFLINK_VERSION=2.3.0\n\
                      LOAD_JOB_JAR=/c/jobs/loadjob.jar\nJAVA_VERSION=17.0.15\nCACHE_DIR=/c\n";
        let installation = parse_report(report).expect("complete report");
        assert_eq!(
            installation.flink_home,
            PathBuf::from("/c/dist-2.3.0/pyflink")
        );
        assert_eq!(installation.flink_version, "2.3.0");
        assert_eq!(
            installation.load_job_jar,
            PathBuf::from("/c/jobs/loadjob.jar")
        );
        assert_eq!(installation.java_version, "17.0.15");
        assert_eq!(installation.cache_dir, PathBuf::from("/c"));
    }

    #[test]
    fn names_the_missing_key() {
        let err = parse_report("FLINK_HOME=/x\n").expect_err("incomplete report");
        assert!(err.to_string().contains("FLINK_VERSION"), "{err}");
    }
}
