//! `flink-sim`: serve a scenario as a simulated Flink JobManager.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use flink_autoscale_simulator::{start, Scenario, SimOptions};

/// Exit code for bad usage or configuration (BSD `EX_USAGE`).
const EX_USAGE: u8 = 64;

/// Simulated Flink JobManager: Flink 2.x REST endpoints over a dataflow model.
#[derive(Parser, Debug)]
#[command(name = "flink-sim", version)]
struct Args {
    /// Scenario file (TOML) describing the cluster and its jobs.
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// Address to serve on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Simulated seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Time moves only through `POST /_sim/clock/advance`.
    #[arg(long)]
    manual_clock: bool,
    /// Validate the scenario and exit.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EX_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    if !(args.speed.is_finite() && args.speed > 0.0) {
        eprintln!(
            "flink-sim: --speed: must be a positive number, got {}",
            args.speed
        );
        return ExitCode::from(EX_USAGE);
    }
    let scenario = match Scenario::from_file(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "flink-sim: invalid scenario {}: {e}",
                args.scenario.display()
            );
            return ExitCode::from(EX_USAGE);
        }
    };
    if args.check {
        println!(
            "scenario {} is valid: {} job(s), {} subtasks",
            args.scenario.display(),
            scenario.job_names().len(),
            scenario.total_subtasks()
        );
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flink-sim: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args, scenario))
}

async fn run(args: Args, scenario: Scenario) -> ExitCode {
    let opts = SimOptions {
        speed: args.speed,
        manual_clock: args.manual_clock,
    };
    let sim = match start(scenario, args.listen, opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("flink-sim: cannot listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let shutdown = flink_autoscale_shared::lifecycle::shutdown_signal();
    println!("listening on {}", sim.url());
    let _ = std::io::stdout().flush();
    shutdown.await;
    sim.shutdown().await;
    ExitCode::SUCCESS
}
