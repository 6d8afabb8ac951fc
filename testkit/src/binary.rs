//! Where the workspace's binaries are. Cargo sets `CARGO_BIN_EXE_<name>` only for the
//! binaries of a test's own package; every other binary is found in the target directory the
//! running test (or tool) was built into. Nothing here builds: `scripts/test.sh` runs
//! `cargo build --workspace --bins` once before the tests.

use std::path::{Path, PathBuf};

use crate::Error;

/// The path of workspace binary `name` (`flink-autoscale-agent`, `flink-autoscale-coordinator`,
/// `flink-sim`, …) in the same target directory and profile as the running executable, or in
/// `$CARGO_TARGET_DIR/<profile>`. A missing binary is an error that names the command to run.
pub fn binary(name: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::NoTargetDir {
        exe: "the running executable".into(),
        why: e.to_string(),
    })?;
    let profile_dir = profile_dir(&exe)?;
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let mut looked_in = vec![profile_dir.join(&file)];
    if let (Some(target), Some(profile)) = (
        std::env::var_os("CARGO_TARGET_DIR"),
        profile_dir.file_name(),
    ) {
        let candidate = Path::new(&target).join(profile).join(&file);
        if !looked_in.contains(&candidate) {
            looked_in.push(candidate);
        }
    }
    if let Some(found) = looked_in.iter().find(|path| path.is_file()) {
        return Ok(found.clone());
    }
    let release = profile_dir.file_name().is_some_and(|p| p == "release");
    Err(Error::MissingBinary {
        name: name.to_owned(),
        looked_in,
        command: format!(
            "cargo build --workspace --bins --locked{}",
            if release { " --release" } else { "" }
        ),
    })
}

/// `<target>/<profile>`: a test executable lives in `<target>/<profile>/deps/`, a binary
/// (a benchmark, the demo) in `<target>/<profile>/`.
fn profile_dir(exe: &Path) -> Result<PathBuf, Error> {
    let dir = exe.parent().ok_or_else(|| Error::NoTargetDir {
        exe: exe.display().to_string(),
        why: "it has no parent directory".into(),
    })?;
    let dir = match dir.file_name() {
        Some(name) if name == "deps" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_executable_and_a_binary_share_the_profile_dir() {
        assert_eq!(
            profile_dir(Path::new("/t/debug/deps/api-0123abcd")).unwrap(),
            Path::new("/t/debug")
        );
        assert_eq!(
            profile_dir(Path::new("/t/release/bench-collect")).unwrap(),
            Path::new("/t/release")
        );
    }

    #[test]
    fn a_missing_binary_names_the_build_command() {
        let err = binary("no-such-binary-anywhere").unwrap_err().to_string();
        assert!(
            err.contains("no-such-binary-anywhere is not built"),
            "{err}"
        );
        assert!(
            err.contains("cargo build --workspace --bins --locked"),
            "{err}"
        );
    }
}
