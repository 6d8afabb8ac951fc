//! The HTTP server: accepts connections, applies injected faults, dispatches to the REST
//! layer under the world lock, accounts per endpoint, and drains on shutdown.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::{self, Query};
use crate::format::{error_body, handler_exception};
use crate::world::{Fault, World};

/// Largest request body accepted (resource requirements of a huge job fit easily).
const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;
/// How long open connections get to finish after shutdown begins.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How often a real-time clock integrates the model when nobody asks.
const TICK: Duration = Duration::from_millis(200);

type ResBody = BoxBody<Bytes, std::io::Error>;

/// State shared by the server tasks and every `SimControl`.
pub(crate) struct Shared {
    world: Mutex<World>,
}

impl Shared {
    pub fn new(world: World) -> Self {
        Shared {
            world: Mutex::new(world),
        }
    }

    /// Locks the world; a panic in another holder does not make the simulator unusable.
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn full(body: impl Into<Bytes>) -> ResBody {
    Full::new(body.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn response(status: u16, content_type: &str, body: ResBody) -> Response<ResBody> {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        content_type.parse().expect("static header value"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        "*".parse().expect("static header value"),
    );
    r
}

fn json_response(status: u16, body: String) -> Response<ResBody> {
    response(status, "application/json; charset=UTF-8", full(body))
}

/// A body that sends a prefix of what its Content-Length promises, then fails, so the
/// client sees the connection drop mid-body.
struct TruncatedBody {
    prefix: Option<Bytes>,
    promised: u64,
}

impl Body for TruncatedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.prefix.take() {
            Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
            None => Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "injected truncation",
            )))),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.promised)
    }
}

fn huge_body(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    s.push('[');
    let mut i = 0u64;
    while s.len() + 40 < bytes {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{{\"id\":\"padding.metric.{i:012}\"}}"));
        i += 1;
    }
    s.push(']');
    s
}

async fn wait_for_shutdown(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Runs the normal Flink handler and accounts for it.
async fn flink_request(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response<ResBody> {
    let (reply, delay_us) = {
        let mut world = shared.world();
        let reply = api::dispatch(&mut world, method, path, &Query::parse(query), body);
        world.stats.record(
            &reply.endpoint,
            reply.body.len() as u64,
            reply.entries,
            reply.fetched,
        );
        (reply, world.entry_delay_us)
    };
    if delay_us > 0 && reply.entries > 0 {
        tokio::time::sleep(Duration::from_micros(
            delay_us.saturating_mul(reply.entries),
        ))
        .await;
    }
    json_response(reply.status, reply.body)
}

async fn handle(
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BODY)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let msg = error_body(&[format!("Could not read the request body: {e}")]).to_string();
            return Ok(json_response(400, msg));
        }
    };
    let is_control = api::segments(&path).first() == Some(&"_sim");
    if is_control {
        let reply =
            api::control::handle(&mut shared.world(), &method, &path, query.as_deref(), &body);
        return Ok(json_response(reply.status, reply.body));
    }
    let fault = shared.world().fault_for(api::job_in_path(&path).as_deref());
    let resp = match fault {
        None => flink_request(&shared, &method, &path, query.as_deref(), &body).await,
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            flink_request(&shared, &method, &path, query.as_deref(), &body).await
        }
        Some(Fault::Hang) => {
            wait_for_shutdown(shutdown).await;
            json_response(503, error_body(&["Service temporarily unavailable: shutting down.".into()]).to_string())
        }
        Some(Fault::Status(s)) => {
            let msg = handler_exception("org.apache.flink.runtime.rest.handler.RestHandlerException", &format!("Injected fault: status {s}"));
            json_response(s, error_body(&[msg]).to_string())
        }
        Some(Fault::Html) => response(
            200,
            "text/html; charset=UTF-8",
            full("<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"),
        ),
        Some(Fault::MalformedJson) => json_response(200, "{\"jobs\":[{\"id\":\"".into()),
        Some(Fault::HugeBody(n)) => json_response(200, huge_body(n)),
        Some(Fault::Redirect) => {
            let mut r = json_response(302, String::new());
            let location = format!("/_sim/redirected{path}");
            if let Ok(v) = location.parse() {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        Some(Fault::Truncated) => {
            let full_resp = flink_request(&shared, &method, &path, query.as_deref(), &body).await;
            let (parts, body) = full_resp.into_parts();
            let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let promised = bytes.len() as u64 + 64;
            let prefix = bytes.slice(..bytes.len() / 2);
            Response::from_parts(parts, TruncatedBody { prefix: Some(prefix), promised }.boxed())
        }
    };
    Ok(resp)
}

/// Serves until `shutdown` turns true, then lets open connections finish (bounded).
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let ticker = {
        let shared = shared.clone();
        let rx = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let mut world = shared.world();
                        if !world.clock.manual() {
                            world.sync();
                        }
                    }
                    _ = wait_for_shutdown(rx.clone()) => break,
                }
            }
        })
    };
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let rx = shutdown.clone();
                conns.spawn(async move {
                    let svc_rx = rx.clone();
                    let svc = service_fn(move |req| handle(shared.clone(), svc_rx.clone(), req));
                    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        r = conn.as_mut() => {
                            if let Err(e) = r {
                                tracing::debug!(%peer, error = %e, "connection ended with an error");
                            }
                        }
                        _ = wait_for_shutdown(rx) => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
            _ = wait_for_shutdown(stop.clone()) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    let _ = stop.borrow_and_update();
    drop(listener);
    if tokio::time::timeout(DRAIN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!("connections still open after the drain grace period; closing them");
        conns.abort_all();
    }
    ticker.abort();
}
