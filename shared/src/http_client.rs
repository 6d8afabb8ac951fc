//! A small HTTP/1.1 client for JSON writes (the agent's coordinator calls and the adaptive
//! scheduler's PUT, the coordinator's webhooks):
//! one deadline per request, a capped response body, and errors that say whether the request
//! can have reached the server, which decides between "retry" and "find out what happened".
//! `https://` URLs use rustls, trusting a configured CA file or else the system's roots.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::files::{read_bounded, MAX_FILE_BYTES};
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Response bodies larger than this are refused (verdicts and Flink answers are small).
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Longest excerpt of an error body kept for a log line or an outcome.
const EXCERPT_CHARS: usize = 300;

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpError {
    /// No connection: the request certainly did not reach the server.
    #[error("cannot connect to {url}: {detail}")]
    Connect { url: String, detail: String },
    /// Sent (perhaps), but no complete answer in time: the server may have acted on it.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// The connection broke mid-exchange: the server may have acted on it.
    #[error("request to {url} failed: {detail}")]
    Transport { url: String, detail: String },
    #[error("invalid URL {url}: {detail}")]
    InvalidUrl { url: String, detail: String },
}

/// Why the trusted certificates could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The certificates an `https://` server must chain to: those in `ca_file` (PEM), or the
/// system's roots when none is given.
pub fn trusted_roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, TlsSetupError> {
    match ca_file {
        Some(path) => {
            let err = |message: String| TlsSetupError::File {
                path: path.to_path_buf(),
                message,
            };
            let pem = read_bounded(path, MAX_FILE_BYTES).map_err(|e| err(e.message))?;
            roots_from_pem(&pem).map_err(err)
        }
        None => {
            let mut roots = rustls::RootCertStore::empty();
            // Unreadable system certificates only matter if an https URL is used; that
            // handshake then fails naming the unknown issuer.
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            Ok(roots)
        }
    }
}

/// The CA certificates in a PEM document (at least one).
pub fn roots_from_pem(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        let cert = cert.map_err(|e| format!("not a PEM certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("unusable certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(roots)
}

/// A client certificate chain and its private key, for servers that authenticate clients
/// (mutual TLS).
pub struct ClientIdentity {
    certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl ClientIdentity {
    /// From PEM documents: the certificate chain (leaf first) and its private key (PKCS#8,
    /// PKCS#1 or SEC1). Errors say which of the two is wrong.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, (&'static str, String)> {
        let certs = rustls_pemfile::certs(&mut &cert_pem[..])
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ("certificate", format!("not a PEM certificate: {e}")))?;
        if certs.is_empty() {
            return Err(("certificate", "holds no PEM certificate".into()));
        }
        let key = rustls_pemfile::private_key(&mut &key_pem[..])
            .map_err(|e| ("key", format!("not a PEM private key: {e}")))?
            .ok_or(("key", "holds no PEM private key".to_string()))?;
        Ok(ClientIdentity { certs, key })
    }

    /// From two PEM files; an error names the file at fault.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, TlsSetupError> {
        let read = |path: &Path| {
            read_bounded(path, MAX_FILE_BYTES).map_err(|e| TlsSetupError::File {
                path: path.to_path_buf(),
                message: e.message,
            })
        };
        let (cert, key) = (read(cert_file)?, read(key_file)?);
        Self::from_pem(&cert, &key).map_err(|(which, message)| TlsSetupError::File {
            path: if which == "key" { key_file } else { cert_file }.to_path_buf(),
            message,
        })
    }
}

/// The rustls client configuration: servers must chain to `roots`; `identity` is presented
/// to servers that ask for a client certificate.
pub fn client_tls(
    roots: rustls::RootCertStore,
    identity: Option<ClientIdentity>,
) -> Result<rustls::ClientConfig, TlsSetupError> {
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    Ok(match identity {
        Some(id) => builder.with_client_auth_cert(id.certs, id.key)?,
        None => builder.with_no_client_auth(),
    })
}

/// A complete answer.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Bytes,
}

impl HttpAnswer {
    /// A short, printable excerpt of the body for logs and outcome texts.
    pub fn excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
        if text.chars().count() > EXCERPT_CHARS {
            out.push('…');
        }
        out
    }
}

/// Cheap to clone; connections are pooled.
#[derive(Clone)]
pub struct JsonClient {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl JsonClient {
    /// A client for `http://` and `https://` URLs; https servers must chain to `roots`.
    pub fn new(timeout: Duration, roots: rustls::RootCertStore) -> Result<Self, TlsSetupError> {
        Ok(Self::with_tls(timeout, client_tls(roots, None)?))
    }

    /// A client for `http://` and `https://` URLs with its own TLS configuration.
    pub fn with_tls(timeout: Duration, tls: rustls::ClientConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        JsonClient {
            http: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(https),
            timeout,
        }
    }

    /// A client for `http://` URLs only (no certificates loaded; https fails the handshake).
    pub fn plain(timeout: Duration) -> Self {
        Self::new(timeout, rustls::RootCertStore::empty())
            .expect("ring's default protocol versions are valid")
    }

    /// Sends `body` as JSON with `method` to `url`, with an optional bearer token.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        bearer: Option<&str>,
        body: Vec<u8>,
    ) -> Result<HttpAnswer, HttpError> {
        self.send_as(method, url, bearer, "application/json", body)
            .await
    }

    /// Like [`JsonClient::send`], with the body's `content_type` (a JSON merge patch is
    /// `application/merge-patch+json`).
    pub async fn send_as(
        &self,
        method: Method,
        url: &str,
        bearer: Option<&str>,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<HttpAnswer, HttpError> {
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| HttpError::InvalidUrl {
                url: url.to_string(),
                detail: e.to_string(),
            })?;
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(CONTENT_TYPE, content_type)
            .header(ACCEPT, "application/json");
        if let Some(token) = bearer {
            builder = builder.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let req =
            builder
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| HttpError::InvalidUrl {
                    url: url.to_string(),
                    detail: e.to_string(),
                })?;
        match tokio::time::timeout(self.timeout, self.exchange(req, url)).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout {
                url: url.to_string(),
                timeout: self.timeout,
            }),
        }
    }

    async fn exchange(
        &self,
        req: Request<Full<Bytes>>,
        url: &str,
    ) -> Result<HttpAnswer, HttpError> {
        let resp = self.http.request(req).await.map_err(|e| {
            let detail = error_chain(&e);
            if e.is_connect() {
                HttpError::Connect {
                    url: url.to_string(),
                    detail,
                }
            } else {
                HttpError::Transport {
                    url: url.to_string(),
                    detail,
                }
            }
        })?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| HttpError::Transport {
                url: url.to_string(),
                detail: format!("reading the answer: {e}"),
            })?
            .to_bytes();
        Ok(HttpAnswer { status, body })
    }
}

/// An error with its sources, `outer: inner: innermost` (hyper's own message is terse).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
