//! # The test kit
//!
//! Everything a test (or a dev tool such as the demo) needs to run this workspace's binaries
//! as real processes, in one place. Use it instead of writing another launcher:
//!
//! - [`binary`] finds a workspace binary (`flink-autoscale-agent`, `flink-autoscale-coordinator`,
//!   `flink-sim`, …) in Cargo's target directory, or says which command builds it. In the
//!   binary's own package prefer `env!("CARGO_BIN_EXE_<name>")`. Tests never run `cargo build`:
//!   `scripts/test.sh` builds every binary once (`cargo build --workspace --bins --locked`)
//!   before `cargo test`; run that yourself before a single test of another package.
//! - [`Daemon::start`] spawns a server with its output captured, waits (bounded) for the
//!   `listening on <url>` line every server here prints once bound, and fails with the child's
//!   stderr when it exits early or stays silent. [`Daemon::stop`] sends SIGTERM, then SIGKILL
//!   after a grace period; dropping a `Daemon` kills it, so a failing test never leaves a
//!   process behind. Its stderr is kept for assertions and echoed as `[name] line`, which
//!   the test harness shows for a failing test. [`Daemon::spawn`] and
//!   [`Daemon::wait_listening`] split the start for tests of what happens before the
//!   announcement.
//! - [`ChildGuard`] gives any other child (a JVM, a script) the same stop and kill-on-drop,
//!   for a whole process group if asked; [`stop_together`] stops several at once.
//! - [`http_get`] / [`http_request`]: a blocking HTTP/1.1 client for loopback.
//! - [`write_private`]: a token file as the daemons accept it (mode 0600).
//!
//! The kit is a dev-dependency of the shipped crates (it must never reach a release binary;
//! `scripts/check-deps.sh` checks) and a normal dependency of the test and demo crates.

mod binary;
mod child;
mod daemon;
mod error;
mod files;
mod http;

pub use binary::binary;
pub use child::{send_signal, stop_together, ChildGuard, Signal};
pub use daemon::{listening_url, Daemon};
pub use error::Error;
pub use files::write_private;
pub use http::{http_get, http_request, HttpResponse};
