//! The small HTTP/1.1 server both daemons use: an accept loop over hyper with keep-alive,
//! header-read timeouts and a graceful, time-bounded shutdown, plus JSON and body helpers.
//!
//! Handlers are plain async functions from a request to a response; routing stays in each
//! daemon. TLS (coordinator only) plugs in through [`Acceptor`], so the agent carries none.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Request type handed to handlers.
pub type Request = hyper::Request<Incoming>;
/// Response type handlers return: a fully buffered body.
pub type Response = hyper::Response<Full<Bytes>>;

/// How long a client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Turns an accepted TCP stream into the byte stream HTTP is spoken over (plain or TLS).
pub trait Acceptor: Clone + Send + Sync + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// Plain TCP: no transformation.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainTcp;

impl Acceptor for PlainTcp {
    type Io = TcpStream;
    async fn accept(&self, tcp: TcpStream) -> io::Result<TcpStream> {
        Ok(tcp)
    }
}

/// Serves plain HTTP on `listener` until `shutdown` is cancelled, then lets in-flight requests
/// finish for at most `grace` before returning.
pub async fn serve<H, Fut>(
    listener: TcpListener,
    handler: H,
    shutdown: CancellationToken,
    grace: Duration,
) where
    H: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    serve_with(listener, PlainTcp, handler, shutdown, grace).await
}

/// Like [`serve`], with a custom [`Acceptor`] (for example a TLS handshake).
pub async fn serve_with<A, H, Fut>(
    listener: TcpListener,
    acceptor: A,
    handler: H,
    shutdown: CancellationToken,
    grace: Duration,
) where
    A: Acceptor,
    H: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handler = Arc::new(handler);
    let graceful = GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    // Typically EMFILE: back off briefly instead of spinning.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handler = Arc::clone(&handler);
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let io = match acceptor.accept(tcp).await {
                Ok(io) => io,
                Err(err) => {
                    tracing::debug!(%peer, error = %err, "connection handshake failed");
                    return;
                }
            };
            let service = service_fn(move |req| {
                let handler = Arc::clone(&handler);
                async move { Ok::<_, Infallible>(handler(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(io), service);
            if let Err(err) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = grace.as_secs_f64(),
            "grace period over; dropping open connections"
        );
    }
}

/// A JSON response with the given status.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => with_type(status, Bytes::from(bytes), "application/json"),
        Err(err) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("failed to encode response: {err}"),
        ),
    }
}

/// A plain-text response with the given status.
pub fn text(status: StatusCode, body: &str) -> Response {
    with_type(
        status,
        Bytes::copy_from_slice(body.as_bytes()),
        "text/plain; charset=utf-8",
    )
}

/// A response with an explicit content type.
pub fn with_type(status: StatusCode, body: Bytes, content_type: &'static str) -> Response {
    let mut resp = hyper::Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body exceeds {limit} bytes")]
    TooLarge { limit: usize },
    #[error("failed to read request body: {0}")]
    Read(String),
}

/// Reads a whole request body, refusing more than `limit` bytes.
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            Err(BodyError::TooLarge { limit })
        }
        Err(err) => Err(BodyError::Read(err.to_string())),
    }
}

/// Binds `addr` and returns the listener with the address actually bound (port 0 resolved).
pub async fn bind(addr: std::net::SocketAddr) -> io::Result<(TcpListener, std::net::SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// The line both daemons print on stdout once they serve; scripts and tests wait for it.
pub fn announce_listening(addr: std::net::SocketAddr) {
    use std::io::Write;
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "listening on http://{addr}");
    let _ = out.flush();
}
