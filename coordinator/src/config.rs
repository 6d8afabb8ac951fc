//! Configuration: a TOML file, then environment variables, then flags (each wins over the
//! one before). Everything is validated, token files included, before anything binds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flink_autoscale_shared::gates::GateConfig;
use flink_autoscale_shared::protocol::GateName;
use flink_autoscale_shared::telemetry::LogFormat;
use serde::{Deserialize, Serialize};

use crate::auth::{parse_token_file, Tokens};
use crate::store::{Backend, SqliteSynchronous, StoreOptions};

/// Shortest token accepted: anything shorter is guessable.
const MIN_TOKEN_LEN: usize = 16;

/// The configuration file, with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to serve on; port 0 picks a free port.
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    /// `tracing` filter directive (`RUST_LOG` wins).
    pub log_level: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Time allowed for in-flight requests after SIGTERM.
    pub shutdown_grace_seconds: u64,
    /// An approved action with no reported outcome stops blocking its job after this long.
    pub open_action_timeout_seconds: u64,
    pub database: DatabaseConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    pub gates: GateConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite:PATH` or `postgres://user@host/db`.
    pub url: String,
    /// PostgreSQL only: schema holding the tables (created if missing).
    pub schema: Option<String>,
    pub read_connections: u32,
    /// PostgreSQL only: concurrent writer transactions (SQLite always uses one).
    pub writers: u32,
    pub max_batch: usize,
    pub sqlite_synchronous: SqliteSynchronous,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub agent_tokens: Vec<String>,
    pub admin_tokens: Vec<String>,
    pub agent_tokens_file: Option<PathBuf>,
    pub admin_tokens_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain; with `key_file` it turns TLS on.
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8470)),
            log_format: LogFormat::Text,
            log_level: "info".to_string(),
            max_body_bytes: 1 << 20,
            shutdown_grace_seconds: 10,
            open_action_timeout_seconds: 3600,
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            gates: GateConfig::default(),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite:/var/lib/flink-autoscale-coordinator/coordinator.db".to_string(),
            schema: None,
            read_connections: 4,
            writers: 4,
            max_batch: 512,
            sqlite_synchronous: SqliteSynchronous::Full,
        }
    }
}

/// Every setting as a flag (and an environment variable). Unset ones keep the file's value.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Address to serve on, e.g. 0.0.0.0:8470; port 0 picks a free port.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Log format: text or json.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Log filter, e.g. info or flink_autoscale_coordinator=debug.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Largest accepted request body in bytes.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Seconds in-flight requests may take after SIGTERM.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_SHUTDOWN_GRACE_SECONDS")]
    pub shutdown_grace_seconds: Option<u64>,
    /// Seconds after which an approved action without an outcome stops blocking its job.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_OPEN_ACTION_TIMEOUT_SECONDS")]
    pub open_action_timeout_seconds: Option<u64>,
    /// Store URL: sqlite:PATH or postgres://user@host/db.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DATABASE")]
    pub database: Option<String>,
    /// PostgreSQL schema for the tables (created if missing).
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DATABASE_SCHEMA")]
    pub database_schema: Option<String>,
    /// Connections for reads.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DATABASE_READ_CONNECTIONS")]
    pub database_read_connections: Option<u32>,
    /// PostgreSQL: concurrent writer transactions.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DATABASE_WRITERS")]
    pub database_writers: Option<u32>,
    /// Most proposals decided per transaction.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DATABASE_MAX_BATCH")]
    pub database_max_batch: Option<usize>,
    /// SQLite durability: full (fsync each commit) or normal.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_SQLITE_SYNCHRONOUS")]
    pub sqlite_synchronous: Option<SqliteSynchronous>,
    /// File with agent tokens, one per line.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_AGENT_TOKENS_FILE")]
    pub agent_tokens_file: Option<PathBuf>,
    /// File with admin tokens, one per line.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_ADMIN_TOKENS_FILE")]
    pub admin_tokens_file: Option<PathBuf>,
    /// Agent tokens, comma-separated (prefer --agent-tokens-file: flags show up in `ps`).
    #[arg(
        long,
        env = "FLINK_AUTOSCALE_COORDINATOR_AGENT_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub agent_tokens: Option<Vec<String>>,
    /// Admin tokens, comma-separated (prefer --admin-tokens-file).
    #[arg(
        long,
        env = "FLINK_AUTOSCALE_COORDINATOR_ADMIN_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub admin_tokens: Option<Vec<String>>,
    /// PEM certificate chain; with --tls-key-file it turns TLS on.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_TLS_KEY_FILE")]
    pub tls_key_file: Option<PathBuf>,
    /// Gates to run, in order, comma-separated (region_failover,disk_capacity,standby_buffer,rate_limit).
    #[arg(
        long,
        env = "FLINK_AUTOSCALE_COORDINATOR_GATE_ORDER",
        value_delimiter = ','
    )]
    pub gate_order: Option<Vec<GateName>>,
    /// Disk per TaskManager in bytes, replacing what agents report.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DISK_BYTES_PER_TASK_MANAGER")]
    pub disk_bytes_per_task_manager: Option<u64>,
    /// Disk headroom over the checkpoint state (0.5 = 50 %).
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_DISK_HEADROOM")]
    pub disk_headroom: Option<f64>,
    /// Clusters with at least this many TaskManagers get standby TaskManagers.
    #[arg(
        long,
        env = "FLINK_AUTOSCALE_COORDINATOR_STANDBY_MIN_CLUSTER_TASK_MANAGERS"
    )]
    pub standby_min_cluster_task_managers: Option<u32>,
    /// Standby TaskManagers as a fraction of the plan.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_STANDBY_FRACTION")]
    pub standby_fraction: Option<f64>,
    /// Fewest standby TaskManagers when a buffer applies.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_STANDBY_MIN_TASK_MANAGERS")]
    pub standby_min_task_managers: Option<u32>,
    /// Minimum seconds between approved actions for one job.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_MIN_INTERVAL_SECONDS")]
    pub min_interval_seconds: Option<u64>,
    /// Concurrent approved rescales per cluster.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_MAX_IN_FLIGHT_PER_CLUSTER")]
    pub max_in_flight_per_cluster: Option<u32>,
    /// Concurrent approved rescales per region.
    #[arg(long, env = "FLINK_AUTOSCALE_COORDINATOR_MAX_IN_FLIGHT_PER_REGION")]
    pub max_in_flight_per_region: Option<u32>,
}

/// A setting that cannot be used, named as in the configuration file.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

impl ConfigError {
    fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            setting: setting.into(),
            message: message.into(),
        }
    }
}

/// A validated configuration, with tokens loaded.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub tokens: Tokens,
}

impl Settings {
    pub fn store_options(&self) -> StoreOptions {
        let db = &self.config.database;
        StoreOptions {
            url: db.url.clone(),
            schema: db.schema.clone(),
            read_connections: db.read_connections,
            writers: db.writers,
            max_batch: db.max_batch,
            sqlite_synchronous: db.sqlite_synchronous,
            open_action_timeout: Duration::from_secs(self.config.open_action_timeout_seconds),
            gates: self.config.gates.clone(),
        }
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.config.shutdown_grace_seconds)
    }
}

/// Reads the file (if any), applies the flags/environment, validates, loads token files.
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let mut config = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError::new("--config", format!("cannot read {}: {e}", path.display()))
            })?;
            toml::from_str::<Config>(&text)
                .map_err(|e| ConfigError::new(path.display().to_string(), e.to_string()))?
        }
        None => Config::default(),
    };
    overrides.apply(&mut config);
    validate(config)
}

impl Overrides {
    fn apply(&self, c: &mut Config) {
        fn set<T: Clone>(target: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *target = v.clone();
            }
        }
        fn set_some<T: Clone>(target: &mut Option<T>, value: &Option<T>) {
            if value.is_some() {
                *target = value.clone();
            }
        }
        set(&mut c.listen, &self.listen);
        set(&mut c.log_format, &self.log_format);
        set(&mut c.log_level, &self.log_level);
        set(&mut c.max_body_bytes, &self.max_body_bytes);
        set(&mut c.shutdown_grace_seconds, &self.shutdown_grace_seconds);
        set(
            &mut c.open_action_timeout_seconds,
            &self.open_action_timeout_seconds,
        );
        set(&mut c.database.url, &self.database);
        set_some(&mut c.database.schema, &self.database_schema);
        set(
            &mut c.database.read_connections,
            &self.database_read_connections,
        );
        set(&mut c.database.writers, &self.database_writers);
        set(&mut c.database.max_batch, &self.database_max_batch);
        set(&mut c.database.sqlite_synchronous, &self.sqlite_synchronous);
        set_some(&mut c.auth.agent_tokens_file, &self.agent_tokens_file);
        set_some(&mut c.auth.admin_tokens_file, &self.admin_tokens_file);
        set(&mut c.auth.agent_tokens, &self.agent_tokens);
        set(&mut c.auth.admin_tokens, &self.admin_tokens);
        set_some(&mut c.tls.cert_file, &self.tls_cert_file);
        set_some(&mut c.tls.key_file, &self.tls_key_file);
        set(&mut c.gates.order, &self.gate_order);
        set_some(
            &mut c.gates.disk_bytes_per_task_manager,
            &self.disk_bytes_per_task_manager,
        );
        set(&mut c.gates.disk_headroom, &self.disk_headroom);
        set(
            &mut c.gates.standby_min_cluster_task_managers,
            &self.standby_min_cluster_task_managers,
        );
        set(&mut c.gates.standby_fraction, &self.standby_fraction);
        set(
            &mut c.gates.standby_min_task_managers,
            &self.standby_min_task_managers,
        );
        set(
            &mut c.gates.min_interval_seconds,
            &self.min_interval_seconds,
        );
        set(
            &mut c.gates.max_in_flight_per_cluster,
            &self.max_in_flight_per_cluster,
        );
        set(
            &mut c.gates.max_in_flight_per_region,
            &self.max_in_flight_per_region,
        );
    }
}

fn validate(config: Config) -> Result<Settings, ConfigError> {
    if config.max_body_bytes < 1024 {
        return Err(ConfigError::new("max_body_bytes", "must be at least 1024"));
    }
    if config.shutdown_grace_seconds == 0 {
        return Err(ConfigError::new("shutdown_grace_seconds", "must be >= 1"));
    }
    if config.log_level.trim().is_empty() {
        return Err(ConfigError::new("log_level", "must not be empty"));
    }
    let db = &config.database;
    let backend = Backend::of_url(&db.url).ok_or_else(|| {
        ConfigError::new(
            "database.url",
            format!("{:?} is neither sqlite:PATH nor postgres://...", db.url),
        )
    })?;
    if backend == Backend::Sqlite
        && db
            .url
            .trim_start_matches("sqlite:")
            .trim_start_matches("//")
            .is_empty()
    {
        return Err(ConfigError::new(
            "database.url",
            "sqlite: needs a file path",
        ));
    }
    if let Some(schema) = &db.schema {
        let ok = !schema.is_empty()
            && schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(ConfigError::new(
                "database.schema",
                "must be a lowercase SQL identifier ([a-z_][a-z0-9_]*, at most 63 characters)",
            ));
        }
    }
    if db.read_connections == 0 {
        return Err(ConfigError::new(
            "database.read_connections",
            "must be >= 1",
        ));
    }
    if db.writers == 0 {
        return Err(ConfigError::new("database.writers", "must be >= 1"));
    }
    if db.max_batch == 0 {
        return Err(ConfigError::new("database.max_batch", "must be >= 1"));
    }
    config
        .gates
        .validate("gates.")
        .map_err(|e| ConfigError::new(e.field, e.message))?;
    match (&config.tls.cert_file, &config.tls.key_file) {
        (Some(_), None) => {
            return Err(ConfigError::new(
                "tls.key_file",
                "required with tls.cert_file",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::new(
                "tls.cert_file",
                "required with tls.key_file",
            ))
        }
        (Some(cert), Some(key)) => {
            for (setting, path) in [("tls.cert_file", cert), ("tls.key_file", key)] {
                std::fs::metadata(path).map_err(|e| {
                    ConfigError::new(setting, format!("cannot read {}: {e}", path.display()))
                })?;
            }
        }
        (None, None) => {}
    }
    let agent = tokens(
        &config.auth.agent_tokens,
        &config.auth.agent_tokens_file,
        "auth.agent_tokens",
    )?;
    let admin = tokens(
        &config.auth.admin_tokens,
        &config.auth.admin_tokens_file,
        "auth.admin_tokens",
    )?;
    if agent.is_empty() && admin.is_empty() {
        return Err(ConfigError::new(
            "auth",
            "no tokens configured: set auth.agent_tokens_file and auth.admin_tokens_file (or --agent-tokens-file / --admin-tokens-file)",
        ));
    }
    if agent.iter().any(|t| admin.contains(t)) {
        return Err(ConfigError::new(
            "auth",
            "the same token is configured for both the agent and the admin role",
        ));
    }
    let tokens = Tokens::new(&agent, &admin);
    Ok(Settings { config, tokens })
}

fn tokens(
    inline: &[String],
    file: &Option<PathBuf>,
    setting: &str,
) -> Result<Vec<String>, ConfigError> {
    let mut all = inline.to_vec();
    let mut source = setting.to_string();
    if let Some(path) = file {
        source = format!("{setting}_file");
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(&source, format!("cannot read {}: {e}", path.display()))
        })?;
        all.extend(parse_token_file(&text));
    }
    for (i, token) in all.iter().enumerate() {
        if token.len() < MIN_TOKEN_LEN {
            return Err(ConfigError::new(
                &source,
                format!(
                    "token #{} is shorter than {MIN_TOKEN_LEN} characters",
                    i + 1
                ),
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::new(
                &source,
                format!("token #{} contains spaces or non-ASCII characters", i + 1),
            ));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_tokens(mut c: Config) -> Config {
        c.auth.agent_tokens = vec!["agent-token-0123456789".into()];
        c.auth.admin_tokens = vec!["admin-token-0123456789".into()];
        c
    }

    #[test]
    fn defaults_validate_once_tokens_exist() {
        assert_eq!(validate(Config::default()).unwrap_err().setting, "auth");
        let s = validate(with_tokens(Config::default())).unwrap();
        assert_eq!(s.tokens.count(crate::auth::Role::Agent), 1);
    }

    #[test]
    fn bad_settings_are_named() {
        type Case = (fn(&mut Config), &'static str);
        let cases: Vec<Case> = vec![
            (|c| c.database.url = "mysql://x".into(), "database.url"),
            (|c| c.database.url = "sqlite:".into(), "database.url"),
            (
                |c| c.database.schema = Some("Bad-Name".into()),
                "database.schema",
            ),
            (|c| c.database.max_batch = 0, "database.max_batch"),
            (|c| c.gates.disk_headroom = -0.1, "gates.disk_headroom"),
            (|c| c.max_body_bytes = 10, "max_body_bytes"),
            (
                |c| c.auth.agent_tokens = vec!["short".into()],
                "auth.agent_tokens",
            ),
            (
                |c| c.tls.cert_file = Some("/nonexistent".into()),
                "tls.key_file",
            ),
            (
                |c| c.auth.agent_tokens_file = Some("/nonexistent/tokens".into()),
                "auth.agent_tokens_file",
            ),
        ];
        for (mutate, setting) in cases {
            let mut c = with_tokens(Config::default());
            mutate(&mut c);
            assert_eq!(validate(c).unwrap_err().setting, setting);
        }
    }

    #[test]
    fn toml_sections_parse_and_flags_win() {
        let text = r#"
            listen = "127.0.0.1:9000"
            [database]
            url = "sqlite:/tmp/x.db"
            [gates]
            order = ["rate_limit", "region_failover"]
            min_interval_seconds = 60
        "#;
        let mut c: Config = toml::from_str(text).unwrap();
        assert_eq!(
            c.gates.order,
            [GateName::RateLimit, GateName::RegionFailover]
        );
        assert_eq!(c.gates.disk_headroom, 0.5);
        let flags = Overrides {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            min_interval_seconds: Some(5),
            ..Overrides::default()
        };
        flags.apply(&mut c);
        assert_eq!(c.listen.port(), 0);
        assert_eq!(c.gates.min_interval_seconds, 5);
        assert_eq!(c.database.url, "sqlite:/tmp/x.db");
        assert!(toml::from_str::<Config>("lisen = \"x\"").is_err());
    }
}
