//! Clients that hold connections: a body that never completes gets 408 after the body-read
//! deadline, connections over `max_connections` get a 503 that says why, and the memory of
//! slowly sent bodies goes back once their connections close.

mod support;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hyper::StatusCode;
use serde_json::Value;
use support::{Db, Server, AGENT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn host(server: &Server) -> String {
    server.base.trim_start_matches("http://").to_string()
}

/// Opens a connection and sends a proposal's headers announcing `length` bytes, then `sent`
/// bytes of body.
async fn slow_body(host: &str, length: usize, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(host).await.expect("connect");
    let head = format!(
        "POST /v1/proposals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {AGENT}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("headers");
    // Send in pieces, as a trickling client does.
    let piece = vec![b' '; 16 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(piece.len());
        stream.write_all(&piece[..n]).await.expect("body");
        left -= n;
    }
    stream
}

/// Reads until the server closes; returns the status and the body.
async fn answer(mut stream: TcpStream, within: Duration) -> Option<(u16, Value)> {
    let mut out = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut out))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_gets_408_after_the_deadline() {
    let db = Db::sqlite();
    let server = Server::start(&db, &["--body-read-timeout", "1s"]);
    let host = host(&server);
    let started = Instant::now();
    let clients = (0..50).map(|_| {
        let host = host.clone();
        async move {
            let stream = slow_body(&host, 100_000, 10).await;
            answer(stream, Duration::from_secs(30)).await
        }
    });
    for got in join_all(clients).await {
        let (status, body) = got.expect("an answer, and the connection closed");
        assert_eq!(status, 408, "{body}");
        assert_eq!(body["error"], "body_timeout", "{body}");
    }
    eprintln!(
        "50 stalled bodies answered 408 within {:?}",
        started.elapsed()
    );
    let (status, _) = server.call("GET", "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_a_503_that_says_so() {
    let db = Db::sqlite();
    let server = Server::start(&db, &["--max-connections", "20"]);
    let host = host(&server);
    // Twenty idle connections take every slot.
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(TcpStream::connect(&host).await.expect("connect"));
    }
    // Give the accept loop a moment to take them all.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut over = TcpStream::connect(&host).await.expect("connect");
    over.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, body) = answer(over, Duration::from_secs(10))
        .await
        .expect("an answer");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "too_many_connections", "{body}");
    assert!(body["message"].as_str().unwrap().contains("20"), "{body}");

    // Slots come back when connections close.
    drop(idle);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let mut probe = TcpStream::connect(&host).await.expect("connect");
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        if let Some((200, _)) = answer(probe, Duration::from_secs(5)).await {
            break;
        }
        assert!(Instant::now() < until, "slots were not released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, metrics) = server.call("GET", "/metrics", None, None).await;
    let text = metrics.as_str().unwrap_or_default();
    assert!(
        text.lines().any(|l| {
            l.starts_with("flink_autoscale_coordinator_http_connections_refused_total")
                && !l.ends_with(" 0")
        }),
        "{text}"
    );
}

/// 300 connections each hold a 1 MB body that is almost complete (the probe's attack),
/// then go away. Prints the coordinator's RSS before, while held and after; the memory must
/// mostly come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_slow_bodies_is_returned_when_their_connections_close() {
    const CLIENTS: usize = 300;
    const LENGTH: usize = 1_000_000;
    let db = Db::sqlite();
    let server = Server::start(
        &db,
        &["--body-read-timeout", "120s", "--max-body-bytes", "2000000"],
    );
    let host = host(&server);
    let pid = server.pid();
    let before = rss_kib(pid);
    let mut held = Vec::new();
    for _ in 0..CLIENTS {
        held.push(slow_body(&host, LENGTH, 0).await);
    }
    // Trickle: every connection gets a piece in turn, so their buffers interleave in the
    // server's heap as they do with real slow clients.
    let piece = vec![b' '; 8 * 1024];
    for _ in 0..(LENGTH - 1000) / piece.len() {
        for stream in &mut held {
            stream.write_all(&piece).await.expect("body");
        }
    }
    // Let the server read what was sent.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let peak = rss_kib(pid);
    drop(held);
    // Closed connections end their reads at once; give the allocator a moment to return
    // the pages.
    let mut after = rss_kib(pid);
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        after = rss_kib(pid);
        if after < before + (peak - before) / 4 {
            break;
        }
    }
    eprintln!(
        "RSS with {CLIENTS} slow 1 MB bodies: before {} MiB, held {} MiB, after close {} MiB",
        before / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(
        peak > before + (CLIENTS * LENGTH / 1024 / 2) as u64,
        "the bodies were held"
    );
    assert!(
        after < before + (peak - before) / 4,
        "at most a quarter of the growth may stay: before {before} KiB, held {peak} KiB, after {after} KiB"
    );
    let (status, _) = server.call("GET", "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
}
