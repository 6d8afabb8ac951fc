//! The Kubernetes manifests in `packaging/kubernetes/`: parsed with serde_yaml, then checked
//! against the real binaries. Statically: the agent is a native sidecar, probes hit
//! `/healthz` and `/readyz` on the port the daemon listens on, the scrape annotations name that
//! port, flags exist in `<binary> run --help`, volumes and ConfigMaps/PVCs resolve, and the
//! containers meet the `restricted` Pod Security Standard. Live: each daemon container is run
//! as its manifest says — ConfigMaps, Secrets and volumes materialised in a temporary
//! directory, the manifest's environment set — and its probe paths must answer 200, then it
//! must stop cleanly on SIGTERM within `terminationGracePeriodSeconds`.

#[allow(dead_code)]
mod ops_support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ops_support::{binary, cli_env_vars, cli_flags, repo_root, Daemon, AGENT_BIN, COORDINATOR_BIN};
use serde::Deserialize;
use serde_yaml::Value;

/// Every document of every manifest file, with the file it came from.
fn documents() -> Vec<(String, Value)> {
    let dir = repo_root().join("packaging/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    let mut docs = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).expect("manifest");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
            if !value.is_null() {
                docs.push((name.clone(), value));
            }
        }
    }
    docs
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(*key))
}

fn seq<'a>(v: &'a Value, path: &[&str]) -> Vec<&'a Value> {
    at(v, path)
        .and_then(Value::as_sequence)
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

/// A scalar as text (ports and annotations may be numbers or strings).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// All objects of the manifests, indexed by kind and name.
struct Manifests {
    docs: Vec<(String, Value)>,
}

impl Manifests {
    fn load() -> Manifests {
        let docs = documents();
        for (file, doc) in &docs {
            for key in ["apiVersion", "kind"] {
                assert!(doc.get(key).is_some(), "{file}: a document lacks {key}");
            }
            assert!(
                str_at(doc, &["metadata", "name"]).is_some(),
                "{file}: a {} lacks metadata.name",
                str_at(doc, &["kind"]).unwrap_or("?")
            );
        }
        Manifests { docs }
    }

    fn find(&self, kind: &str, name: &str) -> Option<&Value> {
        self.docs.iter().map(|(_, d)| d).find(|d| {
            str_at(d, &["kind"]) == Some(kind) && str_at(d, &["metadata", "name"]) == Some(name)
        })
    }

    /// Pod templates (and bare Pods) with the file they are in.
    fn pods(&self) -> Vec<(&str, &Value, &Value)> {
        self.docs
            .iter()
            .filter_map(|(file, doc)| {
                let pod = match str_at(doc, &["kind"])? {
                    "Pod" => doc,
                    "Deployment" | "StatefulSet" | "DaemonSet" => at(doc, &["spec", "template"])?,
                    _ => return None,
                };
                Some((file.as_str(), doc, pod))
            })
            .collect()
    }
}

/// A container of ours: which binary it runs and where it sits in the pod.
struct OurContainer<'a> {
    file: &'a str,
    pod: &'a Value,
    container: &'a Value,
    binary_name: &'static str,
    is_init: bool,
}

fn our_containers(manifests: &Manifests) -> Vec<OurContainer<'_>> {
    let mut found = Vec::new();
    for (file, _, pod) in manifests.pods() {
        for (list, is_init) in [("initContainers", true), ("containers", false)] {
            for container in seq(pod, &["spec", list]) {
                let image = str_at(container, &["image"]).unwrap_or_default();
                let repo = image.rsplit('/').next().unwrap_or_default();
                let repo = repo.split([':', '@']).next().unwrap_or_default();
                let binary_name = match repo {
                    AGENT_BIN => AGENT_BIN,
                    COORDINATOR_BIN => COORDINATOR_BIN,
                    _ => continue,
                };
                found.push(OurContainer {
                    file,
                    pod,
                    container,
                    binary_name,
                    is_init,
                });
            }
        }
    }
    found
}

impl OurContainer<'_> {
    fn name(&self) -> String {
        format!(
            "{}: container {}",
            self.file,
            str_at(self.container, &["name"]).unwrap_or("?")
        )
    }

    fn args(&self) -> Vec<String> {
        seq(self.container, &["args"])
            .into_iter()
            .map(text)
            .collect()
    }

    fn flag(&self, flag: &str) -> Option<String> {
        let args = self.args();
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1).cloned()
    }

    /// The port the daemon serves on, from its `--listen` flag.
    fn listen_port(&self) -> u16 {
        let listen = self
            .flag("--listen")
            .unwrap_or_else(|| panic!("{}: no --listen in args", self.name()));
        assert!(
            listen.starts_with("0.0.0.0:") || listen.starts_with("[::]:"),
            "{}: --listen {listen} is unreachable by probes and Prometheus",
            self.name()
        );
        listen
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}: bad --listen {listen}", self.name()))
    }

    /// Resolves a probe's port (a name or a number) to a number through the container ports.
    fn resolve_port(&self, port: &Value) -> u16 {
        if let Some(n) = port.as_u64() {
            return u16::try_from(n).expect("port");
        }
        let name = text(port);
        seq(self.container, &["ports"])
            .into_iter()
            .find(|p| str_at(p, &["name"]) == Some(name.as_str()))
            .and_then(|p| at(p, &["containerPort"])?.as_u64())
            .and_then(|n| u16::try_from(n).ok())
            .unwrap_or_else(|| panic!("{}: no container port named {name}", self.name()))
    }
}

#[test]
fn manifests_match_the_binaries() {
    let manifests = Manifests::load();
    let ours = our_containers(&manifests);
    for binary_name in [AGENT_BIN, COORDINATOR_BIN] {
        assert!(
            ours.iter().any(|c| c.binary_name == binary_name),
            "no manifest runs {binary_name}"
        );
    }
    for c in &ours {
        let name = c.name();
        let exe = binary(c.binary_name);
        let args = c.args();
        assert_eq!(
            args.first().map(String::as_str),
            Some("run"),
            "{name}: args start with `run`"
        );
        let flags = cli_flags(&exe, "run");
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                flags.contains(flag),
                "{name}: {flag} is not a flag of `run` ({flags:?})"
            );
        }

        if c.binary_name == AGENT_BIN {
            assert!(
                c.is_init,
                "{name}: the agent is a native sidecar (an init container)"
            );
            assert_eq!(
                str_at(c.container, &["restartPolicy"]),
                Some("Always"),
                "{name}: native sidecars need restartPolicy: Always"
            );
        }

        // Probes and scrape annotations point at the daemon's real port and paths.
        let port = c.listen_port();
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = at(c.container, &[probe, "httpGet"])
                .unwrap_or_else(|| panic!("{name}: no {probe}.httpGet"));
            assert_eq!(str_at(get, &["path"]), Some(path), "{name}: {probe} path");
            let probe_port = c.resolve_port(at(get, &["port"]).expect("probe port"));
            assert_eq!(probe_port, port, "{name}: {probe} port vs --listen");
        }
        let annotations = at(c.pod, &["metadata", "annotations"])
            .unwrap_or_else(|| panic!("{name}: the pod has no scrape annotations"));
        let annotation = |key: &str| at(annotations, &[key]).map(text);
        assert_eq!(
            annotation("prometheus.io/scrape").as_deref(),
            Some("true"),
            "{name}"
        );
        assert_eq!(
            annotation("prometheus.io/port"),
            Some(port.to_string()),
            "{name}"
        );
        assert_eq!(
            annotation("prometheus.io/path").as_deref(),
            Some("/metrics"),
            "{name}"
        );

        // Environment names the binary reads: clap's variables, or config overrides that
        // the live check below feeds through the real config loader.
        let known = cli_env_vars(&exe, "run");
        let prefix = format!("{}__", c.binary_name.replace('-', "_").to_ascii_uppercase());
        for env in seq(c.container, &["env"]) {
            let var = str_at(env, &["name"]).expect("env name");
            assert!(
                known.iter().any(|k| k == var) || var.starts_with(&prefix) || var == "RUST_LOG",
                "{name}: env {var} is neither a flag variable ({known:?}) nor {prefix}<SECTION>__<KEY>"
            );
        }

        // The restricted Pod Security Standard.
        let security = |key: &str| {
            at(c.container, &["securityContext", key])
                .or_else(|| at(c.pod, &["spec", "securityContext", key]))
        };
        assert_eq!(
            security("runAsNonRoot").and_then(Value::as_bool),
            Some(true),
            "{name}: runAsNonRoot"
        );
        assert_eq!(
            security("allowPrivilegeEscalation").and_then(Value::as_bool),
            Some(false),
            "{name}: allowPrivilegeEscalation"
        );
        assert_eq!(
            security("readOnlyRootFilesystem").and_then(Value::as_bool),
            Some(true),
            "{name}: readOnlyRootFilesystem"
        );
        let dropped: Vec<String> = at(c.container, &["securityContext", "capabilities", "drop"])
            .and_then(Value::as_sequence)
            .map(|s| s.iter().map(text).collect())
            .unwrap_or_default();
        assert!(
            dropped.iter().any(|d| d == "ALL"),
            "{name}: capabilities.drop [ALL]"
        );
        assert!(
            security("seccompProfile").is_some(),
            "{name}: a seccompProfile (RuntimeDefault)"
        );

        // Every mount resolves to a volume, and ConfigMaps and PVCs exist in the manifests.
        let volumes = seq(c.pod, &["spec", "volumes"]);
        for mount in seq(c.container, &["volumeMounts"]) {
            let volume_name = str_at(mount, &["name"]).expect("mount name");
            let volume = volumes
                .iter()
                .find(|v| str_at(v, &["name"]) == Some(volume_name))
                .unwrap_or_else(|| panic!("{name}: mount {volume_name} has no volume"));
            if let Some(cm) = str_at(volume, &["configMap", "name"]) {
                let config_map = manifests
                    .find("ConfigMap", cm)
                    .unwrap_or_else(|| panic!("{name}: ConfigMap {cm} is not in the manifests"));
                if let Some(key) = str_at(mount, &["subPath"]) {
                    assert!(
                        at(config_map, &["data", key]).is_some(),
                        "{name}: ConfigMap {cm} has no key {key}"
                    );
                }
            }
            if let Some(claim) = str_at(volume, &["persistentVolumeClaim", "claimName"]) {
                assert!(
                    manifests.find("PersistentVolumeClaim", claim).is_some(),
                    "{name}: PVC {claim} is not in the manifests"
                );
            }
        }
        let config = c
            .flag("--config")
            .unwrap_or_else(|| panic!("{name}: no --config"));
        assert!(
            seq(c.container, &["volumeMounts"])
                .iter()
                .filter_map(|m| str_at(m, &["mountPath"]))
                .any(|m| config == m || config.starts_with(&format!("{m}/"))),
            "{name}: --config {config} is not on a mounted volume"
        );
    }
}

#[test]
fn services_target_declared_ports() {
    let manifests = Manifests::load();
    for (file, service) in manifests
        .docs
        .iter()
        .filter(|(_, d)| str_at(d, &["kind"]) == Some("Service"))
    {
        let selector = at(service, &["spec", "selector"]).expect("selector");
        let pods: Vec<&Value> = manifests
            .pods()
            .into_iter()
            .map(|(_, _, pod)| pod)
            .filter(|pod| {
                selector.as_mapping().is_some_and(|m| {
                    m.iter().all(|(k, v)| {
                        at(pod, &["metadata", "labels"]).and_then(|l| l.get(k)) == Some(v)
                    })
                })
            })
            .collect();
        assert!(
            !pods.is_empty(),
            "{file}: a Service selects no pod template"
        );
        for port in seq(service, &["spec", "ports"]) {
            let target = at(port, &["targetPort"])
                .or_else(|| at(port, &["port"]))
                .expect("port");
            let declared = pods.iter().any(|pod| {
                ["initContainers", "containers"].iter().any(|list| {
                    seq(pod, &["spec", list]).iter().any(|c| {
                        seq(c, &["ports"]).iter().any(|p| {
                            at(p, &["containerPort"]) == Some(target)
                                || at(p, &["name"]) == Some(target)
                        })
                    })
                })
            });
            assert!(
                declared,
                "{file}: Service port {target:?} matches no container port"
            );
        }
    }
}

/// A container's filesystem view in a temporary directory: every mount path prefixed.
struct Sandbox {
    root: tempfile::TempDir,
    mounts: Vec<String>,
}

/// The file mode Kubernetes gives a Secret volume's files: its `defaultMode`, else 0644.
/// Kubernetes reads manifests as YAML 1.1, where `0440` is octal; serde_yaml reads 440, so the
/// digits are taken as octal digits.
fn secret_mode(volume: &Value) -> u32 {
    let digits = match at(volume, &["secret", "defaultMode"]) {
        None => return 0o644,
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => panic!("defaultMode {other:?}"),
    };
    u32::from_str_radix(&digits, 8).expect("an octal defaultMode")
}

impl Sandbox {
    /// Writes ConfigMap keys, a distinct token file for every path the config names under a
    /// Secret mount, and empty directories for other volumes.
    fn materialise(manifests: &Manifests, c: &OurContainer, closed_port: u16) -> Sandbox {
        let root = tempfile::tempdir().expect("temp dir");
        let volumes = seq(c.pod, &["spec", "volumes"]);
        let mut mounts = Vec::new();
        let mut secret_dirs = Vec::new();
        for mount in seq(c.container, &["volumeMounts"]) {
            let mount_path = str_at(mount, &["mountPath"])
                .expect("mountPath")
                .to_string();
            let volume_name = str_at(mount, &["name"]).expect("mount name");
            let volume = volumes
                .iter()
                .find(|v| str_at(v, &["name"]) == Some(volume_name))
                .expect("volume");
            let host = root.path().join(mount_path.trim_start_matches('/'));
            if let Some(cm) = str_at(volume, &["configMap", "name"]) {
                let data = at(
                    manifests.find("ConfigMap", cm).expect("ConfigMap"),
                    &["data"],
                )
                .and_then(Value::as_mapping)
                .expect("ConfigMap data");
                match str_at(mount, &["subPath"]) {
                    Some(key) => {
                        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
                        std::fs::write(&host, text(data.get(key).expect("key"))).unwrap();
                    }
                    None => {
                        std::fs::create_dir_all(&host).unwrap();
                        for (key, value) in data {
                            std::fs::write(host.join(text(key)), text(value)).unwrap();
                        }
                    }
                }
            } else {
                std::fs::create_dir_all(&host).unwrap();
                if at(volume, &["secret"]).is_some() {
                    secret_dirs.push((mount_path.clone(), secret_mode(volume)));
                }
            }
            mounts.push(mount_path);
        }
        // Longest first, so /a/b is rewritten before /a.
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        let sandbox = Sandbox { root, mounts };
        // Secrets are created by the operator: make up one distinct token per named file.
        let configs: String = sandbox
            .mounts
            .iter()
            .map(|m| sandbox.root.path().join(m.trim_start_matches('/')))
            .filter(|p| p.is_file())
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        for (dir, mode) in &secret_dirs {
            for (i, word) in configs
                .split(|ch: char| ch == '"' || ch.is_whitespace())
                .filter(|w| w.starts_with(&format!("{dir}/")))
                .enumerate()
            {
                let file = sandbox.root.path().join(word.trim_start_matches('/'));
                std::fs::write(&file, format!("ops-test-secret-{i}-0123456789abcdef\n")).unwrap();
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode)).unwrap();
            }
        }
        // Config files name paths inside the container: point them into the sandbox.
        for mount in &sandbox.mounts {
            let path = sandbox.root.path().join(mount.trim_start_matches('/'));
            if path.is_file() {
                let text = std::fs::read_to_string(&path).unwrap();
                let rewritten = loopback_only(&sandbox.rewrite(&text), closed_port);
                std::fs::write(&path, rewritten).unwrap();
            }
        }
        sandbox
    }

    /// Prefixes every whole mount path in `text` (not `/etc/xy` for mount `/etc/x`) with the
    /// sandbox root; the longest mount wins.
    fn rewrite(&self, text: &str) -> String {
        let root = self.root.path().display().to_string();
        let is_path_char = |ch: char| ch.is_ascii_alphanumeric() || "._-/".contains(ch);
        let mut out = String::new();
        let mut rest = text;
        while let Some(ch) = rest.chars().next() {
            let at_boundary = !out.chars().next_back().is_some_and(is_path_char);
            let mount = self.mounts.iter().find(|m| {
                rest.starts_with(m.as_str())
                    && !rest[m.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c != '/' && is_path_char(c))
            });
            match mount {
                Some(m) if at_boundary => {
                    out.push_str(&root);
                    out.push_str(m);
                    rest = &rest[m.len()..];
                }
                _ => {
                    out.push(ch);
                    rest = &rest[ch.len_utf8()..];
                }
            }
        }
        out
    }
}

/// Points every http(s) URL at a host other than loopback to `127.0.0.1:<closed_port>`,
/// where nothing listens: the test never sends traffic off this machine (a coordinator
/// address in a ConfigMap, for example, becomes an unreachable coordinator).
fn loopback_only(text: &str, closed_port: u16) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_len = after
            .find(|c: char| c == '/' || c == '"' || c == '\'' || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_len];
        let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
        if matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
            out.push_str(authority);
        } else {
            out.push_str(&format!("127.0.0.1:{closed_port}"));
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    out
}

/// Environment the manifest gives the container; optional Secret references are absent (as
/// when the Secret does not exist), downward-API fields get a placeholder.
fn manifest_env(c: &OurContainer) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in seq(c.container, &["env"]) {
        let name = str_at(var, &["name"]).expect("env name").to_string();
        if let Some(value) = at(var, &["value"]) {
            env.insert(name, text(value));
        } else if let Some(field) = str_at(var, &["valueFrom", "fieldRef", "fieldPath"]) {
            env.insert(
                name,
                format!("test-{}", field.replace(['.', '\'', '[', ']', '/'], "-")),
            );
        } else if at(var, &["valueFrom", "secretKeyRef", "optional"]).and_then(Value::as_bool)
            != Some(true)
        {
            panic!(
                "{}: env {name} needs a Secret the test cannot invent",
                c.name()
            );
        }
    }
    env
}

#[test]
fn containers_start_and_answer_their_probes_as_specified() {
    let manifests = Manifests::load();
    let sim = ops_support::start_simulator();
    for c in our_containers(&manifests) {
        let name = c.name();
        // A loopback port nothing listens on, for addresses outside this machine.
        let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let sandbox = Sandbox::materialise(&manifests, &c, closed_port);
        // Loopback only: a free port instead of the pod's, the simulator as JobManager.
        let mut args: Vec<String> = c.args().iter().map(|a| sandbox.rewrite(a)).collect();
        for (flag, value) in [
            ("--listen", "127.0.0.1:0".to_string()),
            ("--jobmanager", format!("http://{}", sim.addr())),
        ] {
            if let Some(at) = args.iter().position(|a| a == flag) {
                args[at + 1] = value;
            }
        }
        let mut cmd = Command::new(binary(c.binary_name));
        cmd.args(&args).current_dir(sandbox.root.path());
        for (key, value) in manifest_env(&c) {
            cmd.env(key, loopback_only(&sandbox.rewrite(&value), closed_port));
        }
        let mut daemon = Daemon::start(&name, &mut cmd, Duration::from_secs(30)).expect("start");
        for (probe, want) in [("livenessProbe", 200), ("readinessProbe", 200)] {
            let path = str_at(c.container, &[probe, "httpGet", "path"]).expect("probe path");
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut status = daemon.get(path).status;
            while status != want && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                status = daemon.get(path).status;
            }
            assert_eq!(
                status,
                want,
                "{name}: {probe} {path}; stderr:\n{}",
                daemon.stderr()
            );
        }
        let grace = at(c.pod, &["spec", "terminationGracePeriodSeconds"])
            .and_then(Value::as_u64)
            .unwrap_or(30);
        let status = daemon
            .stop(Duration::from_secs(grace))
            .unwrap_or_else(|| panic!("{name}: still running {grace} s after SIGTERM"));
        assert!(
            status.success(),
            "{name}: exit {status} after SIGTERM:\n{}",
            daemon.stderr()
        );
    }
}

#[test]
fn sandbox_rewrites_only_mount_paths() {
    let sandbox = Sandbox {
        root: tempfile::tempdir().unwrap(),
        mounts: vec!["/etc/x/tokens".into(), "/etc/x".into()],
    };
    let root = sandbox.root.path().display().to_string();
    assert_eq!(
        sandbox.rewrite("a=/etc/x/tokens/t b=/etc/x/c.toml c=/var/y"),
        format!("a={root}/etc/x/tokens/t b={root}/etc/x/c.toml c=/var/y")
    );
    assert_eq!(sandbox.rewrite("/etc/xy /var/etc/x"), "/etc/xy /var/etc/x");
}

#[test]
fn only_loopback_urls_survive() {
    assert_eq!(
        loopback_only(
            r#"url = "http://coordinator:8470" jm = "http://127.0.0.1:8081/x""#,
            9
        ),
        r#"url = "http://127.0.0.1:9" jm = "http://127.0.0.1:8081/x""#
    );
    assert_eq!(
        loopback_only("postgres://db.example/x", 9),
        "postgres://127.0.0.1:9/x"
    );
}

/// `agent-rbac.yaml`: what the `kubernetes-operator` realizer sends (a GET and a PATCH of one
/// FlinkDeployment), allowed in one namespace and nothing more.
#[test]
fn the_agent_rbac_allows_get_and_patch_on_flinkdeployments_in_its_namespace_only() {
    let manifests = Manifests::load();
    let rbac: Vec<&Value> = manifests
        .docs
        .iter()
        .filter(|(file, _)| file == "agent-rbac.yaml")
        .map(|(_, d)| d)
        .collect();
    let kinds: Vec<&str> = rbac.iter().filter_map(|d| str_at(d, &["kind"])).collect();
    assert_eq!(
        kinds,
        ["Role", "RoleBinding"],
        "agent-rbac.yaml: no cluster-wide grant"
    );
    let role = manifests
        .find("Role", "flink-autoscale-agent")
        .expect("the Role");
    let namespace = str_at(role, &["metadata", "namespace"]).expect("a namespaced Role");
    let rules = seq(role, &["rules"]);
    assert_eq!(rules.len(), 1, "one rule");
    let list = |key: &str| -> Vec<String> {
        let mut v: Vec<String> = seq(rules[0], &[key]).iter().map(|x| text(x)).collect();
        v.sort();
        v
    };
    assert_eq!(list("apiGroups"), ["flink.apache.org"]);
    assert_eq!(list("resources"), ["flinkdeployments"]);
    assert_eq!(list("verbs"), ["get", "patch"]);
    let binding = manifests
        .find("RoleBinding", "flink-autoscale-agent")
        .expect("the RoleBinding");
    assert_eq!(str_at(binding, &["metadata", "namespace"]), Some(namespace));
    assert_eq!(str_at(binding, &["roleRef", "kind"]), Some("Role"));
    assert_eq!(
        str_at(binding, &["roleRef", "name"]),
        Some("flink-autoscale-agent")
    );
    let subjects = seq(binding, &["subjects"]);
    assert_eq!(subjects.len(), 1);
    assert_eq!(str_at(subjects[0], &["kind"]), Some("ServiceAccount"));
    assert_eq!(str_at(subjects[0], &["namespace"]), Some(namespace));
}
