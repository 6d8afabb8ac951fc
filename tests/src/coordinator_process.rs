//! The real coordinator binary on loopback, for end-to-end tests: found in Cargo's target
//! directory by the test kit (`scripts/test.sh` builds it). SQLite in a temporary directory;
//! tokens in files; restartable on the same port so an agent configured with its URL finds it
//! again. Dropping it kills the process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_testkit::{write_private, Daemon};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

pub const AGENT_TOKEN: &str = "loop-agent-token-0123456789";
pub const ADMIN_TOKEN: &str = "loop-admin-token-0123456789";
const BIN: &str = "flink-autoscale-coordinator";
const START_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A coordinator process with its SQLite file and token files in `dir`.
pub struct Coordinator {
    daemon: Option<Daemon>,
    dir: PathBuf,
    extra: Vec<String>,
    /// `http://127.0.0.1:PORT`; stays the same across [`Coordinator::restart`].
    pub url: String,
}

impl Coordinator {
    /// Starts on a free port. `extra`: more `run` flags, e.g. `--min-interval 0s`.
    pub fn start(dir: &Path, extra: &[&str]) -> Coordinator {
        write_private(&dir.join("agent.tokens"), &format!("{AGENT_TOKEN}\n")).expect("token file");
        write_private(&dir.join("admin.tokens"), &format!("{ADMIN_TOKEN}\n")).expect("token file");
        let mut c = Coordinator {
            daemon: None,
            dir: dir.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            url: String::new(),
        };
        c.spawn("127.0.0.1:0");
        c
    }

    /// The agent's token file.
    pub fn agent_token_file(&self) -> PathBuf {
        self.dir.join("agent.tokens")
    }

    fn spawn(&mut self, listen: &str) {
        let bin = flink_autoscale_testkit::binary(BIN).expect("the coordinator binary");
        let daemon = Daemon::start(
            BIN,
            Command::new(bin)
                .arg("run")
                .args(["--listen", listen, "--log-level", "warn"])
                .arg("--database")
                .arg(format!(
                    "sqlite:{}",
                    self.dir.join("coordinator.db").display()
                ))
                .arg("--agent-tokens-file")
                .arg(self.dir.join("agent.tokens"))
                .arg("--admin-tokens-file")
                .arg(self.dir.join("admin.tokens"))
                .args(&self.extra),
            START_TIMEOUT,
        )
        .expect("start the coordinator");
        self.url = daemon.url().to_string();
        self.daemon = Some(daemon);
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            daemon.kill();
        }
    }

    /// Starts again on the same port with the same database.
    pub fn restart(&mut self) {
        self.kill();
        let listen = self.url.trim_start_matches("http://").to_string();
        self.spawn(&listen);
    }

    pub fn is_running(&self) -> bool {
        self.daemon.is_some()
    }

    /// One request with the admin token; answers (status, JSON body).
    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let host = self.url.trim_start_matches("http://").to_string();
        let request = async {
            let stream = tokio::net::TcpStream::connect(&host).await.ok()?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .ok()?;
            tokio::spawn(conn);
            let bytes = body
                .map(|b| serde_json::to_vec(&b).unwrap_or_default())
                .unwrap_or_default();
            let req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, &host)
                .header(
                    hyper::header::AUTHORIZATION,
                    format!("Bearer {ADMIN_TOKEN}"),
                )
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(bytes)))
                .ok()?;
            let resp = sender.send_request(req).await.ok()?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.ok()?.to_bytes();
            Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, request)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{method} {path} to the coordinator failed"))
    }

    /// Every audit record of `job`, newest first, following the cursor.
    pub async fn decisions(&self, job: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/decisions?job={job}&limit=100&cursor={c}"),
                None => format!("/v1/decisions?job={job}&limit=100"),
            };
            let (status, page) = self.admin("GET", &path, None).await;
            assert_eq!(status, 200, "GET {path}: {page}");
            out.extend(page["decisions"].as_array().cloned().unwrap_or_default());
            match page["next"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return out,
            }
        }
    }
}
