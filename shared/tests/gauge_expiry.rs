//! Gauges that are not set again leave the Prometheus output after the expiry; counters stay.
//! Its own test binary, because the recorder is process-wide and installed once.

use std::time::Duration;

use flink_autoscale_shared::telemetry::{install_prometheus_expiring_gauges, render_prometheus};

#[test]
fn idle_gauges_expire_and_counters_do_not() {
    let handle = install_prometheus_expiring_gauges(Some(Duration::from_millis(300))).unwrap();
    metrics::gauge!("test_job_gauge", "job_id" => "gone").set(1.0);
    metrics::gauge!("test_job_gauge", "job_id" => "kept").set(2.0);
    metrics::counter!("test_polls_total").increment(3);
    let text = render_prometheus(&handle);
    assert!(
        text.contains(r#"test_job_gauge{job_id="gone"} 1"#),
        "{text}"
    );

    // "kept" is set again within the expiry, "gone" is not.
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(100));
        metrics::gauge!("test_job_gauge", "job_id" => "kept").set(2.0);
    }
    let text = render_prometheus(&handle);
    assert!(!text.contains(r#"job_id="gone""#), "{text}");
    assert!(
        text.contains(r#"test_job_gauge{job_id="kept"} 2"#),
        "{text}"
    );
    assert!(text.contains("test_polls_total 3"), "{text}");
}
