//! Prints how fast the simulator answers the expensive calls on the 10,000-subtask scenario.
//! Run: `cargo run --release -p flink-autoscale-simulator --example sim-bench`

use std::time::{Duration, Instant};

use bytes::Bytes;
use flink_autoscale_simulator::{start, Scenario, SimOptions};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const ROUNDS: usize = 50;

fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/large-10k.toml");
    let scenario = Scenario::from_file(&path)?;
    let sim = start(
        scenario,
        "127.0.0.1:0".parse()?,
        SimOptions {
            manual_clock: true,
            ..Default::default()
        },
    )
    .await?;
    let control = sim.control();
    let t = Instant::now();
    control.advance(Duration::from_secs(60));
    println!("integrate 60 s of 10,000 subtasks: {:?}", t.elapsed());
    let (job, source) = (
        control.job_ids()[0].clone(),
        control.vertex_ids(&control.job_ids()[0])[0].clone(),
    );
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let cases = [
        (
            "filtered aggregate, 1,000 subtasks, 3 metrics",
            format!("/jobs/{job}/vertices/{source}/subtasks/metrics?get=busyTimeMsPerSecond,backPressuredTimeMsPerSecond,Source__Kafka_Source.pendingRecords&agg=max,sum"),
        ),
        ("name list, 1,000 subtasks", format!("/jobs/{job}/vertices/{source}/subtasks/metrics")),
        ("/jobs/:jobid, 10,000 subtasks", format!("/jobs/{job}")),
        ("one subtask, all names", format!("/jobs/{job}/vertices/{source}/subtasks/3/metrics")),
    ];
    for (label, path) in cases {
        let uri: http::Uri = format!("{}{}", sim.url(), path).parse()?;
        let mut times = Vec::with_capacity(ROUNDS);
        let mut bytes = 0;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let resp = client.get(uri.clone()).await?;
            bytes = resp.into_body().collect().await?.to_bytes().len();
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "{label}: p50 {:?}, p99 {:?}, {} bytes",
            times[ROUNDS / 2],
            times[ROUNDS * 99 / 100],
            bytes
        );
    }
    if let Some(rss) = rss_mib() {
        println!("resident memory: {rss:.1} MiB");
    }
    sim.shutdown().await;
    Ok(())
}
