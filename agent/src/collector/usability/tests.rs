use super::*;
use crate::collector::names::resolve;
use flink_autoscale_core::samples::{Aggregates, FlinkF64, Input};

fn spec(id: &str, parallelism: u32, source: bool) -> VertexSpec {
    VertexSpec {
        id: id.into(),
        name: id.into(),
        parallelism,
        max_parallelism: 128,
        source_partitions: 0,
        finished_subtasks: 0,
        inputs: if source {
            vec![]
        } else {
            vec![Input {
                id: "up".into(),
                ship_strategy: "HASH".into(),
            }]
        },
    }
}

fn busy(max: f64, avg: f64, sum: f64) -> Option<Aggregates> {
    Some(Aggregates {
        min: None,
        max: Some(FlinkF64(max)),
        avg: Some(FlinkF64(avg)),
        sum: Some(FlinkF64(sum)),
    })
}

fn full_vertex() -> VertexSample {
    VertexSample {
        busy_time_ms_per_second: busy(500.0, 250.0, 1000.0),
        backpressured_time_ms_per_second: Some(FlinkF64(0.0)),
        num_records_in_per_second: Some(FlinkF64(10.0)),
        num_records_in: Some(FlinkF64(100.0)),
        ..Default::default()
    }
}

#[test]
fn vertex_rulings() {
    let source = resolve(
        [
            "busyTimeMsPerSecond",
            "backPressuredTimeMsPerSecond",
            "Source__s.numRecordsIn",
            "Source__s.numRecordsInPerSecond",
        ],
        true,
    );
    let map = resolve(["busyTimeMsPerSecond", "numRecordsIn"], false);
    let silent = resolve(["numRecordsIn"], false);
    let no_busy = |v: &mut VertexSample| v.busy_time_ms_per_second = None;
    let no_rate = |v: &mut VertexSample| v.num_records_in_per_second = None;
    let no_counter = |v: &mut VertexSample| v.num_records_in = None;
    let three_of_four =
        |v: &mut VertexSample| v.busy_time_ms_per_second = busy(500.0, 250.0, 750.0);
    let nan = |v: &mut VertexSample| v.busy_time_ms_per_second = busy(f64::NAN, 0.0, 0.0);
    let keep = |_: &mut VertexSample| {};
    use Unusable::{Incomplete, MissingValue};
    type Edit<'a> = &'a dyn Fn(&mut VertexSample);
    type Case<'a> = (
        &'a str,
        &'a ResolvedNames,
        Edit<'a>,
        Option<(Unusable, &'a str)>,
    );
    // (vertex id: "s" is a source, names listed, change to a full sample, expected)
    let cases: [Case; 8] = [
        ("s", &source, &keep, None),
        ("m", &map, &no_rate, None),
        ("m", &map, &nan, None),
        (
            "m",
            &silent,
            &keep,
            Some((MissingValue, "vertex m does not report busyTimeMsPerSecond")),
        ),
        (
            "m",
            &map,
            &no_busy,
            Some((MissingValue, "no busy time value for vertex m")),
        ),
        (
            "s",
            &source,
            &no_rate,
            Some((MissingValue, "no records-in rate value for vertex s")),
        ),
        (
            "m",
            &map,
            &no_counter,
            Some((MissingValue, "no records-in counter value for vertex m")),
        ),
        (
            "m",
            &map,
            &three_of_four,
            Some((Incomplete, "vertex m: 3 of 4 subtasks report busy time")),
        ),
    ];
    for (id, names, edit, expected) in cases {
        let mut sample = full_vertex();
        edit(&mut sample);
        let got = vertex_problem(&spec(id, 4, id == "s"), names, &sample);
        let got = got.as_ref().map(|p| (p.reason, p.detail.as_str()));
        assert_eq!(got, expected, "{sample:?}");
    }
}

#[test]
fn a_reporting_count_off_the_parallelism_asks_for_the_details_again() {
    let names = resolve(["busyTimeMsPerSecond", "numRecordsIn"], false);
    let mut one_of_two = full_vertex();
    one_of_two.busy_time_ms_per_second = busy(500.0, 500.0, 500.0);
    let fewer = vertex_problem(&spec("m", 2, false), &names, &one_of_two).unwrap();
    assert_eq!(fewer.detail, "vertex m: 1 of 2 subtasks report busy time");
    assert!(fewer.topology_suspect);
    let mut three = full_vertex();
    three.busy_time_ms_per_second = busy(500.0, 500.0, 1500.0);
    let more = vertex_problem(&spec("m", 2, false), &names, &three).unwrap();
    assert_eq!(
        more.detail,
        "vertex m: 3 subtasks report busy time, more than its known parallelism 2"
    );
    assert!(more.topology_suspect);
    assert_eq!(vertex_problem(&spec("m", 3, false), &names, &three), None);
    assert!(!Problem::new(Unusable::Stale, "x").topology_suspect);
}

#[test]
fn finished_subtasks_are_left_out_of_the_completeness_rule() {
    // The 1.20.5 case: the source scaled 2 -> 4, subtasks 2 and 3 FINISHED (no split).
    let names = resolve(
        [
            "busyTimeMsPerSecond",
            "backPressuredTimeMsPerSecond",
            "Source__s.numRecordsIn",
            "Source__s.numRecordsInPerSecond",
        ],
        true,
    );
    let mut two_report = full_vertex();
    two_report.busy_time_ms_per_second = busy(500.0, 250.0, 500.0);
    let mut spec = spec("s", 4, true);
    let before = vertex_problem(&spec, &names, &two_report).map(|p| p.detail);
    assert_eq!(
        before.as_deref(),
        Some("vertex s: 2 of 4 subtasks report busy time")
    );
    spec.finished_subtasks = 2;
    assert_eq!(vertex_problem(&spec, &names, &two_report), None);
    let mut one_reports = full_vertex();
    one_reports.busy_time_ms_per_second = busy(500.0, 250.0, 250.0);
    assert_eq!(
        vertex_problem(&spec, &names, &one_reports).map(|p| p.detail),
        Some("vertex s: 1 of 2 running subtasks report busy time (2 FINISHED)".into())
    );
}

fn sample(t: u64, records_in: f64, busy_max: f64) -> Sample {
    let v = VertexSample {
        busy_time_ms_per_second: busy(busy_max, busy_max, busy_max),
        num_records_in: Some(FlinkF64(records_in)),
        ..Default::default()
    };
    Sample {
        time_ms: t,
        vertices: [("v".to_string(), v)].into(),
    }
}

#[test]
fn freshness_rulings() {
    let prev = sample(10_000, 100.0, 500.0);
    let cases: [(Option<&Sample>, Sample, Option<Unusable>); 6] = [
        (None, sample(20_000, 100.0, 500.0), None),
        (Some(&prev), sample(20_000, 200.0, 500.0), None),
        (
            Some(&prev),
            sample(15_000, 200.0, 500.0),
            Some(Unusable::Stale),
        ),
        (
            Some(&prev),
            sample(20_000, 100.0, 500.0),
            Some(Unusable::Stale),
        ),
        (
            Some(&prev),
            sample(20_000, 50.0, 500.0),
            Some(Unusable::Restarted),
        ),
        // Idle and unchanged: nothing flows, so repeating values are no sign of staleness.
        (
            Some(&sample(10_000, 100.0, 0.0)),
            sample(20_000, 100.0, 0.0),
            None,
        ),
    ];
    for (previous, now, expected) in cases {
        let got = freshness(previous, &now, 10_000);
        assert_eq!(got.map(|p| p.reason), expected, "{now:?}");
    }
    let early = freshness(Some(&prev), &sample(12_000, 200.0, 500.0), 10_000).unwrap();
    assert_eq!(
        early.detail,
        "only 2000 ms since the previous sample; the JobManager refreshes metrics every 10000 ms"
    );
}

#[test]
fn job_level_rulings() {
    let details = |complete: bool| -> JobDetails {
        serde_json::from_value(serde_json::json!({
            "jid": "j", "state": "RUNNING",
            "vertices": [{"id": "v", "parallelism": 1, "maxParallelism": 1,
                          "metrics": {"read-records-complete": true, "write-records-complete": complete}}]
        }))
        .unwrap()
    };
    assert_eq!(incomplete_flag(&details(true)), None);
    assert_eq!(
        incomplete_flag(&details(false)),
        Some(Problem::new(
            Unusable::Incomplete,
            "vertex v: write-records-complete is false"
        ))
    );
    assert_eq!(slices_unread("v", 30, 30), None);
    assert_eq!(
        slices_unread("v", 3, 30).map(|p| p.detail),
        Some("vertex v is read in 30 slices of subtasks; 3 read so far".into())
    );
    assert_eq!(not_running("RESTARTING").detail, "job is RESTARTING");
    assert_eq!(not_running("A\nB").detail, "job is A\\nB", "one log line");
    assert_eq!(Unusable::MissingValue.label(), "missing_value");
}
