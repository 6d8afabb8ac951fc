//! `flink-autoscale-coordinator run|check-config`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use flink_autoscale_coordinator::config::{self, Overrides, Settings};
use flink_autoscale_coordinator::server;
use flink_autoscale_shared::{http, lifecycle, telemetry};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "flink-autoscale-coordinator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API until SIGTERM/SIGINT.
    Run(Options),
    /// Validate the configuration (token and TLS files included) and exit.
    CheckConfig(Options),
}

#[derive(clap::Args)]
struct Options {
    /// TOML configuration file; environment variables (FLINK_AUTOSCALE_COORDINATOR__<SECTION>__<KEY>)
    /// and flags override it.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    overrides: Overrides,
}

impl Options {
    fn settings(&self) -> Result<Settings, ExitCode> {
        config::load(self.config.as_deref(), &self.overrides).map_err(|e| {
            eprintln!("error: invalid configuration: {e}");
            ExitCode::from(2)
        })
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::CheckConfig(options) => check_config(&options),
        Command::Run(options) => run(&options),
    }
}

fn check_config(options: &Options) -> ExitCode {
    let settings = match options.settings() {
        Ok(s) => s,
        Err(code) => return code,
    };
    for warning in &settings.warnings {
        eprintln!("warning: {warning}");
    }
    if let Err(e) = server::tls_acceptor(&settings) {
        eprintln!("error: invalid configuration: {e}");
        return ExitCode::from(2);
    }
    let c = &settings.config;
    println!(
        "configuration OK: listen {}, database {}, {} agent and {} admin tokens, TLS {}",
        c.listen,
        redact_url(&c.database.url),
        settings
            .tokens
            .count(flink_autoscale_coordinator::auth::Role::Agent),
        settings
            .tokens
            .count(flink_autoscale_coordinator::auth::Role::Admin),
        if c.tls.cert_file.is_some() {
            "on"
        } else {
            "off"
        }
    );
    ExitCode::SUCCESS
}

fn run(options: &Options) -> ExitCode {
    let settings = match options.settings() {
        Ok(s) => s,
        Err(code) => return code,
    };
    telemetry::init_tracing(settings.config.log_format, &settings.config.log_level);
    for warning in &settings.warnings {
        tracing::warn!(%warning, "configuration");
    }
    let tls = match server::tls_acceptor(&settings) {
        Ok(tls) => tls,
        Err(e) => {
            eprintln!("error: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let (listener, addr) = match http::bind(settings.config.listen).await {
            Ok(bound) => bound,
            Err(e) => {
                eprintln!("error: cannot listen on {}: {e}", settings.config.listen);
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(%addr, "bound");
        let shutdown = CancellationToken::new();
        lifecycle::cancel_on_signal(shutdown.clone());
        match server::run(settings, tls, listener, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "coordinator failed");
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// The database URL without its password, for logs and output.
fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}
