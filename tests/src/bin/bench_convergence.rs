//! Convergence benchmark: the simulator's diurnal day at target utilization 0.45 and 0.7,
//! two simulated days each (day 1 includes converging from the scenario's initial sizing,
//! day 2 is the steady state). Prints the Markdown table for BENCHMARKS.md; with `--json`
//! the last line is one JSON object with every day's figures.
//!
//! `cargo run --release -p flink-autoscale-tests --bin bench_convergence -- [--json]`

use std::time::{Duration, Instant};

use clap::Parser;
use flink_autoscale_tests::convergence::{diurnal_days, markdown_table};

#[derive(Parser)]
#[command(about = "Rescales, average parallelism and lag of the closed loop over diurnal days")]
struct Args {
    /// Simulated days per target utilization.
    #[arg(long, default_value_t = 2)]
    days: usize,
    /// Agent poll interval in simulated seconds.
    #[arg(long, default_value_t = 60)]
    poll_seconds: u64,
    /// Extra fleet autoscaler setting, e.g. `--set 'scale-down.interval="2h"'` (repeatable;
    /// TOML values, keys without the `job.autoscaler.` prefix).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if args.days == 0 || args.poll_seconds < 10 {
        eprintln!("--days must be >= 1 and --poll-seconds >= 10");
        return std::process::ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut autoscaler = String::new();
    for setting in &args.settings {
        let Some((key, value)) = setting.split_once('=') else {
            eprintln!("--set {setting:?}: expected KEY=VALUE");
            return std::process::ExitCode::from(2);
        };
        autoscaler.push_str(&format!("\"{}\" = {}\n", key.trim(), value.trim()));
    }
    if let Err(e) = autoscaler.parse::<toml::Table>() {
        eprintln!("--set: not TOML: {}", e.message());
        return std::process::ExitCode::from(2);
    }
    let started = Instant::now();
    let poll = Duration::from_secs(args.poll_seconds);
    let (low, default) = runtime.block_on(async {
        tokio::join!(
            diurnal_days("0.45", args.days, poll, &autoscaler),
            diurnal_days("0.7", args.days, poll, &autoscaler)
        )
    });
    let rows: Vec<_> = low.into_iter().chain(default).collect();
    println!("{}", markdown_table(&rows));
    for r in &rows {
        println!(
            "target {} day {}: rescales at hours {:?}",
            r.target_utilization, r.day, r.rescale_hours
        );
        for (hour, change) in &r.parallelism_changes {
            println!("  {hour:>4} h: {change}");
        }
    }
    println!(
        "({} simulated days in {:.1} s of wall time)",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "poll_seconds": args.poll_seconds, "settings": args.settings, "days": rows })
        );
    }
    std::process::ExitCode::SUCCESS
}
