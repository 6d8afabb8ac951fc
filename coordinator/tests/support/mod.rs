//! Test support: the coordinator binary on loopback, a tiny HTTP client, and test databases
//! (a temporary SQLite file, or a fresh PostgreSQL schema dropped afterwards).
#![allow(dead_code)]

pub mod proxy;
pub mod webdriver;

/// Runs a scenario once per backend, as a module of two tests. The PostgreSQL variant says
/// plainly when it cannot run (and fails under CI=true). Needs `#[macro_use] mod support;`.
#[allow(unused_macros)]
macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test]
            async fn sqlite() {
                super::$scenario(super::Db::sqlite()).await;
            }
            #[tokio::test]
            async fn postgres() {
                if let Some(db) = super::Db::postgres() {
                    super::$scenario(db).await;
                }
            }
        }
    )*};
}

use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_testkit::{write_private, Daemon, Signal};
use http_body_util::{BodyExt, Full};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

pub const AGENT: &str = "agent-token-0123456789abcdef";
pub const ADMIN: &str = "admin-token-0123456789abcdef";
pub const JOB: &str = "0123456789abcdef0123456789abcdef";
/// The viewer token `start_named` writes, for carol.
pub const VIEWER: &str = "viewer-token-0123456789abcdef";
const START_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/test";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where a test's coordinator keeps its state. Dropping it removes the state.
pub struct Db {
    pub url: String,
    pub schema: Option<String>,
    /// What the coordinator connects to, when not `url` (a proxy in front of it).
    pub connect_url: Option<String>,
    dir: tempfile::TempDir,
}

impl Db {
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("coordinator.db").display());
        Db {
            url,
            schema: None,
            connect_url: None,
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
            connect_url: None,
            dir: tempfile::tempdir().expect("tempdir"),
        })
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// The PostgreSQL server's address (host and port of `url`).
    pub fn postgres_addr(&self) -> std::net::SocketAddr {
        let parsed = url::Url::parse(&self.url).expect("database URL");
        let host = parsed.host_str().unwrap_or("127.0.0.1");
        let port = parsed.port().unwrap_or(5432);
        std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .expect("resolve")
            .next()
            .expect("an address")
    }

    /// Makes the coordinator connect through `proxy` instead of directly.
    pub fn route_through(&mut self, proxy: std::net::SocketAddr) {
        let mut parsed = url::Url::parse(&self.url).expect("database URL");
        parsed.set_ip_host(proxy.ip()).expect("host");
        parsed.set_port(Some(proxy.port())).expect("port");
        self.connect_url = Some(parsed.to_string());
    }

    /// Runs one statement on the test PostgreSQL server (not through any proxy).
    pub async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url)
            .await
            .expect("connect to PostgreSQL");
        sqlx::query(sql).execute(&mut conn).await.expect(sql);
    }

    /// Runs one statement on the coordinator's own tables (its SQLite file, or its schema),
    /// as an operator or an attacker with database access would.
    pub async fn execute_in_store(&self, sql: &str) {
        use sqlx::Connection;
        match &self.schema {
            Some(schema) => {
                let mut conn = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect to PostgreSQL");
                let search_path = format!("SET search_path TO \"{schema}\"");
                sqlx::query(&search_path)
                    .execute(&mut conn)
                    .await
                    .expect("schema");
                sqlx::query(sql).execute(&mut conn).await.expect(sql);
            }
            None => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("open the SQLite store");
                sqlx::query(sql).execute(&mut conn).await.expect(sql);
            }
        }
    }

    fn args(&self) -> Vec<String> {
        let url = self.connect_url.as_ref().unwrap_or(&self.url);
        let mut args = vec!["--database".to_string(), url.clone()];
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
    daemon: Daemon,
    pub base: String,
}

/// How [`Server::spawn`] starts the coordinator.
#[derive(Default)]
pub struct Launch {
    /// `--listen` (default `127.0.0.1:0`).
    pub listen: Option<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Return at once instead of waiting for `listening on` (needs a fixed `listen`).
    pub no_wait: bool,
}

impl Server {
    /// Starts `flink-autoscale-coordinator run` on a free loopback port with the test tokens
    /// and waits until it announces itself.
    pub fn start(db: &Db, extra: &[&str]) -> Server {
        Server::spawn(db, extra, Launch::default())
    }

    /// Starts it with named tokens, so the audit can say who acted: `admins` is the admin
    /// token file, carol holds [`VIEWER`]. Generous rate limits; no minimum interval.
    pub fn start_named(db: &Db, admins: &str, extra: &[&str]) -> Server {
        let dir = db.dir();
        write_private(&dir.join("agent.tokens"), &format!("{AGENT}\n")).expect("tokens");
        write_private(&dir.join("admin.tokens"), admins).expect("tokens");
        write_private(&dir.join("viewer.tokens"), &format!("carol:{VIEWER}\n")).expect("tokens");
        let viewer_file = dir.join("viewer.tokens").display().to_string();
        let mut args = vec![
            "--viewer-tokens-file",
            &viewer_file,
            "--min-interval",
            "0s",
            "--max-in-flight-per-cluster",
            "100",
            "--max-in-flight-per-region",
            "100",
        ];
        args.extend_from_slice(extra);
        Server::start(db, &args)
    }

    pub fn spawn(db: &Db, extra: &[&str], launch: Launch) -> Server {
        let dir = db.dir();
        let agent_file = dir.join("agent.tokens");
        let admin_file = dir.join("admin.tokens");
        if !agent_file.exists() {
            write_private(&agent_file, &format!("# agents\n{AGENT}\n")).expect("write tokens");
            write_private(&admin_file, &format!("{ADMIN}\n")).expect("write tokens");
        }
        let listen = launch
            .listen
            .clone()
            .unwrap_or_else(|| "127.0.0.1:0".to_string());
        let daemon = Daemon::spawn(
            "coordinator",
            Command::new(env!("CARGO_BIN_EXE_flink-autoscale-coordinator"))
                .arg("run")
                .args(["--listen", &listen, "--log-level", "warn"])
                .arg("--agent-tokens-file")
                .arg(&agent_file)
                .arg("--admin-tokens-file")
                .arg(&admin_file)
                .args(db.args())
                .args(extra)
                .envs(launch.env.iter().map(|(k, v)| (k, v))),
        )
        .expect("start the coordinator");
        let mut server = Server {
            daemon,
            base: format!("http://{listen}"),
        };
        if !launch.no_wait {
            server.base = server.wait_listening(START_TIMEOUT);
        }
        server
    }

    /// Waits for the `listening on` line and returns the URL it names.
    pub fn wait_listening(&mut self, timeout: Duration) -> String {
        self.daemon
            .wait_listening(timeout)
            .expect("the coordinator announces itself")
            .to_string()
    }

    /// Whether the `listening on` line has come (without waiting).
    pub fn announced(&mut self) -> Option<String> {
        self.daemon.announced().map(str::to_string)
    }

    /// Everything the coordinator wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.daemon.stderr()
    }

    /// The exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.daemon.exit_status()
    }

    /// Sends a signal (`Signal::Hup`, `Signal::Term`, ...).
    pub fn signal(&mut self, signal: Signal) -> bool {
        self.daemon.signal(signal)
    }

    pub fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        self.daemon.stop(STOP_TIMEOUT).unwrap_or_else(|| {
            panic!(
                "coordinator did not exit within {STOP_TIMEOUT:?} of SIGTERM; stderr:\n{}",
                self.daemon.stderr()
            )
        })
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(mut self) {
        self.daemon.kill();
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

    /// `POST /v1/proposals` with the agent token for job number `job_n` (see [`proposal`]);
    /// answers the decision, which must be a 200.
    pub async fn propose(&self, id: &str, job_n: u32, current: u32, proposed: u32) -> Value {
        let body = proposal(id, &job(job_n), current, proposed);
        let (status, decision) = self
            .call("POST", "/v1/proposals", Some(AGENT), Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{decision}");
        decision
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
        let mut headers = Vec::new();
        let bearer = token.map(|t| format!("Bearer {t}"));
        if let Some(b) = &bearer {
            headers.push(("authorization", b.as_str()));
        }
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        self.request(method, path, &headers, body.unwrap_or_default())
            .await
    }

    /// One request with the given headers on a fresh connection; the body is sent as given.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
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
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            let req = req.body(Full::new(Bytes::from(body))).expect("request");
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

    /// POSTs a JSON body declared as `declared_len` bytes but sends only its first 64 KiB,
    /// then reads the answer. The server refuses on the declared length alone; a client
    /// writing the whole body could meet a closed socket (EPIPE) before reading the answer.
    pub async fn declared_oversize(
        &self,
        path: &str,
        token: &str,
        declared_len: usize,
    ) -> (StatusCode, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let fut = async {
            let host = self.base.trim_start_matches("http://").to_string();
            let mut stream = tokio::net::TcpStream::connect(&host)
                .await
                .expect("connect");
            let head = format!(
                "POST {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n\
                 content-type: application/json\r\ncontent-length: {declared_len}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await.expect("write head");
            let start = vec![b' '; (64 << 10).min(declared_len)];
            stream.write_all(&start).await.expect("write body start");
            let mut answer = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                    Err(e) if answer.is_empty() => panic!("read answer: {e}"),
                    Err(_) => break,
                }
                if let Some(parsed) = parse_raw_answer(&answer) {
                    return parsed;
                }
            }
            parse_raw_answer(&answer).unwrap_or_else(|| {
                panic!("incomplete answer: {}", String::from_utf8_lossy(&answer))
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| panic!("POST {path} took longer than {REQUEST_TIMEOUT:?}"))
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

/// Status and JSON body of a complete HTTP/1.1 answer with a content-length, if `raw` holds one.
fn parse_raw_answer(raw: &[u8]) -> Option<(StatusCode, Value)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())
            .flatten()
    })?;
    if body.len() < length {
        return None;
    }
    let value = serde_json::from_str(&body[..length]).unwrap_or(Value::Null);
    Some((StatusCode::from_u16(status).ok()?, value))
}
