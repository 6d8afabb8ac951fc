//! `flink-autoscale-agent check-config`: validate a configuration file (with environment
//! overrides applied) exactly as `run` does, files it names included, and print what it
//! resolves to and any deprecation warnings.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{Config, Dur, Overrides};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

pub fn main(args: Args) -> ExitCode {
    match Config::load_with_warnings(Some(&args.config), &Overrides::default()) {
        Ok((c, warnings)) => {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            let window = c
                .metrics_window()
                .map(Dur)
                .map(|d| d.to_string())
                .unwrap_or_default();
            println!(
                "configuration OK: jobmanager {} (at most {} requests in flight), poll every {}, window {} ({} samples), listen {}",
                c.jobmanager.url,
                c.jobmanager.max_concurrent_requests,
                c.collector.poll_interval,
                window,
                c.window_capacity(),
                c.server.listen
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("invalid configuration: {e}");
            ExitCode::from(2)
        }
    }
}
