//! `flink-autoscale-agent run`: the daemon. Loads and validates the configuration before
//! binding anything, serves `/metrics`, `/healthz`, `/readyz` and the Flink-compatible reads,
//! polls the JobManager, and shuts down gracefully on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use flink_autoscale_shared::{http as shttp, lifecycle, telemetry as stelemetry};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError, Overrides};
use crate::control::{ControlError, ControlLoop};
use crate::daemon::{Clock, Daemon, DecisionStep, StatusBoard, SystemClock};
use crate::flink::FlinkError;
use crate::http::{self, HttpContext};
use crate::telemetry;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (TOML). Without it, defaults plus environment overrides apply.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to serve on, e.g. 127.0.0.1:9249 (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// JobManager REST URL, e.g. http://127.0.0.1:8081.
    #[arg(long, value_name = "URL")]
    pub jobmanager: Option<String>,
    /// Poll interval, e.g. 15s.
    #[arg(long, value_name = "DURATION")]
    pub poll_interval: Option<String>,
}

impl Args {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen.clone(),
            jobmanager: self.jobmanager.clone(),
            poll_interval: self.poll_interval.clone(),
        }
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Telemetry(#[from] stelemetry::TelemetryError),
    #[error(transparent)]
    Client(#[from] FlinkError),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub fn main(args: Args) -> ExitCode {
    let (config, warnings) =
        match Config::load_with_warnings(args.config.as_deref(), &args.overrides()) {
            Ok(loaded) => loaded,
            Err(e) => {
                eprintln!("invalid configuration: {e}");
                return ExitCode::from(2);
            }
        };
    stelemetry::init_tracing(config.log.format, &config.log.level);
    for warning in warnings {
        tracing::warn!(%warning, "configuration");
    }
    let control = match ControlLoop::from_config(&config) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(runtime) = runtime(true) else {
        return ExitCode::FAILURE;
    };
    let shutdown = CancellationToken::new();
    let result = runtime.block_on(async {
        lifecycle::cancel_on_signal(shutdown.clone());
        run_agent(
            config,
            Arc::new(SystemClock),
            control,
            shutdown.clone(),
            |addr| {
                shttp::announce_listening(addr);
                lifecycle::notify_ready();
                lifecycle::spawn_watchdog(shutdown.clone());
            },
        )
        .await
    });
    lifecycle::notify_stopping();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "agent failed");
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The async runtime of a command: two workers for the daemon, one thread otherwise. Prints
/// why and returns `None` if it cannot be built.
pub(crate) fn runtime(multi_thread: bool) -> Option<tokio::runtime::Runtime> {
    let built = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    built
        .map_err(|e| eprintln!("cannot start the async runtime: {e}"))
        .ok()
}

/// Runs the agent until `shutdown` is cancelled: binds the server, calls `listening` with
/// the bound address, then polls. Returns once the daemon and the server have stopped.
pub async fn run_agent(
    config: Config,
    clock: Arc<dyn Clock>,
    hook: Arc<dyn DecisionStep>,
    shutdown: CancellationToken,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), StartError> {
    config.validate()?;
    let prometheus = stelemetry::install_prometheus_expiring_gauges(Some(config.gauge_expiry()))?;
    telemetry::describe();
    crate::control::metrics::describe();
    let state = StatusBoard::new();
    let daemon = Daemon::new(&config, clock, Arc::clone(&state), hook)?;
    let addr = config.listen_addr()?;
    let (listener, bound) = shttp::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    let ctx = Arc::new(HttpContext { state, prometheus });
    let server = tokio::spawn(shttp::serve(
        listener,
        move |req| http::handle(req, Arc::clone(&ctx)),
        shutdown.clone(),
        config.server.shutdown_grace.0,
    ));
    tracing::info!(%bound, jobmanager = %daemon.client().base_url(), "agent started");
    listening(bound);
    daemon.run(shutdown.clone()).await;
    shutdown.cancel();
    if let Err(e) = server.await {
        tracing::warn!(error = %e, "HTTP server task ended abnormally");
    }
    tracing::info!("agent stopped");
    Ok(())
}
