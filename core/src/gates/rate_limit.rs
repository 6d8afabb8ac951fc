//! Rate limits: one approved action per job at a time, a minimum interval between a job's
//! approvals, and caps on concurrent rescales per cluster and per region.

use super::{reason, Facts, GateConfig};
use crate::protocol::{GateName, Reason};

/// Every rate limit the facts break, in a fixed order.
pub fn check(facts: &Facts, config: &GateConfig, now_ms: i64) -> Vec<Reason> {
    let mut reasons = Vec::new();
    if let Some(open) = &facts.job_open_action {
        reasons.push(reason(
            GateName::RateLimit,
            "job_action_in_flight",
            format!("approved proposal {open} for this job has not reported its outcome yet"),
        ));
    }
    if let Some(last) = facts.job_last_approved_at_ms {
        let interval_ms = i64::try_from(config.min_interval.as_millis_u64()).unwrap_or(i64::MAX);
        // A clock that went backwards counts as "just approved": refuse rather than guess.
        let elapsed_ms = now_ms.saturating_sub(last).max(0);
        if elapsed_ms < interval_ms {
            reasons.push(reason(
                GateName::RateLimit,
                "min_interval",
                format!(
                    "last approval for this job was {} s ago; the minimum interval is {}",
                    elapsed_ms / 1000,
                    config.min_interval
                ),
            ));
        }
    }
    if facts.cluster_in_flight >= config.max_in_flight_per_cluster {
        reasons.push(reason(
            GateName::RateLimit,
            "cluster_concurrency",
            format!(
                "{} rescales already in flight in this cluster (limit {})",
                facts.cluster_in_flight, config.max_in_flight_per_cluster
            ),
        ));
    }
    if facts.region_in_flight >= config.max_in_flight_per_region {
        reasons.push(reason(
            GateName::RateLimit,
            "region_concurrency",
            format!(
                "{} rescales already in flight in this region (limit {})",
                facts.region_in_flight, config.max_in_flight_per_region
            ),
        ));
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn table() {
        let now = 1_000 * MIN;
        // (facts, codes refused with); defaults: 10 min interval, 5 per cluster, 50 per region
        let cases: Vec<(Facts, &[&str])> = vec![
            (Facts::default(), &[]),
            (
                Facts {
                    job_open_action: Some("p0".into()),
                    ..Facts::default()
                },
                &["job_action_in_flight"],
            ),
            (
                Facts {
                    job_last_approved_at_ms: Some(now - 9 * MIN),
                    ..Facts::default()
                },
                &["min_interval"],
            ),
            (
                Facts {
                    job_last_approved_at_ms: Some(now - 10 * MIN),
                    ..Facts::default()
                },
                &[],
            ),
            (
                Facts {
                    job_last_approved_at_ms: Some(now + MIN),
                    ..Facts::default()
                },
                &["min_interval"],
            ),
            (
                Facts {
                    cluster_in_flight: 4,
                    ..Facts::default()
                },
                &[],
            ),
            (
                Facts {
                    cluster_in_flight: 5,
                    ..Facts::default()
                },
                &["cluster_concurrency"],
            ),
            (
                Facts {
                    region_in_flight: 49,
                    ..Facts::default()
                },
                &[],
            ),
            (
                Facts {
                    region_in_flight: 50,
                    ..Facts::default()
                },
                &["region_concurrency"],
            ),
            (
                Facts {
                    job_open_action: Some("p0".into()),
                    job_last_approved_at_ms: Some(now),
                    cluster_in_flight: 9,
                    region_in_flight: 99,
                    region_evacuating: false,
                    pause: None,
                },
                &[
                    "job_action_in_flight",
                    "min_interval",
                    "cluster_concurrency",
                    "region_concurrency",
                ],
            ),
        ];
        let config = GateConfig::default();
        for (facts, codes) in cases {
            let got = check(&facts, &config, now);
            let got_codes: Vec<_> = got.iter().map(|r| r.code.as_str()).collect();
            assert_eq!(got_codes, codes, "{facts:?}");
            assert!(got.iter().all(|r| r.gate == GateName::RateLimit));
        }
    }
}
