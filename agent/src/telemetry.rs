//! The agent's Prometheus metrics: names, descriptions and the few helpers that record them.
//! Labels are bounded: endpoint (templated route), status, error kind, reason, and
//! `job_id`/`vertex_id` on the per-job and per-vertex gauges. Never per subtask.

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};

pub const POLL_DURATION: &str = "flink_autoscale_agent_poll_duration_seconds";
pub const JM_REQUESTS: &str = "flink_autoscale_agent_jobmanager_requests_total";
pub const JM_RESPONSE_BYTES: &str = "flink_autoscale_agent_jobmanager_response_bytes_total";
pub const NAME_CACHE_HITS: &str = "flink_autoscale_agent_name_cache_hits_total";
pub const NAME_CACHE_MISSES: &str = "flink_autoscale_agent_name_cache_misses_total";
pub const NAME_RESOLUTIONS: &str = "flink_autoscale_agent_name_resolutions_total";
pub const ERRORS: &str = "flink_autoscale_agent_errors_total";
pub const JOBS_WATCHED: &str = "flink_autoscale_agent_jobs_watched";
pub const JOBS_POLLED_IN_TIME: &str = "flink_autoscale_agent_jobs_polled_in_time_ratio";
pub const OLDEST_POLL_AGE: &str = "flink_autoscale_agent_oldest_successful_poll_age_seconds";
pub const POLL_INTERVAL_EFFECTIVE: &str = "flink_autoscale_agent_poll_interval_effective_seconds";
pub const SCHEDULE_LAG: &str = "flink_autoscale_agent_schedule_lag_seconds";
pub const HUNG_POLLS: &str = "flink_autoscale_agent_hung_polls";
pub const KEEPING_UP: &str = "flink_autoscale_agent_keeping_up";
pub const POLL_QUEUE_WAIT: &str = "flink_autoscale_agent_poll_queue_wait_seconds";
pub const UNUSABLE_POLLS: &str = "flink_autoscale_agent_unusable_polls_total";
pub const JOB_DATA_USABLE: &str = "flink_autoscale_agent_job_data_usable";
pub const WINDOW_SAMPLES: &str = "flink_autoscale_agent_window_samples";
pub const LAST_POLL: &str = "flink_autoscale_agent_last_successful_poll_timestamp_seconds";
pub const VERTEX_BUSY: &str = "flink_autoscale_agent_vertex_busy_ratio";
pub const VERTEX_BACKPRESSURE: &str = "flink_autoscale_agent_vertex_backpressure_ratio";
pub const VERTEX_INPUT_RATE: &str = "flink_autoscale_agent_vertex_input_records_per_second";
pub const VERTEX_OUTPUT_RATE: &str = "flink_autoscale_agent_vertex_output_records_per_second";
pub const VERTEX_TRUE_RATE: &str =
    "flink_autoscale_agent_vertex_true_processing_rate_records_per_second";
pub const VERTEX_LAG: &str = "flink_autoscale_agent_vertex_lag_records";
pub const VERTEX_PARALLELISM: &str = "flink_autoscale_agent_vertex_parallelism";
pub const VERTEX_TARGET_RATE: &str =
    "flink_autoscale_agent_vertex_target_data_rate_records_per_second";
pub const VERTEX_RECOMMENDED: &str = "flink_autoscale_agent_vertex_recommended_parallelism";
pub const VERTEX_LOAD: &str = "flink_autoscale_agent_vertex_load_ratio";
pub const VERTEX_SCALE_UP_RATE: &str =
    "flink_autoscale_agent_vertex_scale_up_rate_threshold_records_per_second";
pub const VERTEX_SCALE_DOWN_RATE: &str =
    "flink_autoscale_agent_vertex_scale_down_rate_threshold_records_per_second";

/// Registers descriptions and units; call once after installing the recorder.
pub fn describe() {
    describe_histogram!(
        POLL_DURATION,
        Unit::Seconds,
        "Duration of one poll of one job."
    );
    describe_counter!(
        JM_REQUESTS,
        "Requests sent to the JobManager, by endpoint and status."
    );
    describe_counter!(
        JM_RESPONSE_BYTES,
        Unit::Bytes,
        "Response bytes read from the JobManager, by endpoint and status."
    );
    describe_counter!(
        NAME_CACHE_HITS,
        "Vertex polls served from the metric-name cache."
    );
    describe_counter!(
        NAME_CACHE_MISSES,
        "Vertex polls that needed a metric-name listing."
    );
    describe_counter!(
        NAME_RESOLUTIONS,
        "Metric-name listings requested from the JobManager."
    );
    describe_counter!(
        ERRORS,
        "Errors by kind (timeout, connect, http_5xx, malformed_json, ...)."
    );
    describe_gauge!(JOBS_WATCHED, "Jobs the agent currently watches.");
    describe_gauge!(
        JOBS_POLLED_IN_TIME,
        "Share of watched jobs answered within twice collector.poll_interval (1 with no jobs)."
    );
    describe_gauge!(
        OLDEST_POLL_AGE,
        Unit::Seconds,
        "Age of the oldest latest successful poll over the watched jobs (since the watch began, for a job never answered)."
    );
    describe_gauge!(
        POLL_INTERVAL_EFFECTIVE,
        Unit::Seconds,
        "The interval polls are planned at: collector.poll_interval, or longer when the request budget cannot cover every job every interval."
    );
    describe_gauge!(
        SCHEDULE_LAG,
        Unit::Seconds,
        "How long past its due time the most overdue answering job waits for a request slot."
    );
    describe_gauge!(
        HUNG_POLLS,
        "Polls unanswered after scheduling.hung_after that gave their request slot back and wait for an answer."
    );
    describe_gauge!(
        KEEPING_UP,
        "1 while the configured poll interval holds and no answering job waits an interval past due, else 0 (then /readyz is 503)."
    );
    describe_histogram!(
        POLL_QUEUE_WAIT,
        Unit::Seconds,
        "How long a poll waited for a request slot after it was due."
    );
    describe_counter!(
        UNUSABLE_POLLS,
        "Polls whose data no decision may use, by reason."
    );
    describe_gauge!(
        JOB_DATA_USABLE,
        "1 if the job's latest poll produced usable data, else 0."
    );
    describe_gauge!(WINDOW_SAMPLES, "Samples in the job's metric window.");
    describe_gauge!(
        LAST_POLL,
        Unit::Seconds,
        "When the job was last polled successfully (Unix time)."
    );
    describe_gauge!(
        VERTEX_BUSY,
        "Busy time ratio of the vertex (aggregated over subtasks)."
    );
    describe_gauge!(
        VERTEX_BACKPRESSURE,
        "Average backpressured time ratio of the vertex."
    );
    describe_gauge!(
        VERTEX_INPUT_RATE,
        "Records in per second, summed over subtasks."
    );
    describe_gauge!(
        VERTEX_OUTPUT_RATE,
        "Records out per second, summed over subtasks."
    );
    describe_gauge!(
        VERTEX_TRUE_RATE,
        "Records per second the vertex could process at 100% busy, as the engine evaluated it over the window."
    );
    describe_gauge!(
        VERTEX_LAG,
        "Source backlog (pendingRecords, summed over subtasks)."
    );
    describe_gauge!(VERTEX_PARALLELISM, "Current parallelism of the vertex.");
    describe_gauge!(
        VERTEX_TARGET_RATE,
        "Records per second the vertex must sustain (the engine's target data rate)."
    );
    describe_gauge!(
        VERTEX_LOAD,
        "Busy ratio of the vertex averaged over the window, as the engine evaluated it."
    );
    describe_gauge!(
        VERTEX_SCALE_UP_RATE,
        "Above this target rate the engine scales the vertex up (the utilization band's top)."
    );
    describe_gauge!(
        VERTEX_SCALE_DOWN_RATE,
        "Below this target rate the engine scales the vertex down (the utilization band's bottom)."
    );
    describe_gauge!(
        VERTEX_RECOMMENDED,
        "Parallelism the engine would apply now, after forward groups, sink limits and the band gate."
    );
}

/// Counts one JobManager request and its response bytes.
pub fn record_jobmanager_request(endpoint: &'static str, status: &str, bytes: usize) {
    let status = status.to_string();
    counter!(JM_REQUESTS, "endpoint" => endpoint, "status" => status.clone()).increment(1);
    if bytes > 0 {
        counter!(JM_RESPONSE_BYTES, "endpoint" => endpoint, "status" => status)
            .increment(bytes as u64);
    }
}

/// Counts one error of `kind`.
pub fn record_error(kind: &'static str) {
    counter!(ERRORS, "kind" => kind).increment(1);
}

/// Records one poll's duration.
pub fn record_poll_duration(seconds: f64) {
    histogram!(POLL_DURATION).record(seconds);
}

/// Counts name-cache events.
pub fn record_name_cache(hits: u64, misses: u64, resolutions: u64) {
    if hits > 0 {
        counter!(NAME_CACHE_HITS).increment(hits);
    }
    if misses > 0 {
        counter!(NAME_CACHE_MISSES).increment(misses);
    }
    if resolutions > 0 {
        counter!(NAME_RESOLUTIONS).increment(resolutions);
    }
}

/// Sets the number of watched jobs.
pub fn set_jobs_watched(n: usize) {
    gauge!(JOBS_WATCHED).set(n as f64);
}

/// The schedule's keep-up figures.
pub fn record_keep_up(k: &crate::daemon::scheduler::KeepUp) {
    gauge!(JOBS_WATCHED).set(k.jobs as f64);
    gauge!(JOBS_POLLED_IN_TIME).set(k.in_time_ratio());
    gauge!(OLDEST_POLL_AGE).set(k.oldest_answer_age.as_secs_f64());
    gauge!(POLL_INTERVAL_EFFECTIVE).set(k.effective_interval.as_secs_f64());
    gauge!(SCHEDULE_LAG).set(k.schedule_lag.as_secs_f64());
    gauge!(HUNG_POLLS).set(k.hung_polls as f64);
    gauge!(KEEPING_UP).set(if k.keeping_up() { 1.0 } else { 0.0 });
}

/// Records how long a poll waited for a slot after it was due.
pub fn record_queue_wait(seconds: f64) {
    histogram!(POLL_QUEUE_WAIT).record(seconds);
}

/// Records whether a job's latest data is usable, and why not.
pub fn record_usability(job_id: &str, unusable_reason: Option<&'static str>, window_len: usize) {
    let job = job_id.to_string();
    gauge!(JOB_DATA_USABLE, "job_id" => job.clone()).set(if unusable_reason.is_some() {
        0.0
    } else {
        1.0
    });
    gauge!(WINDOW_SAMPLES, "job_id" => job).set(window_len as f64);
    if let Some(reason) = unusable_reason {
        counter!(UNUSABLE_POLLS, "reason" => reason).increment(1);
    }
}

/// Records a successful poll time.
pub fn record_last_poll(job_id: &str, unix_ms: u64) {
    gauge!(LAST_POLL, "job_id" => job_id.to_string()).set(unix_ms as f64 / 1000.0);
}

/// Per-vertex figures of one poll; `None` leaves the previous value in place.
#[derive(Debug, Clone, Copy, Default)]
pub struct VertexFigures {
    pub busy_ratio: Option<f64>,
    pub backpressure_ratio: Option<f64>,
    pub input_rate: Option<f64>,
    pub output_rate: Option<f64>,
    pub lag: Option<f64>,
    pub parallelism: u32,
}

/// Sets the per-vertex gauges. A value that is not finite (`"-Infinity"` from the
/// JobManager, a counter that overflowed) is not exported; it is counted as a
/// `non_finite_value` error and the gauge keeps its previous value.
pub fn record_vertex(job_id: &str, vertex_id: &str, f: &VertexFigures) {
    let labels = [
        ("job_id", job_id.to_string()),
        ("vertex_id", vertex_id.to_string()),
    ];
    let set = |name: &'static str, v: Option<f64>| match v {
        Some(v) if v.is_finite() => gauge!(name, &labels).set(v),
        Some(_) => record_error("non_finite_value"),
        None => {}
    };
    set(VERTEX_BUSY, f.busy_ratio);
    set(VERTEX_BACKPRESSURE, f.backpressure_ratio);
    set(VERTEX_INPUT_RATE, f.input_rate);
    set(VERTEX_OUTPUT_RATE, f.output_rate);
    set(VERTEX_LAG, f.lag);
    set(VERTEX_PARALLELISM, Some(f64::from(f.parallelism)));
}

/// Exports the figures the engine used at an evaluation, per vertex: its true processing
/// rate and load over the window (with the observed-rate switch applied), the target rate,
/// the band around it, and the parallelism it would apply. Non-finite figures (no data yet)
/// are left out.
pub fn record_engine_figures(job_id: &str, output: &flink_autoscale_core::engine::EvaluateOutput) {
    let decision = &output.decision;
    for v in &decision.vertices {
        let labels = [("job_id", job_id.to_string()), ("vertex_id", v.id.clone())];
        let set = |name: &'static str, value: f64| {
            if value.is_finite() {
                gauge!(name, &labels).set(value);
            }
        };
        if let Some(e) = output.evaluated.vertices.get(&v.id) {
            set(VERTEX_TRUE_RATE, e.true_processing_rate.0);
            set(VERTEX_LOAD, e.load.0);
            set(VERTEX_SCALE_UP_RATE, e.scale_up_rate_threshold.0);
            set(VERTEX_SCALE_DOWN_RATE, e.scale_down_rate_threshold.0);
        }
        set(VERTEX_TARGET_RATE, v.target_data_rate.0);
        let applied = decision
            .parallelism
            .get(&v.id)
            .copied()
            .unwrap_or(v.current);
        set(VERTEX_RECOMMENDED, f64::from(applied));
    }
}
