//! Wiring: store, telemetry, routes and the HTTP server, until shutdown.
//!
//! The port is bound and served at once; the store opens in the background, retried with
//! backoff while the database is unreachable. Until it opens `/readyz` and the API answer 503
//! `store_unavailable` at once; then the coordinator prints `listening on` and tells systemd
//! `READY=1`.

use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_shared::{http, lifecycle, telemetry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{self, App, StoreSlot};
use crate::auth::Role;
use crate::config::Settings;
use crate::store::{Store, StoreError, StoreOptions};
use crate::tls::{TlsAcceptor, TlsError};

/// How long closing the store may take after the HTTP server stopped.
const STORE_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// First wait between attempts to open the store; doubles up to the configured maximum.
const STORE_RETRY_FIRST: Duration = Duration::from_millis(250);

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
    #[error("the HTTP server task failed: {0}")]
    Server(String),
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

/// Serves on `listener` until `shutdown` is cancelled, opening the store meanwhile; drains
/// in-flight requests for at most the grace period, and closes the store.
///
/// Prints `listening on http://HOST:PORT` (or `https://`) on stdout once the store is open.
pub async fn run(
    settings: Settings,
    tls: Option<TlsAcceptor>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let prometheus = telemetry::install_prometheus()?;
    crate::metrics::describe();
    let app = Arc::new(App {
        store: StoreSlot::default(),
        tokens: std::sync::RwLock::new(settings.tokens.clone()),
        max_body_bytes: settings.config.max_body_bytes,
        body_read_timeout: settings.config.body_read_timeout.0,
        prometheus,
        console: settings.console(),
    });
    let addr = listener.local_addr()?;
    let grace = settings.shutdown_grace();
    lifecycle::spawn_watchdog(shutdown.clone());
    let handler = {
        let app = Arc::clone(&app);
        move |req| api::handle(Arc::clone(&app), req)
    };
    tokio::spawn(reload_on_sighup(
        settings.clone(),
        Arc::clone(&app),
        tls.clone(),
    ));
    let url = match tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    let options = http::ServeOptions {
        grace,
        max_connections: settings.config.max_connections,
        metrics: Some(http::ConnectionMetrics {
            open: crate::metrics::OPEN_CONNECTIONS,
            refused: crate::metrics::REFUSED_CONNECTIONS,
        }),
    };
    let server = match tls {
        Some(acceptor) => tokio::spawn(http::serve_with(
            listener,
            acceptor,
            handler,
            shutdown.clone(),
            options,
        )),
        None => tokio::spawn(http::serve_with(
            listener,
            http::PlainTcp,
            handler,
            shutdown.clone(),
            options,
        )),
    };

    if let Some(store) = open_store(settings.store_options(), &app.store, &shutdown).await? {
        tracing::info!(backend = ?store.backend(), "store ready; migrations applied");
        tokio::spawn(expire_pending(store.clone(), shutdown.clone()));
        tokio::spawn(crate::notify::delivery::run(
            store.clone(),
            shutdown.clone(),
        ));
        app.store.fill(store);
        announce(&url);
        lifecycle::notify_status("serving");
        lifecycle::notify_ready();
    }
    let served = server.await;
    lifecycle::notify_stopping();
    if let Some(store) = app.store.opened() {
        tracing::info!("HTTP server stopped; closing the store");
        if tokio::time::timeout(STORE_CLOSE_TIMEOUT, store.clone().close())
            .await
            .is_err()
        {
            tracing::warn!("store did not close in time");
        }
    }
    served.map_err(|e| RunError::Server(e.to_string()))
}

/// How often pending proposals past their `approval_ttl` (and pauses past their expiry) are
/// looked for. Every replica sweeps; a proposal is finalized once, by whichever commits
/// first.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);

/// Refuses pending proposals past their expiry (`approval_expired`) until `shutdown`.
async fn expire_pending(store: Store, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(EXPIRE_EVERY) => {}
        }
        if let Err(e) = store.expire().await {
            tracing::warn!(error = %e, "expiring pending proposals failed; retrying");
        }
    }
}

/// Opens the store, retrying with doubling waits while the database cannot be reached.
/// `None` when shutdown came first. Only a URL the store cannot use at all is fatal.
async fn open_store(
    options: StoreOptions,
    slot: &StoreSlot,
    shutdown: &CancellationToken,
) -> Result<Option<Store>, RunError> {
    let mut wait = STORE_RETRY_FIRST;
    let max_wait = options.connect_retry_max.max(STORE_RETRY_FIRST);
    for attempt in 1u64.. {
        let opened = tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            opened = Store::open(options.clone()) => opened,
        };
        let err = match opened {
            Ok(store) => return Ok(Some(store)),
            Err(err @ StoreError::UnsupportedUrl(_)) => return Err(err.into()),
            Err(err) => err,
        };
        tracing::warn!(
            attempt,
            retry_in_seconds = wait.as_secs_f64(),
            error = %err,
            "store not ready; retrying"
        );
        slot.note_waiting(format!("attempt {attempt} failed: {err}"));
        lifecycle::notify_status(&format!("waiting for the store: {err}"));
        // Still starting: keep systemd's start timeout from running out meanwhile.
        lifecycle::notify_extend_start(wait + options.connect_timeout * 2);
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(max_wait);
    }
    Ok(None)
}

/// Rereads the token files and the TLS certificate on every SIGHUP, all or nothing: a file
/// that cannot be used keeps everything as it was, and the log says which file and why.
/// Logs counts and file names, never tokens.
async fn reload_on_sighup(settings: Settings, app: Arc<App>, tls: Option<TlsAcceptor>) {
    let mut requests = lifecycle::reload_requests();
    while requests.changed().await.is_ok() {
        reload(&settings, &app, tls.as_ref());
    }
}

fn reload(settings: &Settings, app: &App, tls: Option<&TlsAcceptor>) {
    let tokens = match crate::config::load_tokens_with_warnings(&settings.config) {
        Ok((tokens, warnings)) => {
            for warning in warnings {
                tracing::warn!(%warning, "token files");
            }
            tokens
        }
        Err(err) => {
            tracing::error!(error = %err, "reload refused; keeping the current tokens and certificate");
            return;
        }
    };
    let certificate = match tls.map(TlsAcceptor::prepare_reload).transpose() {
        Ok(certificate) => certificate,
        Err(err) => {
            tracing::error!(error = %err, "reload refused; keeping the current tokens and certificate");
            return;
        }
    };
    let auth = &settings.config.auth;
    let previous = std::mem::replace(
        &mut *app.tokens.write().unwrap_or_else(|e| e.into_inner()),
        tokens.clone(),
    );
    let (agent_added, agent_removed) = previous.changes(&tokens, Role::Agent);
    let (admin_added, admin_removed) = previous.changes(&tokens, Role::Admin);
    tracing::warn!(
        agent_tokens = tokens.count(Role::Agent),
        agent_added,
        agent_removed,
        agent_tokens_file = ?auth.agent_tokens_file,
        admin_tokens = tokens.count(Role::Admin),
        admin_added,
        admin_removed,
        admin_tokens_file = ?auth.admin_tokens_file,
        "tokens reloaded"
    );
    if let (Some(tls), Some(certificate)) = (tls, certificate) {
        let chain = certificate.chain;
        tls.commit(certificate);
        tracing::warn!(cert_file = %tls.cert_file().display(), chain, "TLS certificate reloaded");
    }
}

/// The `listening on` line scripts and tests wait for.
fn announce(url: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {url}");
    let _ = out.flush();
}
