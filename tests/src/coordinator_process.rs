//! The real coordinator binary on loopback, for end-to-end tests: located next to the test
//! executable (`target/<profile>/flink-autoscale-coordinator`) and built with cargo when it is
//! missing. SQLite in a temporary directory; tokens in files; restartable on the same port so
//! an agent configured with its URL finds it again.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

pub const AGENT_TOKEN: &str = "loop-agent-token-0123456789";
pub const ADMIN_TOKEN: &str = "loop-admin-token-0123456789";
const BIN: &str = "flink-autoscale-coordinator";
const START_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `target/<profile>/flink-autoscale-coordinator`, built first if it is not there.
pub fn coordinator_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> → target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf();
    let bin = profile_dir.join(BIN);
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", BIN, "--bin", BIN]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("run cargo build for the coordinator");
        assert!(status.success(), "building {BIN} failed: {status}");
    }
    bin
}

/// A coordinator process with its SQLite file and token files in `dir`.
pub struct Coordinator {
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
    /// `http://127.0.0.1:PORT`; stays the same across [`Coordinator::restart`].
    pub url: String,
}

impl Coordinator {
    /// Starts on a free port. `extra`: more `run` flags, e.g. `--min-interval-seconds 0`.
    pub fn start(dir: &Path, extra: &[&str]) -> Coordinator {
        std::fs::write(dir.join("agent.tokens"), format!("{AGENT_TOKEN}\n")).expect("token file");
        std::fs::write(dir.join("admin.tokens"), format!("{ADMIN_TOKEN}\n")).expect("token file");
        let mut c = Coordinator {
            child: None,
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
        let mut child = Command::new(coordinator_binary())
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
            .args(&self.extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the coordinator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            for _ in lines {}
        });
        let Ok(line) = rx.recv_timeout(START_TIMEOUT) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the coordinator did not announce itself within {START_TIMEOUT:?}");
        };
        self.url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim()
            .to_string();
        self.child = Some(child);
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again on the same port with the same database.
    pub fn restart(&mut self) {
        self.kill();
        let listen = self.url.trim_start_matches("http://").to_string();
        self.spawn(&listen);
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
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

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.kill();
    }
}
