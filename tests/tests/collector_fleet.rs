//! Fleet scale against the simulator's `[fleet]` session cluster, measured from the
//! JobManager's side (`/_sim/polls`): thousands of jobs share the request budget fairly,
//! hanging jobs do not starve a healthy one, vanished jobs are dropped at once, and an agent
//! whose budget cannot cover every job every interval stretches the interval evenly and says
//! so on `/metrics` and `/readyz`.

mod collector_support;

use std::time::Duration;

use collector_support::*;
use flink_autoscale_simulator::Fault;

const WATCHED: &str = "flink_autoscale_agent_jobs_watched";
const EFFECTIVE: &str = "flink_autoscale_agent_poll_interval_effective_seconds";
const IN_TIME: &str = "flink_autoscale_agent_jobs_polled_in_time_ratio";
const KEEPING_UP: &str = "flink_autoscale_agent_keeping_up";

/// A session cluster of `jobs` copies of a small two-vertex job.
/// One test at a time: their agents run in this process and share its one metrics recorder
/// (a gauge of one agent would be read by another's test), and each measures its schedule.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn fleet_toml(jobs: u32) -> String {
    format!(
        r#"
[fleet]
jobs = {jobs}
template = "small"
[[job]]
name = "small"
[[job.vertex]]
name = "Source: events"
parallelism = 2
capacity = 5000.0
source = {{ partitions = 2, topic = "events", rate = {{ kind = "constant", value = 100.0 }} }}
[[job.vertex]]
name = "Sink: out"
parallelism = 2
capacity = 10000.0
[[job.edge]]
from = "Source: events"
to = "Sink: out"
ship_strategy = "REBALANCE"
"#
    )
}

async fn watched(agent: &Agent) -> Option<f64> {
    metric(&get(&agent.url("/metrics")).await.1, WATCHED, &[])
}

/// Every job of a 300-job session cluster is read within twice the interval at the default
/// budget: the configured one, or, on a machine too loaded for it, the stretched one the
/// agent reports. (`scripts/bench-fleet.sh` measures 10,000 jobs on release binaries.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_jobs_is_each_polled_within_twice_the_interval() {
    let _serial = SERIAL.lock().await;
    let jobs = 300;
    let sim = start_sim(&fleet_toml(jobs), false).await;
    let ctl = sim.control();
    let interval = Duration::from_secs(5);
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nrequest_timeout = \"2s\"\nmax_response_bytes = 16777216\n[collector]\npoll_interval = \"5s\"\npoll_deadline = \"2s\"",
    );
    assert_eq!(
        cfg.jobmanager.max_concurrent_requests, 4,
        "the default budget"
    );
    let agent = start_agent(cfg).await;
    // Waiting on the JobManager's side: rendering /metrics for every job every 50 ms would
    // cost more than the polls measured.
    wait_until(Duration::from_secs(60), "every job read once", || async {
        ctl.poll_gaps().jobs.len() == jobs as usize
    })
    .await;
    assert_eq!(watched(&agent).await, Some(f64::from(jobs)));
    tokio::time::sleep(interval).await;
    let text = get(&agent.url("/metrics")).await.1;
    let planned = metric(&text, EFFECTIVE, &[])
        .unwrap()
        .max(interval.as_secs_f64());
    ctl.reset_stats();
    tokio::time::sleep(Duration::from_secs_f64(planned * 2.5)).await;
    let report = ctl.poll_gaps();
    let mut waits: Vec<u64> = ctl
        .job_ids()
        .iter()
        .map(|j| report.longest_wait_ms(j).unwrap_or(u64::MAX))
        .collect();
    waits.sort_unstable();
    let worst = *waits.last().unwrap();
    eprintln!(
        "{jobs} jobs: longest wait p50 {} ms, p99 {} ms, max {worst} ms; interval planned {planned} s",
        waits[waits.len() / 2],
        waits[waits.len() * 99 / 100]
    );
    assert!(
        worst as f64 <= 2_000.0 * planned,
        "a job waited {worst} ms between reads (interval {interval:?}, planned {planned} s)"
    );
    if planned <= interval.as_secs_f64() {
        let text = get(&agent.url("/metrics")).await.1;
        assert_eq!(metric(&text, IN_TIME, &[]), Some(1.0));
    }
    agent.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_hanging_jobs_do_not_starve_a_healthy_one() {
    let _serial = SERIAL.lock().await;
    let sim = start_sim(&fleet_toml(101), false).await;
    let ctl = sim.control();
    let jobs = ctl.job_ids();
    let (healthy, hanging) = (jobs[0].clone(), &jobs[1..]);
    for job in hanging {
        ctl.set_fault(Some(job), Some(Fault::Hang));
    }
    let interval = Duration::from_secs(2);
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nrequest_timeout = \"2s\"\n[collector]\npoll_interval = \"2s\"\npoll_deadline = \"2s\"\nbackoff_initial = \"1s\"\nbackoff_max = \"4s\"\n[scheduling]\nhung_after = \"250ms\"",
    );
    let agent = start_agent(cfg).await;
    wait_until(
        Duration::from_secs(10),
        "the healthy job answered",
        || async {
            ctl.poll_gaps()
                .jobs
                .get(&healthy)
                .is_some_and(|r| r.reads >= 1)
        },
    )
    .await;
    ctl.reset_stats();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let report = ctl.poll_gaps();
    let reads = report.jobs.get(&healthy).copied().unwrap_or_default();
    let wait = report.longest_wait_ms(&healthy).unwrap_or(u64::MAX);
    eprintln!(
        "healthy job beside 100 hanging: {} reads in 20 s, longest wait {wait} ms",
        reads.reads
    );
    assert!(
        wait <= interval.as_millis() as u64 * 3 / 2,
        "the healthy job waited {wait} ms (interval {interval:?})"
    );
    assert!(reads.reads >= 9, "{} reads in 20 s", reads.reads);
    let text = get(&agent.url("/metrics")).await.1;
    assert!(
        metric(&text, "flink_autoscale_agent_hung_polls", &[]).unwrap() <= 8.0,
        "the pool of hung polls is bounded"
    );
    agent.stop().await;
    for job in hanging {
        ctl.set_fault(Some(job), None);
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_vanish_are_dropped_at_once() {
    let _serial = SERIAL.lock().await;
    if std::env::var("FLEET_DEBUG").is_ok() {
        flink_autoscale_shared::telemetry::init_tracing(
            Default::default(),
            "flink_autoscale_agent=debug",
        );
    }
    let sim = start_sim(&fleet_toml(500), false).await;
    let ctl = sim.control();
    let jobs = ctl.job_ids();
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nrequest_timeout = \"1s\"\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"",
    );
    let agent = start_agent(cfg).await;
    wait_until(Duration::from_secs(10), "500 jobs watched", || async {
        watched(&agent).await == Some(500.0)
    })
    .await;
    for job in &jobs[1..] {
        assert!(ctl.remove_job(job));
    }
    // The next discovery (one interval) drops them.
    wait_until(Duration::from_secs(3), "back to one job", || async {
        watched(&agent).await == Some(1.0)
    })
    .await;
    ctl.reset_stats();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let wait = ctl
        .poll_gaps()
        .longest_wait_ms(&jobs[0])
        .unwrap_or(u64::MAX);
    let text = get(&agent.url("/metrics")).await.1;
    let figures: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("flink_autoscale_agent_errors_total")
                || l.starts_with("flink_autoscale_agent_hung")
                || l.starts_with("flink_autoscale_agent_schedule_lag")
                || l.starts_with("flink_autoscale_agent_oldest")
        })
        .collect();
    assert!(
        wait <= 2_000,
        "the job left waited {wait} ms between reads: {figures:#?} {:#?}",
        ctl.stats()
    );
    agent.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_too_small_stretches_every_interval_evenly_and_says_so() {
    let _serial = SERIAL.lock().await;
    // Every request takes 50 ms: 40 jobs cost more than two slots give in a 1 s interval.
    let sim = start_sim(&fleet_toml(40), false).await;
    let ctl = sim.control();
    for job in ctl.job_ids() {
        ctl.set_fault(Some(&job), Some(Fault::Delay(Duration::from_millis(50))));
    }
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nmax_concurrent_requests = 2\nrequest_timeout = \"1s\"\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"",
    );
    let agent = start_agent(cfg).await;
    wait_until(
        Duration::from_secs(20),
        "the interval stretched",
        || async {
            metric(&get(&agent.url("/metrics")).await.1, EFFECTIVE, &[]).unwrap_or(0.0) > 1.0
        },
    )
    .await;
    // Ready all the same (the agent shares the JobManager's pod), but it says so.
    let (status, body) = get(&agent.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("not keeping up"), "{body}");
    let text = get(&agent.url("/metrics")).await.1;
    assert_eq!(metric(&text, KEEPING_UP, &[]), Some(0.0));
    // Every job is polled on the stretched interval: none waits much beyond it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = get(&agent.url("/metrics")).await.1;
    let effective = metric(&text, EFFECTIVE, &[]).unwrap();
    ctl.reset_stats();
    let span = Duration::from_secs_f64(effective * 2.5);
    tokio::time::sleep(span).await;
    let report = ctl.poll_gaps();
    let worst = ctl
        .job_ids()
        .iter()
        .map(|j| report.longest_wait_ms(j).unwrap_or(u64::MAX))
        .max()
        .unwrap();
    eprintln!(
        "40 slow jobs on two slots: interval stretched to {effective} s, longest wait {worst} ms"
    );
    assert!(
        (worst as f64) <= effective * 2_000.0,
        "a job waited {worst} ms with the interval stretched to {effective} s"
    );
    agent.stop().await;
    sim.shutdown().await;
}
