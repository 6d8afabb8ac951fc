//! Builds a binary of this workspace (for example `flink-autoscale-agent`) so that a real-Flink
//! test can run it as users do. Cargo only provides `CARGO_BIN_EXE_*` for the test's own
//! package, so the test builds it with the same profile into the same target dir.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::HarnessError;

const STEP: &str = "build a workspace binary";
/// A cold build of the agent on 2 busy cores takes minutes.
const BUILD_TIMEOUT: Duration = Duration::from_secs(900);

/// Runs `cargo build -p <package> --bin <bin>` and returns the binary's path.
pub async fn build_workspace_bin(package: &str, bin: &str) -> Result<PathBuf, HarnessError> {
    let profile_dir = profile_dir()?;
    let release = profile_dir
        .file_name()
        .is_some_and(|name| name == "release");
    let target_dir = profile_dir.parent().ok_or_else(|| {
        HarnessError::new(STEP, format!("{} has no parent", profile_dir.display()))
    })?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = tokio::process::Command::new(&cargo);
    command
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if release {
        command.arg("--release");
    }
    let output = tokio::time::timeout(BUILD_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            HarnessError::new(
                STEP,
                format!(
                    "cargo build -p {package} took over {} s",
                    BUILD_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|e| HarnessError::new(STEP, format!("cannot run {cargo:?}: {e}")))?;
    if !output.status.success() {
        return Err(HarnessError::new(
            STEP,
            format!(
                "cargo build -p {package} --bin {bin} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            ),
        ));
    }
    let path = profile_dir.join(bin);
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarnessError::new(
            STEP,
            format!(
                "cargo build succeeded but {} does not exist",
                path.display()
            ),
        ))
    }
}

/// `<target>/<profile>`: a test executable lives in `<target>/<profile>/deps/`, a binary of
/// this package (a benchmark) in `<target>/<profile>/`.
fn profile_dir() -> Result<PathBuf, HarnessError> {
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError::new(STEP, format!("cannot locate the test executable: {e}")))?;
    let dir = exe.parent().ok_or_else(|| {
        HarnessError::new(
            STEP,
            format!("unexpected test executable path {}", exe.display()),
        )
    })?;
    let dir = if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    Ok(dir.to_path_buf())
}
