//! `flink-autoscale-whatif`: try autoscaler settings on a model of a job before enabling
//! actuation. See `README.md` and `docs/decision-engine.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use flink_autoscale_simulator::{RateProfile, Scenario};
use flink_autoscale_whatif::report::table;
use flink_autoscale_whatif::run::{full_key, Setting};
use flink_autoscale_whatif::session::{what_if, Request};

#[derive(Parser)]
#[command(
    name = "flink-autoscale-whatif",
    about = "Runs the simulator's model of a job with the real agent in lockstep simulated time, for each setting, and judges it against the oracle and the best plan"
)]
struct Args {
    /// Scenario file (TOML, as flink-sim reads it); its first job is judged.
    #[arg(long)]
    scenario: PathBuf,
    /// Simulated days (fractions allowed).
    #[arg(long, default_value_t = 3.0)]
    days: f64,
    /// A key for every setting, e.g. `--set scale-down.interval=2h` (repeatable; keys without
    /// a prefix are `job.autoscaler.` keys).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Another setting to run beside the base one: the base plus this key (repeatable).
    #[arg(long = "compare", value_name = "KEY=VALUE")]
    compares: Vec<String>,
    /// A recorded trace replacing the scenario's rate curve: CSV with a header, `time_s`
    /// then `rate` (a job with one source) or one column per source vertex name.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Where the charts and the JSON file go.
    #[arg(long, default_value = "whatif-out")]
    out: PathBuf,
    /// The agent's poll interval, simulated seconds.
    #[arg(long, default_value_t = 60)]
    poll_seconds: u64,
    /// Lag (seconds of input) counted as "over the threshold".
    #[arg(long, default_value_t = 60.0)]
    lag_threshold: f64,
    /// Judge from this hour on (default: after the first day, which learns the load; 0 for
    /// runs of a day or less).
    #[arg(long)]
    judge_from_hour: Option<f64>,
}

fn key_value(text: &str, flag: &str) -> anyhow::Result<(String, String)> {
    let Some((k, v)) = text.split_once('=') else {
        bail!("{flag} {text:?}: expected KEY=VALUE");
    };
    if k.trim().is_empty() {
        bail!("{flag} {text:?}: the key is empty");
    }
    Ok((full_key(k), v.trim().trim_matches('"').to_string()))
}

/// The trace's columns as rate profiles: `(source name or None, profile)`.
fn read_trace(path: &PathBuf) -> anyhow::Result<Vec<(Option<String>, RateProfile)>> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_path(path)
        .with_context(|| format!("--trace {}", path.display()))?;
    let headers = rdr.headers()?.clone();
    if headers.len() < 2 || &headers[0] != "time_s" {
        bail!(
            "--trace {}: the header must be `time_s,rate` or `time_s,<source name>,...`",
            path.display()
        );
    }
    let mut columns: Vec<Vec<(f64, f64)>> = vec![Vec::new(); headers.len() - 1];
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.with_context(|| format!("--trace {} line {}", path.display(), i + 2))?;
        let num = |j: usize| -> anyhow::Result<f64> {
            let cell = rec.get(j).unwrap_or("");
            cell.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .with_context(|| {
                    format!(
                        "--trace {} line {}: {cell:?} is not a non-negative number",
                        path.display(),
                        i + 2
                    )
                })
        };
        let t = num(0)?;
        for (c, col) in columns.iter_mut().enumerate() {
            if col.last().is_some_and(|p| p.0 >= t) {
                bail!(
                    "--trace {} line {}: time_s must increase",
                    path.display(),
                    i + 2
                );
            }
            col.push((t, num(c + 1)?));
        }
    }
    if columns[0].is_empty() {
        bail!("--trace {}: no data rows", path.display());
    }
    Ok(headers
        .iter()
        .skip(1)
        .zip(columns)
        .map(|(name, points)| {
            let name = (name != "rate").then(|| name.to_string());
            (
                name,
                RateProfile::Trace {
                    points,
                    repeat: true,
                },
            )
        })
        .collect())
}

/// Most jobs a scenario may hold: the others run beside the judged one at every tick.
const MAX_JOBS: usize = 20;

async fn main_async(args: Args) -> anyhow::Result<()> {
    if !(args.days > 0.0 && args.days <= 60.0) {
        bail!("--days must be above 0 and at most 60, got {}", args.days);
    }
    if args.poll_seconds < 10 {
        bail!("--poll-seconds must be at least 10");
    }
    let mut scenario = Scenario::from_file(&args.scenario)
        .map_err(|e| anyhow::anyhow!("--scenario {}: {e}", args.scenario.display()))?;
    let jobs = scenario.job_names().len();
    if jobs > MAX_JOBS {
        bail!(
            "--scenario {}: {jobs} jobs; what-if judges one job (the first) and simulates every \
             job beside it, so a fleet-sized scenario (for load tests) would run for hours. \
             Use a scenario with at most {MAX_JOBS} jobs",
            args.scenario.display()
        );
    }
    if let Some(trace) = &args.trace {
        for (source, rate) in read_trace(trace)? {
            scenario
                .replace_source_rate(source.as_deref(), rate)
                .map_err(|e| anyhow::anyhow!("--trace {}: {e}", trace.display()))?;
        }
    }
    let base: Vec<(String, String)> = args
        .sets
        .iter()
        .map(|s| key_value(s, "--set"))
        .collect::<anyhow::Result<_>>()?;
    let mut settings = vec![Setting {
        label: if base.is_empty() {
            "as configured".into()
        } else {
            args.sets.join(" ")
        },
        keys: base.clone(),
    }];
    for c in &args.compares {
        // A compared key replaces the same key given with --set.
        let (key, value) = key_value(c, "--compare")?;
        let mut keys: Vec<(String, String)> =
            base.iter().filter(|(k, _)| *k != key).cloned().collect();
        keys.push((key, value));
        settings.push(Setting {
            label: c.clone(),
            keys,
        });
    }
    let judge_from_hour = args
        .judge_from_hour
        .unwrap_or(if args.days > 1.0 { 24.0 } else { 0.0 });
    let outcome = what_if(Request {
        scenario: &scenario,
        scenario_label: args.scenario.display().to_string(),
        settings,
        hours: args.days * 24.0,
        poll: Duration::from_secs(args.poll_seconds),
        judge_from_hour,
        lag_threshold_s: args.lag_threshold,
        out: Some(&args.out),
    })
    .await?;
    println!(
        "What-if: {} over {} simulated days, judged from hour {judge_from_hour} (one slot per subtask)\n",
        args.scenario.display(),
        args.days
    );
    print!("{}", table(&outcome.settings));
    println!();
    for c in &outcome.charts {
        println!("chart: {}", c.display());
    }
    println!("figures: {}", args.out.join("whatif.json").display());
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
