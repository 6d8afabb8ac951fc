//! `flink-autoscale-agent evaluate --input FILE`: a captured metric window in (one JSON
//! object, `-` for stdin), the evaluated figures and the decision out. The samples are taken
//! as the window; waiting for the window to fill is the daemon's job.

use std::path::PathBuf;
use std::process::ExitCode;

use flink_autoscale_core::engine::{evaluate_and_decide, EvaluateInput};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// JSON input file, or `-` for stdin.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
}

pub fn main(args: Args) -> ExitCode {
    super::decide::run_json_command(&args.input, |input: &EvaluateInput| {
        evaluate_and_decide(input)
    })
}
