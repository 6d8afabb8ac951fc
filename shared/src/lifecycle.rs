//! Process lifecycle: shutdown signals and the systemd notification protocol.
//!
//! `sd_notify` is a datagram to the Unix socket named by `NOTIFY_SOCKET`; without that
//! variable (not under systemd) every call is a no-op, so daemons can call it unconditionally.

use std::io;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C). The handlers are installed when this
/// is called, not when the future is first polled: a daemon calls it before it announces
/// `listening on`, so a signal sent right after the announcement never meets the default
/// action (instant death without draining). Must be called within a Tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received; shutting down"),
                _ = int.recv() => tracing::info!("SIGINT received; shutting down"),
            },
            (Err(err), _) | (_, Err(err)) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM or SIGINT; only Ctrl-C will stop this process");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Cancels `token` on the first SIGTERM or SIGINT (handlers installed before this returns),
/// and turns every SIGHUP into a reload request (see [`reload_requests`]) instead of the
/// default action, which ends the process.
pub fn cancel_on_signal(token: CancellationToken) {
    let signal = shutdown_signal();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(mut hangups) => {
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    tracing::info!("SIGHUP received; reloading");
                    reloads().send_modify(|n| *n += 1);
                }
            });
        }
        Err(err) => tracing::warn!(error = %err, "cannot listen for SIGHUP"),
    }
    tokio::spawn(async move {
        signal.await;
        token.cancel();
    });
}

fn reloads() -> &'static tokio::sync::watch::Sender<u64> {
    static RELOADS: std::sync::OnceLock<tokio::sync::watch::Sender<u64>> =
        std::sync::OnceLock::new();
    RELOADS.get_or_init(|| tokio::sync::watch::channel(0).0)
}

/// Changes once per SIGHUP received after [`cancel_on_signal`]: each daemon rereads its
/// files (tokens, certificates) when it does.
pub fn reload_requests() -> tokio::sync::watch::Receiver<u64> {
    reloads().subscribe()
}

/// Sends one `sd_notify` message (such as `READY=1`). Returns `Ok(false)` when not running
/// under systemd.
pub fn sd_notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        socket.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        socket.send_to(state.as_bytes(), &path)?;
    }
    Ok(true)
}

/// Tells systemd the daemon is serving.
pub fn notify_ready() {
    if let Err(err) = sd_notify("READY=1") {
        tracing::warn!(error = %err, "sd_notify READY=1 failed");
    }
}

/// Tells systemd what the daemon is doing (`systemctl status` shows it).
pub fn notify_status(status: &str) {
    let line = status.replace('\n', " ");
    if let Err(err) = sd_notify(&format!("STATUS={line}")) {
        tracing::warn!(error = %err, "sd_notify STATUS failed");
    }
}

/// Asks systemd for `extra` more start-up time (beyond `TimeoutStartSec=`), for a daemon
/// that is alive but waiting for a dependency before it sends `READY=1`.
pub fn notify_extend_start(extra: Duration) {
    if let Err(err) = sd_notify(&format!("EXTEND_TIMEOUT_USEC={}", extra.as_micros())) {
        tracing::warn!(error = %err, "sd_notify EXTEND_TIMEOUT_USEC failed");
    }
}

/// Tells systemd the daemon is stopping.
pub fn notify_stopping() {
    if let Err(err) = sd_notify("STOPPING=1") {
        tracing::warn!(error = %err, "sd_notify STOPPING=1 failed");
    }
}

/// The watchdog interval systemd asked for (`WatchdogSec=`), if any and if meant for us.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Some(pid) = std::env::var("WATCHDOG_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
    {
        if pid != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// When systemd asked for a watchdog, pings it at half the interval until `token` is
/// cancelled. The ping comes from the runtime, so a wedged runtime stops pinging.
pub fn spawn_watchdog(token: CancellationToken) {
    let Some(interval) = watchdog_interval() else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval / 2);
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tick.tick() => {
                    if let Err(err) = sd_notify("WATCHDOG=1") {
                        tracing::warn!(error = %err, "sd_notify WATCHDOG=1 failed");
                    }
                }
            }
        }
    });
}
