//! Wiring: store, telemetry, routes and the HTTP server, until shutdown.

use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_shared::{http, lifecycle, telemetry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{self, App};
use crate::config::Settings;
use crate::store::{Store, StoreError};
use crate::tls::{TlsAcceptor, TlsError};

/// How long closing the store may take after the HTTP server stopped.
const STORE_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the coordinator could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
    #[error("cannot read the listener address: {0}")]
    Listener(#[from] std::io::Error),
}

/// Loads the TLS material named in the settings, if any, so errors surface before binding.
pub fn tls_acceptor(settings: &Settings) -> Result<Option<TlsAcceptor>, TlsError> {
    match (
        &settings.config.tls.cert_file,
        &settings.config.tls.key_file,
    ) {
        (Some(cert), Some(key)) => TlsAcceptor::from_pem_files(cert, key).map(Some),
        _ => Ok(None),
    }
}

/// Opens the store, serves on `listener` until `shutdown` is cancelled, drains in-flight
/// requests for at most the grace period, and closes the store.
///
/// Prints `listening on http://HOST:PORT` (or `https://`) on stdout once it serves.
pub async fn run(
    settings: Settings,
    tls: Option<TlsAcceptor>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let prometheus = telemetry::install_prometheus()?;
    crate::metrics::describe();
    let store = Store::open(settings.store_options()).await?;
    tracing::info!(backend = ?store.backend(), "store ready; migrations applied");
    let app = Arc::new(App {
        store: store.clone(),
        tokens: settings.tokens.clone(),
        max_body_bytes: settings.config.max_body_bytes,
        prometheus,
    });
    let handler = move |req| api::handle(Arc::clone(&app), req);
    let addr = listener.local_addr()?;
    let grace = settings.shutdown_grace();
    lifecycle::spawn_watchdog(shutdown.clone());
    match tls {
        Some(acceptor) => {
            announce(&format!("https://{addr}"));
            http::serve_with(listener, acceptor, handler, shutdown, grace).await;
        }
        None => {
            http::announce_listening(addr);
            lifecycle::notify_ready();
            http::serve(listener, handler, shutdown, grace).await;
        }
    }
    lifecycle::notify_stopping();
    tracing::info!("HTTP server stopped; closing the store");
    if tokio::time::timeout(STORE_CLOSE_TIMEOUT, store.close())
        .await
        .is_err()
    {
        tracing::warn!("store did not close in time");
    }
    Ok(())
}

/// The `listening on` line for TLS, where the scheme differs from the shared helper's.
fn announce(url: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {url}");
    let _ = out.flush();
    lifecycle::notify_ready();
}
