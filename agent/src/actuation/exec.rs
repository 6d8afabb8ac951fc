//! `exec`: runs a configured program (no shell) with the approved decision as JSON on stdin.
//! Exit code 0 means the control plane accepted the change; the loop then watches the job.
//! stdout and stderr are logged; the program is killed at the timeout.

use std::process::Stdio;
use std::time::Duration;

use flink_autoscale_core::protocol::{Plan, Proposal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::{Actuation, ActuationError, ActuationRequest, Realizer};
use crate::daemon::clock::BoxFuture;

/// Output kept per stream for the log and the outcome text.
const OUTPUT_LIMIT: usize = 8 << 10;

pub struct ExecRealizer {
    command: Vec<String>,
    timeout: Duration,
}

impl ExecRealizer {
    /// `command`: program and arguments, non-empty (validated with the configuration).
    pub fn new(command: Vec<String>, timeout: Duration) -> Self {
        ExecRealizer { command, timeout }
    }

    async fn run(&self, input: Vec<u8>) -> Result<(), ActuationError> {
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| ActuationError::Failed("control.exec.command is empty".into()))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            // Nothing ran, so nothing changed: the same plan may be tried again later.
            .map_err(|e| ActuationError::RetryLater(format!("cannot start {program}: {e}")))?;
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let work = async {
            if let Some(mut s) = stdin.take() {
                // A program that ignores stdin closes the pipe; that is its choice.
                let _ = s.write_all(&input).await;
                let _ = s.shutdown().await;
            }
            let (out, err) = tokio::join!(read_limited(stdout.take()), read_limited(stderr.take()));
            let status = child.wait().await;
            (status, out, err)
        };
        let (status, out, err) = match tokio::time::timeout(self.timeout, work).await {
            Ok(done) => done,
            Err(_) => {
                // Dropping the future dropped the child: kill_on_drop ends it.
                tracing::warn!(program = %program, timeout_s = self.timeout.as_secs_f64(), "exec realizer timed out; killed");
                return Err(ActuationError::Unknown(format!(
                    "{program} did not finish within {:?} and was killed",
                    self.timeout
                )));
            }
        };
        let status =
            status.map_err(|e| ActuationError::Unknown(format!("waiting for {program}: {e}")))?;
        tracing::info!(program = %program, code = ?status.code(), stdout = %out.trim_end(), stderr = %err.trim_end(), "exec realizer finished");
        if status.success() {
            Ok(())
        } else {
            Err(ActuationError::Failed(format!(
                "{program} exited with {status}: {}",
                err.trim_end()
            )))
        }
    }
}

async fn read_limited<R: tokio::io::AsyncRead + Unpin>(stream: Option<R>) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            // Keep reading past the limit so the program never blocks on a full pipe.
            Ok(n) if buf.len() < OUTPUT_LIMIT => {
                buf.extend_from_slice(&chunk[..n.min(OUTPUT_LIMIT - buf.len())])
            }
            Ok(_) => {}
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

impl Realizer for ExecRealizer {
    fn apply<'a>(
        &'a self,
        proposal: &'a Proposal,
        plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>> {
        Box::pin(async move {
            let input =
                serde_json::to_vec(&ActuationRequest::new(proposal, plan)).unwrap_or_default();
            self.run(input).await.map(|()| Actuation::Started)
        })
    }

    fn label(&self) -> &'static str {
        "exec"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64) -> ExecRealizer {
        ExecRealizer::new(
            vec!["/bin/sh".into(), "-c".into(), script.into()],
            Duration::from_millis(timeout_ms),
        )
    }

    #[tokio::test]
    async fn exit_code_decides_and_stdin_carries_the_json() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("in.json");
        let ok = sh(&format!("cat > {}", out.display()), 5_000);
        ok.run(b"{\"a\":1}".to_vec()).await.unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"a\":1}");
        let failed = sh("echo broken >&2; exit 3", 5_000).run(Vec::new()).await;
        match failed {
            Err(ActuationError::Failed(m)) => assert!(m.contains("broken"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_hanging_command_is_killed_at_the_timeout() {
        let started = std::time::Instant::now();
        let r = sh("exec sleep 30", 200).run(Vec::new()).await;
        assert!(matches!(r, Err(ActuationError::Unknown(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_missing_program_is_retried_later() {
        let r = ExecRealizer::new(vec!["/no/such/program".into()], Duration::from_secs(1))
            .run(Vec::new())
            .await;
        assert!(matches!(r, Err(ActuationError::RetryLater(_))), "{r:?}");
    }
}
