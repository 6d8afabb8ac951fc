//! `flink-autoscale-whatif` as a user runs it, on every scenario shipped in
//! `simulator/scenarios/`: a short run with prediction on and off side by side. It must exit
//! 0, print the table, write one chart per setting that parses as XML (SVG) and a JSON file
//! whose figures are the printed table's. Bad input is a clear error with exit code 2.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The binary, built by `scripts/test.sh` (`cargo build --workspace --bins`).
fn whatif_binary() -> PathBuf {
    flink_autoscale_testkit::binary("flink-autoscale-whatif").unwrap_or_else(|e| panic!("{e}"))
}

/// The table's cells by row name, one per setting.
fn table_rows(stdout: &str) -> Vec<(String, Vec<String>)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| |"))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            (cells[0].clone(), cells[1..].to_vec())
        })
        .collect()
}

fn row<'a>(rows: &'a [(String, Vec<String>)], name: &str) -> &'a [String] {
    &rows
        .iter()
        .find(|r| r.0 == name)
        .unwrap_or_else(|| panic!("no row {name:?}"))
        .1
}

#[test]
fn the_command_runs_every_shipped_scenario_and_its_files_match_its_table() {
    let bin = whatif_binary();
    let scenarios = repo().join("simulator/scenarios");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&scenarios)
        .expect("scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 8, "{names:?}");
    // Fleet-sized scenarios (load tests of the agent) are refused with a clear error.
    let fleet = repo().join("simulator/scenarios/fleet-10k.toml");
    let out = Command::new(&bin)
        .arg("--scenario")
        .arg(&fleet)
        .output()
        .expect("the command runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("10000 jobs"), "{stderr}");
    names.retain(|p| p != &fleet);
    for scenario in names {
        let out_dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new(&bin)
            .arg("--scenario")
            .arg(&scenario)
            .args([
                "--days",
                "0.1",
                "--compare",
                "flink-autoscale.prediction.enabled=false",
                "--out",
            ])
            .arg(out_dir.path())
            .output()
            .expect("the command runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}\n{stdout}",
            scenario.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out_dir.path().join("whatif.json")).expect("whatif.json written"),
        )
        .expect("whatif.json is JSON");
        let settings = json["settings"].as_array().expect("settings");
        assert_eq!(settings.len(), 2, "{}", scenario.display());
        let charts = json["charts"].as_array().expect("charts");
        assert_eq!(charts.len(), 2);
        for chart in charts {
            let text =
                std::fs::read_to_string(chart.as_str().expect("path")).expect("chart written");
            let doc = roxmltree::Document::parse(&text)
                .unwrap_or_else(|e| panic!("{chart}: not XML: {e}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            assert!(doc.descendants().filter(|n| n.has_tag_name("path")).count() >= 3);
        }
        let rows = table_rows(&stdout);
        for (i, f) in settings.iter().enumerate() {
            let num = |k: &str| f[k].as_f64().unwrap_or_else(|| panic!("{k} in {f}"));
            let checks = [
                (
                    "rescales per day",
                    format!("{:.2}", num("rescales_per_day")),
                ),
                ("subtask-hours", format!("{:.1}", num("subtask_hours"))),
                (
                    "static peak-sized, subtask-hours",
                    format!("{:.1}", num("static_subtask_hours")),
                ),
                (
                    "saving vs static peak-sized",
                    format!("{:.1} %", 100.0 * num("saving")),
                ),
                (
                    "oracle, subtask-hours",
                    format!("{:.1}", num("oracle_subtask_hours")),
                ),
                (
                    "ratio to the best plan",
                    format!("{:.2}", num("ratio_to_best_plan")),
                ),
                ("max lag (s of input)", format!("{:.1}", num("max_lag_s"))),
                ("p99 lag (s of input)", format!("{:.1}", num("p99_lag_s"))),
                (
                    "rescales, day by day",
                    f["rescales_by_day"]
                        .as_array()
                        .expect("rescales_by_day")
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                (
                    "minutes above the target utilization",
                    format!("{}", num("minutes_above_target_utilization")),
                ),
                (
                    "decisions on a confident forecast",
                    format!("{:.0} %", 100.0 * num("forecast_used_share")),
                ),
            ];
            for (name, expected) in checks {
                assert_eq!(
                    row(&rows, name)[i],
                    expected,
                    "{}: {name}",
                    scenario.display()
                );
            }
            // Every rescale counted in the table is in the log, with its reasons.
            let log = f["rescale_log"].as_array().expect("rescale_log");
            assert!(log.len() as f64 >= num("rescales"), "{f}");
            for r in log {
                assert!(
                    r["reasons"].as_array().is_some_and(|a| !a.is_empty()),
                    "{r}"
                );
            }
            // The baselines come from the model: the oracle never exceeds the best plan,
            // which never exceeds the static peak-sized job.
            let best = f["best_plan"]["subtask_hours"].as_f64().expect("best plan");
            assert!(
                num("oracle_subtask_hours") <= best + 1e-6
                    && best <= num("static_subtask_hours") + 1e-6,
                "{f}"
            );
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let bin = whatif_binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let diurnal = repo().join("simulator/scenarios/diurnal.toml");
    let trace = dir.path().join("rates.csv");
    std::fs::write(&trace, "time_s,rate\n0,100\n0,200\n").expect("trace");
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec!["--scenario".into(), "/no/such.toml".into()],
            "/no/such.toml",
        ),
        (
            vec![
                "--scenario".into(),
                diurnal.display().to_string(),
                "--set".into(),
                "nokey".into(),
            ],
            "expected KEY=VALUE",
        ),
        (
            vec![
                "--scenario".into(),
                diurnal.display().to_string(),
                "--days".into(),
                "0".into(),
            ],
            "--days",
        ),
        (
            vec![
                "--scenario".into(),
                diurnal.display().to_string(),
                "--trace".into(),
                trace.display().to_string(),
            ],
            "time_s must increase",
        ),
    ];
    for (args, needle) in cases {
        let out = Command::new(&bin)
            .args(&args)
            .arg("--out")
            .arg(dir.path())
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Runs the command on the diurnal scenario with `args`, writing into `dir`; its JSON figures.
fn run_diurnal(args: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let out = Command::new(whatif_binary())
        .arg("--scenario")
        .arg(repo().join("simulator/scenarios/diurnal.toml"))
        .args(args)
        .arg("--out")
        .arg(dir)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(dir.join("whatif.json")).expect("json")).expect("JSON")
}

#[test]
fn a_recorded_trace_replaces_the_rate_curve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("rates.csv");
    // A flat 3,000 records/s: the static, oracle and best-plan baselines all agree.
    std::fs::write(&trace, "time_s,rate\n0,3000\n86400,3000\n").expect("trace");
    let trace = trace.to_str().expect("UTF-8 path");
    let json = run_diurnal(&["--trace", trace, "--days", "0.1"], dir.path());
    let f = &json["settings"][0];
    assert_eq!(f["oracle_subtask_hours"], f["static_subtask_hours"], "{f}");
}

#[test]
fn a_compared_key_replaces_the_same_key_set_for_every_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = run_diurnal(
        &[
            "--days",
            "0.05",
            "--set",
            "flink-autoscale.prediction.max-rescales-per-day=4",
            "--compare",
            "flink-autoscale.prediction.max-rescales-per-day=2",
        ],
        dir.path(),
    );
    let keys = |i: usize| json["settings"][i]["keys"].to_string();
    assert!(keys(0).contains("\"4\""), "{}", keys(0));
    assert!(
        keys(1).contains("\"2\"") && !keys(1).contains("\"4\""),
        "{}",
        keys(1)
    );
}
