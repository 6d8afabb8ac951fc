//! A plain blocking HTTP/1.1 client for loopback: one request per connection, bounded by a
//! timeout, panicking with the address and path when the daemon does not answer (it serves
//! tests, which want the failure, not a `Result`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A buffered HTTP response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

/// One GET with `Connection: close`.
pub fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http_request(addr, "GET", path, None, None)
}

/// One request with `Connection: close`, an optional bearer token and an optional JSON body.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    json: Option<&str>,
) -> HttpResponse {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
    stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = bearer {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = json.unwrap_or_default();
    if json.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .unwrap_or_else(|e| panic!("sending {method} {path} to {addr}: {e}"));
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("reading {method} {path} from {addr}: {e}"));
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path} from {addr}: no status line in {head:?}"));
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    HttpResponse { status, body }
}

/// Decodes a chunked transfer-encoded body.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Serves one connection with `answer` and returns what the client sent.
    fn serve_once(answer: &'static str) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"{}") {
                let n = stream.read(&mut buf).unwrap();
                request.extend_from_slice(&buf[..n]);
            }
            stream.write_all(answer.as_bytes()).unwrap();
            String::from_utf8(request).unwrap()
        });
        (addr, server)
    }

    #[test]
    fn sends_token_and_body_and_decodes_a_chunked_answer() {
        let (addr, server) = serve_once(
            "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        );
        let response = http_request(addr, "PUT", "/x", Some("t0k"), Some("{}"));
        assert_eq!(response.status, 201);
        assert_eq!(response.body, "abcde");
        let request = server.join().unwrap();
        assert!(request.starts_with("PUT /x HTTP/1.1\r\n"), "{request}");
        assert!(
            request.contains("Authorization: Bearer t0k\r\n"),
            "{request}"
        );
        assert!(request.contains("Content-Length: 2\r\n"), "{request}");
    }
}
