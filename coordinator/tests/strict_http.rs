//! What the coordinator accepts at its edge, over raw TCP: dot segments and doubled slashes
//! in paths, positional JSON arrays, Content-Type, normalized idempotent retries, JSON on
//! every error the application shapes, the statuses the HTTP layer answers by itself, and
//! HEAD on the health endpoints.

mod support;

use std::time::Duration;

use hyper::StatusCode;
use serde_json::{json, Value};
use support::{job, proposal, Db, Server, ADMIN, AGENT, JOB};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A parsed raw response.
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Sends `bytes` on a fresh connection and reads until the server closes it.
async fn send(server: &Server, bytes: &[u8]) -> Raw {
    let host = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    // The server may answer (and close) before reading everything; that is fine.
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut out)).await;
    if read.is_err() && out.is_empty() {
        panic!("no answer within 15 s");
    }
    let text_end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .unwrap_or(out.len());
    let head = String::from_utf8_lossy(&out[..text_end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    Raw {
        status,
        head,
        body: out[text_end..].to_vec(),
    }
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn loose_input_is_refused() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]);
    let admin = bearer(ADMIN);
    let agent = bearer(AGENT);
    let json_type = ("Content-Type", "application/json");
    let flag = br#"{"reason":"drill"}"#;

    // Dot segments as ids, written plainly or percent-encoded, are refused by name.
    for path in [
        "/v1/regions/../evacuation",
        "/v1/regions/./evacuation",
        "/v1/regions/%2e%2e/evacuation",
        "/v1/regions/%2E/evacuation",
        "/v1/clusters/../overrides",
    ] {
        let field = if path.contains("clusters") {
            "cluster"
        } else {
            "region"
        };
        for method in ["PUT", "DELETE"] {
            let body: &[u8] = if method == "PUT" { flag } else { b"" };
            let r = send(
                &server,
                &request(method, path, &[("Authorization", &admin), json_type], body),
            )
            .await;
            assert_eq!(r.status, 400, "{method} {path}");
            assert_eq!(r.json()["field"], field, "{method} {path}");
        }
    }
    // Doubled slashes do not route.
    let r = send(
        &server,
        &request("GET", "//v1/decisions", &[("Authorization", &admin)], b""),
    )
    .await;
    assert_eq!(r.status, 404);

    // Positional arrays in place of objects, at the top and nested.
    let overrides_path = "/v1/clusters/c1/overrides";
    for body in ["[1,0.5]", "[]"] {
        let r = send(
            &server,
            &request(
                "PUT",
                overrides_path,
                &[("Authorization", &admin), json_type],
                body.as_bytes(),
            ),
        )
        .await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.json()["error"], "invalid_field", "{body}");
    }
    let mut positional = proposal("arrays", JOB, 4, 6);
    positional["vertices"][1] = json!([support::vertex_id(2), "Map", null, 4, 6, null]);
    let r = send(
        &server,
        &request(
            "POST",
            "/v1/proposals",
            &[("Authorization", &agent), json_type],
            &serde_json::to_vec(&positional).unwrap(),
        ),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["field"], "vertices[1]");

    // Bodies must say they are JSON.
    let valid = serde_json::to_vec(&proposal("typed", JOB, 4, 6)).unwrap();
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let mut headers = vec![("Authorization", agent.as_str())];
        if let Some(t) = content_type {
            headers.push(("Content-Type", t));
        }
        let r = send(&server, &request("POST", "/v1/proposals", &headers, &valid)).await;
        assert_eq!(r.status, 415, "{content_type:?}");
        let body = r.json();
        assert_eq!(body["error"], "unsupported_media_type");
        assert_eq!(body["field"], "Content-Type");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("application/json"),
            "{body}"
        );
    }
    let r = send(
        &server,
        &request(
            "POST",
            "/v1/proposals",
            &[
                ("Authorization", &agent),
                ("Content-Type", "Application/JSON; charset=utf-8"),
            ],
            &valid,
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    // Nothing refused above left a record or changed the overrides.
    assert_eq!(server.all_decisions().await.len(), 1);
    let (_, clusters) = server.call("GET", "/v1/clusters", Some(ADMIN), None).await;
    assert_eq!(clusters["clusters"], json!([]));
}

#[tokio::test]
async fn a_retry_spelled_differently_is_the_same_proposal() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]);
    let first = proposal("spelled", &job(7), 4, 6);
    let (status, answer) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(first.clone()))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // The default group written out, the ids in uppercase, the fields in another order.
    let mut spelled = first.clone();
    spelled["vertices"][0]["slot_sharing_group"] = json!("default");
    spelled["job_id"] = json!(job(7).to_ascii_uppercase());
    spelled["vertices"][1]["id"] = json!(support::vertex_id(2).to_ascii_uppercase());
    let reordered: serde_json::Map<String, Value> = spelled
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (status, again) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(Value::Object(reordered)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, answer);
    // A real difference is still a conflict.
    let mut changed = first;
    changed["vertices"][0]["slot_sharing_group"] = json!("heavy");
    let (status, err) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(changed))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert_eq!(server.all_decisions().await.len(), 1);
}

#[tokio::test]
async fn errors_are_json_and_head_answers_like_get() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]);
    let agent = bearer(AGENT);
    let json_type = ("Content-Type", "application/json");

    // Every error the application shapes is JSON with an `error` code.
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (request("GET", "/nowhere", &[], b""), 404, "not_found"),
        (
            request("DELETE", "/v1/proposals", &[], b""),
            405,
            "method_not_allowed",
        ),
        (
            request("GET", "/v1/decisions", &[], b""),
            401,
            "unauthorized",
        ),
        (
            request("GET", "/v1/decisions", &[("Authorization", &agent)], b""),
            403,
            "forbidden",
        ),
        (
            request(
                "POST",
                "/v1/proposals",
                &[("Authorization", &agent), json_type],
                b"{",
            ),
            400,
            "malformed_json",
        ),
        (
            request(
                "POST",
                "/v1/proposals",
                &[("Authorization", &agent), json_type],
                &vec![b'['; 100_000],
            ),
            400,
            "invalid_field",
        ),
        (
            request(
                "POST",
                "/v1/proposals",
                &[("Authorization", &agent), json_type],
                &[br#"{"vertices":"#.as_slice(), &vec![b'['; 100_000]].concat(),
            ),
            400,
            "invalid_field",
        ),
        (
            request(
                "POST",
                "/v1/proposals",
                &[("Authorization", &agent), json_type],
                &vec![b'{'; 100_000],
            ),
            400,
            "malformed_json",
        ),
        (
            request("POST", "/v1/proposals", &[("Authorization", &agent)], b"{}"),
            415,
            "unsupported_media_type",
        ),
        (
            request(
                "POST",
                "/v1/proposals/nope/outcome",
                &[("Authorization", &agent), json_type],
                br#"{"status":"applied"}"#,
            ),
            404,
            "not_found",
        ),
    ];
    for (bytes, status, error) in cases {
        let r = send(&server, &bytes).await;
        let line = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
        assert_eq!(r.status, status, "{line}");
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json"),
            "{line}"
        );
        assert_eq!(r.json()["error"], error, "{line}");
    }

    // HEAD where there is no GET: 405 (a HEAD answer never has a body).
    let r = send(&server, &request("HEAD", "/v1/proposals", &[], b"")).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow").as_deref(), Some("POST"));
    assert!(r.body.is_empty());

    // HEAD on the health endpoints: GET's status and headers, no body.
    for path in ["/healthz", "/readyz"] {
        let get = send(&server, &request("GET", path, &[], b"")).await;
        let head = send(&server, &request("HEAD", path, &[], b"")).await;
        assert_eq!(head.status, 200, "HEAD {path}");
        assert_eq!(head.status, get.status, "HEAD {path}");
        assert!(head.body.is_empty(), "HEAD {path}: {:?}", head.body);
        assert_eq!(
            head.header("content-length"),
            get.header("content-length"),
            "HEAD {path}"
        );
    }

    // What the HTTP layer answers by itself, before any route (documented in
    // docs/coordinator.md): a status line without a JSON body.
    let long_header = "x".repeat(1 << 20);
    let many_headers: Vec<(String, String)> = (0..10_000)
        .map(|i| (format!("X-H{i}"), "1".to_string()))
        .collect();
    let many: Vec<(&str, &str)> = many_headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let long_uri = format!("/healthz?{}", "a".repeat(100_000));
    let transport: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "1 MB header",
            request("GET", "/healthz", &[("Authorization", &long_header)], b""),
            431,
        ),
        (
            "10,000 headers",
            request("GET", "/healthz", &many, b""),
            431,
        ),
        (
            "100 KB URI",
            request("GET", &long_uri, &[], b""),
            414,
        ),
        (
            "non-ASCII header byte",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: \xff\x01\r\n\r\n".to_vec(),
            400,
        ),
        (
            "Transfer-Encoding: gzip",
            request(
                "POST",
                "/v1/proposals",
                &[("Transfer-Encoding", "gzip")],
                b"",
            ),
            400,
        ),
        (
            "two Content-Length headers",
            b"POST /v1/proposals HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}"
                .to_vec(),
            400,
        ),
        ("HTTP/0.9", b"GET /healthz\r\n\r\n".to_vec(), 400),
        (
            "TLS bytes",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
            400,
        ),
    ];
    for (name, bytes, status) in transport {
        let r = send(&server, &bytes).await;
        assert_eq!(r.status, status, "{name}: {}", r.head);
    }
    // And it keeps serving.
    let (status, _) = server.call("GET", "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
}
