//! `flink-autoscale-agent`: the sidecar binary. Each subcommand lives in `commands/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use flink_autoscale_agent::commands;

#[derive(Parser)]
#[command(
    name = "flink-autoscale-agent",
    version,
    about = "Watches a Flink JobManager and rescales its jobs with coordinator approval"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent daemon.
    Run(commands::run::Args),
    /// Validate a configuration file and exit.
    CheckConfig(commands::check_config::Args),
    /// Poll every job of a JobManager once and print what was collected as JSON.
    Collect(commands::collect::Args),
    /// Decide parallelism from evaluated per-vertex figures (JSON in, JSON out).
    Decide(commands::decide::Args),
    /// Evaluate a captured metric window and decide (JSON in, JSON out).
    Evaluate(commands::evaluate::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => commands::run::main(args),
        Command::CheckConfig(args) => commands::check_config::main(args),
        Command::Collect(args) => commands::collect::main(args),
        Command::Decide(args) => commands::decide::main(args),
        Command::Evaluate(args) => commands::evaluate::main(args),
    }
}
