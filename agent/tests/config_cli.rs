//! `check-config` and `run` agree: every configuration `check-config` refuses, `run` refuses
//! with the same key before binding, and every one it passes, `run` starts with. Includes the
//! environment (a non-UTF-8 variable that is not ours is ignored; one of ours is named) and
//! the files the configuration names (the coordinator's token file).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use flink_autoscale_testkit::Daemon;

const BIN: &str = env!("CARGO_BIN_EXE_flink-autoscale-agent");

/// A loopback port with nothing listening on it: the agent polls it and gets refused.
fn refused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A state file in `dir`; the JobManager and the listen address come from [`with_base_env`].
fn base_config(dir: &Path) -> String {
    format!(
        "[control]\nstate_file = \"{}\"\n",
        dir.join("state.json").display()
    )
}

/// The environment every run gets: loopback, a free port, a JobManager that refuses.
fn with_base_env(cmd: &mut Command, env: &[(&str, &OsStr)]) {
    cmd.env("FLINK_AUTOSCALE_AGENT__SERVER__LISTEN", "127.0.0.1:0")
        .env(
            "FLINK_AUTOSCALE_AGENT__JOBMANAGER__URL",
            format!("http://127.0.0.1:{}", refused_port()),
        )
        .envs(env.iter().copied());
}

fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn check_config(config: &Path, env: &[(&str, &OsStr)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["check-config", "--config"]).arg(config);
    with_base_env(&mut cmd, env);
    cmd.output().unwrap()
}

/// `run` on a configuration expected to be refused: it must exit 2 without binding.
fn run_refused(config: &Path, env: &[(&str, &OsStr)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--config"]).arg(config);
    with_base_env(&mut cmd, env);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("run kept running on a configuration check-config refuses");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `run` on a configuration expected to work: it must serve, then stop on SIGTERM with 0.
fn run_serves(config: &Path, env: &[(&str, &OsStr)]) {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--config"]).arg(config);
    with_base_env(&mut cmd, env);
    let mut agent = Daemon::start("agent", &mut cmd, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("run refused what check-config passed: {e}"));
    assert_eq!(agent.get("/healthz").status, 200);
    let status = agent
        .stop(Duration::from_secs(10))
        .expect("stops on SIGTERM");
    assert!(status.success(), "{status:?}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_non_utf8_environment_variable_is_ignored_unless_it_is_ours() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "agent.toml", &base_config(dir.path()), 0o600);
    let bad = OsStr::from_bytes(b"\xff");

    let unrelated = [("UNRELATED_VAR", bad)];
    let out = check_config(&config, &unrelated);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        text(&out.stderr)
    );
    run_serves(&config, &unrelated);

    let ours = [("FLINK_AUTOSCALE_AGENT__LOG__LEVEL", bad)];
    for out in [check_config(&config, &ours), run_refused(&config, &ours)] {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains("FLINK_AUTOSCALE_AGENT__LOG__LEVEL") && err.contains("UTF-8"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn check_config_refuses_exactly_what_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_config(dir.path());
    let token = write(dir.path(), "agent.token", "Zk3u9PqL0xW7yT2mB5nV8c\n", 0o600);
    let readable = write(
        dir.path(),
        "readable.token",
        "Zk3u9PqL0xW7yT2mB5nV8c\n",
        0o644,
    );
    let coordinator = |token_file: &Path| {
        format!(
            "[control.coordinator]\nurl = \"http://127.0.0.1:{}\"\ntoken_file = \"{}\"\n",
            refused_port(),
            token_file.display()
        )
    };
    let refused: Vec<(String, &str)> = vec![
        (
            coordinator(Path::new("/nonexistent/agent.token")),
            "control.coordinator.token_file",
        ),
        (coordinator(&readable), "control.coordinator.token_file"),
        (
            coordinator(Path::new("/dev/zero")),
            "control.coordinator.token_file",
        ),
        ("[log]\nlevel = \"nonsense==\"\n".into(), "log.level"),
        (
            "[server]\nshutdown_grace = \"99999999999s\"\n".into(),
            "server.shutdown_grace",
        ),
        (
            "[jobmanager]\nmax_response_bytes = 99999999999999\n".into(),
            "jobmanager.max_response_bytes",
        ),
    ];
    for (extra, key) in refused {
        let config = write(dir.path(), "bad.toml", &format!("{base}{extra}"), 0o600);
        let checked = check_config(&config, &[]);
        let ran = run_refused(&config, &[]);
        for (what, out) in [("check-config", &checked), ("run", &ran)] {
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what} {extra:?}: {}",
                text(&out.stderr)
            );
            let err = text(&out.stderr);
            assert!(err.contains(key), "{what} {extra:?}: {err}");
            assert!(
                out.stdout.is_empty() || what == "check-config",
                "{what} bound a port"
            );
        }
    }

    // The opt-out, a private file and the deprecated spelling: accepted by both, with
    // warnings where due.
    let relaxed = format!(
        "{base}{}allow_readable_token_file = true\n[control.gates]\nmin_interval_seconds = 60\n",
        coordinator(&readable)
    );
    let config = write(dir.path(), "relaxed.toml", &relaxed, 0o600);
    let out = check_config(&config, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: control.coordinator.allow_readable_token_file"),
        "{err}"
    );
    assert!(
        err.contains("warning: control.gates.min_interval_seconds is deprecated"),
        "{err}"
    );
    run_serves(&config, &[]);
    let good = write(
        dir.path(),
        "good.toml",
        &format!("{base}{}", coordinator(&token)),
        0o600,
    );
    let out = check_config(&good, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    run_serves(&good, &[]);
}
