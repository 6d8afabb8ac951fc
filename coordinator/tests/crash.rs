//! SIGKILL during a burst of proposals: every proposal that got a verdict must be in the
//! audit after a restart, with the same verdict.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_testkit::{send_signal, Signal};
use hyper::StatusCode;
use serde_json::Value;
use support::{job, proposal, Db, Server, AGENT};
use tokio::sync::Mutex;

/// Concurrent agents in the burst.
const AGENTS: u32 = 16;
/// Longest wait for the first 100 verdicts before the kill.
const BURST_LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_burst_sqlite() {
    sigkill_during_burst(Db::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_burst_postgres() {
    if let Some(db) = Db::postgres() {
        sigkill_during_burst(db).await;
    }
}

async fn sigkill_during_burst(db: Db) {
    let server = Arc::new(Server::start(&db, &["--min-interval", "0s"]));
    let answered: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let mut agents = Vec::new();
    for a in 0..AGENTS {
        let server = Arc::clone(&server);
        let answered = Arc::clone(&answered);
        agents.push(tokio::spawn(async move {
            for n in 0u32.. {
                let id = format!("crash-{a}-{n}");
                let p = proposal(&id, &job(a * 1000 + n % 50), 4, 6);
                // Once the process is gone requests fail; that ends this agent.
                let Some((status, answer)) = try_post(&server, p).await else {
                    return;
                };
                if status == StatusCode::OK {
                    let verdict = answer["verdict"].as_str().expect("verdict").to_string();
                    answered.lock().await.insert(id, verdict);
                }
            }
        }));
    }
    // Kill mid-burst, once enough verdicts were answered (bounded, for a loaded machine).
    let started = std::time::Instant::now();
    while answered.lock().await.len() < 100 && started.elapsed() < BURST_LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The agents share the handle, so kill by pid; dropping the last handle reaps it.
    assert!(send_signal(server.pid(), Signal::Kill, false), "SIGKILL");
    for agent in agents {
        tokio::time::timeout(Duration::from_secs(20), agent)
            .await
            .expect("agents stop once the server is gone")
            .expect("agent task");
    }
    drop(server);
    let answered = answered.lock().await.clone();
    assert!(
        answered.len() > 50,
        "the burst should get many verdicts before the kill, got {}",
        answered.len()
    );

    let server = Server::start(&db, &[]);
    let audit: HashMap<String, String> = server
        .all_decisions()
        .await
        .into_iter()
        .map(|d: Value| {
            (
                d["proposal_id"].as_str().unwrap().to_string(),
                d["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (id, verdict) in &answered {
        assert_eq!(
            audit.get(id),
            Some(verdict),
            "proposal {id} got {verdict} before the crash"
        );
    }
    eprintln!(
        "{} verdicts answered before SIGKILL, all in the audit ({} records)",
        answered.len(),
        audit.len()
    );
}

/// POST a proposal; `None` when the connection fails (server killed).
async fn try_post(server: &Server, body: Value) -> Option<(StatusCode, Value)> {
    let host = server.base.trim_start_matches("http://").to_string();
    let fut = async {
        let stream = tokio::net::TcpStream::connect(&host).await.ok()?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .ok()?;
        tokio::spawn(conn);
        let req = hyper::Request::post("/v1/proposals")
            .header(hyper::header::HOST, &host)
            .header(hyper::header::AUTHORIZATION, format!("Bearer {AGENT}"))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                serde_json::to_vec(&body).ok()?,
            )))
            .ok()?;
        let resp = sender.send_request(req).await.ok()?;
        let status = resp.status();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .ok()?
            .to_bytes();
        Some((status, serde_json::from_slice(&bytes).ok()?))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .ok()
        .flatten()
}
