//! `flink-autoscale-agent collect --jobmanager URL --once`: poll every job once and print
//! topology, resolved names and values as JSON. Without `--once`, poll on the interval and
//! print one JSON line per round (so the name cache shows its effect).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use crate::collector::{CollectorSettings, JobCollector, JobSnapshot};
use crate::config::{Config, Overrides};
use crate::daemon::{client_from_config, Clock, SystemClock};
use crate::flink::{FlinkClient, FlinkError};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// JobManager REST URL, e.g. http://127.0.0.1:8081.
    #[arg(long, value_name = "URL")]
    pub jobmanager: Option<String>,
    /// Optional configuration file (timeouts, limits, aggregator).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Poll once and exit.
    #[arg(long)]
    pub once: bool,
    /// Poll interval when not `--once`, e.g. 15s.
    #[arg(long, value_name = "DURATION")]
    pub poll_interval: Option<String>,
}

/// One round over all jobs.
#[derive(Debug, Serialize)]
pub struct Round {
    pub jobmanager: String,
    pub polled_at_ms: u64,
    pub requests: u64,
    pub response_bytes: u64,
    pub jobs: Vec<JobSnapshot>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

pub fn main(args: Args) -> ExitCode {
    let overrides = Overrides {
        jobmanager: args.jobmanager.clone(),
        poll_interval: args.poll_interval.clone(),
        ..Default::default()
    };
    let config = match Config::load(args.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    flink_autoscale_shared::telemetry::init_tracing(config.log.format, "warn");
    let Some(runtime) = super::run::runtime(false) else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(async {
        let client = match client_from_config(&config) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        let mut settings = CollectorSettings::from_config(&config);
        if args.once {
            // One poll must show every subtask: a single slice would be only part of a job.
            settings = settings.without_slicing();
        }
        let settings = Arc::new(settings);
        let clock = SystemClock;
        let mut collectors = std::collections::HashMap::new();
        loop {
            let round = collect_round(&client, &settings, &mut collectors, clock.now_ms()).await;
            let failed = round.as_ref().is_err();
            match round {
                Ok(round) => match serde_json::to_string(&round) {
                    Ok(line) => println!("{line}"),
                    Err(e) => eprintln!("cannot encode the result: {e}"),
                },
                Err(e) => eprintln!("{e}"),
            }
            if args.once {
                return if failed {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                };
            }
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
                _ = clock.sleep(config.collector.poll_interval.0) => {}
            }
        }
    })
}

/// Discovers the jobs and polls each once with its (persistent) collector.
pub async fn collect_round(
    client: &FlinkClient,
    settings: &Arc<CollectorSettings>,
    collectors: &mut std::collections::HashMap<String, JobCollector>,
    now_ms: u64,
) -> Result<Round, FlinkError> {
    let before = client.stats();
    let (overview, _) = client.jobs_overview().await?;
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for job in &overview.jobs {
        let collector = collectors
            .entry(job.jid.clone())
            .or_insert_with(|| JobCollector::new(job.jid.clone(), Arc::clone(settings)));
        match collector.poll(client, job, now_ms).await {
            Ok(_) => jobs.push(collector.snapshot().clone()),
            Err(e) => errors.push(format!("job {}: {e}", job.jid)),
        }
    }
    let after = client.stats();
    Ok(Round {
        jobmanager: client.base_url().to_string(),
        polled_at_ms: now_ms,
        requests: after.requests - before.requests,
        response_bytes: after.response_bytes - before.response_bytes,
        jobs,
        errors,
    })
}
