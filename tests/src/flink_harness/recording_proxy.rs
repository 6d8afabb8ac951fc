//! A loopback HTTP proxy in front of the JobManager that records every request it forwards,
//! so a test can check what a client (the agent) asked for, independently of the client's
//! own accounting.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::rest::FlinkRest;
use super::HarnessError;

/// One forwarded request.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub at: Instant,
    pub method: String,
    /// Path and query, as sent.
    pub path_and_query: String,
}

/// Forwards to the JobManager; stops serving when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    url: String,
    log: Arc<Mutex<Vec<RecordedRequest>>>,
    server: JoinHandle<()>,
}

impl RecordingProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: FlinkRest) -> Result<Self, HarnessError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| HarnessError::new("proxy", format!("cannot listen on 127.0.0.1: {e}")))?;
        let addr: SocketAddr = listener
            .local_addr()
            .map_err(|e| HarnessError::new("proxy", format!("no local address: {e}")))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let server = tokio::spawn(serve(listener, upstream, Arc::clone(&log)));
        Ok(Self {
            url: format!("http://{addr}"),
            log,
            server,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Takes the requests recorded so far, oldest first.
    pub fn take(&self) -> Vec<RecordedRequest> {
        self.log
            .lock()
            .map(|mut log| std::mem::take(&mut *log))
            .unwrap_or_default()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(listener: TcpListener, upstream: FlinkRest, log: Arc<Mutex<Vec<RecordedRequest>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let upstream = upstream.clone();
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                forward(request, upstream.clone(), Arc::clone(&log))
            });
            // A client closing its connection mid-request is not the proxy's problem.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(
    request: Request<hyper::body::Incoming>,
    upstream: FlinkRest,
    log: Arc<Mutex<Vec<RecordedRequest>>>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let method = request.method().clone();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    if let Ok(mut log) = log.lock() {
        log.push(RecordedRequest {
            at: Instant::now(),
            method: method.to_string(),
            path_and_query: path_and_query.clone(),
        });
    }
    let content_type = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = request.into_body().collect().await?.to_bytes();
    let response = match upstream
        .send_raw(method, &path_and_query, content_type.as_deref(), body)
        .await
    {
        Ok((status, bytes)) => Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes)),
        Err(e) => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Full::new(Bytes::from(e.to_string()))),
    };
    Ok(response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new()))))
}
