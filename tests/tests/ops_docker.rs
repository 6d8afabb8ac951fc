//! The container images in `packaging/docker/`, checked without a Docker engine: the
//! Dockerfile's structure (multi-stage, minimal static base, numeric non-root user, the binary
//! as entrypoint), that every path it copies exists and survives its `.dockerignore`, that the
//! whole workspace reaches the build stage, and that the flags and port it uses are the
//! binary's real ones. Building and running the images needs a Docker engine, which these
//! machines lack (see packaging/README.md).

#[allow(dead_code)]
mod ops_support;

use std::path::Path;

use ops_support::{binary, cli_flags, read_repo_file, repo_root};

/// One Dockerfile instruction, continuation lines joined.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

fn parse_dockerfile(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(continued) = trimmed.strip_suffix('\\') {
            pending.push_str(continued);
            pending.push(' ');
            continue;
        }
        if !trimmed.starts_with('#') {
            pending.push_str(trimmed);
        }
        let (keyword, args) = pending
            .trim()
            .split_once(char::is_whitespace)
            .unwrap_or_else(|| panic!("instruction without arguments: {pending:?}"));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        });
        pending.clear();
    }
    assert!(pending.is_empty(), "dangling continuation: {pending:?}");
    out
}

/// The JSON (exec) form of ENTRYPOINT/CMD.
fn exec_form(args: &str) -> Vec<String> {
    serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("not the exec (JSON array) form: {args:?}: {e}"))
}

/// `--flag=value` options of COPY, then its sources and destination.
fn copy_parts(args: &str) -> (Vec<String>, Vec<String>, String) {
    let words: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    let (options, paths): (Vec<String>, Vec<String>) =
        words.into_iter().partition(|w| w.starts_with("--"));
    let (dest, sources) = paths.split_last().expect("COPY has a destination");
    (options, sources.to_vec(), dest.clone())
}

/// Whether `.dockerignore` (first `*`, then `!path` re-includes) keeps `source`.
fn kept_by_dockerignore(ignore: &str, source: &str) -> bool {
    let source = source.trim_end_matches('/');
    let mut kept = true;
    for rule in ignore.lines().map(str::trim) {
        if rule.is_empty() || rule.starts_with('#') {
            continue;
        }
        let (include, pattern) = match rule.strip_prefix('!') {
            Some(p) => (true, p.trim_end_matches('/')),
            None => (false, rule.trim_end_matches('/')),
        };
        let matches = pattern == "*"
            || source == pattern
            || source.starts_with(&format!("{pattern}/"))
            || pattern.starts_with("**/");
        if matches && !pattern.starts_with("**/") {
            kept = include;
        }
    }
    kept
}

fn workspace_members() -> Vec<String> {
    let manifest: toml::Table = read_repo_file("Cargo.toml")
        .parse()
        .expect("root Cargo.toml");
    manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| m.as_str().expect("member path").to_string())
        .collect()
}

fn check_image(short: &str, bin_name: &str) {
    let file = format!("packaging/docker/{short}.Dockerfile");
    let text = read_repo_file(&file);
    let ignore = read_repo_file(&format!("{file}.dockerignore"));
    let steps = parse_dockerfile(&text);
    let root = repo_root();

    // Stages: a build stage and a minimal, static final stage.
    let stages: Vec<(usize, &Instruction)> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.keyword == "FROM")
        .collect();
    assert!(
        stages.len() >= 2,
        "{file}: multi-stage (found {} FROM)",
        stages.len()
    );
    let stage_names: Vec<String> = stages
        .iter()
        .filter_map(|(_, s)| s.args.split_once(" AS ").map(|(_, n)| n.trim().to_string()))
        .collect();
    let (final_at, final_from) = stages.last().expect("a final stage");
    let base = final_from
        .args
        .split_whitespace()
        .next()
        .unwrap_or_default();
    assert!(
        base.starts_with("gcr.io/distroless/static") || base == "scratch",
        "{file}: final base {base} is not distroless/static or scratch"
    );
    let final_steps = &steps[*final_at..];

    // Every local COPY source exists and is sent in the build context.
    let mut copied_to: Vec<(String, String)> = Vec::new();
    for step in steps.iter().filter(|s| s.keyword == "COPY") {
        let (options, sources, dest) = copy_parts(&step.args);
        if let Some(stage) = options.iter().find_map(|o| o.strip_prefix("--from=")) {
            assert!(
                stage_names.iter().any(|n| n == stage),
                "{file}: COPY --from={stage} names no stage ({stage_names:?})"
            );
            let producer = steps
                .iter()
                .filter(|s| s.keyword == "RUN")
                .any(|s| sources.iter().all(|src| s.args.contains(src.as_str())));
            assert!(producer, "{file}: no RUN step produces {sources:?}");
        } else {
            for source in &sources {
                assert!(
                    root.join(source).exists(),
                    "{file}: COPY {source}: no such path in the repository"
                );
                assert!(
                    kept_by_dockerignore(&ignore, source),
                    "{file}: COPY {source} is excluded by {file}.dockerignore"
                );
            }
        }
        for source in sources {
            copied_to.push((source, dest.clone()));
        }
    }
    // Cargo needs every workspace member's manifest to load the workspace.
    for member in workspace_members() {
        assert!(
            copied_to
                .iter()
                .any(|(src, _)| src.trim_end_matches('/') == member),
            "{file}: workspace member {member} is not copied into the build stage"
        );
    }
    for manifest in ["Cargo.toml", "Cargo.lock"] {
        assert!(
            steps
                .iter()
                .any(|s| s.keyword == "COPY" && s.args.contains(manifest)),
            "{file}: {manifest} is not copied"
        );
    }
    let build = steps
        .iter()
        .find(|s| s.keyword == "RUN" && s.args.contains("cargo build"))
        .unwrap_or_else(|| panic!("{file}: no cargo build step"));
    for needle in [
        "--release".to_string(),
        "--locked".to_string(),
        format!("-p {bin_name}"),
        format!("--bin {bin_name}"),
    ] {
        assert!(
            build.args.contains(&needle),
            "{file}: cargo build lacks {needle}"
        );
    }

    // The toolchain is at least the workspace's rust-version.
    let manifest: toml::Table = read_repo_file("Cargo.toml")
        .parse()
        .expect("root Cargo.toml");
    let msrv = manifest["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("rust-version");
    let rust_arg = steps
        .iter()
        .find_map(|s| {
            (s.keyword == "ARG")
                .then(|| s.args.strip_prefix("RUST_VERSION="))
                .flatten()
        })
        .unwrap_or_else(|| panic!("{file}: ARG RUST_VERSION=<version>"));
    let version = |v: &str| -> Vec<u32> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    assert!(
        version(rust_arg) >= version(msrv),
        "{file}: Rust {rust_arg} is older than the workspace's rust-version {msrv}"
    );

    // Non-root, numerically (so Kubernetes can verify runAsNonRoot).
    let user = final_steps
        .iter()
        .rev()
        .find(|s| s.keyword == "USER")
        .unwrap_or_else(|| panic!("{file}: final stage sets no USER"));
    let uid: u32 = user
        .args
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("{file}: USER {} is not numeric", user.args));
    assert_ne!(uid, 0, "{file}: runs as root");

    // The entrypoint is the binary, copied into the final stage under its own name.
    let entrypoint = final_steps
        .iter()
        .find(|s| s.keyword == "ENTRYPOINT")
        .map(|s| exec_form(&s.args))
        .unwrap_or_else(|| panic!("{file}: no ENTRYPOINT"));
    assert_eq!(
        entrypoint.len(),
        1,
        "{file}: ENTRYPOINT is exactly the binary"
    );
    assert_eq!(
        Path::new(&entrypoint[0])
            .file_name()
            .and_then(|n| n.to_str()),
        Some(bin_name),
        "{file}: ENTRYPOINT"
    );
    assert!(
        copied_to.iter().any(|(_, dest)| *dest == entrypoint[0]),
        "{file}: nothing is copied to {}",
        entrypoint[0]
    );

    // The default command uses the binary's real subcommand, flags, config path and port.
    let cmd = final_steps
        .iter()
        .find(|s| s.keyword == "CMD")
        .map(|s| exec_form(&s.args))
        .unwrap_or_else(|| panic!("{file}: no CMD"));
    let exe = binary(bin_name);
    let flags = cli_flags(&exe, &cmd[0]);
    for flag in cmd.iter().filter(|w| w.starts_with("--")) {
        assert!(
            flags.contains(flag),
            "{file}: CMD passes {flag}; `{} --help` lists {flags:?}",
            cmd[0]
        );
    }
    let value_of = |flag: &str| {
        cmd.iter()
            .position(|w| w == flag)
            .and_then(|i| cmd.get(i + 1))
            .cloned()
    };
    let config = value_of("--config").unwrap_or_else(|| panic!("{file}: CMD has no --config"));
    assert!(
        copied_to
            .iter()
            .any(|(src, dest)| *dest == config && src == &format!("packaging/{short}.toml")),
        "{file}: --config {config} is not the packaged example config"
    );
    let listen = value_of("--listen").unwrap_or_else(|| panic!("{file}: CMD has no --listen"));
    let port = listen.rsplit(':').next().unwrap_or_default();
    let exposed: Vec<&str> = final_steps
        .iter()
        .filter(|s| s.keyword == "EXPOSE")
        .flat_map(|s| s.args.split_whitespace())
        .collect();
    assert!(
        exposed.iter().any(|e| e.trim_end_matches("/tcp") == port),
        "{file}: --listen port {port} is not EXPOSEd ({exposed:?})"
    );
    assert!(
        listen.starts_with("0.0.0.0:") || listen.starts_with("[::]:"),
        "{file}: --listen {listen} is unreachable from outside the container"
    );
}

#[test]
fn agent_image_is_static_non_root_and_runs_the_agent() {
    check_image("agent", ops_support::AGENT_BIN);
}

#[test]
fn coordinator_image_is_static_non_root_and_runs_the_coordinator() {
    check_image("coordinator", ops_support::COORDINATOR_BIN);
}

#[test]
fn dockerignore_matching_works() {
    let ignore = "*\n!agent/\n!packaging/agent.toml\n**/target/\n";
    assert!(kept_by_dockerignore(ignore, "agent"));
    assert!(kept_by_dockerignore(ignore, "agent/src/main.rs"));
    assert!(kept_by_dockerignore(ignore, "packaging/agent.toml"));
    assert!(!kept_by_dockerignore(ignore, "packaging/coordinator.toml"));
    assert!(!kept_by_dockerignore(ignore, "README.md"));
}
