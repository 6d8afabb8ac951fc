//! Optional TLS (rustls) for the API.

use std::io;
use std::path::Path;
use std::sync::Arc;

use flink_autoscale_shared::http::Acceptor;
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// Performs the TLS handshake on each accepted connection.
#[derive(Clone)]
pub struct TlsAcceptor(tokio_rustls::TlsAcceptor);

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
}

impl TlsAcceptor {
    /// Loads a PEM certificate chain and private key.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
        let file_error = |path: &Path, message: String| TlsError::File {
            path: path.display().to_string(),
            message,
        };
        let cert_bytes = std::fs::read(cert).map_err(|e| file_error(cert, e.to_string()))?;
        let chain = rustls_pemfile::certs(&mut cert_bytes.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(cert, e.to_string()))?;
        if chain.is_empty() {
            return Err(file_error(cert, "no PEM certificate found".to_string()));
        }
        let key_bytes = std::fs::read(key).map_err(|e| file_error(key, e.to_string()))?;
        let private_key = rustls_pemfile::private_key(&mut key_bytes.as_slice())
            .map_err(|e| file_error(key, e.to_string()))?
            .ok_or_else(|| file_error(key, "no PEM private key found".to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, private_key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor(tokio_rustls::TlsAcceptor::from(Arc::new(
            config,
        ))))
    }
}

impl Acceptor for TlsAcceptor {
    type Io = TlsStream<TcpStream>;
    async fn accept(&self, tcp: TcpStream) -> io::Result<Self::Io> {
        self.0.accept(tcp).await
    }
}
