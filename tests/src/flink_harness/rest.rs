//! A small client for the JobManager's REST API over loopback, for the harness and the tests'
//! own checks. It is deliberately independent of the agent's client: the tests compare the
//! agent's view with what this one reads straight from Flink.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::HarnessError;

const STEP: &str = "REST";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A response: status and body (JSON when the body parses as JSON, else a JSON string).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct FlinkRest {
    base_url: String,
    client: Transport,
}

/// Plain HTTP as always; https only for a cluster with `security.ssl.rest.enabled`.
#[derive(Debug, Clone)]
enum Transport {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector<HttpConnector>, Full<Bytes>>),
}

impl FlinkRest {
    /// `base_url` such as `http://127.0.0.1:41234`, without a trailing slash.
    pub fn new(base_url: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            client: Transport::Plain(Client::builder(TokioExecutor::new()).build_http()),
        }
    }

    /// A client for an `https://` REST endpoint: `tls` says which CA to trust and which
    /// client certificate to present (see [`super::RestTls::client_config`]).
    pub fn with_tls(base_url: &str, tls: rustls::ClientConfig) -> Self {
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            client: Transport::Tls(Client::builder(TokioExecutor::new()).build(https)),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Sends one request; any HTTP status is a `Reply`, only transport failures are errors.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Reply, HarnessError> {
        let (status, bytes) = self.send_raw(method, path, content_type, body).await?;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok(Reply { status, body })
    }

    /// Like [`Self::send`], with the body as received.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), HarnessError> {
        let url = format!("{}{path}", self.base_url);
        let mut request = Request::builder().method(method.clone()).uri(&url);
        if let Some(content_type) = content_type {
            request = request.header(hyper::header::CONTENT_TYPE, content_type);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| HarnessError::new(STEP, format!("bad request {method} {url}: {e}")))?;
        let exchange = async {
            let response = match &self.client {
                Transport::Plain(client) => client.request(request).await?,
                Transport::Tls(client) => client.request(request).await?,
            };
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, bytes))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                HarnessError::new(
                    STEP,
                    format!(
                        "{method} {url}: no answer within {} s",
                        REQUEST_TIMEOUT.as_secs()
                    ),
                )
            })?
            .map_err(|e| HarnessError::new(STEP, format!("{method} {url}: {e}")))
    }

    /// GET that must answer 2xx with JSON.
    pub async fn get(&self, path: &str) -> Result<Value, HarnessError> {
        let reply = self.send(Method::GET, path, None, Bytes::new()).await?;
        expect_success(Method::GET, path, reply)
    }

    /// Sends `body` as JSON; the answer must be 2xx.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, HarnessError> {
        let reply = self
            .send(
                method.clone(),
                path,
                Some("application/json"),
                Bytes::from(body.to_string()),
            )
            .await?;
        expect_success(method, path, reply)
    }

    /// Uploads a jar through `POST /jars/upload` and returns the jar id Flink assigned.
    pub async fn upload_jar(&self, file_name: &str, jar: Vec<u8>) -> Result<String, HarnessError> {
        let boundary = format!("flink-autoscale-{}", std::process::id());
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; \
             filename=\"{file_name}\"\r\nContent-Type: application/x-java-archive\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(&jar);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let reply = self
            .send(
                Method::POST,
                "/jars/upload",
                Some(&content_type),
                Bytes::from(body),
            )
            .await?;
        let answer = expect_success(Method::POST, "/jars/upload", reply)?;
        answer["filename"]
            .as_str()
            .and_then(|path| path.rsplit('/').next())
            .map(str::to_owned)
            .ok_or_else(|| {
                HarnessError::new(
                    STEP,
                    format!("POST /jars/upload answered without a filename: {answer}"),
                )
            })
    }
}

fn expect_success(method: Method, path: &str, reply: Reply) -> Result<Value, HarnessError> {
    if reply.status.is_success() {
        Ok(reply.body)
    } else {
        Err(HarnessError::new(
            STEP,
            format!("{method} {path} answered {}: {}", reply.status, reply.body),
        ))
    }
}
