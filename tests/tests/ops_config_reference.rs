//! `docs/configuration.md` against the binaries. The keys each configuration accepts are read
//! from the real binaries: `check-config` on a file with an unknown key makes the strict
//! parser list the keys it expects, section by section. The page must list exactly those keys;
//! its defaults must be valid (and, for the agent, equal to `Config::default()`); its
//! environment variables and flags must exist, and every flag and variable of `run` must be
//! on the page.

#[allow(dead_code)]
mod ops_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use ops_support::{
    binary, cli_env_vars, cli_flags, read_repo_file, run, AGENT_BIN, COORDINATOR_BIN,
};

const PAGE: &str = "docs/configuration.md";

/// A probe key no configuration has.
const PROBE: &str = "zz_reference_probe";

/// One row of a binary's table on the page.
#[derive(Debug)]
struct Row {
    key: String,
    /// A TOML literal, or `None` for "unset".
    default: Option<String>,
    env: Option<String>,
    flag: Option<String>,
}

/// The text of the first `code span` in a cell, if any.
fn code(cell: &str) -> Option<String> {
    let start = cell.find('`')? + 1;
    let len = cell[start..].find('`')?;
    Some(cell[start..start + len].to_string())
}

/// The rows of the table under `## \`<binary>\``.
fn rows(page: &str, binary_name: &str) -> Vec<Row> {
    let heading = format!("## `{binary_name}`");
    let section = page
        .split_once(&heading)
        .unwrap_or_else(|| panic!("{PAGE}: no heading {heading}"))
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let rows: Vec<Row> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 6, "{PAGE}: a row needs 6 cells: {line}");
            Row {
                key: code(cells[0]).expect("key"),
                default: (cells[2] != "unset")
                    .then(|| code(cells[2]).unwrap_or_else(|| panic!("{PAGE}: default of {line}"))),
                env: code(cells[3]),
                flag: code(cells[4]),
            }
        })
        .collect();
    assert!(!rows.is_empty(), "{PAGE}: no table rows for {binary_name}");
    rows
}

/// The keys `check-config` accepts, found by probing each table with an unknown key: the
/// strict parser answers "unknown field ..., expected one of `a`, `b`". A key whose probe
/// gets another answer is a leaf (a value, or a free-form table).
fn accepted_keys(exe: &Path, dir: &Path, path: &[String], out: &mut BTreeSet<String>) {
    let file = dir.join("probe.toml");
    let header = if path.is_empty() {
        String::new()
    } else {
        format!("[{}]\n", path.join("."))
    };
    std::fs::write(&file, format!("{header}{PROBE} = 1\n")).expect("probe file");
    let (_, stdout, stderr) = run(Command::new(exe)
        .args(["check-config", "--config"])
        .arg(&file));
    let answer = format!("{stdout}{stderr}");
    let children = match answer.split_once(&format!("unknown field `{PROBE}`, ")) {
        Some((_, rest)) => {
            let line = rest.lines().next().unwrap_or_default();
            line.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        }
        None => {
            assert!(
                !path.is_empty(),
                "{}: no unknown-field error for a top-level probe:\n{answer}",
                exe.display()
            );
            out.insert(path.join("."));
            return;
        }
    };
    for child in children {
        let mut child_path = path.to_vec();
        child_path.push(child);
        accepted_keys(exe, dir, &child_path, out);
    }
}

/// A TOML file that sets each documented default (dotted keys under their tables), leaving
/// out keys of optional sections (`optional(key)`), which need other keys to be valid.
fn defaults_file(rows: &[Row], optional: &dyn Fn(&str) -> bool) -> String {
    let mut top = String::new();
    let mut tables: Vec<(String, String)> = Vec::new();
    for row in rows.iter().filter(|r| !optional(&r.key)) {
        let Some(value) = &row.default else { continue };
        match row.key.rsplit_once('.') {
            None => top.push_str(&format!("{} = {value}\n", row.key)),
            Some((table, key)) => match tables.iter_mut().find(|(t, _)| t == table) {
                Some((_, body)) => body.push_str(&format!("{key} = {value}\n")),
                None => tables.push((table.to_string(), format!("{key} = {value}\n"))),
            },
        }
    }
    let mut text = top;
    for (table, body) in tables {
        text.push_str(&format!("\n[{table}]\n{body}"));
    }
    text
}

/// Parses one TOML value literal.
fn literal(text: &str) -> toml::Value {
    let mut table: toml::Table = format!("v = {text}")
        .parse()
        .unwrap_or_else(|e| panic!("{PAGE}: default {text} is not a TOML value: {e}"));
    table.remove("v").expect("v")
}

fn check_binary(
    binary_name: &str,
    token_env: &[(String, String)],
    optional: &dyn Fn(&str) -> bool,
) -> Vec<Row> {
    let page = read_repo_file(PAGE);
    let rows = rows(&page, binary_name);
    let exe = binary(binary_name);
    let dir = tempfile::tempdir().expect("temp dir");

    // Same keys in the code and on the page.
    let mut accepted = BTreeSet::new();
    accepted_keys(&exe, dir.path(), &[], &mut accepted);
    let documented: BTreeSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let undocumented: Vec<&String> = accepted.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "{PAGE} vs {binary_name}: accepted but not documented {undocumented:?}; documented but unknown {unknown:?}"
    );

    // The documented defaults form a valid configuration.
    let file = dir.path().join("defaults.toml");
    std::fs::write(&file, defaults_file(&rows, optional)).expect("defaults file");
    let (status, stdout, stderr) = run(Command::new(&exe)
        .args(["check-config", "--config"])
        .arg(&file)
        .envs(token_env.iter().cloned()));
    assert!(
        status.success(),
        "{PAGE}: {binary_name} rejects the documented defaults:\n{stdout}{stderr}"
    );

    // Flags and variables: the page names only real ones, and all of them.
    let flags = cli_flags(&exe, "run");
    let vars = cli_env_vars(&exe, "run");
    for row in &rows {
        if let Some(flag) = &row.flag {
            assert!(
                flags.contains(flag),
                "{PAGE}: {} names flag {flag}, unknown to `run` ({flags:?})",
                row.key
            );
        }
    }
    for flag in flags
        .iter()
        .filter(|f| !["--help", "--version", "--config"].contains(&f.as_str()))
    {
        assert!(
            rows.iter().any(|r| r.flag.as_ref() == Some(flag)),
            "{PAGE}: `{binary_name} run` has {flag}, which the page does not list"
        );
    }
    for var in &vars {
        assert!(
            page.contains(&format!("`{var}`")),
            "{PAGE}: {binary_name} reads {var}, which the page does not name"
        );
    }
    rows
}

/// The agent's defaults as TOML; optional sections (`Option<…>` in the code) are absent.
fn agent_defaults() -> toml::Table {
    toml::Value::try_from(flink_autoscale_agent::config::Config::default())
        .expect("serialize defaults")
        .try_into()
        .expect("a table")
}

/// The default of a dotted key, if the defaults have it.
fn lookup(defaults: &toml::Table, key: &str) -> Option<toml::Value> {
    let mut parts = key.split('.');
    let first = defaults.get(parts.next()?);
    parts
        .fold(first, |v, part| v.and_then(|v| v.get(part)))
        .cloned()
}

#[test]
fn agent_reference_matches_the_code() {
    let defaults = agent_defaults();
    // A key whose table is absent from the defaults belongs to an optional section.
    let optional = |key: &str| {
        key.rsplit_once('.')
            .is_some_and(|(table, _)| lookup(&defaults, table).is_none())
    };
    let rows = check_binary(AGENT_BIN, &[], &optional);
    let exe = binary(AGENT_BIN);

    // Variables follow FLINK_AUTOSCALE_AGENT__<SECTION>__<KEY>, and the loader knows each.
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("empty config");
    for row in &rows {
        let derived = format!(
            "FLINK_AUTOSCALE_AGENT__{}",
            row.key.replace('.', "__").to_ascii_uppercase()
        );
        let env = row
            .env
            .clone()
            .unwrap_or_else(|| panic!("{PAGE}: {} has no variable", row.key));
        if env.ends_with("__<OPTION>") {
            assert_eq!(
                env,
                format!("{derived}__<OPTION>"),
                "{PAGE}: variable of {}",
                row.key
            );
            continue;
        }
        assert_eq!(env, derived, "{PAGE}: variable of {}", row.key);
        let Some(value) = row.default.as_ref().filter(|_| !optional(&row.key)) else {
            continue;
        };
        let raw = match literal(value) {
            toml::Value::String(s) => s,
            other => other.to_string(),
        };
        let (status, stdout, stderr) = run(Command::new(&exe)
            .args(["check-config", "--config"])
            .arg(&empty)
            .env(&env, &raw));
        assert!(
            status.success(),
            "{PAGE}: {env}={raw} is rejected:\n{stdout}{stderr}"
        );
    }

    // The documented defaults are the real ones (within their section, for optional ones).
    for row in rows.iter().filter(|r| !optional(&r.key)) {
        let real = lookup(&defaults, &row.key);
        let documented = row.default.as_deref().map(literal);
        let same = match (&real, &documented) {
            (Some(toml::Value::String(a)), Some(toml::Value::String(b))) => {
                use flink_autoscale_agent::config::parse_duration;
                a == b || matches!((parse_duration(a), parse_duration(b)), (Ok(x), Ok(y)) if x == y)
            }
            (a, b) => a == b,
        };
        assert!(
            same,
            "{PAGE}: {} default is documented as {documented:?}, the code has {real:?}",
            row.key
        );
    }
}

#[test]
fn coordinator_reference_matches_the_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The coordinator refuses to validate without tokens, and its default SQLite directory is
    // the unit's StateDirectory=, absent here: both come from the environment.
    let tokens = dir.path().join("agent-tokens");
    flink_autoscale_testkit::write_private(&tokens, &format!("{}\n", ops_support::AGENT_TOKEN))
        .expect("tokens");
    let base_env = vec![
        (
            "FLINK_AUTOSCALE_COORDINATOR__AUTH__AGENT_TOKENS_FILE".to_string(),
            tokens.display().to_string(),
        ),
        (
            "FLINK_AUTOSCALE_COORDINATOR__DATABASE__URL".to_string(),
            format!("sqlite:{}", dir.path().join("c.db").display()),
        ),
    ];
    let rows = check_binary(COORDINATOR_BIN, &base_env, &|_| false);
    let exe = binary(COORDINATOR_BIN);
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("empty config");
    // Variables follow FLINK_AUTOSCALE_COORDINATOR__<SECTION>__<KEY>, and the loader knows each.
    for row in &rows {
        let derived = format!(
            "FLINK_AUTOSCALE_COORDINATOR__{}",
            row.key.replace('.', "__").to_ascii_uppercase()
        );
        let env = row
            .env
            .clone()
            .unwrap_or_else(|| panic!("{PAGE}: {} has no variable", row.key));
        assert_eq!(env, derived, "{PAGE}: variable of {}", row.key);
        let Some(value) = &row.default else { continue };
        if base_env.iter().any(|(k, _)| *k == env) {
            continue;
        }
        let raw = match literal(value) {
            toml::Value::String(s) => s,
            other => other.to_string(),
        };
        let (status, stdout, stderr) = run(Command::new(&exe)
            .args(["check-config", "--config"])
            .arg(&empty)
            .envs(base_env.iter().cloned())
            .env(&env, &raw));
        assert!(
            status.success(),
            "{PAGE}: {env}={raw} is rejected:\n{stdout}{stderr}"
        );
        assert!(
            !stderr.contains("warning"),
            "{PAGE}: {env}={raw} is warned about:\n{stderr}"
        );
    }
}

#[test]
fn rows_are_parsed() {
    let page = "## `x`\n\n| Key | Type | Default | Environment variable | Flag | Meaning |\n|---|---|---|---|---|---|\n| `a.b` | integer | `4` | `X__A__B` | — | m |\n| `c` | path | unset | `X_C` | `--c` | m |\n\n## `y`\n";
    let rows = rows(page, "x");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].default.as_deref(), Some("4"));
    assert_eq!(rows[0].flag, None);
    assert_eq!(rows[1].default, None);
    assert_eq!(rows[1].flag.as_deref(), Some("--c"));
    assert_eq!(defaults_file(&rows, &|_| false), "\n[a]\nb = 4\n");
    assert_eq!(defaults_file(&rows, &|k| k == "a.b"), "");
}
