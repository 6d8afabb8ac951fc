//! A real browser for the console tests: Debian's Chromium, headless, driven through
//! ChromeDriver with the W3C WebDriver protocol (JSON over HTTP on loopback), in a fresh
//! profile. `scripts/setup-browser.sh` installs both.
//!
//! Only the dozen WebDriver calls the tests use, over the same hyper client as the rest of
//! the support code (a WebDriver crate would bring a few dozen more crates to build).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use flink_autoscale_testkit::ChildGuard;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const CHROMEDRIVER: &str = "chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The key W3C WebDriver names element references with.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
const START_TIMEOUT: Duration = Duration::from_secs(30);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Browser::find`] waits for an element to appear.
const FIND_TIMEOUT: Duration = Duration::from_secs(10);

/// A headless Chromium session. Dropping it kills ChromeDriver and its browser.
pub struct Browser {
    _driver: ChildGuard,
    driver_host: String,
    session: String,
    _profile: tempfile::TempDir,
}

/// An element of the current page.
pub struct Element<'a> {
    browser: &'a Browser,
    id: String,
}

impl Browser {
    /// Starts ChromeDriver on a free port and opens a session; `None` (said on stderr) when
    /// ChromeDriver is not installed, and under `CI=true` that fails the test instead.
    pub async fn start() -> Option<Browser> {
        let installed = Command::new(CHROMEDRIVER)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed || !Path::new(CHROMIUM).exists() {
            let message = "chromium and chromedriver are not installed (scripts/setup-browser.sh installs them)";
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{message} (CI=true: failing instead of skipping)");
            }
            eprintln!("SKIPPED: {message}");
            return None;
        }
        let mut command = Command::new(CHROMEDRIVER);
        command
            .args(["--port=0", "--allowed-ips=127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut driver = ChildGuard::group_leader(command.spawn().expect("start chromedriver"));
        let stdout = driver.child_mut().stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line
                    .split("started successfully on port ")
                    .nth(1)
                    .and_then(|rest| rest.trim_end_matches('.').trim().parse::<u16>().ok())
                {
                    let _ = tx.send(port);
                }
            }
        });
        let port = rx
            .recv_timeout(START_TIMEOUT)
            .expect("chromedriver announces its port");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Browser {
            _driver: driver,
            driver_host: format!("127.0.0.1:{port}"),
            session: String::new(),
            _profile: profile,
        };
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1360,1000",
            &format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let created = browser
            .call(
                "POST",
                "/session",
                Some(json!({ "capabilities": { "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": { "binary": CHROMIUM, "args": args }
                }}})),
            )
            .await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_string();
        Some(browser)
    }

    /// One WebDriver command; answers its `value`, panicking on a WebDriver error.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let answer = self.try_call(method, path, body).await;
        if let Some(error) = answer.get("error") {
            panic!("WebDriver {method} {path}: {error}: {}", answer["message"]);
        }
        answer
    }

    /// One WebDriver command; answers its `value` (an `{error, message}` object on failure).
    async fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let host = self.driver_host.clone();
        let fut = async {
            let stream = tokio::net::TcpStream::connect(&host)
                .await
                .expect("connect");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            let bytes = body.map(|b| b.to_string()).unwrap_or_default();
            let req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, &host)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(bytes)))
                .expect("request");
            let resp = sender.send_request(req).await.expect("send");
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            let value: Value = serde_json::from_slice(&body).expect("WebDriver answers JSON");
            value["value"].clone()
        };
        tokio::time::timeout(CALL_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| panic!("WebDriver {method} {path} took over {CALL_TIMEOUT:?}"))
    }

    fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub async fn goto(&self, url: &str) {
        self.call("POST", &self.at("/url"), Some(json!({ "url": url })))
            .await;
    }

    pub async fn current_url(&self) -> String {
        self.call("GET", &self.at("/url"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub async fn refresh(&self) {
        self.call("POST", &self.at("/refresh"), Some(json!({})))
            .await;
    }

    /// The page's HTML as the browser has it now.
    pub async fn source(&self) -> String {
        self.call("GET", &self.at("/source"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Every element matching a CSS selector, now.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self
            .call(
                "POST",
                &self.at("/elements"),
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e[ELEMENT_KEY].as_str())
            .map(|id| Element {
                browser: self,
                id: id.to_string(),
            })
            .collect()
    }

    /// The first element matching a CSS selector, waiting up to 10 s for it.
    pub async fn find(&self, css: &str) -> Element<'_> {
        let deadline = Instant::now() + FIND_TIMEOUT;
        loop {
            if let Some(e) = self.find_all(css).await.into_iter().next() {
                return e;
            }
            if Instant::now() > deadline {
                panic!(
                    "no element {css:?} on {} within {FIND_TIMEOUT:?}; page:\n{}",
                    self.current_url().await,
                    self.source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the first element matching `css` reads `want` (a page that is still
    /// navigating may show the old element, or replace it while it is read); answers the last
    /// text read.
    pub async fn wait_for_text(&self, css: &str, want: &str) -> String {
        let deadline = Instant::now() + FIND_TIMEOUT;
        loop {
            let mut last = String::new();
            if let Some(e) = self.find_all(css).await.into_iter().next() {
                let answer = self.try_call("GET", &e.at("/text"), None).await;
                last = answer.as_str().unwrap_or_default().to_string();
                if last == want {
                    return last;
                }
            }
            if Instant::now() > deadline {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs a script in the page; answers its return value.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            &self.at("/execute/sync"),
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// The cookies the browser holds for the current page (name, value, httpOnly, sameSite...).
    pub async fn cookies(&self) -> Vec<Value> {
        self.call("GET", &self.at("/cookie"), None)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// A PNG of the whole page (the window grows to the document's height first).
    pub async fn screenshot(&self, path: &Path) {
        let height = self
            .execute("return document.documentElement.scrollHeight;", json!([]))
            .await
            .as_u64()
            .unwrap_or(1000)
            .clamp(600, 4000);
        self.call(
            "POST",
            &self.at("/window/rect"),
            Some(json!({ "width": 1360, "height": height + 140 })),
        )
        .await;
        let png = self.call("GET", &self.at("/screenshot"), None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64 PNG"))
            .expect("decode the screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("screenshot dir");
        }
        std::fs::write(path, bytes).expect("write the screenshot");
    }

    /// Ends the session (closing the browser); ChromeDriver stops when dropped.
    pub async fn quit(self) {
        let _ = self.try_call("DELETE", &self.at(""), None).await;
    }
}

impl Element<'_> {
    fn at(&self, rest: &str) -> String {
        self.browser.at(&format!("/element/{}{rest}", self.id))
    }

    pub async fn click(&self) {
        self.browser
            .call("POST", &self.at("/click"), Some(json!({})))
            .await;
    }

    pub async fn type_text(&self, text: &str) {
        self.browser
            .call("POST", &self.at("/value"), Some(json!({ "text": text })))
            .await;
    }

    pub async fn text(&self) -> String {
        self.browser
            .call("GET", &self.at("/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}
