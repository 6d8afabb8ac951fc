//! The coordinator over HTTP: `POST /v1/proposals` and `POST /v1/proposals/{id}/outcome`
//! with the agent's bearer token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use flink_autoscale_core::protocol::{Decision, ErrorBody, Outcome, Proposal, Verdict};
use flink_autoscale_shared::files::{read_secret_file, SecretPermissions};
use http::Method;

use super::{GateError, Gatekeeper};
use crate::control::http_client::{HttpError, JsonClient, TlsSetupError};
use crate::daemon::clock::BoxFuture;

/// The coordinator over HTTP.
pub struct CoordinatorClient {
    base: String,
    token: Option<String>,
    http: JsonClient,
}

/// The token file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("control.coordinator.token_file: {path}: {message}")]
pub struct TokenFileError {
    pub path: PathBuf,
    pub message: String,
}

/// The first non-empty line of `path`, trimmed. The file must be private to the agent (see
/// [`SecretPermissions::Strict`]) unless `permissions` says otherwise, and small.
pub fn read_token_file(
    path: &Path,
    permissions: SecretPermissions,
) -> Result<String, TokenFileError> {
    let fail = |message: String| TokenFileError {
        path: path.to_path_buf(),
        message,
    };
    let text = read_secret_file(
        path,
        permissions,
        "control.coordinator.allow_readable_token_file",
    )
    .map_err(|e| fail(e.message))?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .ok_or_else(|| fail("holds no token".into()))
}

impl CoordinatorClient {
    /// `roots`: what an `https://` coordinator's certificate must chain to.
    pub fn new(
        base_url: &str,
        token: Option<String>,
        timeout: Duration,
        roots: rustls::RootCertStore,
    ) -> Result<Self, TlsSetupError> {
        Ok(CoordinatorClient {
            base: base_url.trim().trim_end_matches('/').to_string(),
            token,
            http: JsonClient::new(timeout, roots)?,
        })
    }

    async fn post(&self, path: &str, body: Vec<u8>) -> Result<bytes::Bytes, GateError> {
        self.call(Method::POST, path, body).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> Result<bytes::Bytes, GateError> {
        let url = format!("{}{path}", self.base);
        let answer = self
            .http
            .send(method, &url, self.token.as_deref(), body)
            .await
            .map_err(|e: HttpError| GateError::Unavailable(e.to_string()))?;
        match answer.status {
            200..=299 => Ok(answer.body),
            429 | 500..=599 => Err(GateError::Unavailable(format!(
                "{url} answered {}: {}",
                answer.status,
                answer.excerpt()
            ))),
            status => Err(GateError::Rejected {
                status,
                message: serde_json::from_slice::<ErrorBody>(&answer.body)
                    .map(|b| match b.field {
                        Some(f) => format!("{}: {}", f, b.message),
                        None => b.message,
                    })
                    .unwrap_or_else(|_| answer.excerpt()),
            }),
        }
    }
}

impl Gatekeeper for CoordinatorClient {
    fn propose<'a>(
        &'a self,
        proposal: &'a Proposal,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Decision, GateError>> {
        Box::pin(async move {
            let body = serde_json::to_vec(proposal).unwrap_or_default();
            let bytes = self.post("/v1/proposals", body).await?;
            checked_decision(&bytes, &proposal.proposal_id)
        })
    }

    fn verdict<'a>(&'a self, proposal_id: &'a str) -> BoxFuture<'a, Result<Decision, GateError>> {
        Box::pin(async move {
            let bytes = self
                .call(Method::GET, &proposal_path(proposal_id, ""), Vec::new())
                .await?;
            checked_decision(&bytes, proposal_id)
        })
    }

    fn report<'a>(
        &'a self,
        _job_id: &'a str,
        proposal_id: &'a str,
        outcome: &'a Outcome,
    ) -> BoxFuture<'a, Result<(), GateError>> {
        Box::pin(async move {
            let body = serde_json::to_vec(outcome).unwrap_or_default();
            self.post(&proposal_path(proposal_id, "/outcome"), body)
                .await
                .map(|_| ())
        })
    }

    fn label(&self) -> &'static str {
        "coordinator"
    }
}

/// `/v1/proposals/{id}{suffix}` with the id percent-encoded.
fn proposal_path(proposal_id: &str, suffix: &str) -> String {
    format!(
        "/v1/proposals/{}{suffix}",
        percent_encoding::utf8_percent_encode(proposal_id, percent_encoding::NON_ALPHANUMERIC)
    )
}

/// A verdict as the coordinator sent it, checked: for this proposal, with a plan exactly when
/// approved. Anything else (an unreadable body, a verdict this agent does not know) is an
/// error, never an approval: the caller retries and acts on nothing.
pub fn checked_decision(bytes: &[u8], proposal_id: &str) -> Result<Decision, GateError> {
    let decision: Decision = serde_json::from_slice(bytes).map_err(|e| {
        GateError::Unavailable(format!("unreadable verdict from the coordinator: {e}"))
    })?;
    if decision.proposal_id != proposal_id
        || (decision.verdict == Verdict::Approved) != decision.plan.is_some()
    {
        return Err(GateError::Unavailable(format!(
            "inconsistent verdict from the coordinator for {proposal_id}"
        )));
    }
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let read = |p: &Path| read_token_file(p, SecretPermissions::Strict);
        let e = read(&path).unwrap_err().to_string();
        assert!(e.starts_with("control.coordinator.token_file"), "{e}");
        assert!(e.contains("cannot read"), "{e}");
        std::fs::write(&path, "\n  \n").unwrap();
        set_mode(&path, 0o600);
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("holds no token"), "{e}");
        std::fs::write(&path, "\n secret \n").unwrap();
        assert_eq!(read(&path).unwrap(), "secret");
        set_mode(&path, 0o644);
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("mode 0644"), "{e}");
        assert!(
            e.contains("control.coordinator.allow_readable_token_file = true"),
            "{e}"
        );
        let relaxed = read_token_file(&path, SecretPermissions::Any).unwrap();
        assert_eq!(relaxed, "secret");
        let e = read_token_file(Path::new("/dev/zero"), SecretPermissions::Any).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}
