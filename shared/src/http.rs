//! The small HTTP/1.1 server both daemons use: an accept loop over hyper with keep-alive,
//! header-read timeouts, a cap on open connections and a graceful, time-bounded shutdown,
//! plus JSON and body helpers (bodies are read with a size limit and a deadline).
//!
//! Handlers are plain async functions from a request to a response; routing stays in each
//! daemon. TLS (coordinator only) plugs in through [`Acceptor`], so the agent carries none.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Request type handed to handlers.
pub type Request = hyper::Request<Incoming>;
/// Response type handlers return: a fully buffered body.
pub type Response = hyper::Response<Full<Bytes>>;

/// How long a client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Per-connection read buffer cap (hyper: about 400 KiB). Request heads must fit in it.
const MAX_BUF_SIZE: usize = 64 * 1024;
/// Connections served at once by [`serve`] (the coordinator sets its own).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Connections over the cap that still get a 503 answer; beyond these, they are closed.
const REFUSALS_AT_ONCE: usize = 64;
/// How long answering an over-the-cap connection may take.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);
/// At most one "connection cap reached" warning per this interval.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Limits and metrics of one server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long in-flight requests may take after shutdown begins.
    pub grace: Duration,
    /// Connections served at once. A connection over the cap is answered `503` with a JSON
    /// body `{"error":"too_many_connections",...}` and `Retry-After`, then closed.
    pub max_connections: usize,
    /// Gauge of open connections and counter of refused ones, if wanted.
    pub metrics: Option<ConnectionMetrics>,
}

/// Metric names for [`ServeOptions::metrics`].
#[derive(Debug, Clone, Copy)]
pub struct ConnectionMetrics {
    pub open: &'static str,
    pub refused: &'static str,
}

impl ServeOptions {
    /// The default limits with this shutdown grace.
    pub fn with_grace(grace: Duration) -> Self {
        ServeOptions {
            grace,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            metrics: None,
        }
    }
}

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
    serve_with(
        listener,
        PlainTcp,
        handler,
        shutdown,
        ServeOptions::with_grace(grace),
    )
    .await
}

/// Like [`serve`], with a custom [`Acceptor`] (for example a TLS handshake) and limits.
pub async fn serve_with<A, H, Fut>(
    listener: TcpListener,
    acceptor: A,
    handler: H,
    shutdown: CancellationToken,
    options: ServeOptions,
) where
    A: Acceptor,
    H: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handler = Arc::new(handler);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let mut refused_since_log = 0u64;
    let mut last_refusal_log: Option<std::time::Instant> = None;
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
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if let Some(m) = &options.metrics {
                metrics::counter!(m.refused).increment(1);
            }
            refused_since_log += 1;
            if last_refusal_log.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_INTERVAL) {
                tracing::warn!(
                    max_connections = options.max_connections,
                    refused = refused_since_log,
                    "connection cap reached; refusing new connections with 503"
                );
                refused_since_log = 0;
                last_refusal_log = Some(std::time::Instant::now());
            }
            // Answer a few with a 503 that says why; close the rest at once.
            if let Ok(refusal) = Arc::clone(&refusals).try_acquire_owned() {
                let acceptor = acceptor.clone();
                let cap = options.max_connections;
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, refuse(acceptor, tcp, cap)).await;
                    drop(refusal);
                });
            }
            continue;
        };
        let open_gauge = options.metrics.map(|m| metrics::gauge!(m.open));
        if let Some(g) = &open_gauge {
            g.increment(1.0);
        }
        let acceptor = acceptor.clone();
        let handler = Arc::clone(&handler);
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // Held until the connection ends: one slot of the cap, one count in the gauge.
            let _slot = slot;
            let _open = OpenConnection(open_gauge);
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
                .max_buf_size(MAX_BUF_SIZE)
                .serve_connection(TokioIo::new(io), service);
            if let Err(err) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    let grace = options.grace;
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

/// Decrements the open-connections gauge when the connection's task ends.
struct OpenConnection(Option<metrics::Gauge>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.decrement(1.0);
        }
    }
}

/// Answers one request on an over-the-cap connection with 503 and closes it.
async fn refuse<A: Acceptor>(acceptor: A, tcp: TcpStream, cap: usize) {
    let Ok(io) = acceptor.accept(tcp).await else {
        return;
    };
    let service = service_fn(move |_req| async move {
        let mut resp = json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({
                "error": "too_many_connections",
                "message": format!("this server serves at most {cap} connections at once; retry shortly"),
            }),
        );
        resp.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, Infallible>(resp)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(REFUSAL_TIMEOUT)
        .keep_alive(false)
        .serve_connection(TokioIo::new(io), service)
        .await;
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
    #[error("the request body did not arrive within {} s", deadline.as_secs_f64())]
    Timeout { deadline: Duration },
    #[error("failed to read request body: {0}")]
    Read(String),
}

/// First capacity of a body buffer; it grows with what arrives, never with what a
/// `Content-Length` merely announces.
const BODY_BUFFER_START: usize = 8 * 1024;

/// Reads a whole request body, refusing more than `limit` bytes and giving up after
/// `deadline` (a client that announces a body and never sends it holds nothing for long).
///
/// Each chunk is copied into one buffer and released at once, so a slowly sent body does not
/// pin the connection's read buffers chunk by chunk.
pub async fn read_body(
    mut body: Incoming,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, BodyError> {
    if body.size_hint().lower() > limit as u64 {
        return Err(BodyError::TooLarge { limit });
    }
    let read = async {
        let mut buf: Vec<u8> = Vec::with_capacity(BODY_BUFFER_START.min(limit));
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > limit {
                    return Err(BodyError::TooLarge { limit });
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(Bytes::from(buf))
    };
    tokio::time::timeout(deadline, read)
        .await
        .map_err(|_| BodyError::Timeout { deadline })?
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
