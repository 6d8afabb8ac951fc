//! `check-config` and `run` agree: every configuration `check-config` refuses, `run` refuses
//! with the same setting before binding, and every one it passes, `run` serves with. Covers
//! the examples of the hostile probe (a bad log filter, a SQLite file in a missing directory,
//! out-of-range sizes and durations, token files others can read or that never end) and the
//! environment (a non-UTF-8 variable that is not ours is ignored; one of ours is named).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use flink_autoscale_testkit::{write_private, Daemon};

const BIN: &str = env!("CARGO_BIN_EXE_flink-autoscale-coordinator");
const AGENT: &str = "agent-token-0123456789abcdef";

/// A coordinator file on loopback with SQLite and a private token file in `dir`.
fn base_config(dir: &Path) -> String {
    let tokens = dir.join("agent.tokens");
    write_private(&tokens, &format!("{AGENT}\n")).unwrap();
    format!(
        "listen = \"127.0.0.1:0\"\nlog_level = \"warn\"\n[database]\nurl = \"sqlite:{}\"\n[auth]\nagent_tokens_file = \"{}\"\n",
        dir.join("c.db").display(),
        tokens.display()
    )
}

fn command(sub: &str, config: &Path, env: &[(&str, &OsStr)]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([sub, "--config"])
        .arg(config)
        .envs(env.iter().copied());
    cmd
}

/// `run` on a configuration expected to be refused: exit 2, nothing bound or announced.
fn run_refused(config: &Path, env: &[(&str, &OsStr)]) -> Output {
    let mut child = command("run", config, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("run kept running on a configuration check-config refuses");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `run` on a configuration expected to work: it serves, then exits 0 on SIGTERM.
fn run_serves(config: &Path, env: &[(&str, &OsStr)]) -> String {
    let mut daemon = Daemon::start(
        "coordinator",
        &mut command("run", config, env),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("run refused what check-config passed: {e}"));
    assert_eq!(daemon.get("/healthz").status, 200);
    let status = daemon
        .stop(Duration::from_secs(15))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    daemon.stderr()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_non_utf8_environment_variable_is_ignored_unless_it_is_ours() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, base_config(dir.path())).unwrap();
    let bad = OsStr::from_bytes(b"\xff");

    let unrelated = [("UNRELATED_VAR", bad)];
    let out = command("check-config", &config, &unrelated)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    run_serves(&config, &unrelated);

    for var in [
        "FLINK_AUTOSCALE_COORDINATOR__LOG_LEVEL",
        "FLINK_AUTOSCALE_COORDINATOR_LISTEN",
    ] {
        let ours = [(var, bad)];
        let checked = command("check-config", &config, &ours).output().unwrap();
        for out in [checked, run_refused(&config, &ours)] {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{var}: {err}");
            assert!(err.contains(var) && err.contains("UTF-8"), "{var}: {err}");
        }
    }
}

#[test]
fn check_config_refuses_exactly_what_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_config(dir.path());
    let readable = dir.path().join("readable.tokens");
    std::fs::write(&readable, format!("{AGENT}\n")).unwrap();
    std::fs::set_permissions(
        &readable,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let tokens_line = format!(
        "agent_tokens_file = \"{}\"",
        dir.path().join("agent.tokens").display()
    );
    let sqlite_line = format!("url = \"sqlite:{}\"", dir.path().join("c.db").display());
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace("log_level = \"warn\"", "log_level = \"nonsense==\""),
            "log_level",
        ),
        (
            base.replace(&sqlite_line, "url = \"sqlite:/nonexistent/dir/c.db\""),
            "database.url",
        ),
        (
            format!("max_body_bytes = 99999999999999\n{base}"),
            "max_body_bytes",
        ),
        (
            format!("shutdown_grace_seconds = 99999999999\n{base}"),
            "shutdown_grace",
        ),
        (
            format!("shutdown_grace = \"5min\"\n{base}"),
            "shutdown_grace",
        ),
        (
            format!("open_action_timeout_seconds = 0\n{base}"),
            "open_action_timeout",
        ),
        (
            base.replace(
                &tokens_line,
                &format!("agent_tokens_file = \"{}\"", readable.display()),
            ),
            "auth.agent_tokens_file",
        ),
        (
            base.replace(&tokens_line, "agent_tokens_file = \"/dev/zero\""),
            "auth.agent_tokens_file",
        ),
    ];
    for (file, setting) in cases {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, &file).unwrap();
        let started = Instant::now();
        let checked = command("check-config", &config, &[]).output().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{file}: too slow"
        );
        let ran = run_refused(&config, &[]);
        for (what, out) in [("check-config", &checked), ("run", &ran)] {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} {setting}: {err}");
            assert!(err.contains(setting), "{what} {setting}: {err}");
        }
        assert!(
            ran.stdout.is_empty(),
            "run announced itself on a bad configuration"
        );
    }

    // The old spellings, the opt-out: both accept them and say so.
    let relaxed = format!(
        "shutdown_grace_seconds = 3\n{}",
        base.replace(
            &tokens_line,
            &format!(
                "agent_tokens_file = \"{}\"\nallow_readable_token_files = true",
                readable.display()
            )
        )
    );
    let config = dir.path().join("relaxed.toml");
    std::fs::write(&config, relaxed).unwrap();
    let out = command("check-config", &config, &[]).output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: shutdown_grace_seconds is deprecated"),
        "{err}"
    );
    assert!(
        err.contains("warning: auth.allow_readable_token_files is on"),
        "{err}"
    );
    let logs = run_serves(&config, &[]);
    assert!(
        logs.contains("shutdown_grace_seconds is deprecated"),
        "{logs}"
    );
}
