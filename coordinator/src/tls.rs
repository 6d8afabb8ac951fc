//! Optional TLS (rustls) for the API, with a certificate that SIGHUP can replace.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use flink_autoscale_shared::files::{read_bounded, MAX_FILE_BYTES};
use flink_autoscale_shared::http::Acceptor;
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::server::TlsStream;

/// Performs the TLS handshake on each accepted connection.
#[derive(Clone)]
pub struct TlsAcceptor {
    acceptor: tokio_rustls::TlsAcceptor,
    certificate: Arc<ReloadableCert>,
}

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The certificate and key files, and what was last loaded from them.
#[derive(Debug)]
struct ReloadableCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A PEM certificate chain and private key, checked to belong together.
fn load(cert: &Path, key: &Path) -> Result<(CertifiedKey, usize), TlsError> {
    let file_error = |path: &Path, message: String| TlsError::File {
        path: path.display().to_string(),
        message,
    };
    let cert_bytes = read_bounded(cert, MAX_FILE_BYTES).map_err(|e| file_error(cert, e.message))?;
    let chain = rustls_pemfile::certs(&mut cert_bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file_error(cert, "no PEM certificate found".to_string()));
    }
    let key_bytes = read_bounded(key, MAX_FILE_BYTES).map_err(|e| file_error(key, e.message))?;
    let private_key = rustls_pemfile::private_key(&mut key_bytes.as_slice())
        .map_err(|e| file_error(key, e.to_string()))?
        .ok_or_else(|| file_error(key, "no PEM private key found".to_string()))?;
    let length = chain.len();
    let certified = CertifiedKey::from_der(chain, private_key, &provider())
        .map_err(|e| file_error(key, format!("does not fit the certificate: {e}")))?;
    Ok((certified, length))
}

impl TlsAcceptor {
    /// Loads a PEM certificate chain and private key.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
        let (certified, _) = load(cert, key)?;
        let certificate = Arc::new(ReloadableCert {
            cert_file: cert.to_path_buf(),
            key_file: key.to_path_buf(),
            current: RwLock::new(Arc::new(certified)),
        });
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&certificate) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            certificate,
        })
    }

    /// Reads the certificate and key files again, without switching yet: `commit` the
    /// result to serve it to new handshakes. Returns the chain's length.
    pub fn prepare_reload(&self) -> Result<PreparedCert, TlsError> {
        let c = &self.certificate;
        let (certified, chain) = load(&c.cert_file, &c.key_file)?;
        Ok(PreparedCert {
            certified: Arc::new(certified),
            chain,
        })
    }

    /// Serves `prepared` from the next handshake on.
    pub fn commit(&self, prepared: PreparedCert) {
        *self
            .certificate
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = prepared.certified;
    }

    pub fn cert_file(&self) -> &Path {
        &self.certificate.cert_file
    }
}

/// A certificate read from disk and checked, not yet served.
pub struct PreparedCert {
    certified: Arc<CertifiedKey>,
    pub chain: usize,
}

impl Acceptor for TlsAcceptor {
    type Io = TlsStream<TcpStream>;
    async fn accept(&self, tcp: TcpStream) -> io::Result<Self::Io> {
        self.acceptor.accept(tcp).await
    }
}
