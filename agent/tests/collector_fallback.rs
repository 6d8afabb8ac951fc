//! Against a scripted JobManager on loopback (shapes the simulator does not produce): the
//! all-or-nothing `get` fallback when a resolved name stops reporting, and JSON with wrong
//! types or missing fields, which fails one poll with an error naming the field while the
//! next poll goes ahead.

mod support;

use std::sync::Arc;

use flink_autoscale_agent::collector::{CollectorSettings, JobCollector};
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::client_from_config;
use flink_autoscale_agent::flink::{FlinkClient, FlinkError};
use support::{start_scripted, JOB, VERTEX};

fn collector_for(url: &str) -> (FlinkClient, JobCollector) {
    let toml = format!("[jobmanager]\nurl = \"{url}\"\nfetcher_update_interval = \"1s\"\nrequest_timeout = \"1s\"\n[collector]\npoll_interval = \"1s\"\npoll_deadline = \"1s\"\nnames_refresh_interval = \"1h\"\nslow_refresh_interval = \"1h\"");
    let cfg = Config::from_layers(&toml, &Default::default(), &Overrides::default()).unwrap();
    (
        client_from_config(&cfg).unwrap(),
        JobCollector::new(JOB, Arc::new(CollectorSettings::from_config(&cfg))),
    )
}

#[tokio::test]
async fn an_empty_filtered_answer_resolves_names_again_and_retries() {
    let (url, script, stop) = start_scripted().await;
    let (client, mut collector) = collector_for(&url);
    let (overview, _) = client.jobs_overview().await.unwrap();
    let job = &overview.jobs[0];

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
    assert_eq!(
        r.unusable,
        None,
        "{:?}",
        collector.snapshot().unusable_detail
    );
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
async fn wrong_types_and_missing_fields_name_the_field_and_the_next_poll_proceeds() {
    let (url, script, stop) = start_scripted().await;
    let (client, mut collector) = collector_for(&url);
    let (overview, _) = client.jobs_overview().await.unwrap();
    let job = &overview.jobs[0];

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
    assert_eq!(
        r.unusable,
        None,
        "{:?}",
        collector.snapshot().unusable_detail
    );
    stop.cancel();
}
