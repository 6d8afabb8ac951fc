//! The coordinator with its PostgreSQL store taken away through a proxy: unreachable at
//! start (it serves at once, answers 503 `store_unavailable` quickly, and sends READY=1 only
//! when the store opens), and a backend terminated under it (logged as unavailable, never as
//! corruption).

mod support;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use support::proxy::Proxy;
use support::{job, proposal, Db, Launch, Server, AGENT};

/// Generous bound for anything that should be "at once" on a loaded machine.
const QUICK: Duration = Duration::from_secs(5);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `NOTIFY_SOCKET` the test reads, as systemd does for `Type=notify` units.
struct NotifySocket {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl NotifySocket {
    fn bind() -> NotifySocket {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_nonblocking(true).unwrap();
        NotifySocket {
            socket,
            path,
            _dir: dir,
        }
    }

    /// Every message received so far.
    fn drain(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.socket.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        out
    }
}

/// Polls until `probe` holds or `deadline` passes.
async fn eventually<F, Fut>(what: &str, deadline: Duration, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + deadline;
    while Instant::now() < until {
        if probe().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {deadline:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_unreachable_at_start_answers_503_and_is_ready_once_it_opens() {
    let Some(mut db) = Db::postgres() else { return };
    let proxy = Proxy::start(db.postgres_addr(), false).await;
    db.route_through(proxy.addr);
    let notify = NotifySocket::bind();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Server::spawn(
        &db,
        &[],
        Launch {
            listen: Some(listen),
            env: vec![(
                "NOTIFY_SOCKET".to_string(),
                notify.path.display().to_string(),
            )],
            no_wait: true,
        },
    );

    // It serves before the store is there: alive, not ready, and quick about it.
    let host = server.base.trim_start_matches("http://").to_string();
    eventually("the port is bound", Duration::from_secs(20), || async {
        tokio::net::TcpStream::connect(&host).await.is_ok()
    })
    .await;
    let (status, _) = server.call("GET", "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    // Let at least one attempt to open the store fail.
    eventually("an attempt failed", Duration::from_secs(20), || async {
        server.stderr().contains("store not ready; retrying")
    })
    .await;
    for (method, path, token, body) in [
        ("GET", "/readyz", None, None),
        (
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("early", &job(1), 4, 6)),
        ),
        ("GET", "/v1/decisions", Some(support::ADMIN), None),
    ] {
        let started = Instant::now();
        let (status, answer) = server.call(method, path, token, body).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {answer}");
        assert_eq!(answer["error"], "store_unavailable", "{path}: {answer}");
        assert!(
            started.elapsed() < QUICK,
            "{path} took {:?}",
            started.elapsed()
        );
    }
    assert!(server.announced().is_none(), "announced before the store");
    let early = notify.drain();
    assert!(!early.iter().any(|m| m.contains("READY=1")), "{early:?}");
    assert!(
        early
            .iter()
            .any(|m| m.starts_with("STATUS=waiting for the store")),
        "{early:?}"
    );
    assert!(
        early.iter().any(|m| m.starts_with("EXTEND_TIMEOUT_USEC=")),
        "{early:?}"
    );

    // The database comes back: the retry opens it, then READY=1 and `listening on`.
    proxy.set_open(true);
    server.base = server.wait_listening(Duration::from_secs(60));
    eventually("READY=1", Duration::from_secs(10), || async {
        notify.drain().iter().any(|m| m.contains("READY=1"))
    })
    .await;
    let (status, answer) = server.call("GET", "/readyz", None, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("late", &job(1), 4, 6)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(server.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_waiting_for_the_store_exits_0() {
    let Some(mut db) = Db::postgres() else { return };
    let proxy = Proxy::start(db.postgres_addr(), false).await;
    db.route_through(proxy.addr);
    let listen = format!("127.0.0.1:{}", free_port());
    let server = Server::spawn(
        &db,
        &[],
        Launch {
            listen: Some(listen),
            no_wait: true,
            ..Launch::default()
        },
    );
    eventually("an attempt failed", Duration::from_secs(20), || async {
        server.stderr().contains("store not ready; retrying")
    })
    .await;
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_is_logged_as_unavailable_not_as_corruption() {
    let Some(mut db) = Db::postgres() else { return };
    let proxy = Proxy::start(db.postgres_addr(), true).await;
    db.route_through(proxy.addr);
    let server = Server::start(&db, &[]);
    let (status, answer) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("before", &job(1), 4, 6)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // No new connections, and the server ends every session the coordinator had.
    proxy.set_open(false);
    let ports = proxy.upstream_ports();
    assert!(!ports.is_empty());
    let list = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    db.execute(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port IN ({list})"
    ))
    .await;

    let (status, answer) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("during", &job(2), 4, 6)),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(answer["error"], "store_unavailable", "{answer}");
    let (status, answer) = server.call("GET", "/readyz", None, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    let log = server.stderr();
    assert!(log.contains("store unavailable"), "{log}");
    assert!(!log.contains("corrupt"), "{log}");

    // Back again: the pool reconnects and the same proposal is decided.
    proxy.set_open(true);
    eventually("the store is back", Duration::from_secs(30), || async {
        let (status, _) = server
            .call(
                "POST",
                "/v1/proposals",
                Some(AGENT),
                Some(proposal("during", &job(2), 4, 6)),
            )
            .await;
        status == StatusCode::OK
    })
    .await;
}
