//! Convergence benchmark: the simulator's diurnal scenario through the what-if library
//! (`flink-autoscale-whatif`), at target utilization 0.7 and 0.45, prediction on and off,
//! side by side, judged over the days after the first (which learns the load). Prints the
//! table for BENCHMARKS.md; with `--json` the last line is every figure as one JSON object.
//!
//! `cargo run --release -p flink-autoscale-tests --bin bench_convergence -- [--days 4] [--json]`

use std::time::{Duration, Instant};

use clap::Parser;
use flink_autoscale_simulator::Scenario;
use flink_autoscale_tests::lockstep::scenario_path;
use flink_autoscale_whatif::report::{figures, table};
use flink_autoscale_whatif::run::{full_key, Setting};
use flink_autoscale_whatif::session::{what_if, Request};

#[derive(Parser)]
#[command(about = "The diurnal day at 0.7 and 0.45, prediction on and off, against the best plan")]
struct Args {
    /// Scenario file name (tests/scenarios or simulator/scenarios).
    #[arg(long, default_value = "diurnal.toml")]
    scenario: String,
    /// Simulated days; the first is not judged.
    #[arg(long, default_value_t = 4.0)]
    days: f64,
    /// Agent poll interval in simulated seconds.
    #[arg(long, default_value_t = 60)]
    poll_seconds: u64,
    /// A key for every setting, `KEY=VALUE` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if args.days <= 1.0 || args.days > 60.0 || args.poll_seconds < 10 {
        eprintln!("--days must be above 1 and at most 60, --poll-seconds at least 10");
        return std::process::ExitCode::from(2);
    }
    let mut base = Vec::new();
    for s in &args.settings {
        let Some((k, v)) = s.split_once('=') else {
            eprintln!("--set {s:?}: expected KEY=VALUE");
            return std::process::ExitCode::from(2);
        };
        base.push((full_key(k), v.trim().to_string()));
    }
    let path = scenario_path(&args.scenario);
    let scenario = match Scenario::from_file(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return std::process::ExitCode::from(2);
        }
    };
    let settings = [
        ("0.7", true),
        ("0.7", false),
        ("0.45", true),
        ("0.45", false),
    ]
    .into_iter()
    .map(|(target, prediction)| {
        let mut keys = base.clone();
        keys.push(("job.autoscaler.utilization.target".into(), target.into()));
        keys.push((
            "flink-autoscale.prediction.enabled".into(),
            prediction.to_string(),
        ));
        Setting {
            label: format!(
                "{target}, prediction {}",
                if prediction { "on" } else { "off" }
            ),
            keys,
        }
    })
    .collect();
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
    let started = Instant::now();
    let outcome = runtime.block_on(what_if(Request {
        scenario: &scenario,
        scenario_label: args.scenario.clone(),
        settings,
        hours: args.days * 24.0,
        poll: Duration::from_secs(args.poll_seconds),
        judge_from_hour: 24.0,
        lag_threshold_s: 60.0,
        out: None,
    }));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!(
        "{} over {} simulated days, judged from hour 24\n",
        args.scenario, args.days
    );
    print!("{}", table(&outcome.settings));
    // The steady state: once a whole day has been scored, the forecast can be trusted.
    let steady: Vec<_> = outcome
        .runs
        .iter()
        .filter_map(|r| {
            let scenario = r.setting.apply(&scenario);
            let truth = scenario.truth(&r.job_id)?;
            Some(figures(r, &truth, 48.0, 60.0))
        })
        .collect();
    if args.days > 2.0 {
        println!("\njudged from hour 48 (the profile has scored a whole day)\n");
        print!("{}", table(&steady));
    }
    println!(
        "({} settings x {} simulated days in {:.1} s of wall time)",
        outcome.settings.len(),
        args.days,
        started.elapsed().as_secs_f64()
    );
    if args.json {
        let json = serde_json::json!({ "from_hour_24": outcome, "from_hour_48": steady });
        println!("{json}");
    }
    std::process::ExitCode::SUCCESS
}
