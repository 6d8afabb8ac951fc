//! `kubernetes-operator`: for jobs the Flink Kubernetes Operator manages. A parallelism that
//! lives only in the running job is lost at the operator's next upgrade, so the approved
//! parallelism is first written durably into the job's `FlinkDeployment`, then applied in
//! place as the adaptive-scheduler realizer does.
//!
//! The write is a JSON merge patch (`application/merge-patch+json`) of
//! `spec.flinkConfiguration["pipeline.jobvertex-parallelism-overrides"]` (`vid:p,…`, every
//! vertex of the job, earlier entries for other vertices kept), carrying the
//! `metadata.resourceVersion` it read so that a concurrent change makes the API server answer
//! 409 instead of being overwritten. A deployment whose own autoscaler is enabled
//! (`job.autoscaler.enabled: true`) is refused: two autoscalers must not fight.
//!
//! Requests, as the Kubernetes API documents them (custom resources of group
//! `flink.apache.org`, version `v1beta1`, plural `flinkdeployments`):
//! - `GET /apis/flink.apache.org/v1beta1/namespaces/<ns>/flinkdeployments/<name>`: 200 with the
//!   object (`metadata.resourceVersion`, `spec.flinkConfiguration`, `status.jobStatus.jobId`).
//! - `PATCH` on the same path with `Content-Type: application/merge-patch+json`: 200 with the
//!   patched object.
//! - Errors are a `Status` object (`{"kind": "Status", "status": "Failure", "message": …,
//!   "reason": "NotFound" | "Forbidden" | "Conflict" | "Invalid" | …, "code": …}`).
//!
//! Credentials: the pod's service account (token re-read for every request, since the kubelet
//! rotates projected tokens; the CA and namespace from the same directory; the API server from
//! `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`), or a kubeconfig's current context for
//! local use. Tested against a local HTTPS server that checks each request; it has not run
//! against a live cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use flink_autoscale_core::protocol::{Plan, Proposal};
use flink_autoscale_shared::files::{read_bounded, read_text_bounded, MAX_FILE_BYTES};
use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};

use super::payload::{overrides_value, OVERRIDES_KEY};
use super::{full_parallelism, Actuation, ActuationError, AdaptiveScheduler, Realizer};
use crate::config::ConfigError;
use crate::control::config::KubernetesConfig;
use crate::control::http_client::{
    client_tls, roots_from_pem, trusted_roots, ClientIdentity, HttpAnswer, HttpError, JsonClient,
};
use crate::daemon::clock::BoxFuture;

/// The operator's own autoscaler switch, in the deployment's Flink configuration.
const OPERATOR_AUTOSCALER_KEY: &str = "job.autoscaler.enabled";
const MERGE_PATCH: &str = "application/merge-patch+json";

/// How the agent reaches the Kubernetes API, resolved from `[control.kubernetes]`.
pub struct KubeAccess {
    /// `https://host:port`, no trailing slash.
    pub server: String,
    pub namespace: String,
    auth: KubeAuth,
    roots: rustls::RootCertStore,
    identity: Option<ClientIdentity>,
}

/// The bearer token, if any.
enum KubeAuth {
    /// Re-read for every request (projected service-account tokens rotate).
    TokenFile(PathBuf),
    Token(String),
    /// Client certificate only.
    None,
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message: message.into(),
    }
}

impl KubeAccess {
    /// Resolves and loads every file `config` names (so `check-config` checks them); `env`
    /// reads the process environment (`KUBERNETES_SERVICE_HOST`/`PORT`).
    pub fn resolve(
        config: &KubernetesConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<KubeAccess, ConfigError> {
        let mut access = match &config.kubeconfig {
            Some(path) => from_kubeconfig(path)?,
            None => from_service_account(&config.service_account_dir, env)?,
        };
        if let Some(url) = &config.api_url {
            access.server = url.trim_end_matches('/').to_string();
        }
        if let Some(ns) = &config.namespace {
            access.namespace = ns.clone();
        }
        let key = if config.namespace.is_some() {
            "control.kubernetes.namespace"
        } else if config.kubeconfig.is_some() {
            "control.kubernetes.kubeconfig"
        } else {
            "control.kubernetes.service_account_dir"
        };
        validate_name(&access.namespace, 63)
            .map_err(|m| err(key, format!("namespace {:?} {m}", access.namespace)))?;
        if !access.server.starts_with("https://") || access.server.parse::<http::Uri>().is_err() {
            return Err(err(
                "control.kubernetes.api_url",
                format!("{:?} is not an https:// URL", access.server),
            ));
        }
        Ok(access)
    }

    fn path(&self, deployment: &str) -> String {
        format!(
            "/apis/flink.apache.org/v1beta1/namespaces/{}/flinkdeployments/{deployment}",
            self.namespace
        )
    }

    fn token(&self) -> Result<Option<String>, String> {
        match &self.auth {
            KubeAuth::TokenFile(path) => read_text_bounded(path, MAX_FILE_BYTES)
                .map(|t| Some(t.trim().to_string()))
                .map_err(|e| format!("the token {}: {}", path.display(), e.message)),
            KubeAuth::Token(t) => Ok(Some(t.clone())),
            KubeAuth::None => Ok(None),
        }
    }
}

/// A Kubernetes object or resource name: lowercase letters, digits, `-` and `.`, starting and
/// ending with a letter or digit.
pub fn validate_name(name: &str, max: usize) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most {max})"
        ))
    }
}

fn from_service_account(
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<KubeAccess, ConfigError> {
    const KEY: &str = "control.kubernetes.service_account_dir";
    let token = dir.join("token");
    if !token.is_file() {
        return Err(err(
            KEY,
            format!(
                "{} does not exist: not in a pod with a service account (set control.kubernetes.kubeconfig for local use)",
                token.display()
            ),
        ));
    }
    let roots = trusted_roots(Some(&dir.join("ca.crt"))).map_err(|e| err(KEY, e.to_string()))?;
    let namespace = read_text_bounded(&dir.join("namespace"), MAX_FILE_BYTES)
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    let server = match (
        env("KUBERNETES_SERVICE_HOST"),
        env("KUBERNETES_SERVICE_PORT"),
    ) {
        (Some(host), port) => {
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            format!("https://{host}:{}", port.unwrap_or_else(|| "443".into()))
        }
        // Checked after control.kubernetes.api_url is applied.
        (None, _) => String::new(),
    };
    Ok(KubeAccess {
        server,
        namespace,
        auth: KubeAuth::TokenFile(token),
        roots,
        identity: None,
    })
}

#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(rename = "current-context", default)]
    current_context: String,
    #[serde(default)]
    clusters: Vec<Named<KubeCluster>>,
    #[serde(default)]
    users: Vec<Named<KubeUser>>,
    #[serde(default)]
    contexts: Vec<Named<KubeContext>>,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    item: T,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct KubeCluster {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct KubeUser {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    exec: Option<serde_yaml::Value>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
struct KubeContext {
    cluster: String,
    user: String,
    namespace: Option<String>,
}

/// Reads a kubeconfig's current context: server, CA, token or client certificate, namespace.
/// Relative paths in it are relative to its directory.
fn from_kubeconfig(path: &Path) -> Result<KubeAccess, ConfigError> {
    const KEY: &str = "control.kubernetes.kubeconfig";
    let fail = |m: String| err(KEY, format!("{}: {m}", path.display()));
    let text = read_text_bounded(path, MAX_FILE_BYTES).map_err(|e| fail(e.message))?;
    let config: Kubeconfig =
        serde_yaml::from_str(&text).map_err(|e| fail(format!("not a kubeconfig: {e}")))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let file = |p: &Path| base.join(p);
    let find = |what: &str, name: &str, names: Vec<&str>| {
        fail(format!("no {what} named {name:?} (it has {names:?})"))
    };
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == config.current_context)
        .ok_or_else(|| {
            find(
                "context",
                &config.current_context,
                config.contexts.iter().map(|c| c.name.as_str()).collect(),
            )
        })?;
    let ctx = &context.item;
    let cluster = &config
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .ok_or_else(|| {
            find(
                "cluster",
                &ctx.cluster,
                config.clusters.iter().map(|c| c.name.as_str()).collect(),
            )
        })?
        .item;
    let user = &config
        .users
        .iter()
        .find(|u| u.name == ctx.user)
        .ok_or_else(|| {
            find(
                "user",
                &ctx.user,
                config.users.iter().map(|u| u.name.as_str()).collect(),
            )
        })?
        .item;
    if cluster.insecure_skip_tls_verify {
        return Err(fail(format!(
            "cluster {:?} sets insecure-skip-tls-verify: give its CA instead",
            ctx.cluster
        )));
    }
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(fail(format!(
            "user {:?} authenticates through an exec plugin or auth provider, which the agent does not run: use a token or a client certificate",
            ctx.user
        )));
    }
    let decode = |what: &str, data: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| fail(format!("{what} is not base64: {e}")))
    };
    let read = |what: &str, p: &Path| {
        read_bounded(&file(p), MAX_FILE_BYTES)
            .map_err(|e| fail(format!("{what} {}: {}", file(p).display(), e.message)))
    };
    let roots = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => roots_from_pem(&decode("certificate-authority-data", data)?)
            .map_err(|m| fail(format!("certificate-authority-data {m}")))?,
        (None, Some(p)) => roots_from_pem(&read("certificate-authority", p)?)
            .map_err(|m| fail(format!("certificate-authority {m}")))?,
        (None, None) => trusted_roots(None).map_err(|e| fail(e.to_string()))?,
    };
    let cert = match (&user.client_certificate_data, &user.client_certificate) {
        (Some(data), _) => Some(decode("client-certificate-data", data)?),
        (None, Some(p)) => Some(read("client-certificate", p)?),
        (None, None) => None,
    };
    let key = match (&user.client_key_data, &user.client_key) {
        (Some(data), _) => Some(decode("client-key-data", data)?),
        (None, Some(p)) => Some(read("client-key", p)?),
        (None, None) => None,
    };
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some(
            ClientIdentity::from_pem(&c, &k)
                .map_err(|(which, m)| fail(format!("user {:?}: client {which} {m}", ctx.user)))?,
        ),
        (None, None) => None,
        _ => {
            return Err(fail(format!(
            "user {:?} has a client certificate without its key, or a key without its certificate",
            ctx.user
        )))
        }
    };
    let auth = match (&user.token, &user.token_file) {
        (Some(t), _) => KubeAuth::Token(t.clone()),
        (None, Some(p)) => KubeAuth::TokenFile(file(p)),
        (None, None) if identity.is_some() => KubeAuth::None,
        (None, None) => {
            return Err(fail(format!(
                "user {:?} has neither a token nor a client certificate",
                ctx.user
            )))
        }
    };
    Ok(KubeAccess {
        server: cluster.server.trim_end_matches('/').to_string(),
        namespace: ctx.namespace.clone().unwrap_or_else(|| "default".into()),
        auth,
        roots,
        identity,
    })
}

/// The realizer.
pub struct KubernetesOperator {
    in_place: AdaptiveScheduler,
    http: JsonClient,
    access: KubeAccess,
    deployment: String,
}

impl KubernetesOperator {
    /// `in_place` applies the change to the running job once the deployment carries it.
    pub fn new(
        mut access: KubeAccess,
        deployment: &str,
        timeout: Duration,
        in_place: AdaptiveScheduler,
    ) -> Result<Self, ConfigError> {
        let tls = client_tls(access.roots.clone(), access.identity.take())
            .map_err(|e| err("control.kubernetes", e.to_string()))?;
        Ok(KubernetesOperator {
            in_place,
            http: JsonClient::with_tls(timeout, tls),
            access,
            deployment: deployment.to_string(),
        })
    }

    /// `namespace/name`, for messages.
    fn resource(&self) -> String {
        format!(
            "FlinkDeployment {}/{}",
            self.access.namespace, self.deployment
        )
    }

    async fn call(
        &self,
        method: Method,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<HttpAnswer, ActuationError> {
        let url = format!(
            "{}{}",
            self.access.server,
            self.access.path(&self.deployment)
        );
        let token = self.access.token().map_err(ActuationError::RetryLater)?;
        let safe = method == Method::GET;
        self.http
            .send_as(method, &url, token.as_deref(), content_type, body)
            .await
            .map_err(|e| match e {
                HttpError::Connect { .. } | HttpError::InvalidUrl { .. } => {
                    ActuationError::RetryLater(e.to_string())
                }
                // A read that got no answer changed nothing.
                _ if safe => ActuationError::RetryLater(e.to_string()),
                HttpError::Timeout { .. } | HttpError::Transport { .. } => {
                    ActuationError::Unknown(e.to_string())
                }
            })
    }

    /// The error for a non-2xx answer of the API server.
    fn api_error(&self, verb: &str, answer: &HttpAnswer) -> ActuationError {
        let message = serde_json::from_slice::<Value>(&answer.body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| answer.excerpt());
        let what = format!("{verb} {}: {} {message}", self.resource(), answer.status);
        match answer.status {
            401 => ActuationError::Failed(format!(
                "{what} (the API server refused the credentials of control.kubernetes)"
            )),
            403 => ActuationError::Failed(format!(
                "{what} (the service account needs get and patch on flinkdeployments in namespace {}: packaging/kubernetes/agent-rbac.yaml)",
                self.access.namespace
            )),
            404 => ActuationError::Failed(format!(
                "{what} (check control.kubernetes.deployment and namespace)"
            )),
            409 => ActuationError::RetryLater(format!(
                "{what} (the deployment changed since it was read)"
            )),
            429 | 500..=599 => ActuationError::RetryLater(what),
            _ => ActuationError::Failed(what),
        }
    }
}

/// Why the operator-managed deployment must not be patched, if it must not.
pub fn refusal(deployment: &Value, job_id: &str, resource: &str) -> Option<String> {
    let enabled = &deployment["spec"]["flinkConfiguration"][OPERATOR_AUTOSCALER_KEY];
    let on = enabled.as_bool() == Some(true)
        || enabled
            .as_str()
            .is_some_and(|s| s.trim().eq_ignore_ascii_case("true"));
    if on {
        return Some(format!(
            "refused: {resource} has {OPERATOR_AUTOSCALER_KEY}: true in spec.flinkConfiguration, so the operator's own autoscaler scales it and two autoscalers must not fight; set it to \"false\" to let flink-autoscale apply changes"
        ));
    }
    match deployment["status"]["jobStatus"]["jobId"].as_str() {
        Some(running) if !running.eq_ignore_ascii_case(job_id) => Some(format!(
            "refused: {resource} runs job {running}, not {job_id} (check control.kubernetes.deployment)"
        )),
        _ => None,
    }
}

/// The merge patch: every vertex of the proposal at its approved parallelism, earlier
/// overrides of other vertices kept, guarded by the resource version read.
pub fn merge_patch(deployment: &Value, proposal: &Proposal, plan: &Plan) -> Value {
    let mut overrides: BTreeMap<String, u32> = deployment["spec"]["flinkConfiguration"]
        [OVERRIDES_KEY]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .filter_map(|entry| {
            let (id, p) = entry.trim().split_once(':')?;
            Some((id.trim().to_string(), p.trim().parse().ok()?))
        })
        .collect();
    overrides.extend(full_parallelism(proposal, plan));
    let mut patch = json!({
        "spec": { "flinkConfiguration": { OVERRIDES_KEY: overrides_value(&overrides) } }
    });
    if let Some(version) = deployment["metadata"]["resourceVersion"].as_str() {
        patch["metadata"] = json!({ "resourceVersion": version });
    }
    patch
}

impl Realizer for KubernetesOperator {
    fn apply<'a>(
        &'a self,
        proposal: &'a Proposal,
        plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>> {
        Box::pin(async move {
            let resource = self.resource();
            let answer = self
                .call(Method::GET, "application/json", Vec::new())
                .await?;
            if !(200..300).contains(&answer.status) {
                return Err(self.api_error("GET", &answer));
            }
            let deployment: Value = serde_json::from_slice(&answer.body).map_err(|e| {
                ActuationError::RetryLater(format!("GET {resource}: not JSON: {e}"))
            })?;
            if let Some(reason) = refusal(&deployment, &proposal.job_id, &resource) {
                return Err(ActuationError::Failed(reason));
            }
            let patch = merge_patch(&deployment, proposal, plan);
            let body = serde_json::to_vec(&patch).unwrap_or_default();
            let answer = self.call(Method::PATCH, MERGE_PATCH, body).await?;
            if !(200..300).contains(&answer.status) {
                return Err(self.api_error("PATCH", &answer));
            }
            tracing::info!(job_id = %proposal.job_id, deployment = %resource, overrides = %patch["spec"]["flinkConfiguration"][OVERRIDES_KEY], "wrote the parallelism overrides into the FlinkDeployment");
            // The deployment now carries the change, so the operator applies it at its next
            // reconcile even if the in-place request fails; watching the job tells.
            if let Err(e) = self.in_place.apply(proposal, plan).await {
                tracing::warn!(job_id = %proposal.job_id, error = %e, "in-place rescale not accepted; the operator applies the patched FlinkDeployment");
            }
            Ok(Actuation::Started)
        })
    }

    fn label(&self) -> &'static str {
        "kubernetes-operator"
    }

    /// The change is applied in place like the adaptive-scheduler realizer's: Flink 2.3's
    /// rescale history tells how it ended.
    fn rescale_status<'a>(
        &'a self,
        job_id: &'a str,
        wanted: &'a std::collections::BTreeMap<String, u32>,
        since_ms: u64,
    ) -> BoxFuture<'a, super::HistoryFinding> {
        self.in_place.rescale_status(job_id, wanted, since_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuation::test_support::proposal;

    fn plan(parallelism: &[(&str, u32)]) -> Plan {
        Plan {
            task_managers: 3,
            standby_task_managers: 0,
            parallelism: parallelism
                .iter()
                .map(|(id, p)| (id.to_string(), *p))
                .collect(),
        }
    }

    #[test]
    fn the_patch_lists_every_vertex_keeps_other_overrides_and_the_resource_version() {
        let deployment = json!({
            "metadata": { "resourceVersion": "4711" },
            "spec": { "flinkConfiguration": { OVERRIDES_KEY: "old:7, aa:1" } }
        });
        let patch = merge_patch(
            &deployment,
            &proposal(&[("aa", 2, 4), ("bb", 3, 3)], 1),
            &plan(&[("aa", 4)]),
        );
        assert_eq!(
            patch,
            json!({
                "metadata": { "resourceVersion": "4711" },
                "spec": { "flinkConfiguration": { OVERRIDES_KEY: "aa:4,bb:3,old:7" } }
            })
        );
    }

    #[test]
    fn an_enabled_operator_autoscaler_or_another_job_is_refused() {
        let p = "FlinkDeployment ns/d";
        for enabled in [json!("true"), json!(" TRUE "), json!(true)] {
            let d =
                json!({ "spec": { "flinkConfiguration": { OPERATOR_AUTOSCALER_KEY: enabled } } });
            let reason = refusal(&d, "j", p).expect("refused");
            assert!(reason.contains("job.autoscaler.enabled: true"), "{reason}");
        }
        let off = json!({ "spec": { "flinkConfiguration": { OPERATOR_AUTOSCALER_KEY: "false" } },
                          "status": { "jobStatus": { "jobId": "J" } } });
        assert_eq!(refusal(&off, "j", p), None);
        let other = json!({ "status": { "jobStatus": { "jobId": "k" } } });
        assert!(refusal(&other, "j", p).is_some_and(|r| r.contains("runs job k")));
    }

    #[test]
    fn names_follow_kubernetes_rules() {
        assert!(validate_name("flink-prod.a1", 63).is_ok());
        for bad in ["", "Flink", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(validate_name(bad, 63).is_err(), "{bad:?}");
        }
    }
}
