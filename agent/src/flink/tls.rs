//! TLS to a JobManager that serves REST over https (`security.ssl.rest.enabled`): the CA to
//! trust (`jobmanager.ca_file`, else the system roots), a client certificate for mutual
//! authentication (`security.ssl.rest.authentication-enabled`), and, only where nothing else
//! works, an explicit `jobmanager.insecure_skip_verify` that is logged loudly at every start.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::config::{ConfigError, JobManagerConfig};
use crate::control::http_client::{client_tls, trusted_roots, ClientIdentity};

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// The rustls configuration for the JobManager, or `None` for an `http://` URL. Loads every
/// file it names, so `check-config` checks them; each error names its key.
pub fn client_config(jm: &JobManagerConfig) -> Result<Option<rustls::ClientConfig>, ConfigError> {
    let https = jm.url.trim().starts_with("https://");
    let set: Vec<&str> = [
        ("jobmanager.ca_file", jm.ca_file.is_some()),
        ("jobmanager.client_cert_file", jm.client_cert_file.is_some()),
        ("jobmanager.client_key_file", jm.client_key_file.is_some()),
        ("jobmanager.insecure_skip_verify", jm.insecure_skip_verify),
    ]
    .into_iter()
    .filter_map(|(key, on)| on.then_some(key))
    .collect();
    if !https {
        return match set.first() {
            Some(key) => Err(err(key, "set, but jobmanager.url is not https://")),
            None => Ok(None),
        };
    }
    if jm.insecure_skip_verify && jm.ca_file.is_some() {
        return Err(err(
            "jobmanager.insecure_skip_verify",
            "set together with jobmanager.ca_file: give the CA and drop insecure_skip_verify",
        ));
    }
    let roots = trusted_roots(jm.ca_file.as_deref())
        .map_err(|e| err("jobmanager.ca_file", e.to_string()))?;
    let identity = match (&jm.client_cert_file, &jm.client_key_file) {
        (Some(cert), Some(key)) => Some(ClientIdentity::load(cert, key).map_err(|e| {
            let which = if e.to_string().starts_with(&key.display().to_string()) {
                "jobmanager.client_key_file"
            } else {
                "jobmanager.client_cert_file"
            };
            err(which, e.to_string())
        })?),
        (None, None) => None,
        (Some(_), None) => {
            return Err(err(
                "jobmanager.client_key_file",
                "required with jobmanager.client_cert_file",
            ))
        }
        (None, Some(_)) => {
            return Err(err(
                "jobmanager.client_cert_file",
                "required with jobmanager.client_key_file",
            ))
        }
    };
    let has_identity = identity.is_some();
    let mut config = client_tls(roots, identity).map_err(|e| {
        let key = if has_identity {
            "jobmanager.client_key_file"
        } else {
            "jobmanager.ca_file"
        };
        err(key, e.to_string())
    })?;
    if jm.insecure_skip_verify {
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(AcceptAnyCertificate(
                rustls::crypto::ring::default_provider(),
            )));
    }
    Ok(Some(config))
}

/// Logs, loudly, what `insecure_skip_verify` gives up. Called at every start.
pub fn warn_if_insecure(jm: &JobManagerConfig) {
    if jm.insecure_skip_verify && jm.url.trim().starts_with("https://") {
        tracing::warn!(url = %jm.url, "jobmanager.insecure_skip_verify = true: the JobManager's TLS certificate is NOT verified; anyone on the network path can impersonate the JobManager and feed the agent false metrics. Set jobmanager.ca_file to the CA that signed it instead.");
    }
}

/// A hint naming the key to fix, for a failed connection to an https JobManager.
pub fn handshake_hint(detail: &str, has_client_cert: bool) -> Option<&'static str> {
    let d = detail.to_ascii_lowercase();
    if d.contains("unknownissuer")
        || d.contains("invalid peer certificate")
        || d.contains("notvalidforname")
    {
        Some("the JobManager's certificate is not trusted: check jobmanager.ca_file")
    } else if !has_client_cert
        && (d.contains("certificaterequired")
            || d.contains("handshakefailure")
            || d.contains("bad certificate")
            || d.contains("badcertificate")
            || d.contains("alert")
            || d.contains("connection reset")
            || d.contains("unexpected eof")
            || d.contains("peer closed"))
    {
        Some("the JobManager may require a client certificate (security.ssl.rest.authentication-enabled): set jobmanager.client_cert_file and jobmanager.client_key_file")
    } else if d.contains("tls") || d.contains("certificate") {
        Some("TLS handshake failed: check jobmanager.ca_file, jobmanager.client_cert_file and jobmanager.client_key_file")
    } else {
        None
    }
}

/// The verifier behind `insecure_skip_verify`: accepts any certificate, but still checks the
/// handshake's signatures so that the session keys belong to the presented certificate.
#[derive(Debug)]
struct AcceptAnyCertificate(rustls::crypto::CryptoProvider);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
