//! Process lifecycle: shutdown signals and the systemd notification protocol.
//!
//! `sd_notify` is a datagram to the Unix socket named by `NOTIFY_SOCKET`; without that
//! variable (not under systemd) every call is a no-op, so daemons can call it unconditionally.

use std::io;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(sig) => sig,
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM; only Ctrl-C will stop this process");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received; shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
    }
}

/// Cancels `token` on the first SIGTERM or SIGINT.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        shutdown_signal().await;
        token.cancel();
    });
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

/// Stops a child process the way systemd would: SIGTERM, then SIGKILL if it has not exited
/// within `grace`. Returns whether it stopped by itself. (The workspace forbids `unsafe`,
/// so the signal is sent with kill(1) rather than libc.)
pub fn terminate_child(child: &mut std::process::Child, grace: Duration) -> bool {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}
