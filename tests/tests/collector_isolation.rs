//! Isolation: one job's calls hang, and the other jobs' polls stay on schedule.

mod collector_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use collector_support::*;
use flink_autoscale_simulator::Fault;

const LAST_POLL: &str = "flink_autoscale_agent_last_successful_poll_timestamp_seconds";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_job_delays_no_other_job() {
    let toml = [
        job_toml("stuck", 2, 2, 100.0),
        job_toml("left", 2, 2, 100.0),
        job_toml("right", 2, 2, 100.0),
    ]
    .concat();
    let sim = start_sim(&toml, false).await;
    let ctl = sim.control();
    let jobs = ctl.job_ids();
    let (stuck, healthy) = (jobs[0].clone(), jobs[1..].to_vec());
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nrequest_timeout = \"1s\"\nmax_concurrent_requests = 2\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"\nbackoff_initial = \"1s\"\nbackoff_max = \"2s\"",
    );
    ctl.set_fault(Some(&stuck), Some(Fault::Hang));
    let agent = start_agent(cfg).await;

    // Sample each job's last-successful-poll gauge for 5 s and record when it changed.
    let mut changes: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let text = get(&agent.url("/metrics")).await.1;
        for job in &jobs {
            if let Some(v) = metric(&text, LAST_POLL, &[("job_id", job)]) {
                if last.get(job) != Some(&v) {
                    last.insert(job.clone(), v);
                    changes.entry(job.clone()).or_default().push(Instant::now());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !changes.contains_key(&stuck),
        "the hanging job never completes a poll"
    );
    for job in &healthy {
        let times = &changes[job];
        assert!(
            times.len() >= 4,
            "job {job} polled only {} times in 5 s",
            times.len()
        );
        let worst = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(
            worst < Duration::from_millis(1600),
            "job {job}: a gap of {worst:?} between polls"
        );
    }
    let text = get(&agent.url("/metrics")).await.1;
    // The hanging job's polls end as a request timeout, a poll deadline, or cut while hung.
    let failed: f64 = ["timeout", "deadline", "hung"]
        .iter()
        .map(|k| metric_sum(&text, "flink_autoscale_agent_errors_total", &[("kind", k)]))
        .sum();
    assert!(failed >= 1.0);
    assert_eq!(
        metric(&text, "flink_autoscale_agent_jobs_watched", &[]),
        Some(3.0)
    );
    agent.stop().await;
    ctl.set_fault(Some(&stuck), None);
    sim.shutdown().await;
}
