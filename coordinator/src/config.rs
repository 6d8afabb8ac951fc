//! Configuration: a TOML file, then environment variables, then flags (each wins over the
//! one before), in the dialect both daemons share (`flink_autoscale_shared::config_layers`):
//! `FLINK_AUTOSCALE_COORDINATOR__<SECTION>__<KEY>` (`FLINK_AUTOSCALE_COORDINATOR__<KEY>` for a
//! top-level key) sets any key, durations are strings ("10s"). Everything is validated, token
//! files included, before anything binds, by the one [`load`] that `check-config` and `run`
//! both call.
//!
//! Adding a key: a field below (with its default), its range in [`validate`], a row in
//! `docs/configuration.md` and, when operators set it on the command line, a [`FLAGS`] entry.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use flink_autoscale_core::duration::Dur;
use flink_autoscale_core::gates::GateConfig;
use flink_autoscale_core::policy::{self, Rule};
use flink_autoscale_shared::config_layers::{self, LayerError, Renamed};
use flink_autoscale_shared::files::{is_low_entropy, read_secret_file, SecretPermissions};
use flink_autoscale_shared::telemetry::LogFormat;
use serde::{Deserialize, Serialize};

use crate::auth::{parse_token_entry, parse_token_file, NamedToken, Role, Tokens};
use crate::notify::NotificationsConfig;
use crate::store::{Backend, SqliteSynchronous, StoreOptions};

/// Shortest token accepted: anything shorter is guessable.
const MIN_TOKEN_LEN: usize = 16;
/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "FLINK_AUTOSCALE_COORDINATOR__";
/// Prefix of the variables before this release (`FLINK_AUTOSCALE_COORDINATOR_<FLAG>`), still
/// read with a warning; `..._CONFIG` names the file and stays.
const LEGACY_ENV_PREFIX: &str = "FLINK_AUTOSCALE_COORDINATOR_";
const CONFIG_ENV: &str = "FLINK_AUTOSCALE_COORDINATOR_CONFIG";
/// After SIGTERM the drain, plus closing the store (up to 5 s), must end within the unit's
/// `TimeoutStopSec=30s` (and Kubernetes' default `terminationGracePeriodSeconds` of 30).
const MAX_SHUTDOWN_GRACE: Dur = Dur::secs(25);

/// Keys renamed in this release, still read under their old name (with a warning) until the
/// next one.
pub const RENAMED: &[Renamed] = &[
    Renamed {
        old: "body_read_timeout_seconds",
        new: "body_read_timeout",
        seconds_to_duration: true,
    },
    Renamed {
        old: "shutdown_grace_seconds",
        new: "shutdown_grace",
        seconds_to_duration: true,
    },
    Renamed {
        old: "open_action_timeout_seconds",
        new: "open_action_timeout",
        seconds_to_duration: true,
    },
    Renamed {
        old: "gates.min_interval_seconds",
        new: "gates.min_interval",
        seconds_to_duration: true,
    },
];

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
    /// Time a client may take to send a request body once its headers are in.
    pub body_read_timeout: Dur,
    /// Connections served at once; more are answered 503 `too_many_connections`.
    pub max_connections: usize,
    /// Time allowed for in-flight requests after SIGTERM.
    pub shutdown_grace: Dur,
    /// An approved action with no reported outcome stops blocking its job after this long.
    pub open_action_timeout: Dur,
    pub database: DatabaseConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    pub gates: GateConfig,
    pub console: ConsoleConfig,
    pub approval: ApprovalConfig,
    pub notifications: NotificationsConfig,
}

/// `[approval]`: which proposals a person must approve (after the gates pass).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    /// A pending proposal nobody approves or denies within this long is refused
    /// (`approval_expired`).
    pub ttl: Dur,
    /// Rules tried in order before those set through the API; the first match decides
    /// (`auto` or `manual`); no match is `auto`.
    pub rules: Vec<Rule>,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            ttl: Dur::secs(30 * 60),
            rules: Vec::new(),
        }
    }
}

/// The web console at `/ui/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console; when off, `/ui/` answers 404.
    pub enabled: bool,
    /// How long a sign-in lasts, e.g. "8h".
    pub session_ttl: Dur,
    /// Mark the session cookie `Secure` although this process serves plain HTTP (TLS ends at
    /// a proxy in front). With `tls.*` set it is always `Secure`.
    pub secure_cookie: bool,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            session_ttl: Dur::secs(8 * 3600),
            secure_cookie: false,
        }
    }
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
    /// Read-only tokens: every read of the API and the console, no change.
    pub viewer_tokens: Vec<String>,
    pub admin_tokens: Vec<String>,
    pub agent_tokens_file: Option<PathBuf>,
    pub viewer_tokens_file: Option<PathBuf>,
    pub admin_tokens_file: Option<PathBuf>,
    /// Accept token files other users can read (refused otherwise).
    pub allow_readable_token_files: bool,
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
            body_read_timeout: Dur::secs(10),
            max_connections: 4096,
            shutdown_grace: Dur::secs(10),
            open_action_timeout: Dur::secs(3600),
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            gates: GateConfig::default(),
            console: ConsoleConfig::default(),
            approval: ApprovalConfig::default(),
            notifications: NotificationsConfig::default(),
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

/// How a flag's text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagValue {
    /// Taken as a string (addresses, paths, names).
    Text,
    /// A TOML value: a number or a boolean.
    Literal,
    /// Comma-separated strings.
    List,
}

/// A command-line flag and the key it sets. Each also had a variable before this release
/// (`FLINK_AUTOSCALE_COORDINATOR_` and the flag's name in upper case), still read with a
/// deprecation warning.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    pub long: &'static str,
    pub key: &'static str,
    pub value: FlagValue,
    pub help: &'static str,
    /// Kept for one release, hidden from `--help`.
    pub deprecated: bool,
}

const fn flag(long: &'static str, key: &'static str, value: FlagValue, help: &'static str) -> Flag {
    Flag {
        long,
        key,
        value,
        help,
        deprecated: false,
    }
}

const fn old_flag(long: &'static str, key: &'static str) -> Flag {
    Flag {
        long,
        key,
        value: FlagValue::Literal,
        help: "",
        deprecated: true,
    }
}

use FlagValue::{List, Literal, Text};

/// Every flag of `run` and `check-config`.
pub const FLAGS: &[Flag] = &[
    flag("listen", "listen", Text, "Address to serve on, e.g. 0.0.0.0:8470; port 0 picks a free port."),
    flag("log-format", "log_format", Text, "Log format: text or json."),
    flag("log-level", "log_level", Text, "Log filter, e.g. info or flink_autoscale_coordinator=debug."),
    flag("max-body-bytes", "max_body_bytes", Literal, "Largest accepted request body in bytes."),
    flag("body-read-timeout", "body_read_timeout", Text, "Time a client may take to send a request body, e.g. 10s."),
    flag("max-connections", "max_connections", Literal, "Connections served at once; more are answered 503."),
    flag("shutdown-grace", "shutdown_grace", Text, "Time in-flight requests may take after SIGTERM, e.g. 10s."),
    flag("open-action-timeout", "open_action_timeout", Text, "Time after which an approved action without an outcome stops blocking its job, e.g. 1h."),
    flag("database", "database.url", Text, "Store URL: sqlite:PATH or postgres://user@host/db."),
    flag("database-schema", "database.schema", Text, "PostgreSQL schema for the tables (created if missing)."),
    flag("database-read-connections", "database.read_connections", Literal, "Connections for reads."),
    flag("database-writers", "database.writers", Literal, "PostgreSQL: concurrent writer transactions."),
    flag("database-max-batch", "database.max_batch", Literal, "Most proposals decided per transaction."),
    flag("sqlite-synchronous", "database.sqlite_synchronous", Text, "SQLite durability: full (fsync each commit) or normal."),
    flag("agent-tokens-file", "auth.agent_tokens_file", Text, "File with agent tokens, one per line."),
    flag("admin-tokens-file", "auth.admin_tokens_file", Text, "File with admin tokens, one per line (name:token, or a bare token)."),
    flag("viewer-tokens-file", "auth.viewer_tokens_file", Text, "File with viewer (read-only) tokens, one per line."),
    flag("viewer-tokens", "auth.viewer_tokens", List, "Viewer tokens, comma-separated (prefer --viewer-tokens-file)."),
    flag("approval-ttl", "approval.ttl", Text, "How long a proposal pending a person's approval waits before it is refused, e.g. 30min."),
    flag("notifications-queue-capacity", "notifications.queue_capacity", Literal, "Most webhook deliveries waiting in the store."),
    flag("notifications-max-attempts", "notifications.max_attempts", Literal, "Attempts per webhook delivery before it is given up."),
    flag("notifications-retry-initial", "notifications.retry_initial", Text, "First wait before retrying a webhook delivery, e.g. 1s."),
    flag("notifications-retry-max", "notifications.retry_max", Text, "Longest wait between webhook delivery attempts, e.g. 5min."),
    flag("agent-tokens", "auth.agent_tokens", List, "Agent tokens, comma-separated (prefer --agent-tokens-file: flags show up in `ps`)."),
    flag("admin-tokens", "auth.admin_tokens", List, "Admin tokens, comma-separated (prefer --admin-tokens-file)."),
    flag("tls-cert-file", "tls.cert_file", Text, "PEM certificate chain; with --tls-key-file it turns TLS on."),
    flag("tls-key-file", "tls.key_file", Text, "PEM private key."),
    flag("gate-order", "gates.order", List, "Gates to run, in order, comma-separated (region_failover,disk_capacity,standby_buffer,rate_limit)."),
    flag("disk-bytes-per-task-manager", "gates.disk_bytes_per_task_manager", Literal, "Disk per TaskManager in bytes, replacing what agents report."),
    flag("disk-headroom", "gates.disk_headroom", Literal, "Disk headroom over the checkpoint state (0.5 = 50 %)."),
    flag("standby-min-cluster-task-managers", "gates.standby_min_cluster_task_managers", Literal, "Clusters with at least this many TaskManagers get standby TaskManagers."),
    flag("standby-fraction", "gates.standby_fraction", Literal, "Standby TaskManagers as a fraction of the plan."),
    flag("standby-min-task-managers", "gates.standby_min_task_managers", Literal, "Fewest standby TaskManagers when a buffer applies."),
    flag("min-interval", "gates.min_interval", Text, "Least time between approved actions for one job, e.g. 10min."),
    flag("max-in-flight-per-cluster", "gates.max_in_flight_per_cluster", Literal, "Concurrent approved rescales per cluster."),
    flag("max-in-flight-per-region", "gates.max_in_flight_per_region", Literal, "Concurrent approved rescales per region."),
    flag("console-enabled", "console.enabled", Literal, "Serve the web console at /ui/ (true or false)."),
    flag("console-session-ttl", "console.session_ttl", Text, "How long a console sign-in lasts, e.g. 8h."),
    flag("console-secure-cookie", "console.secure_cookie", Literal, "Mark the console's session cookie Secure behind a TLS-terminating proxy (true or false)."),
    old_flag("body-read-timeout-seconds", "body_read_timeout_seconds"),
    old_flag("shutdown-grace-seconds", "shutdown_grace_seconds"),
    old_flag("open-action-timeout-seconds", "open_action_timeout_seconds"),
    old_flag("min-interval-seconds", "gates.min_interval_seconds"),
];

impl Flag {
    /// The variable that set this flag before this release.
    fn legacy_env(&self) -> String {
        format!(
            "{LEGACY_ENV_PREFIX}{}",
            self.long.replace('-', "_").to_ascii_uppercase()
        )
    }

    fn path(&self) -> Vec<String> {
        self.key.split('.').map(str::to_string).collect()
    }

    fn parse(&self, raw: &str) -> toml::Value {
        match self.value {
            FlagValue::Text => toml::Value::String(raw.to_string()),
            FlagValue::Literal => config_layers::value_from_text(raw),
            FlagValue::List => toml::Value::Array(
                raw.split(',')
                    .map(|s| toml::Value::String(s.trim().to_string()))
                    .collect(),
            ),
        }
    }
}

/// The flags given on the command line, in [`FLAGS`] order.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub given: Vec<(&'static Flag, String)>,
}

impl Overrides {
    /// Sets `--long` to `value`, as if given on the command line.
    pub fn with(mut self, long: &str, value: &str) -> Self {
        let flag = FLAGS
            .iter()
            .find(|f| f.long == long)
            .unwrap_or_else(|| panic!("no flag --{long}"));
        self.given.push((flag, value.to_string()));
        self
    }
}

impl clap::FromArgMatches for Overrides {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = FLAGS
            .iter()
            .filter_map(|f| matches.get_one::<String>(f.long).map(|v| (f, v.clone())))
            .collect();
        Ok(Overrides { given })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for Overrides {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        FLAGS.iter().fold(cmd, |cmd, f| {
            cmd.arg(
                clap::Arg::new(f.long)
                    .long(f.long)
                    .value_name("VALUE")
                    .help(f.help)
                    .hide(f.deprecated),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// A setting that cannot be used, named as in the configuration file.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            setting: setting.into(),
            message: message.into(),
        }
    }
}

impl From<LayerError> for ConfigError {
    fn from(e: LayerError) -> Self {
        ConfigError::new(e.key, e.message)
    }
}

/// A validated configuration, with tokens loaded.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub tokens: Tokens,
    /// Allowed but unwise, or spelled the old way: logged at start, printed by `check-config`.
    pub warnings: Vec<String>,
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
            open_action_timeout: self.config.open_action_timeout.0,
            gates: self.config.gates.clone(),
            approval_rules: self.config.approval.rules.clone(),
            approval_ttl: self.config.approval.ttl.0,
            notifications: self.config.notifications.clone(),
            connect_timeout: Duration::from_secs(5),
            connect_retry_max: Duration::from_secs(30),
        }
    }

    pub fn shutdown_grace(&self) -> Duration {
        self.config.shutdown_grace.0
    }

    /// The console's settings.
    pub fn console(&self) -> crate::console::ConsoleSettings {
        let console = &self.config.console;
        crate::console::ConsoleSettings {
            enabled: console.enabled,
            session_ttl: console.session_ttl.0,
            secure_cookie: console.secure_cookie || self.config.tls.cert_file.is_some(),
        }
    }
}

/// Reads the file (if any), applies the environment and the flags, validates, loads token
/// files: everything `run` needs before it binds, and all `check-config` does.
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let table = match file {
        Some(path) => config_layers::read_toml_file(path)?,
        None => toml::Table::new(),
    };
    let env = config_layers::environment(LEGACY_ENV_PREFIX)?;
    from_layers(table, &env, overrides)
}

/// The pure part of [`load`]: the file's table, our environment variables, the flags.
pub fn from_layers(
    mut table: toml::Table,
    env: &[(String, String)],
    overrides: &Overrides,
) -> Result<Settings, ConfigError> {
    let mut warnings = Vec::new();
    // Variables of the old form first, so the new form wins where both are set.
    for (name, raw) in env {
        if name.starts_with(ENV_PREFIX) || name == CONFIG_ENV {
            continue;
        }
        match FLAGS.iter().find(|f| f.legacy_env() == *name) {
            Some(flag) => {
                let new_name = format!(
                    "{ENV_PREFIX}{}",
                    flag.key
                        .trim_end_matches("_seconds")
                        .replace('.', "__")
                        .to_ascii_uppercase()
                );
                warnings.push(format!(
                    "{name} is deprecated and will be ignored in the next release: use {new_name}"
                ));
                config_layers::set(&mut table, &flag.path(), flag.parse(raw), name, RENAMED)?;
            }
            None => warnings.push(format!(
                "{name} is not a setting and is ignored (variables are {ENV_PREFIX}<SECTION>__<KEY>)"
            )),
        }
    }
    config_layers::apply_environment(&mut table, ENV_PREFIX, env, RENAMED)?;
    for (flag, raw) in &overrides.given {
        let origin = format!("--{}", flag.long);
        if flag.deprecated {
            warnings.push(format!(
                "{origin} is deprecated and will be removed in the next release: use --{}",
                flag.long.trim_end_matches("-seconds")
            ));
        }
        config_layers::set(&mut table, &flag.path(), flag.parse(raw), &origin, RENAMED)?;
    }
    warnings.extend(config_layers::apply_renames(&mut table, RENAMED)?);
    let config: Config = config_layers::deserialize(table.clone())?;
    warnings.extend(config_layers::integer_durations(&table, &config));
    let mut settings = validate(config)?;
    warnings.append(&mut settings.warnings);
    settings.warnings = warnings;
    Ok(settings)
}

/// Every range and cross-field rule, and the files the configuration names.
fn validate(config: Config) -> Result<Settings, ConfigError> {
    count(
        "max_body_bytes",
        config.max_body_bytes as u64,
        1024,
        64 << 20,
    )?;
    within(
        "body_read_timeout",
        config.body_read_timeout,
        Dur::secs(1),
        Dur::secs(300),
    )?;
    count(
        "max_connections",
        config.max_connections as u64,
        1,
        1_000_000,
    )
    .map_err(|e| {
        ConfigError::new(
            e.setting,
            format!("{} (and below the process's LimitNOFILE)", e.message),
        )
    })?;
    within(
        "shutdown_grace",
        config.shutdown_grace,
        Dur::secs(1),
        MAX_SHUTDOWN_GRACE,
    )?;
    within(
        "open_action_timeout",
        config.open_action_timeout,
        Dur::secs(60),
        Dur::secs(7 * 86_400),
    )?;
    flink_autoscale_shared::telemetry::check_log_filter(&config.log_level)
        .map_err(|m| ConfigError::new("log_level", m))?;
    let db = &config.database;
    check_database_url(&db.url)?;
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
    count(
        "database.read_connections",
        db.read_connections.into(),
        1,
        256,
    )?;
    count("database.writers", db.writers.into(), 1, 64)?;
    count("database.max_batch", db.max_batch as u64, 1, 10_000)?;
    config
        .gates
        .validate("gates.")
        .map_err(|e| ConfigError::new(e.field, e.message))?;
    within(
        "console.session_ttl",
        config.console.session_ttl,
        Dur::secs(60),
        Dur::secs(30 * 86_400),
    )?;
    within(
        "approval.ttl",
        config.approval.ttl,
        Dur::secs(1),
        Dur::secs(30 * 86_400),
    )?;
    policy::validate_rules(&config.approval.rules, "approval.rules")
        .map_err(|e| ConfigError::new(e.field, e.message))?;
    config.notifications.validate()?;
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
    let (tokens, warnings) = load_tokens_with_warnings(&config)?;
    Ok(Settings {
        config,
        tokens,
        warnings,
    })
}

/// The store URL as the store will read it: a backend it knows, a URL the driver parses and,
/// for SQLite, a file path in a directory that exists.
fn check_database_url(url: &str) -> Result<(), ConfigError> {
    let bad = |m: String| ConfigError::new("database.url", m);
    let backend = Backend::of_url(url)
        .ok_or_else(|| bad(format!("{url:?} is neither sqlite:PATH nor postgres://...")))?;
    sqlx::any::install_default_drivers();
    sqlx::any::AnyConnectOptions::from_str(url).map_err(|e| bad(format!("cannot be used: {e}")))?;
    if backend == Backend::Sqlite {
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
            .map_err(|e| bad(format!("cannot be used: {e}")))?;
        let file = options.get_filename();
        if file.as_os_str().is_empty()
            || url
                .trim_start_matches("sqlite:")
                .trim_start_matches("//")
                .is_empty()
        {
            return Err(bad("sqlite: needs a file path".to_string()));
        }
        if file != Path::new(":memory:") {
            let dir = file
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !dir.is_dir() {
                return Err(bad(format!(
                    "the directory {} of the SQLite file does not exist",
                    dir.display()
                )));
            }
        }
    }
    Ok(())
}

/// A duration within `min..=max`.
fn within(setting: &str, d: Dur, min: Dur, max: Dur) -> Result<(), ConfigError> {
    if d < min || d > max {
        return Err(ConfigError::new(
            setting,
            format!("must be between {min} and {max}, got {d}"),
        ));
    }
    Ok(())
}

/// A number within `min..=max`.
fn count(setting: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if !(min..=max).contains(&value) {
        return Err(ConfigError::new(
            setting,
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(())
}

/// Reads the configured tokens (inline and from their files) and checks them; used at start
/// and by every reload (SIGHUP).
pub fn load_tokens(config: &Config) -> Result<Tokens, ConfigError> {
    load_tokens_with_warnings(config).map(|(tokens, _)| tokens)
}

/// [`load_tokens`], and what is allowed but unwise about them (guessable tokens, token files
/// whose permissions are not checked).
pub fn load_tokens_with_warnings(config: &Config) -> Result<(Tokens, Vec<String>), ConfigError> {
    let permissions = if config.auth.allow_readable_token_files {
        SecretPermissions::Any
    } else {
        SecretPermissions::Strict
    };
    let a = &config.auth;
    let by_role = vec![
        (
            Role::Agent,
            tokens(
                &a.agent_tokens,
                &a.agent_tokens_file,
                "auth.agent_tokens",
                permissions,
            )?,
        ),
        (
            Role::Viewer,
            tokens(
                &a.viewer_tokens,
                &a.viewer_tokens_file,
                "auth.viewer_tokens",
                permissions,
            )?,
        ),
        (
            Role::Admin,
            tokens(
                &a.admin_tokens,
                &a.admin_tokens_file,
                "auth.admin_tokens",
                permissions,
            )?,
        ),
    ];
    if by_role.iter().all(|(_, t)| t.is_empty()) {
        return Err(ConfigError::new(
            "auth",
            "no tokens configured: set auth.agent_tokens_file and auth.admin_tokens_file (or --agent-tokens-file / --admin-tokens-file)",
        ));
    }
    for (i, (role, list)) in by_role.iter().enumerate() {
        for (other, other_list) in &by_role[i + 1..] {
            if list
                .iter()
                .any(|t| other_list.iter().any(|o| o.token == t.token))
            {
                return Err(ConfigError::new(
                    "auth",
                    format!(
                        "the same token is configured for both the {} and the {} role",
                        role.as_str(),
                        other.as_str()
                    ),
                ));
            }
        }
    }
    let mut warnings = Vec::new();
    if config.auth.allow_readable_token_files {
        warnings.push(
            "auth.allow_readable_token_files is on: the token files' permissions are not checked"
                .to_string(),
        );
    }
    for (role, list) in &by_role {
        let weak = list.iter().filter(|t| is_low_entropy(&t.token)).count();
        if weak > 0 {
            warnings.push(format!(
                "{weak} {} token(s) look guessable (too few distinct characters); use random ones, e.g. `openssl rand -base64 32`",
                role.as_str()
            ));
        }
    }
    Ok((Tokens::new(&by_role), warnings))
}

fn tokens(
    inline: &[String],
    file: &Option<PathBuf>,
    setting: &str,
    permissions: SecretPermissions,
) -> Result<Vec<NamedToken>, ConfigError> {
    let mut all = inline
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            parse_token_entry(entry)
                .map_err(|m| ConfigError::new(setting, format!("token #{}: {m}", i + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut source = setting.to_string();
    if let Some(path) = file {
        source = format!("{setting}_file");
        let text = read_secret_file(path, permissions, "auth.allow_readable_token_files")
            .map_err(|e| ConfigError::new(&source, e.to_string()))?;
        all.extend(
            parse_token_file(&text)
                .map_err(|e| ConfigError::new(&source, format!("{}: {e}", path.display())))?,
        );
    }
    for (i, t) in all.iter().enumerate() {
        if t.token.len() < MIN_TOKEN_LEN {
            return Err(ConfigError::new(
                &source,
                format!(
                    "token #{} ({}) is shorter than {MIN_TOKEN_LEN} characters",
                    i + 1,
                    t.name
                ),
            ));
        }
        if !t.token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::new(
                &source,
                format!(
                    "token #{} ({}) contains spaces or non-ASCII characters",
                    i + 1,
                    t.name
                ),
            ));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::protocol::GateName;

    fn with_tokens(mut c: Config) -> Config {
        c.auth.agent_tokens = vec!["agent-token-0123456789".into()];
        c.auth.admin_tokens = vec!["admin-token-0123456789".into()];
        c
    }

    fn from_text(
        text: &str,
        env: &[(&str, &str)],
        flags: Overrides,
    ) -> Result<Settings, ConfigError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let tokens = "[auth]\nagent_tokens = [\"agent-token-0123456789\"]\n";
        let text = if text.contains("[auth]") {
            text.to_string()
        } else {
            format!("{text}\n{tokens}")
        };
        from_layers(config_layers::parse_toml(&text).unwrap(), &env, &flags)
    }

    #[test]
    fn defaults_validate_once_tokens_exist() {
        let mut defaults = Config::default();
        // The default SQLite file's directory is the unit's StateDirectory=.
        if !Path::new("/var/lib/flink-autoscale-coordinator").is_dir() {
            assert_eq!(
                validate(defaults.clone()).unwrap_err().setting,
                "database.url"
            );
        }
        defaults.database.url = "sqlite::memory:".into();
        assert_eq!(validate(defaults.clone()).unwrap_err().setting, "auth");
        let s = validate(with_tokens(defaults)).unwrap();
        assert_eq!(s.tokens.count(crate::auth::Role::Agent), 1);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn bad_settings_are_named() {
        type Case = (fn(&mut Config), &'static str);
        let cases: Vec<Case> = vec![
            (|c| c.database.url = "mysql://x".into(), "database.url"),
            (|c| c.database.url = "sqlite:".into(), "database.url"),
            (
                |c| c.database.url = "sqlite:/nonexistent/dir/c.db".into(),
                "database.url",
            ),
            (
                |c| c.database.url = "postgres://u@h:notaport/db".into(),
                "database.url",
            ),
            (
                |c| c.database.schema = Some("Bad-Name".into()),
                "database.schema",
            ),
            (|c| c.database.max_batch = 0, "database.max_batch"),
            (|c| c.database.writers = 1000, "database.writers"),
            (|c| c.gates.disk_headroom = -0.1, "gates.disk_headroom"),
            (
                |c| c.console.session_ttl = Dur::secs(30),
                "console.session_ttl",
            ),
            (|c| c.max_body_bytes = 10, "max_body_bytes"),
            (|c| c.max_body_bytes = 99_999_999_999_999, "max_body_bytes"),
            (|c| c.shutdown_grace = Dur::secs(99_999), "shutdown_grace"),
            (|c| c.shutdown_grace = Dur::secs(0), "shutdown_grace"),
            (
                |c| c.open_action_timeout = Dur::secs(0),
                "open_action_timeout",
            ),
            (
                |c| c.body_read_timeout = Dur::millis(10),
                "body_read_timeout",
            ),
            (|c| c.log_level = "nonsense==".into(), "log_level"),
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
            (
                |c| c.auth.agent_tokens_file = Some("/dev/zero".into()),
                "auth.agent_tokens_file",
            ),
        ];
        for (mutate, setting) in cases {
            let mut c = with_tokens(Config::default());
            c.database.url = "sqlite::memory:".into();
            mutate(&mut c);
            let e = validate(c).unwrap_err();
            assert_eq!(e.setting, setting, "{e}");
        }
    }

    #[test]
    fn token_files_must_be_private_unless_opted_out() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.tokens");
        std::fs::write(&file, "aaaaaaaaaaaaaaaaaaaa\nagent-token-0123456789\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let mut c = Config::default();
        c.database.url = "sqlite::memory:".into();
        c.auth.agent_tokens_file = Some(file.clone());
        let e = validate(c.clone()).unwrap_err();
        assert_eq!(e.setting, "auth.agent_tokens_file");
        assert!(e.message.contains("mode 0666"), "{e}");
        assert!(
            e.message.contains("auth.allow_readable_token_files = true"),
            "{e}"
        );
        c.auth.allow_readable_token_files = true;
        let s = validate(c.clone()).unwrap();
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(
            s.warnings[1].contains("1 agent token(s) look guessable"),
            "{:?}",
            s.warnings
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        c.auth.allow_readable_token_files = false;
        assert_eq!(validate(c).unwrap().warnings.len(), 1);
    }

    #[test]
    fn layers_file_then_environment_then_flags() {
        let text = r#"
            listen = "127.0.0.1:9000"
            shutdown_grace = "5s"
            [database]
            url = "sqlite::memory:"
            [gates]
            order = ["rate_limit", "region_failover"]
            min_interval = "1min"
        "#;
        let s = from_text(text, &[], Overrides::default()).unwrap();
        let c = &s.config;
        assert_eq!(
            c.gates.order,
            [GateName::RateLimit, GateName::RegionFailover]
        );
        assert_eq!(c.gates.min_interval, Dur::secs(60));
        assert_eq!(c.gates.disk_headroom, 0.5);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);

        let env = [
            ("FLINK_AUTOSCALE_COORDINATOR__LISTEN", "127.0.0.1:9100"),
            ("FLINK_AUTOSCALE_COORDINATOR__GATES__MIN_INTERVAL", "2min"),
            (
                "FLINK_AUTOSCALE_COORDINATOR__GATES__MAX_IN_FLIGHT_PER_REGION",
                "7",
            ),
        ];
        let flags = Overrides::default()
            .with("listen", "127.0.0.1:0")
            .with("gate-order", "rate_limit")
            .with("min-interval", "5s");
        let s = from_text(text, &env, flags).unwrap();
        assert_eq!(s.config.listen.port(), 0);
        assert_eq!(s.config.gates.min_interval, Dur::secs(5));
        assert_eq!(s.config.gates.max_in_flight_per_region, 7);
        assert_eq!(s.config.gates.order, [GateName::RateLimit]);
        assert_eq!(s.config.shutdown_grace, Dur::secs(5));
        let e = from_text(
            text,
            &[("FLINK_AUTOSCALE_COORDINATOR__LISEN", "x")],
            Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(e.setting, "lisen");
        assert!(from_text("lisen = \"x\"", &[], Overrides::default()).is_err());
    }

    #[test]
    fn old_spellings_still_work_with_a_warning() {
        let text = "shutdown_grace_seconds = 7\n[database]\nurl = \"sqlite::memory:\"\n";
        let env = [
            ("FLINK_AUTOSCALE_COORDINATOR_MAX_CONNECTIONS", "20"),
            (
                "FLINK_AUTOSCALE_COORDINATOR_AGENT_TOKENS",
                "agent-token-0123456789,agent-token-9876543210",
            ),
            ("FLINK_AUTOSCALE_COORDINATOR_CONFIG", "/ignored/here"),
        ];
        let flags = Overrides::default()
            .with("min-interval-seconds", "0")
            .with("body-read-timeout-seconds", "3");
        let s = from_text(text, &env, flags).unwrap();
        let c = &s.config;
        assert_eq!(c.shutdown_grace, Dur::secs(7));
        assert_eq!(c.max_connections, 20);
        assert_eq!(c.gates.min_interval, Dur::secs(0));
        assert_eq!(c.body_read_timeout, Dur::secs(3));
        assert_eq!(s.tokens.count(crate::auth::Role::Agent), 2);
        let all = s.warnings.join("\n");
        for expected in [
            "FLINK_AUTOSCALE_COORDINATOR_MAX_CONNECTIONS is deprecated",
            "use FLINK_AUTOSCALE_COORDINATOR__MAX_CONNECTIONS",
            "use FLINK_AUTOSCALE_COORDINATOR__AUTH__AGENT_TOKENS",
            "--min-interval-seconds is deprecated",
            "use --min-interval",
            "shutdown_grace_seconds is deprecated",
            "write shutdown_grace = \"7s\"",
            "gates.min_interval_seconds is deprecated",
        ] {
            assert!(all.contains(expected), "{expected}: {all}");
        }
        assert!(!all.contains("CONFIG"), "{all}");
        // The new variable wins over the old one.
        let both = [
            ("FLINK_AUTOSCALE_COORDINATOR_MAX_CONNECTIONS", "20"),
            ("FLINK_AUTOSCALE_COORDINATOR__MAX_CONNECTIONS", "30"),
        ];
        let s = from_text(text, &both, Overrides::default()).unwrap();
        assert_eq!(s.config.max_connections, 30);
        // A bare number of seconds for a duration still reads, with a warning.
        let s = from_text(
            "open_action_timeout = 600\n[database]\nurl = \"sqlite::memory:\"\n",
            &[],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(s.config.open_action_timeout, Dur::secs(600));
        assert!(
            s.warnings[0].contains("open_action_timeout = \"10min\""),
            "{:?}",
            s.warnings
        );
    }
}
