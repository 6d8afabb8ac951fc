//! The kit's one error type. Each message names the process and carries the tail of what it
//! wrote to stderr, so a failing test says why without a rerun.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

#[derive(thiserror::Error)]
pub enum Error {
    #[error("cannot start {name} ({program}): {source}")]
    Spawn {
        name: String,
        program: String,
        source: std::io::Error,
    },
    #[error(
        "{name} exited ({status}) before printing `listening on <url>`; its stderr:\n{stderr}"
    )]
    ExitedEarly {
        name: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error(
        "{name} printed no `listening on <url>` line within {timeout:?}; its stderr:\n{stderr}"
    )]
    NotListening {
        name: String,
        timeout: Duration,
        stderr: String,
    },
    #[error("{name} announced `{line}`, which has no HOST:PORT address")]
    BadAnnouncement { name: String, line: String },
    #[error("{name} is not built (looked for {}); build the workspace's binaries first: {command}", .looked_in.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    MissingBinary {
        name: String,
        looked_in: Vec<PathBuf>,
        command: String,
    },
    #[error("cannot locate Cargo's target directory from {exe}: {why}")]
    NoTargetDir { exe: String, why: String },
}

/// The same text as `Display`: tests end in `.expect(…)`, whose message then reads as a
/// sentence with the process's stderr on its own lines rather than one escaped string.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
