//! Test harness: a simulator on a loopback port with a manual clock, and a small HTTP client.

#![allow(dead_code)] // each test file uses a different subset

use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_simulator::{start, RunningSim, Scenario, SimControl, SimOptions};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Bounds every request so a broken simulator fails the test instead of hanging it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Sim {
    pub sim: Option<RunningSim>,
    pub url: String,
    pub control: SimControl,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

pub fn scenario_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

impl Sim {
    pub async fn from_file(name: &str) -> Sim {
        Sim::start(Scenario::from_file(&scenario_path(name)).expect("example scenario is valid"))
            .await
    }

    pub async fn from_toml(text: &str) -> Sim {
        Sim::start(Scenario::from_toml_str(text).expect("test scenario is valid")).await
    }

    pub async fn start(scenario: Scenario) -> Sim {
        let opts = SimOptions {
            manual_clock: true,
            ..SimOptions::default()
        };
        let sim = start(scenario, "127.0.0.1:0".parse().unwrap(), opts)
            .await
            .expect("simulator starts");
        let client = Client::builder(TokioExecutor::new()).build_http();
        Sim {
            url: sim.url(),
            control: sim.control(),
            sim: Some(sim),
            client,
        }
    }

    pub fn job(&self) -> String {
        self.control.job_ids()[0].clone()
    }

    pub fn vertex(&self, i: usize) -> String {
        self.control.vertex_ids(&self.job())[i].clone()
    }

    pub fn advance_s(&self, s: u64) {
        self.control.advance(Duration::from_secs(s));
    }

    /// Sends a request; returns status, headers and body text.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, http::HeaderMap, String) {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{}", self.url, path))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))
            .unwrap();
        let fut = async {
            let resp = self.client.request(req).await.expect("request succeeds");
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .expect("body reads")
                .to_bytes();
            (
                status,
                headers,
                String::from_utf8(bytes.to_vec()).expect("utf-8 body"),
            )
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .expect("request within the timeout")
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let (status, _, text) = self.request("GET", path, None).await;
        (
            status,
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {text}")),
        )
    }

    pub async fn get_ok(&self, path: &str) -> Value {
        let (status, v) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    pub async fn send(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let (status, _, text) = self.request(method, path, Some(body)).await;
        let v = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, v)
    }

    pub async fn stop(mut self) {
        if let Some(sim) = self.sim.take() {
            tokio::time::timeout(Duration::from_secs(10), sim.shutdown())
                .await
                .expect("shutdown is bounded");
        }
    }
}

/// Aggregated metric `agg` of `name` in a `subtasks/metrics?get=` answer.
pub fn agg(v: &Value, name: &str, agg: &str) -> f64 {
    let entry = v
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == name))
        .unwrap_or_else(|| panic!("{name} missing in {v}"));
    entry[agg]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}.{agg} not a number in {v}"))
}

/// A plain value (string) of `name` in a `[{"id","value"}]` answer, parsed as a number.
pub fn plain(v: &Value, name: &str) -> f64 {
    let entry = v
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == name))
        .unwrap_or_else(|| panic!("{name} missing in {v}"));
    entry["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} value not a string in {v}"))
        .parse()
        .expect("numeric value")
}

/// A small job: Kafka source (1 subtask, `partitions` partitions) -> map -> sink.
pub fn chain_toml(rate: f64, map_capacity: f64, extra: &str) -> String {
    format!(
        r#"
{extra}
[[job]]
name = "chain"
downtime_ms = 2000
rescale_delay_ms = 0
checkpoint_interval_ms = 10000

[[job.vertex]]
name = "Source: Kafka Source"
parallelism = 2
max_parallelism = 32
capacity = 100000
source = {{ partitions = 4, topic = "in", rate = {{ kind = "constant", value = {rate} }} }}

[[job.vertex]]
name = "Map"
parallelism = 2
max_parallelism = 32
capacity = {map_capacity}
selectivity = 0.5

[[job.vertex]]
name = "Sink: Writer"
parallelism = 1
max_parallelism = 32
capacity = 100000

[[job.edge]]
from = "Source: Kafka Source"
to = "Map"
ship_strategy = "FORWARD"

[[job.edge]]
from = "Map"
to = "Sink: Writer"
ship_strategy = "REBALANCE"
"#
    )
}
