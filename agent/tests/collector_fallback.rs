//! Against a scripted JobManager on loopback (shapes the simulator does not produce): the
//! all-or-nothing `get` fallback when a resolved name stops reporting, the empty name
//! listings Flink gives right after a job turns RUNNING, and JSON with wrong
//! types or missing fields, which fails one poll with an error naming the field while the
//! next poll goes ahead.

mod support;

use std::sync::{Arc, Mutex};

use flink_autoscale_agent::collector::SourceKind;
use flink_autoscale_agent::collector::{CollectorSettings, JobCollector, PollReport, Unusable};
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::{client_from_config, CancellationToken};
use flink_autoscale_agent::flink::model::JobOverview;
use flink_autoscale_agent::flink::{FlinkClient, FlinkError};
use support::{start_scripted, Batch, Script, JOB, VERTEX};

fn collector_for(url: &str) -> (FlinkClient, JobCollector) {
    let toml = format!("[jobmanager]\nurl = \"{url}\"\nfetcher_update_interval = \"1s\"\nrequest_timeout = \"1s\"\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"\nnames_refresh_interval = \"1h\"\nslow_refresh_interval = \"1h\"");
    let cfg = Config::from_layers(&toml, &Default::default(), &Overrides::default()).unwrap();
    (
        client_from_config(&cfg).unwrap(),
        JobCollector::new(JOB, Arc::new(CollectorSettings::from_config(&cfg))),
    )
}

fn assert_usable(report: &PollReport, collector: &JobCollector) {
    assert_eq!(
        report.unusable,
        None,
        "{:?}",
        collector.snapshot().unusable_detail
    );
}

/// The scripted JobManager, a collector for it, and its one job's overview entry.
async fn scripted_job() -> (
    FlinkClient,
    JobCollector,
    JobOverview,
    Arc<Mutex<Script>>,
    CancellationToken,
) {
    let (url, script, stop) = start_scripted().await;
    let (client, collector) = collector_for(&url);
    let (mut overview, _) = client.jobs_overview().await.unwrap();
    let job = overview.jobs.remove(0);
    (client, collector, job, script, stop)
}

#[tokio::test]
async fn an_empty_filtered_answer_resolves_names_again_and_retries() {
    let (client, mut collector, job, script, stop) = scripted_job().await;
    let job = &job;

    collector.poll(&client, job, 10_000).await.unwrap();
    assert_eq!(script.lock().unwrap().listings, 1);
    let r = collector.poll(&client, job, 20_000).await.unwrap();
    assert_eq!(r.requests, 1, "steady state: one filtered request");
    assert!(
        collector.snapshot().sample.as_ref().unwrap().vertices[VERTEX]
            .pending_records
            .is_some()
    );

    script.lock().unwrap().pending_gone = true;
    let r = collector.poll(&client, job, 30_000).await.unwrap();
    assert_eq!(r.requests, 3, "[] answer, one listing, one retry");
    assert_usable(&r, &collector);
    {
        let s = script.lock().unwrap();
        assert_eq!(s.listings, 2);
        assert!(!s.value_queries.last().unwrap().contains("pendingRecords"));
    }
    let sample = collector.snapshot().sample.clone().unwrap();
    assert_eq!(
        sample.vertices[VERTEX].pending_records, None,
        "absent pendingRecords: lag reads as 0"
    );
    let r = collector.poll(&client, job, 40_000).await.unwrap();
    assert_eq!(r.requests, 1, "the new names are cached");
    stop.cancel();
}

#[tokio::test]
async fn the_batch_source_retries_an_empty_answer_the_same_way() {
    let (client, mut collector, job, script, stop) = scripted_job().await;
    let job = &job;
    script.lock().unwrap().batch = Batch::Served;

    let r = collector.poll(&client, job, 10_000).await.unwrap();
    assert_eq!(r.source, SourceKind::Batch);
    assert_eq!(
        r.requests, 6,
        "details, probe, listing, values, checkpoints, configuration"
    );
    assert_usable(&r, &collector);
    let r = collector.poll(&client, job, 20_000).await.unwrap();
    assert_eq!(r.requests, 1, "steady state: one batch request");
    assert_eq!(script.lock().unwrap().listings, 0, "no per-vertex listing");

    script.lock().unwrap().pending_gone = true;
    let r = collector.poll(&client, job, 30_000).await.unwrap();
    assert_eq!(r.requests, 3, "[] for the vertex, one listing, one retry");
    assert_usable(&r, &collector);
    assert!(!script
        .lock()
        .unwrap()
        .value_queries
        .last()
        .unwrap()
        .contains("pendingRecords"));
    assert_eq!(script.lock().unwrap().batch_requests, 7);
    stop.cancel();
}

#[tokio::test]
async fn batch_endpoints_of_another_shape_keep_the_per_vertex_source() {
    let (client, mut collector, job, script, stop) = scripted_job().await;
    let job = &job;
    script.lock().unwrap().batch = Batch::WrongShape;
    for now_ms in [10_000, 20_000, 30_000] {
        let r = collector.poll(&client, job, now_ms).await.unwrap();
        assert_eq!(r.source, SourceKind::PerVertex);
        assert_usable(&r, &collector);
    }
    let s = script.lock().unwrap();
    assert_eq!(s.batch_requests, 1, "probed once");
    assert_eq!(s.listings, 1);
    drop(s);
    stop.cancel();
}

#[tokio::test]
async fn wrong_types_and_missing_fields_name_the_field_and_the_next_poll_proceeds() {
    let (client, mut collector, job, script, stop) = scripted_job().await;
    let job = &job;

    script.lock().unwrap().wrong_type = true;
    let err = collector.poll(&client, job, 10_000).await.unwrap_err();
    assert!(matches!(err, FlinkError::WrongShape { .. }), "{err}");
    assert_eq!(err.kind(), "wrong_shape");
    assert!(err.to_string().contains("vertices[0].parallelism"), "{err}");

    {
        let mut s = script.lock().unwrap();
        s.wrong_type = false;
        s.missing_field = true;
    }
    let err = collector.poll(&client, job, 20_000).await.unwrap_err();
    assert!(err.to_string().contains("maxParallelism"), "{err}");

    script.lock().unwrap().missing_field = false;
    let r = collector.poll(&client, job, 30_000).await.unwrap();
    assert_usable(&r, &collector);
    stop.cancel();
}

#[tokio::test]
async fn an_empty_start_up_listing_is_listed_again_until_complete_then_cached() {
    let (client, mut collector, job, script, stop) = scripted_job().await;
    let job = &job;

    script.lock().unwrap().empty_listings = 2;
    for (poll, now_ms) in [(1, 10_000), (2, 20_000)] {
        let r = collector.poll(&client, job, now_ms).await.unwrap();
        assert_eq!(r.unusable, Some(Unusable::MissingValue), "poll {poll}");
        let s = script.lock().unwrap();
        assert_eq!(
            s.listings, poll,
            "one listing per poll while names are missing"
        );
        assert!(s.value_queries.is_empty(), "nothing to ask for yet");
    }

    let r = collector.poll(&client, job, 30_000).await.unwrap();
    assert_usable(&r, &collector);
    assert_eq!(r.requests, 2, "one listing, one filtered request");
    assert_eq!(script.lock().unwrap().listings, 3);
    assert!(collector.snapshot().names[VERTEX].busy.is_some());

    for now_ms in [40_000, 50_000] {
        let r = collector.poll(&client, job, now_ms).await.unwrap();
        assert_eq!(r.requests, 1, "complete names are cached: no listing");
    }
    assert_eq!(script.lock().unwrap().listings, 3);
    stop.cancel();
}
