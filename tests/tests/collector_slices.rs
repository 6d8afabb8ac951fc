//! Large jobs are read in rotating slices of subtasks, against the simulated JobManager over
//! loopback: each poll is still one request per vertex, the JobManager touches only one
//! slice's entries, no sample is usable until every slice has been read, and the merged
//! values agree with reading every subtask.

mod collector_support;

use std::time::Duration;

use collector_support::*;
use flink_autoscale_agent::collector::{JobCollector, Unusable};
use flink_autoscale_agent::flink::FlinkClient;
use flink_autoscale_core::samples::Sample;
use flink_autoscale_simulator::SimControl;

const VERTICES: u64 = 3;
/// 150 s window / 15 s polls / 2 passes.
const SLICES: u64 = 5;
const POLL_MS: u64 = 15_000;

/// A collector for a job of 40 + 40 + 2 subtasks, sliced above `slice_above` subtasks.
fn collector(url: &str, job: &str, slice_above: u32) -> (FlinkClient, JobCollector) {
    let extra = format!(
        "[collector]\npoll_interval = \"15s\"\npoll_deadline = \"5s\"\nslice_above_subtasks = {slice_above}\nslice_passes_per_window = 2\n[autoscaler]\n\"metrics.window\" = \"150s\""
    );
    let (client, settings) = client_and_settings(&config(url, &extra));
    (client, JobCollector::new(job, settings))
}

/// Polls `c`, returning (requests, entries the JobManager touched, unusable reason, detail).
async fn poll(
    ctl: &SimControl,
    client: &FlinkClient,
    c: &mut JobCollector,
    job: &str,
    now_ms: u64,
) -> (u64, u64, Option<Unusable>, Option<String>) {
    let overview = overview_of(client, job).await;
    ctl.reset_stats();
    let r = c.poll(client, &overview, now_ms).await.unwrap();
    let entries = ctl.stats().entries_touched;
    (
        r.requests,
        entries,
        r.unusable,
        c.snapshot().unusable_detail.clone(),
    )
}

fn latest(c: &JobCollector) -> Sample {
    c.window().latest().expect("a usable sample").clone()
}

/// Records-in rate of `vertex` between the window's first and last samples.
fn window_rate(c: &JobCollector, vertex: &str) -> f64 {
    let s = c.window().to_vec();
    let (a, b) = (&s[0], &s[s.len() - 1]);
    let count = |x: &Sample| x.vertices[vertex].num_records_in.unwrap().0;
    (count(b) - count(a)) / ((b.time_ms - a.time_ms) as f64 / 1000.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_job_is_read_one_slice_per_poll_and_agrees_with_reading_it_whole() {
    let sim = start_sim(&job_toml("clicks", 40, 40, 30_000.0), true).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    ctl.advance(Duration::from_secs(60));
    let (client, mut sliced) = collector(&sim.url(), &job, 50);
    let (_, mut whole) = collector(&sim.url(), &job, 1000);

    let mut now = 1_000_000;
    // First poll lists names; then slices 1..4 are still unread after each poll until the
    // fifth slice has been read.
    for round in 0..SLICES {
        let (_, _, unusable, detail) = poll(&ctl, &client, &mut sliced, &job, now).await;
        poll(&ctl, &client, &mut whole, &job, now).await;
        if round + 1 < SLICES {
            assert_eq!(unusable, Some(Unusable::Incomplete), "round {round}");
            let detail = detail.unwrap();
            assert!(detail.contains("slices of subtasks"), "{detail}");
        } else {
            assert_eq!(unusable, None, "round {round}: {detail:?}");
        }
        assert!(sliced.window().len() <= 1);
        ctl.advance(Duration::from_millis(POLL_MS));
        now += POLL_MS;
    }

    let mut sliced_entries = 0;
    let mut whole_entries = 0;
    for round in 0..2 * SLICES {
        let (requests, entries, unusable, detail) =
            poll(&ctl, &client, &mut sliced, &job, now).await;
        assert_eq!(unusable, None, "round {round}: {detail:?}");
        assert_eq!(requests, VERTICES, "round {round}: one request per vertex");
        sliced_entries += entries;
        let (requests, entries, unusable, _) = poll(&ctl, &client, &mut whole, &job, now).await;
        assert_eq!(unusable, None);
        assert_eq!(requests, VERTICES);
        whole_entries += entries;
        ctl.advance(Duration::from_millis(POLL_MS));
        now += POLL_MS;
    }
    // 40-subtask vertices are read 8 at a time, the 2-subtask sink 1 at a time; reporting-only
    // metrics are skipped while sliced.
    assert!(
        sliced_entries * 4 < whole_entries,
        "sliced {sliced_entries} vs whole {whole_entries} entries"
    );

    let (s, w) = (latest(&sliced), latest(&whole));
    for (vid, wv) in &w.vertices {
        let sv = &s.vertices[vid];
        let (sb, wb) = (
            sv.busy_time_ms_per_second.unwrap(),
            wv.busy_time_ms_per_second.unwrap(),
        );
        // Subtasks count as reporting busy time across all slices together.
        let reporting = |b: flink_autoscale_core::samples::Aggregates| {
            (b.sum.unwrap().0 / b.avg.unwrap().0).round()
        };
        assert_eq!(reporting(sb), reporting(wb), "vertex {vid}");
        let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1.0);
        assert!(
            close(sb.max.unwrap().0, wb.max.unwrap().0, 0.1),
            "vertex {vid} busy max {sb:?} vs {wb:?}"
        );
        assert!(
            close(window_rate(&sliced, vid), window_rate(&whole, vid), 0.05),
            "vertex {vid}: sliced rate {} vs whole {}",
            window_rate(&sliced, vid),
            window_rate(&whole, vid)
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_starts_the_slices_over() {
    let sim = start_sim(&job_toml("views", 40, 40, 30_000.0), true).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    ctl.advance(Duration::from_secs(60));
    let (client, mut sliced) = collector(&sim.url(), &job, 50);
    let mut now = 1_000_000;
    for _ in 0..SLICES + 1 {
        poll(&ctl, &client, &mut sliced, &job, now).await;
        ctl.advance(Duration::from_millis(POLL_MS));
        now += POLL_MS;
    }
    assert_eq!(sliced.snapshot().unusable_reason, None);

    ctl.restart_job(&job);
    for _ in 0..100 {
        if ctl.job_status(&job).as_deref() == Some("RUNNING") {
            break;
        }
        ctl.advance(Duration::from_secs(5));
        now += 5_000;
    }
    ctl.advance(Duration::from_secs(30));
    now += 30_000;
    let mut reasons = Vec::new();
    for _ in 0..SLICES {
        let (_, _, unusable, _) = poll(&ctl, &client, &mut sliced, &job, now).await;
        reasons.push(unusable);
        ctl.advance(Duration::from_millis(POLL_MS));
        now += POLL_MS;
    }
    // The restart (its poll reads the first slice), then polls with slices still unread,
    // then usable again once the fifth slice is in.
    let last = SLICES as usize - 1;
    assert_eq!(reasons[0], Some(Unusable::Restarted), "{reasons:?}");
    assert!(
        reasons[1..last]
            .iter()
            .all(|r| *r == Some(Unusable::Incomplete)),
        "{reasons:?}"
    );
    assert_eq!(reasons[last], None, "{reasons:?}");
    sim.shutdown().await;
}
