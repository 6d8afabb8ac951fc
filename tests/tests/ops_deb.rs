//! The Debian packages: builds both `.deb` files with `cargo deb` (a release build) and
//! inspects them with `dpkg-deb -c`, `-I`, `-e` and `-x`: the binary, the unit (installed, not
//! enabled or started), the conffiles under /etc, the postinst that creates the system user.
//!
//! Needs cargo-deb (scripts/setup-ops.sh installs it) and dpkg-deb; without them, or with
//! `FLINK_AUTOSCALE_SKIP_DEB` set, the test prints `SKIPPED` and returns.

#[allow(dead_code)]
mod ops_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ops_support::{read_repo_file, repo_root, run, skip};

/// One entry of `dpkg-deb -c`: permissions and owner.
#[derive(Debug)]
struct Entry {
    mode: String,
    owner: String,
}

/// `dpkg-deb -c` output: path (without the leading `.`) → entry.
fn contents(deb: &Path) -> BTreeMap<String, Entry> {
    let (status, stdout, stderr) = run(Command::new("dpkg-deb").arg("-c").arg(deb));
    assert!(status.success(), "dpkg-deb -c {}: {stderr}", deb.display());
    stdout
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // mode owner size date time path [-> target]
            let path = fields.get(5)?.trim_start_matches('.').to_string();
            Some((
                path,
                Entry {
                    mode: fields[0].to_string(),
                    owner: fields[1].to_string(),
                },
            ))
        })
        .collect()
}

/// The control fields of `dpkg-deb -I`.
fn control_fields(deb: &Path) -> BTreeMap<String, String> {
    let (status, stdout, stderr) = run(Command::new("dpkg-deb").arg("-I").arg(deb));
    assert!(status.success(), "dpkg-deb -I {}: {stderr}", deb.display());
    stdout
        .lines()
        .filter_map(|l| {
            let (key, value) = l.trim().split_once(": ")?;
            (!key.contains(' ')).then(|| (key.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// Builds the package of `package` into `out`, returning the `.deb` path.
fn build_deb(package: &str, out: &Path) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // <target>/<profile>/deps/<test>: the release build shares the tests' target directory.
    let target_dir = exe.ancestors().nth(3).expect("target dir").to_path_buf();
    let (status, stdout, stderr) = run(Command::new("cargo")
        .current_dir(repo_root())
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["deb", "--fast", "-p", package, "--output"])
        .arg(out)
        .args(["--", "--locked"]));
    assert!(
        status.success(),
        "cargo deb -p {package} failed:\n{stdout}\n{stderr}"
    );
    std::fs::read_dir(out)
        .expect("output dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .unwrap_or_else(|| panic!("no {package}_*.deb in {}", out.display()))
}

fn check_package(short: &str) {
    let package = format!("flink-autoscale-{short}");
    let out = tempfile::tempdir().expect("temp dir");
    let deb = build_deb(&package, out.path());

    let files = contents(&deb);
    let expect = |path: &str, mode: &str| {
        let entry = files
            .get(path)
            .unwrap_or_else(|| panic!("{package}: {path} missing from {files:#?}"));
        assert_eq!(entry.mode, mode, "{package}: mode of {path}");
        assert!(
            entry.owner == "root/root" || entry.owner == "0/0",
            "{package}: owner of {path} is {}",
            entry.owner
        );
    };
    let unit = format!("/usr/lib/systemd/system/{package}.service");
    let config = format!("/etc/flink-autoscale/{short}.toml");
    let defaults = format!("/etc/default/{package}");
    expect(&format!("/usr/bin/{package}"), "-rwxr-xr-x");
    expect(&unit, "-rw-r--r--");
    expect(&config, "-rw-r-----");
    expect(&defaults, "-rw-r--r--");
    expect(
        &format!("/usr/share/doc/{package}/configuration.md"),
        "-rw-r--r--",
    );
    assert!(
        !files.keys().any(|p| p.contains(".wants/")),
        "{package}: the unit must not be enabled by a packaged .wants link"
    );

    let fields = control_fields(&deb);
    assert_eq!(fields.get("Package"), Some(&package), "{fields:?}");
    let depends = fields.get("Depends").cloned().unwrap_or_default();
    assert!(depends.contains("adduser"), "{package}: Depends: {depends}");

    // Maintainer scripts and conffiles.
    let control = tempfile::tempdir().expect("temp dir");
    let (status, _, stderr) = run(Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(control.path()));
    assert!(status.success(), "dpkg-deb -e: {stderr}");
    let conffiles = std::fs::read_to_string(control.path().join("conffiles")).unwrap_or_default();
    for path in [&config, &defaults] {
        assert!(
            conffiles.lines().any(|l| l.trim() == path),
            "{package}: {path} is not a conffile:\n{conffiles}"
        );
    }
    let postinst = std::fs::read_to_string(control.path().join("postinst"))
        .unwrap_or_else(|e| panic!("{package}: no postinst: {e}"));
    assert!(
        postinst.contains("adduser --system"),
        "{package}: postinst creates no system user:\n{postinst}"
    );
    assert!(
        !postinst.contains("#DEBHELPER#"),
        "{package}: the #DEBHELPER# token was not replaced"
    );
    // Installed, not enabled and not started: the only enable is the guarded re-enable of a
    // unit the administrator had enabled before an upgrade, and nothing starts it.
    assert!(
        !postinst.contains("deb-systemd-invoke $_dh_action")
            && !postinst.contains("deb-systemd-invoke start"),
        "{package}: postinst starts the unit:\n{postinst}"
    );
    if postinst.contains("deb-systemd-helper enable") {
        assert!(
            postinst.contains("was-enabled"),
            "{package}: postinst enables the unit unconditionally:\n{postinst}"
        );
    }
    for script in ["preinst", "postinst", "prerm", "postrm"] {
        let path = control.path().join(script);
        if path.exists() {
            let (status, _, stderr) = run(Command::new("sh").arg("-n").arg(&path));
            assert!(
                status.success(),
                "{package}: {script} is not valid sh: {stderr}"
            );
        }
    }

    check_maintainer_scripts(control.path(), &package);

    // The packaged files are the repository's.
    let tree = tempfile::tempdir().expect("temp dir");
    let (status, _, stderr) = run(Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(tree.path()));
    assert!(status.success(), "dpkg-deb -x: {stderr}");
    for (installed, source) in [
        (unit.clone(), format!("systemd/{package}.service")),
        (config.clone(), format!("packaging/{short}.toml")),
        (defaults.clone(), format!("systemd/{package}.default")),
    ] {
        let packaged = std::fs::read_to_string(tree.path().join(installed.trim_start_matches('/')))
            .unwrap_or_else(|e| panic!("{package}: {installed}: {e}"));
        assert_eq!(
            packaged,
            read_repo_file(&source),
            "{package}: {installed} differs from {source}"
        );
    }
    let binary_size = std::fs::metadata(tree.path().join(format!("usr/bin/{package}")))
        .map(|m| m.len())
        .unwrap_or(0);
    let deb_size = std::fs::metadata(&deb).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "{package}: {} ({deb_size} bytes), stripped binary {binary_size} bytes",
        deb.file_name().and_then(|n| n.to_str()).unwrap_or_default()
    );
}

/// The maintainer scripts in `dir` (as packaged, or the repository's templates) behave:
/// `postinst configure` creates the service user once and neither enables nor starts the
/// unit; `postrm purge` removes the state directory.
fn check_maintainer_scripts(dir: &Path, package: &str) {
    let fresh = run_maintainer_script(dir, "postinst", &["configure"], package, false);
    for wanted in [
        "addgroup --system --quiet flink-autoscale",
        "adduser --system --quiet --ingroup flink-autoscale",
    ] {
        assert!(
            fresh.iter().any(|call| call.starts_with(wanted)),
            "{package}: postinst configure did not run `{wanted} …`: {fresh:?}"
        );
    }
    let forbidden = [
        "deb-systemd-helper enable",
        "deb-systemd-invoke",
        "systemctl",
    ];
    for call in &fresh {
        assert!(
            !forbidden.iter().any(|f| call.starts_with(f)),
            "{package}: a fresh install must not enable or start the unit: {call}"
        );
    }
    let again = run_maintainer_script(dir, "postinst", &["configure"], package, true);
    assert!(
        !again
            .iter()
            .any(|c| c.starts_with("adduser") || c.starts_with("addgroup")),
        "{package}: postinst recreates an existing user: {again:?}"
    );
    let purge = run_maintainer_script(dir, "postrm", &["purge"], package, true);
    assert!(
        purge
            .iter()
            .any(|c| c == &format!("rm -rf /var/lib/private/{package} /var/lib/{package}")),
        "{package}: postrm purge keeps the state directory: {purge:?}"
    );
}

#[test]
fn maintainer_scripts_create_the_user_and_purge_state() {
    // The templates run as they are: `#DEBHELPER#` is a shell comment until cargo-deb fills it.
    let dir = repo_root().join("packaging/deb");
    for package in ["flink-autoscale-agent", "flink-autoscale-coordinator"] {
        check_maintainer_scripts(&dir, package);
    }
}

/// Runs a maintainer script with `sh` and a PATH of stubs that log their arguments, so it
/// touches nothing on this machine. `getent` answers as if the service user exists or not;
/// `deb-systemd-helper` answers as on a first install. Returns the logged calls.
fn run_maintainer_script(
    control: &Path,
    script: &str,
    args: &[&str],
    package: &str,
    user_exists: bool,
) -> Vec<String> {
    let stubs = tempfile::tempdir().expect("temp dir");
    let log = stubs.path().join("calls.log");
    let commands = [
        "getent",
        "addgroup",
        "adduser",
        "dpkg-statoverride",
        "chown",
        "chmod",
        "rm",
        "deb-systemd-helper",
        "deb-systemd-invoke",
        "systemctl",
    ];
    for command in commands {
        let status = match command {
            "getent" if !user_exists => "exit 2",
            "deb-systemd-helper" => {
                r#"case "$1 $2" in debian-installed*|"--quiet was-enabled") exit 1;; esac; exit 0"#
            }
            _ => "exit 0",
        };
        let path = stubs.path().join(command);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{command} $*\" >> '{}'\n{status}\n",
                log.display()
            ),
        )
        .expect("stub");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("stub mode");
    }
    let (status, stdout, stderr) = run(Command::new("/bin/sh")
        .arg(control.join(script))
        .args(args)
        .env_clear()
        .env("PATH", stubs.path())
        .env("DPKG_MAINTSCRIPT_PACKAGE", package));
    assert!(
        status.success(),
        "{package}: {script} {args:?} failed with stubbed commands:\n{stdout}{stderr}"
    );
    std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Why the packages cannot (or should not) be built here, if so.
fn reason_to_skip() -> Option<String> {
    // The release build takes minutes on a small machine; a developer loop may opt out.
    if std::env::var_os("FLINK_AUTOSCALE_SKIP_DEB").is_some() {
        return Some("FLINK_AUTOSCALE_SKIP_DEB is set".into());
    }
    if !ops_support::tool_available("dpkg-deb") {
        return Some("dpkg-deb is not installed".into());
    }
    let (status, _, _) = run(Command::new("cargo").args(["deb", "--version"]));
    if !status.success() {
        return Some("cargo-deb is not installed (scripts/setup-ops.sh installs it)".into());
    }
    None
}

#[test]
fn debian_packages_install_units_without_enabling_them() {
    if let Some(reason) = reason_to_skip() {
        return skip(
            "debian_packages_install_units_without_enabling_them",
            &reason,
        );
    }
    // One test for both packages: their release builds share most dependencies, so running
    // them one after the other in one target directory is the cheapest order.
    check_package("agent");
    check_package("coordinator");
}
