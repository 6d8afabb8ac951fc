//! Test support: the coordinator binary on loopback, a tiny HTTP client, and test databases
//! (a temporary SQLite file, or a fresh PostgreSQL schema dropped afterwards).
#![allow(dead_code)]

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

pub const AGENT: &str = "agent-token-0123456789abcdef";
pub const ADMIN: &str = "admin-token-0123456789abcdef";
pub const JOB: &str = "0123456789abcdef0123456789abcdef";
const START_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/test";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where a test's coordinator keeps its state. Dropping it removes the state.
pub struct Db {
    pub url: String,
    pub schema: Option<String>,
    dir: tempfile::TempDir,
}

impl Db {
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("coordinator.db").display());
        Db {
            url,
            schema: None,
            dir,
        }
    }

    /// A fresh schema on the test PostgreSQL server, or `None` (said plainly on stderr) when
    /// none is reachable. Under `CI=true` an unreachable server fails the test.
    pub fn postgres() -> Option<Db> {
        let url = std::env::var("FLINK_AUTOSCALE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| DEFAULT_POSTGRES.to_string());
        if let Err(why) = reachable(&url) {
            let message = format!(
                "PostgreSQL is not reachable at {url} ({why}); set FLINK_AUTOSCALE_TEST_POSTGRES_URL to run the PostgreSQL variant"
            );
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{message} (CI=true: failing instead of skipping)");
            }
            eprintln!("SKIPPED: {message}");
            return None;
        }
        let schema = format!(
            "coord_test_{}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Some(Db {
            url,
            schema: Some(schema),
            dir: tempfile::tempdir().expect("tempdir"),
        })
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec!["--database".to_string(), self.url.clone()];
        if let Some(schema) = &self.schema {
            args.push("--database-schema".to_string());
            args.push(schema.clone());
        }
        args
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let Some(schema) = self.schema.clone() else {
            return;
        };
        let url = self.url.clone();
        // Drop runs outside any async context: use a private runtime on a thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                use sqlx::Connection;
                if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                    let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                        .execute(&mut conn)
                        .await;
                }
            });
        })
        .join();
    }
}

fn reachable(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let host = parsed.host_str().unwrap_or("127.0.0.1").to_string();
    let port = parsed.port().unwrap_or(5432);
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .map_err(|e| e.to_string())?;
    for addr in addrs {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok() {
            return Ok(());
        }
    }
    Err("connection refused or timed out".to_string())
}

/// A running coordinator process. Dropping it kills the process.
pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    /// Starts `flink-autoscale-coordinator run` on a free loopback port with the test tokens.
    pub fn start(db: &Db, extra: &[&str]) -> Server {
        let dir = db.dir();
        let agent_file = dir.join("agent.tokens");
        let admin_file = dir.join("admin.tokens");
        std::fs::write(&agent_file, format!("# agents\n{AGENT}\n")).expect("write tokens");
        std::fs::write(&admin_file, format!("{ADMIN}\n")).expect("write tokens");
        let mut child = Command::new(env!("CARGO_BIN_EXE_flink-autoscale-coordinator"))
            .arg("run")
            .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
            .arg("--agent-tokens-file")
            .arg(&agent_file)
            .arg("--admin-tokens-file")
            .arg(&admin_file)
            .args(db.args())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start coordinator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the child never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("coordinator did not announce itself within {START_TIMEOUT:?} ({status:?})");
            }
        };
        let base = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first stdout line {line:?}"))
            .to_string();
        Server { child, base }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        signal(self.child.id(), "-TERM");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("coordinator did not exit within {STOP_TIMEOUT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let bytes = body.map(|b| serde_json::to_vec(&b).expect("json"));
        self.raw(method, path, token, bytes).await
    }

    /// `POST /v1/proposals/{id}/outcome` with the agent token.
    pub async fn report_outcome(&self, id: &str, outcome: Value) -> (StatusCode, Value) {
        let path = format!("/v1/proposals/{id}/outcome");
        self.call("POST", &path, Some(AGENT), Some(outcome)).await
    }

    /// One request on a fresh connection; the body is sent as given.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, Value) {
        let (status, _, text) = self.raw_with_headers(method, path, token, body).await;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn raw_with_headers(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, hyper::HeaderMap, String) {
        let fut = async {
            let host = self.base.trim_start_matches("http://").to_string();
            let stream = tokio::net::TcpStream::connect(&host)
                .await
                .expect("connect");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, host);
            if let Some(t) = token {
                req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            if body.is_some() {
                req = req.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            let req = req
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .expect("request");
            let resp = sender.send_request(req).await.expect("send");
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp.into_body().collect().await.expect("body").to_bytes();
            (
                status,
                headers,
                String::from_utf8_lossy(&bytes).into_owned(),
            )
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| panic!("{method} {path} took longer than {REQUEST_TIMEOUT:?}"))
    }

    /// Every audit record, following the cursor.
    pub async fn all_decisions(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/decisions?limit=1000&cursor={c}"),
                None => "/v1/decisions?limit=1000".to_string(),
            };
            let (status, page) = self.call("GET", &path, Some(ADMIN), None).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            out.extend(
                page["decisions"]
                    .as_array()
                    .expect("decisions")
                    .iter()
                    .cloned(),
            );
            match page["next"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return out,
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Vertex id number `n` of job `job`.
pub fn vertex_id(n: u32) -> String {
    format!("{n:032x}")
}

/// A valid proposal for `job` with one vertex going from `current` to `proposed`.
pub fn proposal(id: &str, job: &str, current: u32, proposed: u32) -> Value {
    json!({
        "proposal_id": id,
        "agent_id": "agent-1",
        "cluster_id": "c1",
        "region": "eu-west-1",
        "job_id": job,
        "job_name": "orders",
        "vertices": [
            { "id": vertex_id(1), "name": "Source", "current_parallelism": current, "proposed_parallelism": current },
            { "id": vertex_id(2), "name": "Map", "slot_sharing_group": "default",
              "current_parallelism": current, "proposed_parallelism": proposed,
              "evidence": { "true_processing_rate": 1000.0, "target_data_rate": 300.0, "busy_ratio": 0.3, "reason": "test" } }
        ],
        "checkpoint_state_bytes": 1_073_741_824u64,
        "slots_per_task_manager": 4,
        "disk_bytes_per_task_manager": 10_737_418_240u64,
        "current_task_managers": current.div_ceil(4)
    })
}

/// Job id number `n`.
pub fn job(n: u32) -> String {
    format!("{n:032x}")
}
