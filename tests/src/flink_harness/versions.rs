//! The Flink versions the harness runs, and what differs between them that the harness or a
//! test must know. Each fact here was seen on the real version (docs/real-flink.md).

use std::fmt;

use super::HarnessError;

/// The versions the whole real-Flink suite runs on in CI: the newest release and the 1.x
/// long-term-support line.
pub const FULL_SUITE: [&str; 2] = ["2.3.0", "1.20.5"];

/// The other versions CI runs the per-version smoke test on (`real_flink_versions.rs`): the
/// harness, one collection checked against Flink's per-subtask endpoints, one in-place
/// scale-up through the adaptive scheduler.
pub const SMOKE: [&str; 5] = ["1.18.1", "1.19.3", "2.0.2", "2.1.3", "2.2.1"];

/// A Flink release number such as 1.20.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlinkVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// Which configuration file a distribution reads from `FLINK_CONF_DIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// `flink-conf.yaml` (up to 1.18): `key: value` lines read by Flink's own line parser,
    /// not YAML; values are taken verbatim up to a `#`.
    Legacy,
    /// `config.yaml` (1.19 on, the only one on 2.x): standard YAML; flat dotted keys are
    /// accepted beside nested ones.
    Standard,
}

impl ConfigFormat {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Legacy => "flink-conf.yaml",
            Self::Standard => "config.yaml",
        }
    }
}

impl FlinkVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// `1.20.5` and the like; anything else is an error that quotes the text.
    pub fn parse(text: &str) -> Result<Self, HarnessError> {
        let bad = || {
            HarnessError::new(
                "version",
                format!("a Flink version looks like 1.20.5, got {text:?}"),
            )
        };
        let mut parts = text.trim().split('.').map(|p| p.parse::<u32>());
        let (Some(Ok(major)), Some(Ok(minor)), Some(Ok(patch)), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        Ok(Self::new(major, minor, patch))
    }

    /// `config.yaml` is read from 1.19 on; 1.18 reads only `flink-conf.yaml`.
    pub fn config_format(self) -> ConfigFormat {
        if self < Self::new(1, 19, 0) {
            ConfigFormat::Legacy
        } else {
            ConfigFormat::Standard
        }
    }

    /// `/jobs/:jid` and `/jobs/overview` carry `schedulerType` from 2.3 on.
    pub fn reports_scheduler_type(self) -> bool {
        self >= Self::new(2, 3, 0)
    }

    /// The job metric `numRescales` exists from 2.0 on; 1.x has only `numRestarts`.
    pub fn reports_num_rescales(self) -> bool {
        self >= Self::new(2, 0, 0)
    }

    /// Whether `pipeline.jobvertex-parallelism-overrides` given with `POST /jars/:id/run`
    /// reaches the job. From 2.0 on the jar-run handler submits a StreamGraph, and the
    /// Dispatcher applies the overrides only to a JobGraph (FLINK-38770, open), so they are
    /// silently ignored.
    pub fn applies_jar_run_overrides(self) -> bool {
        self < Self::new(2, 0, 0)
    }

    /// Test-name form, e.g. `1_20_5`.
    pub fn snake(self) -> String {
        format!("{}_{}_{}", self.major, self.minor, self.patch)
    }
}

impl fmt::Display for FlinkVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders_versions() {
        let v = FlinkVersion::parse("1.20.5").expect("valid");
        assert_eq!(v, FlinkVersion::new(1, 20, 5));
        assert_eq!(v.to_string(), "1.20.5");
        assert_eq!(v.snake(), "1_20_5");
        assert!(FlinkVersion::new(1, 9, 9) < FlinkVersion::new(1, 18, 0));
        for bad in ["", "2.3", "2.3.0.1", "2.x.0", "v2.3.0"] {
            let err = FlinkVersion::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("1.20.5"), "{err}");
        }
    }

    #[test]
    fn config_file_changes_at_1_19() {
        let format = |v: &str| FlinkVersion::parse(v).unwrap().config_format();
        assert_eq!(format("1.18.1"), ConfigFormat::Legacy);
        assert_eq!(format("1.19.3"), ConfigFormat::Standard);
        assert_eq!(format("2.3.0"), ConfigFormat::Standard);
        assert_eq!(ConfigFormat::Legacy.file_name(), "flink-conf.yaml");
    }

    #[test]
    fn every_matrix_version_parses() {
        for v in FULL_SUITE.iter().chain(&SMOKE) {
            FlinkVersion::parse(v).expect(v);
        }
    }
}
