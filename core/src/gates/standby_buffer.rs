//! Standby buffer: large clusters keep a few idle TaskManagers so a lost machine does not
//! stall the job while a replacement is provisioned.

use super::GateConfig;

/// Standby TaskManagers to add to a plan of `task_managers`: none below the size threshold,
/// otherwise max(min, ceil(fraction × task_managers)).
pub fn standby_task_managers(task_managers: u32, config: &GateConfig) -> u32 {
    if task_managers < config.standby_min_cluster_task_managers {
        return 0;
    }
    let by_fraction = (f64::from(task_managers) * config.standby_fraction).ceil() as u32;
    by_fraction.max(config.standby_min_task_managers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        // (task managers, threshold, fraction, min, standby)
        let cases = [
            (9, 10, 0.05, 1, 0),   // below threshold
            (10, 10, 0.05, 1, 1),  // at threshold: ceil(0.5) = 1
            (20, 10, 0.05, 1, 1),  // exactly 1
            (21, 10, 0.05, 1, 2),  // ceil(1.05) = 2
            (100, 10, 0.05, 1, 5), // 5 %
            (10, 10, 0.0, 1, 1),   // fraction 0 still keeps the minimum
            (10, 10, 0.0, 0, 0),   // unless the minimum is 0
            (50, 10, 0.05, 4, 4),  // minimum wins over ceil(2.5) = 3
            (3, 0, 0.5, 1, 2),     // threshold 0: every cluster
        ];
        for (tms, threshold, fraction, min, want) in cases {
            let config = GateConfig {
                standby_min_cluster_task_managers: threshold,
                standby_fraction: fraction,
                standby_min_task_managers: min,
                ..GateConfig::default()
            };
            assert_eq!(
                standby_task_managers(tms, &config),
                want,
                "tms={tms} threshold={threshold} fraction={fraction} min={min}"
            );
        }
    }
}
