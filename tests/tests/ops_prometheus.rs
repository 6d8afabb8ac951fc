//! `packaging/prometheus/` checked by Prometheus itself: `promtool check` on the rule file and
//! the example configuration, `promtool test rules` on the rules' unit tests, and a real
//! Prometheus (Debian's binary, installed by `scripts/setup-ops.sh`) on loopback that scrapes
//! an agent and a coordinator through the walk-through of `ops_support/walkthrough.rs`, then
//! evaluates every query of the Grafana dashboard and every rule through its HTTP API. Each
//! must parse and return data. `promtool check metrics` lints both daemons' `/metrics`.

#[allow(dead_code)]
mod ops_support;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flink_autoscale_testkit::ChildGuard;
use ops_support::dashboard::{dashboard, expressions, DASHBOARD};
use ops_support::{http_get, read_repo_file, repo_root, run, walkthrough};
use serde_json::Value;

const RULES: &str = "packaging/prometheus/flink-autoscale.rules.yml";
const RULE_TESTS: &str = "packaging/prometheus/flink-autoscale.rules.test.yml";
const SCRAPE_CONFIG: &str = "packaging/prometheus/prometheus.yml";
const RUNBOOKS: &str = "docs/operations.md";

/// How long Prometheus gets to start, and the rules to be evaluated and every query to have
/// data after the walk-through (generous: the machine is shared).
const READY_DEADLINE: Duration = Duration::from_secs(60);
const DATA_DEADLINE: Duration = Duration::from_secs(90);

/// What stands for the dashboard's Grafana variables: every job and vertex, and a rate window
/// of 30 scrapes (the test scrapes every second).
const VARIABLES: [(&str, &str); 3] = [
    ("$job_id", ".*"),
    ("$vertex_id", ".*"),
    ("$__rate_interval", "30s"),
];

fn require(program: &str) -> PathBuf {
    assert!(
        ops_support::tool_available(program),
        "{program} is not installed: scripts/setup-ops.sh installs Debian's prometheus package"
    );
    PathBuf::from(program)
}

fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let (status, out, err) = run(Command::new(require("promtool"))
        .args(args)
        .current_dir(dir));
    (status.success(), format!("{out}{err}"))
}

#[test]
fn rules_and_configuration_pass_promtool_check_and_unit_tests() {
    let dir = repo_root().join("packaging/prometheus");
    let file = |p: &str| {
        Path::new(p)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    let (ok, out) = promtool(&["check", "rules", &file(RULES)], &dir);
    assert!(ok, "promtool check rules {RULES}:\n{out}");
    let (ok, out) = promtool(&["test", "rules", &file(RULE_TESTS)], &dir);
    assert!(ok, "promtool test rules {RULE_TESTS}:\n{out}");
    let (ok, out) = promtool(&["check", "config", &file(SCRAPE_CONFIG)], &dir);
    assert!(ok, "promtool check config {SCRAPE_CONFIG}:\n{out}");
}

/// Every rule of the rule file: (group, rule) as YAML.
fn rules() -> Vec<serde_yaml::Value> {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&read_repo_file(RULES)).unwrap_or_else(|e| panic!("{RULES}: {e}"));
    doc["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
        .collect()
}

#[test]
fn every_alert_has_a_runbook_and_the_alerts_the_issue_asks_for_exist() {
    let doc = read_repo_file(RUNBOOKS);
    let alerts: Vec<serde_yaml::Value> = rules()
        .into_iter()
        .filter(|r| r["alert"].is_string())
        .collect();
    for alert in &alerts {
        let name = alert["alert"].as_str().unwrap();
        assert!(
            doc.lines().any(|l| l.trim() == format!("### {name}")),
            "{RUNBOOKS} has no runbook heading `### {name}`"
        );
        assert_eq!(
            alert["annotations"]["runbook_url"].as_str(),
            Some(format!("{RUNBOOKS}#{}", name.to_lowercase()).as_str()),
            "{name}: runbook_url"
        );
        assert!(
            alert["annotations"]["summary"].is_string(),
            "{name}: a summary"
        );
        assert!(
            alert["labels"]["severity"].is_string(),
            "{name}: a severity"
        );
    }
    let names: Vec<&str> = alerts.iter().filter_map(|a| a["alert"].as_str()).collect();
    for needed in [
        "FlinkAutoscaleAgentDown",
        "FlinkAutoscaleAgentNotPolling",
        "FlinkAutoscaleJobsUnusable",
        "FlinkAutoscaleJobManagerErrors",
        "FlinkAutoscaleCoordinatorUnreachable",
        "FlinkAutoscaleRefusalsSurging",
        "FlinkAutoscaleRescaleFailed",
        "FlinkAutoscaleStoreUnavailable",
        "FlinkAutoscaleCoordinatorLatencyHigh",
    ] {
        assert!(names.contains(&needed), "{RULES} has no alert {needed}");
    }
}

/// A free loopback port (bound, then released for Prometheus to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// A Prometheus started for the test; stopped (SIGTERM, then SIGKILL) when dropped.
struct Prometheus {
    /// Stopped with SIGTERM (SIGKILL after 20 s) on drop.
    child: ChildGuard,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus with the packaged scrape jobs and rules, each job's targets read from
    /// `<dir>/<job>.json` (file discovery), scraping and evaluating every second.
    fn start(dir: &Path) -> Prometheus {
        let mut config: serde_yaml::Value =
            serde_yaml::from_str(&read_repo_file(SCRAPE_CONFIG)).expect("prometheus.yml");
        config["global"]["scrape_interval"] = "1s".into();
        config["global"]["evaluation_interval"] = "1s".into();
        config["rule_files"] = vec![repo_root().join(RULES).display().to_string()].into();
        for job in config["scrape_configs"]
            .as_sequence_mut()
            .expect("scrape_configs")
        {
            let name = job["job_name"].as_str().expect("job_name").to_string();
            let targets = dir.join(format!("{name}.json"));
            std::fs::write(&targets, "[]").expect("targets file");
            let map = job.as_mapping_mut().expect("a scrape job");
            map.remove("static_configs");
            map.insert(
                "file_sd_configs".into(),
                serde_yaml::from_str(&format!(
                    "[{{files: [\"{}\"], refresh_interval: 1s}}]",
                    targets.display()
                ))
                .expect("file_sd_configs"),
            );
        }
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, serde_yaml::to_string(&config).unwrap()).expect("config");
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new(require("prometheus"))
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus");
        let mut prometheus = Prometheus {
            child: ChildGuard::new(child).stop_on_drop(Duration::from_secs(20)),
            addr,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Some(status) = prometheus.child.exit_status() {
                panic!("prometheus exited ({status}):\n{}", prometheus.log());
            }
            let ready = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
                && http_get(addr, "/-/ready").status == 200;
            if ready {
                return prometheus;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready within {READY_DEADLINE:?}:\n{}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Points scrape job `job` at `target` (atomically, for file discovery to pick up).
    fn set_target(&self, job: &str, target: SocketAddr) {
        let tmp = self.dir.join(format!("{job}.json.tmp"));
        std::fs::write(&tmp, format!(r#"[{{"targets": ["{target}"]}}]"#)).expect("targets");
        std::fs::rename(&tmp, self.dir.join(format!("{job}.json"))).expect("targets");
    }

    /// GET an API path; the JSON answer (Prometheus answers errors as JSON too).
    fn api(&self, path_and_query: &str) -> Value {
        let resp = http_get(self.addr, path_and_query);
        serde_json::from_str(&resp.body)
            .unwrap_or_else(|e| panic!("GET {path_and_query}: {} {e}: {}", resp.status, resp.body))
    }

    /// Evaluates `query` over `[start, now]` every second: `Ok(series count)` or the error.
    fn query_range(&self, query: &str, start: f64) -> Result<usize, String> {
        let answer = self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={:.3}&step=1",
            encode(query),
            unix_now()
        ));
        if answer["status"] != "success" {
            return Err(format!("{}: {}", answer["errorType"], answer["error"]));
        }
        Ok(answer["data"]["result"].as_array().map_or(0, Vec::len))
    }
}

/// Percent-encodes a query parameter value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The series selectors (`name` or `name{...}`) of ours and `up` in a PromQL expression.
fn selectors(expr: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(|c: char| is_ident(c)) {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
        let name = &tail[..end];
        let mut selector = name.to_string();
        let mut after = &tail[end..];
        if after.starts_with('{') {
            let close = after.find('}').map_or(after.len(), |i| i + 1);
            selector.push_str(&after[..close]);
            after = &after[close..];
        }
        // Not a label name inside `by (...)`, not a quoted value.
        let quoted = rest[..at].matches('"').count() % 2 == 1;
        if !quoted && (name.starts_with("flink_autoscale") || name == "up") {
            out.push(selector);
        }
        rest = after;
    }
    out
}

/// A dashboard expression as Prometheus runs it: Grafana's variables substituted.
fn as_promql(expr: &str) -> String {
    VARIABLES
        .iter()
        .fold(expr.to_string(), |e, (var, value)| e.replace(var, value))
}

#[test]
fn selectors_are_extracted_and_variables_substituted() {
    assert_eq!(
        selectors(
            r#"flink_autoscale:x:rate5m > 1 or (rate(flink_autoscale_a_total{k="up"}[5m]) == 0 and on (job, instance) up{job="j"} == 1)"#
        ),
        [
            "flink_autoscale:x:rate5m",
            r#"flink_autoscale_a_total{k="up"}"#,
            r#"up{job="j"}"#
        ]
    );
    assert_eq!(
        as_promql(r#"rate(x{job_id=~"$job_id"}[$__rate_interval])"#),
        r#"rate(x{job_id=~".*"}[30s])"#
    );
    assert_eq!(encode("a b{c=\"d\"}"), "a%20b%7Bc%3D%22d%22%7D");
}

/// Lints a daemon's exposition with `promtool check metrics`.
fn check_metrics(name: &str, text: &str) {
    use std::io::Write;
    let mut child = Command::new(require("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feeding promtool");
    let out = child.wait_with_output().expect("promtool check metrics");
    assert!(
        out.status.success(),
        "promtool check metrics on the {name}'s /metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_real_prometheus_evaluates_every_dashboard_query_and_rule() {
    let prom_dir = tempfile::tempdir().expect("temp dir");
    let prometheus = Prometheus::start(prom_dir.path());
    let start = unix_now();
    let walk = walkthrough::run(&mut |name, addr| {
        prometheus.set_target(&format!("flink-autoscale-{name}"), addr);
    });

    check_metrics("agent", &walk.agent.get("/metrics").body);
    check_metrics("coordinator", &walk.coordinator.get("/metrics").body);

    // Both targets up; every rule of the file loaded and evaluated without error.
    let expected_rules = rules().len();
    let deadline = Instant::now() + DATA_DEADLINE;
    let rule_groups = loop {
        let targets = prometheus.api("/api/v1/targets");
        let up = targets["data"]["activeTargets"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|t| t["health"] == "up").count());
        let groups = prometheus.api("/api/v1/rules")["data"]["groups"].clone();
        let all: Vec<&Value> = groups
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .collect();
        let healthy = all.iter().filter(|r| r["health"] == "ok").count();
        if up == 2 && healthy == expected_rules {
            break groups;
        }
        assert!(
            Instant::now() < deadline,
            "after {DATA_DEADLINE:?}: {up} of 2 targets up, {healthy} of {expected_rules} rules healthy:\n{}\n{}",
            serde_json::to_string_pretty(&targets["data"]).unwrap(),
            serde_json::to_string_pretty(&all).unwrap()
        );
        std::thread::sleep(Duration::from_secs(1));
    };

    // What must return data: every dashboard query, every recorded series, and every series
    // an alert reads (its expression itself is empty unless it fires, but must parse).
    let mut must_have_data: BTreeMap<String, String> = BTreeMap::new();
    let mut label_queries = Vec::new();
    for expr in expressions(&dashboard()) {
        if let Some(args) = expr
            .strip_prefix("label_values(")
            .and_then(|a| a.strip_suffix(')'))
        {
            label_queries.push(args.to_string());
        } else {
            must_have_data.insert(as_promql(&expr), format!("{DASHBOARD}: {expr}"));
        }
    }
    for rule in rule_groups
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
    {
        let name = rule["name"].as_str().expect("rule name");
        let query = rule["query"].as_str().expect("rule query");
        if rule["type"] == "recording" {
            must_have_data.insert(name.to_string(), format!("recording rule {name}"));
        } else {
            if let Err(e) = prometheus.query_range(query, start) {
                panic!("alert {name}: `{query}` does not evaluate: {e}");
            }
            for selector in selectors(query) {
                must_have_data
                    .entry(selector)
                    .or_insert_with(|| format!("read by alert {name}"));
            }
        }
    }
    let deadline = Instant::now() + DATA_DEADLINE;
    loop {
        let mut empty = Vec::new();
        for (query, source) in &must_have_data {
            match prometheus.query_range(query, start) {
                Ok(0) => empty.push(format!("{source}\n    `{query}` returned no data")),
                Ok(_) => {}
                Err(e) => panic!("{source}\n    `{query}` does not parse: {e}"),
            }
        }
        for args in &label_queries {
            let (metric, label) = args.rsplit_once(',').expect("label_values(metric, label)");
            let answer = prometheus.api(&format!(
                "/api/v1/label/{}/values?match[]={}&start={start:.3}",
                label.trim(),
                encode(&as_promql(metric.trim()))
            ));
            assert_eq!(
                answer["status"], "success",
                "label_values({args}): {answer}"
            );
            if answer["data"].as_array().is_none_or(Vec::is_empty) {
                empty.push(format!(
                    "{DASHBOARD}: label_values({args}) returned no values"
                ));
            }
        }
        if empty.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} queries returned no data within {DATA_DEADLINE:?}:\n  {}\nagent stderr:\n{}",
            empty.len(),
            empty.join("\n  "),
            walk.agent.stderr()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "prometheus evaluated {} queries with data and {} label queries",
        must_have_data.len(),
        label_queries.len()
    );
}
