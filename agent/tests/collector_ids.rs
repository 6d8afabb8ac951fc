//! The agent does not trust the JobManager's ids and values. A hostile JobManager on loopback
//! lists jobs whose ids are a query string (`x?get=1`), a path (`../../jobmanager/config`),
//! 5,000 characters, or carry a newline and a forged log line; one job has vertex ids of the
//! same kinds, and the good job reports `"-Infinity"` backpressure. It answers for any id,
//! as a careless proxy would. The agent runs in-process with its logs captured; each finding
//! has its own test.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_agent::commands::run::run_agent;
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::{CancellationToken, NoDecision, SystemClock};
use flink_autoscale_shared::http::{self as shttp, Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const GOOD: &str = "0123456789abcdef0123456789abcdef";
const GOOD_VERTEX: &str = "fedcba9876543210fedcba9876543210";
/// A well-formed job id whose job details carry hostile vertex ids.
const BAD_VERTICES: &str = "11111111111111111111111111111111";
const FORGED: &str = "FORGED-LINE level=ERROR the agent was compromised";

fn hostile_job_ids() -> Vec<String> {
    vec![
        "x?get=1".into(),
        "../../jobmanager/config".into(),
        "a".repeat(5000),
        format!("abc\n{FORGED}"),
    ]
}

/// Every request the hostile JobManager saw, as `path?query`.
type Seen = Arc<Mutex<Vec<String>>>;

fn handle(req: &Request, seen: &Seen) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    seen.lock().unwrap().push(format!("{path}?{query}"));
    let json = |v: serde_json::Value| shttp::json(StatusCode::OK, &v);
    let job_entry = |jid: &str| serde_json::json!({"jid": jid, "name": "j", "state": "RUNNING", "start-time": 1, "last-modification": 2, "tasks": {"total": 1}});
    if path == "/jobs/overview" {
        let mut jobs: Vec<_> = hostile_job_ids().iter().map(|j| job_entry(j)).collect();
        jobs.push(job_entry(GOOD));
        jobs.push(job_entry(BAD_VERTICES));
        return json(serde_json::json!({ "jobs": jobs }));
    }
    let Some(rest) = path.strip_prefix("/jobs/") else {
        return shttp::json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"errors": ["Not found."]}),
        );
    };
    // Answers for any job id, and for any vertex id under it.
    let (jid, tail) = rest.split_once("/vertices/").unwrap_or((rest, ""));
    if tail.is_empty() {
        let vertices: Vec<&str> = if jid == BAD_VERTICES {
            vec!["../../jobmanager/config", "x?get=1"]
        } else {
            vec![GOOD_VERTEX]
        };
        let vs: Vec<_> = vertices
            .iter()
            .map(|v| serde_json::json!({"id": v, "name": "Source: s", "parallelism": 1, "maxParallelism": 8}))
            .collect();
        let nodes: Vec<_> = vertices
            .iter()
            .map(|v| serde_json::json!({"id": v}))
            .collect();
        return json(
            serde_json::json!({"jid": jid, "state": "RUNNING", "timestamps": {"RUNNING": 1000},
            "vertices": vs, "plan": {"nodes": nodes}}),
        );
    }
    if !tail.ends_with("/subtasks/metrics") {
        return shttp::json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"errors": ["Not found."]}),
        );
    }
    let names = [
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "numRecordsOut",
        "Source__s.numRecordsIn",
        "Source__s.numRecordsInPerSecond",
    ];
    let Some(get) = query.split('&').find_map(|kv| kv.strip_prefix("get=")) else {
        let listed: Vec<_> = names.iter().map(|n| serde_json::json!({"id": n})).collect();
        return json(listed.into());
    };
    let tick = seen.lock().unwrap().len() as f64;
    let values: Vec<_> = get
        .split(',')
        .map(|n| match n {
            "backPressuredTimeMsPerSecond" => {
                serde_json::json!({"id": n, "avg": "-Infinity", "sum": "-Infinity"})
            }
            _ => {
                serde_json::json!({"id": n, "max": 100.0 * tick, "avg": 50.0, "sum": 100.0 * tick})
            }
        })
        .collect();
    json(values.into())
}

async fn hostile_jobmanager() -> (String, Seen, CancellationToken) {
    let seen: Seen = Arc::default();
    let (listener, addr) = shttp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let token = CancellationToken::new();
    let s = Arc::clone(&seen);
    tokio::spawn(shttp::serve(
        listener,
        move |req| {
            let resp = handle(&req, &s);
            async move { resp }
        },
        token.clone(),
        Duration::from_secs(1),
    ));
    (format!("http://{addr}"), seen, token)
}

/// The agent's log lines, from a text-format subscriber like `run`'s, for the whole binary.
fn logs() -> &'static Mutex<Vec<u8>> {
    static LOGS: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        struct Sink(&'static Mutex<Vec<u8>>);
        impl Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Sink(buffer))
            .init();
        buffer
    })
}

struct Agent {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    jobmanager: CancellationToken,
    seen: Seen,
}

impl Agent {
    async fn start() -> Agent {
        logs();
        let (url, seen, jobmanager) = hostile_jobmanager().await;
        let toml = format!("[jobmanager]\nurl = \"{url}\"\nrequest_timeout = \"300ms\"\nconnect_timeout = \"300ms\"\nfetcher_update_interval = \"100ms\"\n[collector]\npoll_interval = \"300ms\"\npoll_deadline = \"300ms\"\nbackoff_initial = \"100ms\"\nbackoff_max = \"300ms\"\n[server]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"1s\"");
        let cfg = Config::from_layers(&toml, &Default::default(), &Overrides::default()).unwrap();
        let shutdown = CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            run_agent(
                cfg,
                Arc::new(SystemClock),
                Arc::new(NoDecision),
                token,
                move |a| {
                    let _ = tx.send(a);
                },
            )
            .await
            .expect("agent runs");
        });
        let addr = tokio::time::timeout(Duration::from_secs(5), rx)
            .await
            .unwrap()
            .unwrap();
        Agent {
            addr,
            shutdown,
            task,
            jobmanager,
            seen,
        }
    }

    async fn metrics(&self) -> String {
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let url = format!("http://{}/metrics", self.addr).parse().unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(5), client.get(url))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8(
            resp.into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
        .unwrap()
    }

    /// Waits (bounded) until the good job was polled successfully, then a few poll intervals
    /// more, so every job had its turns.
    async fn settled(&self) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.metrics().await;
            let polled = text.contains(&format!(
                "flink_autoscale_agent_job_data_usable{{job_id=\"{GOOD}\"}}"
            ));
            if polled {
                tokio::time::sleep(Duration::from_millis(900)).await;
                return self.metrics().await;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "agent did not settle:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .unwrap()
            .unwrap();
        self.jobmanager.cancel();
    }
}

fn counter(text: &str, name: &str, kind: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&format!("kind=\"{kind}\"")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_are_not_flink_ids_never_reach_a_url() {
    let agent = Agent::start().await;
    agent.settled().await;
    let seen = agent.seen.lock().unwrap().clone();
    for request in &seen {
        let (path, query) = request.split_once('?').unwrap();
        assert!(
            !path.split('/').any(|s| s == ".." || s == "."),
            "a dot segment reached the JobManager: {request}"
        );
        assert!(
            !query.starts_with("get=1"),
            "an id became a query string: {request}"
        );
        if let Some(rest) = path.strip_prefix("/jobs/").filter(|r| *r != "overview") {
            let id = rest.split('/').next().unwrap();
            assert!(
                id == GOOD || id == BAD_VERTICES,
                "job {:?} was requested",
                &id[..id.len().min(60)]
            );
        }
        if let Some((_, vertex)) = path.split_once("/vertices/") {
            assert!(
                vertex.starts_with(GOOD_VERTEX) || vertex.starts_with("subtasks/metrics/"),
                "vertex request {request}"
            );
        }
    }
    assert!(seen.iter().any(|r| r.starts_with(&format!(
        "/jobs/{GOOD}/vertices/{GOOD_VERTEX}/subtasks/metrics?get="
    ))));
    let text = agent.metrics().await;
    // Four refused job ids per discovery, and the job with hostile vertex ids per poll.
    assert!(
        counter(&text, "flink_autoscale_agent_errors_total", "invalid_id") >= 5.0,
        "{text}"
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5000_character_id_becomes_no_metric_label() {
    let agent = Agent::start().await;
    let text = agent.settled().await;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels = line.split_once('{').map_or("", |(_, rest)| rest);
        for value in labels.split('"').skip(1).step_by(2) {
            assert!(
                value.len() <= 200,
                "a label of {} characters: {}…",
                value.len(),
                &line[..120]
            );
        }
    }
    assert!(text.contains(&format!("job_id=\"{GOOD}\"")));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newline_in_an_id_forges_no_log_line() {
    let agent = Agent::start().await;
    agent.settled().await;
    agent.stop().await;
    let logs = String::from_utf8_lossy(&logs().lock().unwrap()).into_owned();
    for line in logs.lines() {
        assert!(
            !line.starts_with("FORGED-LINE"),
            "a forged log line:\n{line}"
        );
    }
    let refusals = logs
        .lines()
        .filter(|l| l.contains("skipping jobs whose ids are not Flink ids"))
        .count();
    assert!(refusals >= 1, "the refusal is logged:\n{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_finite_values_are_not_exported_and_are_counted() {
    let agent = Agent::start().await;
    let text = agent.settled().await;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit_once(' ').map_or("", |(_, v)| v);
        assert!(
            !value.to_ascii_lowercase().contains("inf") && value != "NaN",
            "exported: …{}",
            &line[line.len().saturating_sub(120)..]
        );
    }
    assert!(
        counter(
            &text,
            "flink_autoscale_agent_errors_total",
            "non_finite_value"
        ) >= 1.0,
        "{text}"
    );
    assert!(text.contains(&format!(
        "flink_autoscale_agent_vertex_busy_ratio{{job_id=\"{GOOD}\""
    )));
    agent.stop().await;
}
