//! What a real Flink cluster's JVMs spent between two moments, from `/proc`: the JobManager
//! as a whole and per thread group, the TaskManagers together, and the MetricFetcher
//! refreshes the JobManager started. Shared by the JobManager-cost benchmarks.

use std::collections::{BTreeMap, HashMap};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};

use crate::flink_harness::{thread_usage, FlinkCluster};

/// JobManager threads that serve REST requests: the handler pool
/// (`Flink-DispatcherRestEndpoint-thread-N`, which also folds the MetricFetcher's dumps into
/// the MetricStore) and the Netty workers (`flink-rest-server-netty-worker-thread-N`), as
/// the kernel cuts their names.
pub const REST_THREAD_GROUPS: [&str; 2] = ["Flink-Dispatche", "flink-rest-serv"];

/// JobManager threads of the metrics RPC system (`flink-metrics-pekko.*`,
/// `flink-metrics-N`), which receive the TaskManagers' metric dumps during a refresh.
pub const METRICS_RPC_PREFIX: &str = "flink-metrics";

/// CPU counters of the cluster at one moment.
#[derive(Debug, Clone)]
pub struct UsageSnapshot {
    pub at: Instant,
    pub epoch_ms: u64,
    pub jm_cpu: f64,
    pub tm_cpu: f64,
    /// JobManager threads by id: (name, CPU seconds).
    pub jm_threads: HashMap<u32, (String, f64)>,
}

impl UsageSnapshot {
    /// Reads every JVM of `cluster`; fails when one of them is gone.
    pub fn take(cluster: &mut FlinkCluster) -> Result<Self> {
        let usage = cluster.process_usage();
        let expected = 1 + cluster.settings().task_managers;
        if usage.len() != expected {
            bail!(
                "{} of the cluster's {expected} JVMs are running",
                usage.len()
            );
        }
        let jm = usage
            .iter()
            .find(|u| u.role == "jobmanager")
            .ok_or_else(|| anyhow!("the JobManager is not running"))?;
        let jm_threads = thread_usage(jm.pid)
            .into_iter()
            .map(|t| (t.tid, (t.name, t.cpu_seconds)))
            .collect();
        Ok(Self {
            at: Instant::now(),
            epoch_ms: epoch_ms(),
            jm_cpu: jm.cpu_seconds,
            tm_cpu: usage
                .iter()
                .filter(|u| u.role != "jobmanager")
                .map(|u| u.cpu_seconds)
                .sum(),
            jm_threads,
        })
    }
}

/// What the cluster spent from one snapshot to a later one.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct UsageDelta {
    pub seconds: f64,
    pub jm_cpu_s: f64,
    pub tm_cpu_s: f64,
    /// JobManager CPU seconds per thread group (name without its number) that did any work.
    pub jm_threads: BTreeMap<String, f64>,
}

impl UsageDelta {
    pub fn between(start: &UsageSnapshot, end: &UsageSnapshot) -> Self {
        let mut jm_threads: BTreeMap<String, f64> = BTreeMap::new();
        for (tid, (name, cpu)) in &end.jm_threads {
            // A thread born after the start counted from zero.
            let before = start.jm_threads.get(tid).map_or(0.0, |(_, cpu)| *cpu);
            let delta = cpu - before;
            if delta > 0.0 {
                *jm_threads.entry(thread_group(name)).or_default() += delta;
            }
        }
        Self {
            seconds: end.at.duration_since(start.at).as_secs_f64(),
            jm_cpu_s: end.jm_cpu - start.jm_cpu,
            tm_cpu_s: end.tm_cpu - start.tm_cpu,
            jm_threads,
        }
    }

    /// The REST threads' share (see [`REST_THREAD_GROUPS`]).
    pub fn rest_threads_s(&self) -> f64 {
        REST_THREAD_GROUPS
            .iter()
            .filter_map(|g| self.jm_threads.get(*g))
            .sum()
    }

    /// The metrics RPC threads' share (see [`METRICS_RPC_PREFIX`]).
    pub fn metrics_rpc_threads_s(&self) -> f64 {
        self.jm_threads
            .iter()
            .filter(|(g, _)| g.starts_with(METRICS_RPC_PREFIX))
            .map(|(_, s)| s)
            .sum()
    }
}

/// A thread's name without its running number (`flink-rest-server-netty-worker-thread-3`
/// cut to 15 bytes by the kernel is `flink-rest-serv`; `C2 CompilerThre` stays).
pub fn thread_group(name: &str) -> String {
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '#' || c == ' ')
        .to_owned()
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` has them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_groups_drop_the_running_number() {
        assert_eq!(thread_group("flink-rest-serv"), "flink-rest-serv");
        assert_eq!(
            thread_group("Flink-DispatcherRestEndpoint-thread-4"),
            "Flink-DispatcherRestEndpoint-thread"
        );
        assert_eq!(thread_group("GC Thread#3"), "GC Thread");
        assert_eq!(thread_group("C2 CompilerThre"), "C2 CompilerThre");
    }

    #[test]
    fn a_delta_sums_thread_groups_and_counts_new_threads_from_zero() {
        let at = Instant::now();
        let threads = |list: &[(u32, &str, f64)]| {
            list.iter()
                .map(|(tid, name, cpu)| (*tid, (name.to_string(), *cpu)))
                .collect()
        };
        let start = UsageSnapshot {
            at,
            epoch_ms: 0,
            jm_cpu: 10.0,
            tm_cpu: 100.0,
            jm_threads: threads(&[(1, "flink-rest-serv", 1.0), (2, "flink-metrics-2", 0.5)]),
        };
        let end = UsageSnapshot {
            at,
            epoch_ms: 0,
            jm_cpu: 12.5,
            tm_cpu: 130.0,
            jm_threads: threads(&[
                (1, "flink-rest-serv", 1.5),
                (2, "flink-metrics-2", 0.75),
                (3, "flink-rest-serv", 0.25),
                (4, "GC Thread#0", 0.0),
            ]),
        };
        let d = UsageDelta::between(&start, &end);
        assert_eq!(d.jm_cpu_s, 2.5);
        assert_eq!(d.tm_cpu_s, 30.0);
        assert_eq!(d.jm_threads["flink-rest-serv"], 0.75);
        assert_eq!(d.rest_threads_s(), 0.75);
        assert_eq!(d.metrics_rpc_threads_s(), 0.25);
        assert!(!d.jm_threads.contains_key("GC Thread"), "no work, no entry");
    }
}
