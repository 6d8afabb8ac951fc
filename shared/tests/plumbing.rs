//! The shared HTTP server and systemd notification, over real sockets.

use std::time::Duration;

use flink_autoscale_shared::{http, lifecycle};
use hyper::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn serves_json_and_stops_within_grace() {
    let (listener, addr) = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let token = CancellationToken::new();
    let server = tokio::spawn(http::serve(
        listener,
        |req: http::Request| async move {
            if req.uri().path() == "/slow" {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            http::json(
                StatusCode::OK,
                &serde_json::json!({"path": req.uri().path()}),
            )
        },
        token.clone(),
        Duration::from_millis(300),
    ));
    let resp = get(addr, "/hello").await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("application/json"));
    assert!(resp.ends_with(r#"{"path":"/hello"}"#), "{resp}");

    // A request that outlives the grace period must not hold shutdown hostage.
    let slow = tokio::spawn(async move { get(addr, "/slow").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    tokio::time::timeout(Duration::from_secs(3), server)
        .await
        .expect("server stopped within the grace period")
        .unwrap();
    slow.abort();
}

#[test]
fn sd_notify_sends_a_datagram_to_notify_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let receiver = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    // Only this test in this binary touches NOTIFY_SOCKET.
    std::env::set_var("NOTIFY_SOCKET", &path);
    assert!(lifecycle::sd_notify("READY=1").unwrap());
    let mut buf = [0u8; 64];
    let n = receiver.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    std::env::remove_var("NOTIFY_SOCKET");
    assert!(!lifecycle::sd_notify("READY=1").unwrap());
}
