//! The `kubernetes-operator` realizer against a local HTTPS server standing in for the
//! Kubernetes API server, and a simulated JobManager for the in-place rescale. The server
//! records every request; the tests check each one exactly: method, path, content type,
//! merge-patch body, bearer token, and that the client verified the server's certificate
//! against the configured CA. No real API server runs here: this is the request and response
//! shape of the Kubernetes API documentation, not a live cluster.

#[allow(dead_code)]
mod ops_support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use flink_autoscale_agent::actuation::kubernetes::KubeAccess;
use flink_autoscale_agent::actuation::{
    ActuationError, AdaptiveScheduler, KubernetesOperator, Realizer,
};
use flink_autoscale_agent::control::config::KubernetesConfig;
use flink_autoscale_core::protocol::{Plan, Proposal, VertexProposal};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const NAMESPACE: &str = "flink-prod";
const DEPLOYMENT: &str = "orders-enrichment";
const TOKEN: &str = "service-account-token-1";
const PATH: &str =
    "/apis/flink.apache.org/v1beta1/namespaces/flink-prod/flinkdeployments/orders-enrichment";

/// One request as the API server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    content_type: Option<String>,
    authorization: Option<String>,
    body: String,
}

/// The stand-in API server: serves one FlinkDeployment at [`PATH`] over HTTPS, applies merge
/// patches to it (RFC 7386, objects merged, other values replaced) and records every request.
struct ApiServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    object: Arc<Mutex<Value>>,
    /// The server's CA, PEM.
    ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn answer(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    object: Arc<Mutex<Value>>,
) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("").to_string())
    };
    let (content_type, authorization) = (header("content-type"), header("authorization"));
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
        content_type: content_type.clone(),
        authorization: authorization.clone(),
        body: body.clone(),
    });
    if authorization.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return status(401, "Unauthorized", "Unauthorized");
    }
    if path != PATH {
        return status(
            404,
            "NotFound",
            "flinkdeployments.flink.apache.org not found",
        );
    }
    let mut current = object.lock().unwrap();
    match method.as_str() {
        "GET" => {}
        "PATCH" => {
            if content_type.as_deref() != Some("application/merge-patch+json") {
                return status(415, "UnsupportedMediaType", "unsupported media type");
            }
            let Ok(patch) = serde_json::from_str::<Value>(&body) else {
                return status(400, "BadRequest", "the body is not JSON");
            };
            let version = current["metadata"]["resourceVersion"].clone();
            if patch["metadata"]["resourceVersion"] != Value::Null
                && patch["metadata"]["resourceVersion"] != version
            {
                return status(409, "Conflict", "the object has been modified");
            }
            merge(&mut current, &patch);
            let next = version.as_str().unwrap().parse::<u64>().unwrap() + 1;
            current["metadata"]["resourceVersion"] = json!(next.to_string());
        }
        _ => return status(405, "MethodNotAllowed", "method not allowed"),
    }
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(current.to_string())))
        .unwrap()
}

impl ApiServer {
    async fn start(object: Value) -> ApiServer {
        let ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let certs = vec![ca.cert.der().clone()];
        let key = rustls::pki_types::PrivateKeyDer::try_from(ca.key_pair.serialize_der()).unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let object = Arc::new(Mutex::new(object));
        let (s, o) = (seen.clone(), object.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, s, o) = (acceptor.clone(), s.clone(), o.clone());
                tokio::spawn(async move {
                    // A client that does not trust the certificate ends the handshake.
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let (s, o) = (s.clone(), o.clone());
                        async move { Ok::<_, Infallible>(answer(req, s, o).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        ApiServer {
            addr,
            seen,
            object,
            ca_pem: ca.cert.pem(),
            task,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The simulated JobManager's job: its id and `(vertex id, parallelism)` in graph order.
fn sim_job(sim: &ops_support::Daemon) -> (String, Vec<(String, u32)>) {
    let overview: Value = serde_json::from_str(&sim.get("/jobs/overview").body).unwrap();
    let jid = overview["jobs"][0]["jid"].as_str().unwrap().to_string();
    let job: Value = serde_json::from_str(&sim.get(&format!("/jobs/{jid}")).body).unwrap();
    let vertices = job["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_string(),
                v["parallelism"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    (jid, vertices)
}

/// A proposal raising the second vertex from its parallelism to `to`.
fn proposal(jid: &str, vertices: &[(String, u32)], to: u32) -> (Proposal, Plan) {
    let proposal = Proposal {
        proposal_id: "k8s-1".into(),
        agent_id: "agent".into(),
        cluster_id: "cluster".into(),
        region: "region".into(),
        job_id: jid.into(),
        job_name: "orders-enrichment".into(),
        vertices: vertices
            .iter()
            .enumerate()
            .map(|(i, (id, p))| VertexProposal {
                id: id.clone(),
                name: id.clone(),
                slot_sharing_group: None,
                current_parallelism: *p,
                proposed_parallelism: if i == 1 { to } else { *p },
                evidence: None,
            })
            .collect(),
        checkpoint_state_bytes: None,
        slots_per_task_manager: 4,
        disk_bytes_per_task_manager: 1 << 30,
        current_task_managers: 3,
    };
    let plan = Plan {
        task_managers: 4,
        standby_task_managers: 0,
        parallelism: [(vertices[1].0.clone(), to)].into(),
    };
    (proposal, plan)
}

fn deployment(jid: &str, autoscaler: &str) -> Value {
    json!({
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": { "name": DEPLOYMENT, "namespace": NAMESPACE, "resourceVersion": "17" },
        "spec": {
            "flinkVersion": "v1_20",
            "flinkConfiguration": {
                "jobmanager.scheduler": "adaptive",
                "job.autoscaler.enabled": autoscaler,
                "pipeline.jobvertex-parallelism-overrides": "0a448493b4782967b150582570326227:3"
            },
            "job": { "jarURI": "local:///opt/flink/usrlib/orders.jar", "upgradeMode": "savepoint" }
        },
        "status": { "jobStatus": { "jobId": jid, "state": "RUNNING" } }
    })
}

/// A service-account directory (token, CA, namespace) trusting `ca_pem`.
fn service_account(dir: &Path, ca_pem: &str) -> KubernetesConfig {
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_pem).unwrap();
    std::fs::write(dir.join("namespace"), NAMESPACE).unwrap();
    KubernetesConfig {
        deployment: DEPLOYMENT.into(),
        service_account_dir: dir.to_path_buf(),
        ..KubernetesConfig::default()
    }
}

/// `KUBERNETES_SERVICE_HOST`/`PORT` as the kubelet sets them, pointing at `addr`.
fn pod_env(addr: SocketAddr) -> impl Fn(&str) -> Option<String> {
    move |name| match name {
        "KUBERNETES_SERVICE_HOST" => Some(addr.ip().to_string()),
        "KUBERNETES_SERVICE_PORT" => Some(addr.port().to_string()),
        _ => None,
    }
}

fn realizer(
    config: &KubernetesConfig,
    env: &dyn Fn(&str) -> Option<String>,
    jobmanager: SocketAddr,
) -> KubernetesOperator {
    let access = KubeAccess::resolve(config, env).expect("resolving the Kubernetes access");
    KubernetesOperator::new(
        access,
        &config.deployment,
        Duration::from_secs(5),
        AdaptiveScheduler::new(&format!("http://{jobmanager}"), Duration::from_secs(5)),
    )
    .expect("realizer")
}

/// Waits (bounded) until the simulated job's second vertex runs at `parallelism`.
fn wait_for_parallelism(sim: &ops_support::Daemon, parallelism: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if sim_job(sim).1[1].1 == parallelism {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flinkdeployment_is_patched_then_the_job_is_rescaled_in_place() {
    let sim = ops_support::start_simulator();
    let (jid, vertices) = sim_job(&sim);
    let from = vertices[1].1;
    let api = ApiServer::start(deployment(&jid, "false")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = service_account(dir.path(), &api.ca_pem);
    let realizer = realizer(&config, &pod_env(api.addr), sim.addr());
    assert_eq!(realizer.label(), "kubernetes-operator");

    let (proposal, plan) = proposal(&jid, &vertices, from + 2);
    let result = realizer.apply(&proposal, &plan).await;
    assert!(result.is_ok(), "{result:?}");

    let seen = api.seen();
    assert_eq!(seen.len(), 2, "a GET and a PATCH: {seen:#?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", PATH)
    );
    assert_eq!(
        (seen[1].method.as_str(), seen[1].path.as_str()),
        ("PATCH", PATH)
    );
    for s in &seen {
        assert_eq!(
            s.authorization.as_deref(),
            Some(&*format!("Bearer {TOKEN}"))
        );
    }
    assert_eq!(
        seen[1].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    // Every vertex at its approved parallelism, the unrelated override kept, the version read.
    let mut expected: Vec<String> = vertices
        .iter()
        .enumerate()
        .map(|(i, (id, p))| format!("{id}:{}", if i == 1 { from + 2 } else { *p }))
        .collect();
    expected.push("0a448493b4782967b150582570326227:3".into());
    expected.sort();
    let body: Value = serde_json::from_str(&seen[1].body).unwrap();
    assert_eq!(
        body,
        json!({
            "metadata": { "resourceVersion": "17" },
            "spec": { "flinkConfiguration": {
                "pipeline.jobvertex-parallelism-overrides": expected.join(",")
            } }
        })
    );
    let stored = api.object.lock().unwrap().clone();
    assert_eq!(
        stored["spec"]["flinkConfiguration"]["pipeline.jobvertex-parallelism-overrides"],
        json!(expected.join(","))
    );
    assert_eq!(
        stored["spec"]["job"]["upgradeMode"], "savepoint",
        "the rest of the spec is kept"
    );
    // And in place on the running job.
    assert!(
        tokio::task::block_in_place(|| wait_for_parallelism(&sim, from + 2)),
        "the simulated job did not reach parallelism {}",
        from + 2
    );

    // The token file is read for every request (the kubelet rotates it): a stale token is
    // refused by the server and the realizer says so without applying anything.
    std::fs::write(dir.path().join("token"), "rotated-elsewhere\n").unwrap();
    let (proposal, plan) = self::proposal(&jid, &sim_job(&sim).1, from + 3);
    match realizer.apply(&proposal, &plan).await {
        Err(ActuationError::Failed(m)) => assert!(m.contains("401"), "{m}"),
        other => panic!("expected a refusal of the credentials, got {other:?}"),
    }
    let last = api.seen().last().cloned().unwrap();
    assert_eq!(
        last.authorization.as_deref(),
        Some("Bearer rotated-elsewhere")
    );
    assert_eq!(last.method, "GET", "nothing was patched");
    assert_eq!(sim_job(&sim).1[1].1, from + 2, "nothing was applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_with_the_operators_autoscaler_enabled_is_refused() {
    let sim = ops_support::start_simulator();
    let (jid, vertices) = sim_job(&sim);
    let from = vertices[1].1;
    let api = ApiServer::start(deployment(&jid, "true")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = service_account(dir.path(), &api.ca_pem);
    let realizer = realizer(&config, &pod_env(api.addr), sim.addr());
    let (proposal, plan) = proposal(&jid, &vertices, from + 2);
    match realizer.apply(&proposal, &plan).await {
        Err(ActuationError::Failed(reason)) => {
            assert!(
                reason.contains(
                    "FlinkDeployment flink-prod/orders-enrichment has job.autoscaler.enabled: true"
                ) && reason.contains("two autoscalers must not fight"),
                "{reason}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let seen = api.seen();
    assert_eq!(seen.len(), 1, "only the GET: {seen:#?}");
    assert_eq!(seen[0].method, "GET");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(sim_job(&sim).1[1].1, from, "nothing applied in place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_outside_the_configured_ca_gets_no_request() {
    let api = ApiServer::start(deployment("j", "false")).await;
    let other_ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = service_account(dir.path(), &other_ca.cert.pem());
    // The JobManager is never reached: a closed port proves it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let realizer = realizer(&config, &pod_env(api.addr), closed);
    let vertices = vec![("aa".to_string(), 1), ("bb".to_string(), 1)];
    let (proposal, plan) = proposal("j", &vertices, 2);
    match realizer.apply(&proposal, &plan).await {
        Err(ActuationError::RetryLater(m)) => {
            assert!(m.to_lowercase().contains("certificate"), "{m}")
        }
        other => panic!("expected a handshake failure, got {other:?}"),
    }
    assert!(api.seen().is_empty(), "no request reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_context_reaches_the_api_with_its_ca_token_and_namespace() {
    let sim = ops_support::start_simulator();
    let (jid, vertices) = sim_job(&sim);
    let api = ApiServer::start(deployment(&jid, "false")).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_data = base64::engine::general_purpose::STANDARD.encode(&api.ca_pem);
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            r#"apiVersion: v1
kind: Config
current-context: local
clusters:
  - name: other
    cluster: {{ server: "https://192.0.2.1:6443" }}
  - name: kind
    cluster:
      server: https://{addr}
      certificate-authority-data: {ca_data}
users:
  - name: admin
    user:
      token: {TOKEN}
contexts:
  - name: local
    context: {{ cluster: kind, user: admin, namespace: {NAMESPACE} }}
"#,
            addr = api.addr
        ),
    )
    .unwrap();
    let config = KubernetesConfig {
        deployment: DEPLOYMENT.into(),
        kubeconfig: Some(kubeconfig.clone()),
        ..KubernetesConfig::default()
    };
    let realizer = realizer(&config, &|_| None, sim.addr());
    let (proposal, plan) = proposal(&jid, &vertices, vertices[1].1 + 1);
    let result = realizer.apply(&proposal, &plan).await;
    assert!(result.is_ok(), "{result:?}");
    let seen = api.seen();
    assert_eq!(
        seen.iter()
            .map(|s| (s.method.as_str(), s.path.as_str()))
            .collect::<Vec<_>>(),
        [("GET", PATH), ("PATCH", PATH)]
    );

    // A context naming a user that does not exist: a clear error naming the key.
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    std::fs::write(&kubeconfig, text.replace("user: admin", "user: nobody")).unwrap();
    let error = KubeAccess::resolve(&config, &|_| None)
        .err()
        .expect("an error");
    assert_eq!(error.key, "control.kubernetes.kubeconfig");
    assert!(
        error.message.contains("no user named \"nobody\""),
        "{}",
        error.message
    );
}

#[test]
fn outside_a_pod_without_a_kubeconfig_the_error_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = KubernetesConfig {
        deployment: DEPLOYMENT.into(),
        service_account_dir: dir.path().join("serviceaccount"),
        ..KubernetesConfig::default()
    };
    let error = KubeAccess::resolve(&config, &|_| None)
        .err()
        .expect("an error");
    assert_eq!(error.key, "control.kubernetes.service_account_dir");
    assert!(error.message.contains("not in a pod"), "{}", error.message);
}

/// `check-config` loads the service account's files: outside a pod it fails naming the key;
/// with a token, a CA and an API server it passes.
#[test]
fn check_config_loads_the_kubernetes_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let sa = dir.path().join("serviceaccount");
    let config = dir.path().join("agent.toml");
    let write = |api_url: &str| {
        std::fs::write(
            &config,
            format!(
                r#"[control]
realizer = "kubernetes-operator"
state_file = "{state}"
disk_bytes_per_task_manager = 1000000000

[control.kubernetes]
deployment = "{DEPLOYMENT}"
service_account_dir = "{sa}"
{api_url}
"#,
                state = dir.path().join("state.json").display(),
                sa = sa.display(),
            ),
        )
        .unwrap()
    };
    let check = || {
        ops_support::run(
            std::process::Command::new(ops_support::binary(ops_support::AGENT_BIN))
                .args(["check-config", "--config"])
                .arg(&config)
                .env_remove("KUBERNETES_SERVICE_HOST"),
        )
    };
    write("");
    let (status, _, stderr) = check();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("control.kubernetes.service_account_dir")
            && stderr.contains("not in a pod"),
        "{stderr}"
    );
    std::fs::create_dir(&sa).unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    service_account(&sa, "not a certificate");
    let (status, _, stderr) = check();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ca.crt"), "{stderr}");
    service_account(&sa, &ca.cert.pem());
    let (status, _, stderr) = check();
    assert_eq!(status.code(), Some(2), "no API server known: {stderr}");
    assert!(stderr.contains("control.kubernetes.api_url"), "{stderr}");
    write(r#"api_url = "https://127.0.0.1:6443""#);
    let (status, stdout, stderr) = check();
    assert!(status.success(), "{stdout}{stderr}");
}
