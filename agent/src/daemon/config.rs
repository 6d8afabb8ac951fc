//! `[scheduling]`: how polls share the JobManager's request budget when some of them hang.
//! The budget itself is `jobmanager.max_concurrent_requests`.

use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError, Dur};

/// Most hung requests a configuration may keep open.
const MAX_HUNG_LIMIT: usize = 256;

/// The whole `[scheduling]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulingConfig {
    /// A poll still unanswered this long after it started gives its slot of
    /// `jobmanager.max_concurrent_requests` back and waits as a hung poll. Longer than
    /// `collector.poll_deadline` means the deadline's value.
    pub hung_after: Dur,
    /// Hung polls kept waiting for an answer at once; a poll that hangs beyond that is cut
    /// (`errors_total{kind="hung"}`). At most `max_concurrent_requests + max_hung_requests`
    /// requests are ever open against the JobManager.
    pub max_hung_requests: usize,
}

impl Default for SchedulingConfig {
    fn default() -> Self {
        SchedulingConfig {
            hung_after: Dur::secs(1),
            max_hung_requests: 8,
        }
    }
}

/// The `[scheduling]` rules; each failure names the key.
pub fn validate(config: &Config) -> Result<(), ConfigError> {
    let s = &config.scheduling;
    let err = |key: &str, message: String| ConfigError {
        key: key.to_string(),
        message,
    };
    if s.hung_after.0.is_zero() {
        return Err(err(
            "scheduling.hung_after",
            "must be greater than zero".into(),
        ));
    }
    if s.max_hung_requests > MAX_HUNG_LIMIT {
        return Err(err(
            "scheduling.max_hung_requests",
            format!("must be 0..={MAX_HUNG_LIMIT}, got {}", s.max_hung_requests),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Overrides};

    fn load(toml: &str) -> Result<Config, crate::config::ConfigError> {
        Config::from_layers(toml, &Default::default(), &Overrides::default())
    }

    #[test]
    fn defaults_and_rules() {
        let c = load("").unwrap();
        assert_eq!(c.scheduling.hung_after.0.as_millis(), 1000);
        assert_eq!(c.scheduling.max_hung_requests, 8);
        let c = load("[scheduling]\nhung_after = \"250ms\"\nmax_hung_requests = 0").unwrap();
        assert_eq!(c.scheduling.hung_after.0.as_millis(), 250);
        // Longer than the deadline is allowed: the deadline then bounds it.
        load("[scheduling]\nhung_after = \"11s\"").unwrap();
        for (toml, key) in [
            ("[scheduling]\nhung_after = \"0s\"", "scheduling.hung_after"),
            (
                "[scheduling]\nmax_hung_requests = 257",
                "scheduling.max_hung_requests",
            ),
            (
                "[scheduling]\nmax_hung_requests = -1",
                "scheduling.max_hung_requests",
            ),
            ("[scheduling]\nhung = 1", "scheduling"),
        ] {
            let e = load(toml).unwrap_err();
            assert!(e.key.starts_with(key), "{toml}: {e}");
        }
        let env = [(
            "FLINK_AUTOSCALE_AGENT__SCHEDULING__MAX_HUNG_REQUESTS".to_string(),
            "3".to_string(),
        )]
        .into();
        let c = Config::from_layers("", &env, &Overrides::default()).unwrap();
        assert_eq!(c.scheduling.max_hung_requests, 3);
    }
}
