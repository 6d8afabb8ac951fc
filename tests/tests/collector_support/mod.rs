//! Helpers shared by the collector end-to-end tests: scenarios, a simulator on loopback, the
//! agent in-process, and a tiny HTTP client.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_agent::collector::CollectorSettings;
use flink_autoscale_agent::commands::run::run_agent;
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::{
    client_from_config, CancellationToken, NoDecision, SystemClock,
};
use flink_autoscale_agent::flink::model::JobOverview;
use flink_autoscale_agent::flink::FlinkClient;
use flink_autoscale_simulator::{start, RunningSim, Scenario, SimOptions};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A job of three vertices: a Kafka-like source, a map, a sink.
pub fn job_toml(name: &str, source_p: u32, map_p: u32, rate: f64) -> String {
    format!(
        r#"
[[job]]
name = "{name}"
[[job.vertex]]
name = "Source: {name} events"
parallelism = {source_p}
capacity = 5000.0
[job.vertex.source]
partitions = 8
topic = "{name}"
rate = {{ kind = "constant", value = {rate} }}
[[job.vertex]]
name = "enrich"
parallelism = {map_p}
capacity = 2000.0
[[job.vertex]]
name = "Sink: {name} out"
parallelism = 2
capacity = 10000.0
[[job.edge]]
from = "Source: {name} events"
to = "enrich"
ship_strategy = "REBALANCE"
[[job.edge]]
from = "enrich"
to = "Sink: {name} out"
ship_strategy = "HASH"
"#
    )
}

/// Starts the simulator on a free loopback port.
pub async fn start_sim(toml: &str, manual_clock: bool) -> RunningSim {
    let scenario = Scenario::from_toml_str(toml).expect("valid scenario");
    start(
        scenario,
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            manual_clock,
            ..Default::default()
        },
    )
    .await
    .expect("simulator starts")
}

/// A configuration for tests: fast polls, short timeouts, loopback only.
pub fn config(jm_url: &str, extra_toml: &str) -> Config {
    let base = format!(
        r#"
[jobmanager]
url = "{jm_url}"
request_timeout = "400ms"
connect_timeout = "400ms"
fetcher_update_interval = "100ms"
max_response_bytes = 1048576
[collector]
poll_interval = "400ms"
poll_deadline = "400ms"
names_refresh_interval = "1h"
slow_refresh_interval = "1h"
backoff_initial = "100ms"
backoff_max = "400ms"
[server]
listen = "127.0.0.1:0"
shutdown_grace = "1s"
[autoscaler]
"metrics.window" = "10min"
"#
    );
    let merged = merge_toml(&base, extra_toml);
    Config::from_layers(&merged, &BTreeMap::new(), &Overrides::default())
        .expect("valid test config")
}

/// `extra` wins over `base`, key by key inside sections.
fn merge_toml(base: &str, extra: &str) -> String {
    let mut b: toml::Table = base.parse().unwrap();
    let e: toml::Table = extra.parse().unwrap();
    for (section, values) in e {
        match (b.get_mut(&section), values) {
            (Some(toml::Value::Table(bt)), toml::Value::Table(et)) => bt.extend(et),
            (_, v) => {
                b.insert(section, v);
            }
        }
    }
    toml::to_string(&b).unwrap()
}

pub fn client_and_settings(cfg: &Config) -> (FlinkClient, Arc<CollectorSettings>) {
    (
        client_from_config(cfg).unwrap(),
        Arc::new(CollectorSettings::from_config(cfg)),
    )
}

/// This job's entry of `/jobs/overview`.
pub async fn overview_of(client: &FlinkClient, job_id: &str) -> JobOverview {
    let (o, _) = client.jobs_overview().await.expect("overview");
    o.jobs
        .into_iter()
        .find(|j| j.jid == job_id)
        .expect("job listed")
}

/// A running in-process agent.
pub struct Agent {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Agent {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the agent and waits (bounded) for it to finish.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("agent stops within 5 s")
            .expect("agent task");
    }
}

pub async fn start_agent(cfg: Config) -> Agent {
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        run_agent(
            cfg,
            Arc::new(SystemClock),
            Arc::new(NoDecision),
            token,
            move |addr| {
                let _ = tx.send(addr);
            },
        )
        .await
        .expect("agent runs");
    });
    let addr = tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .expect("agent binds")
        .expect("address");
    Agent {
        addr,
        shutdown,
        task,
    }
}

/// GET over loopback; returns status and body.
pub async fn get(url: &str) -> (u16, String) {
    request(hyper::Method::GET, url, Bytes::new()).await
}

pub async fn request(method: hyper::Method, url: &str, body: Bytes) -> (u16, String) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), client.request(req))
        .await
        .expect("answer within 5 s")
        .expect("request");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// Polls `check` every 50 ms until it returns true or `limit` passes.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of one Prometheus sample whose name matches and whose labels include `labels`.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            if n != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            if all {
                value.parse().ok()
            } else {
                None
            }
        })
}

/// Sum of every sample of `name` whose labels include `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().ok())
            .flatten()
        })
        .sum()
}
