//! The web console over real HTTP, as a browser would speak to it (cookies, forms), against
//! SQLite and PostgreSQL: sign-in, session cookie attributes, CSRF, the Content-Security
//! Policy, escaping, bad input naming the field, revocation, expiry, sign-out and restarts;
//! approving, denying and pausing through the forms.
//! `console_browser.rs` drives the same pages in a real browser.

#[macro_use]
mod support;

use std::collections::BTreeMap;

use flink_autoscale_testkit::{send_signal, Signal};
use hyper::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use support::{job, proposal, Db, Server, ADMIN, AGENT, VIEWER};

on_both_backends!(
    sign_in_and_the_session_cookie,
    forms_need_the_session_csrf_token,
    pages_show_the_fleet_and_escape_what_agents_send,
    bad_input_names_the_field,
    sessions_survive_restarts_and_end_on_revocation_expiry_or_sign_out,
    admins_approve_and_deny_pending_proposals,
    admins_pause_and_lift_from_the_regions_page,
);

/// A named admin (alice) and viewer (carol), so the audit can say who decided.
fn start_named(db: &Db) -> Server {
    Server::start_named(db, &format!("alice:{ADMIN}\n"), &[])
}

async fn decision(server: &Server, id: &str) -> Value {
    let (status, body) = server
        .call("GET", &format!("/v1/decisions/{id}"), Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Asserts a 4xx page naming `field`.
fn assert_names(page: &Page, status: StatusCode, field: &str, what: &str) {
    assert_eq!(page.status, status, "{what}: {}", page.body);
    assert!(
        page.body.contains(&format!("<code>{field}</code>")),
        "{what} should name {field}: {}",
        page.body
    );
}

/// One answer.
struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect()
    }

    /// The value of the first `name="csrf"` field on the page.
    fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .unwrap_or_else(|| panic!("no CSRF field on the page:\n{}", self.body));
        let rest = &self.body[at + "name=\"csrf\" value=\"".len()..];
        rest[..rest.find('"').expect("closing quote")].to_string()
    }
}

/// A browser without a browser: keeps cookies and sends forms.
struct Visitor<'a> {
    server: &'a Server,
    cookies: BTreeMap<String, String>,
}

impl<'a> Visitor<'a> {
    fn new(server: &'a Server) -> Self {
        Visitor {
            server,
            cookies: BTreeMap::new(),
        }
    }

    async fn send(&mut self, method: &str, path: &str, form: Option<&[(&str, &str)]>) -> Page {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut headers = vec![("cookie", cookie.as_str())];
        let body = form.map(|fields| {
            url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(fields)
                .finish()
        });
        if body.is_some() {
            headers.push(("content-type", "application/x-www-form-urlencoded"));
        }
        let (status, headers, body) = self
            .server
            .request(
                method,
                path,
                &headers,
                body.unwrap_or_default().into_bytes(),
            )
            .await;
        let page = Page {
            status,
            headers,
            body,
        };
        for cookie in page.set_cookies() {
            let pair = cookie.split(';').next().unwrap_or("");
            let (name, value) = pair.split_once('=').expect("name=value");
            if value.is_empty() || cookie.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        page
    }

    async fn get(&mut self, path: &str) -> Page {
        self.send("GET", path, None).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        self.send("POST", path, Some(form)).await
    }

    /// The sign-in form, then the token posted with its CSRF token.
    async fn sign_in(&mut self, token: &str) -> Page {
        let form = self.get("/ui/sign-in").await;
        assert_eq!(form.status, StatusCode::OK, "{}", form.body);
        let csrf = form.csrf();
        self.post("/ui/sign-in", &[("token", token), ("csrf", &csrf)])
            .await
    }
}

fn assert_strict_headers(page: &Page, what: &str) {
    let csp = page
        .headers
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(directive), "{what}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(page.headers["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(page.headers["x-frame-options"], "DENY", "{what}");
}

async fn sign_in_and_the_session_cookie(db: Db) {
    let server = Server::start(&db, &["--console-session-ttl", "2h"]);
    let mut v = Visitor::new(&server);

    // Without a session, a page sends the browser to the form, and back afterwards.
    let page = v.get("/ui/audit?verdict=refused").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(
        page.location(),
        "/ui/sign-in?next=%2Fui%2Faudit%3Fverdict%3Drefused"
    );
    assert_strict_headers(&page, "redirect");
    let root = v.get("/ui").await;
    assert_eq!(
        (root.status, root.location()),
        (StatusCode::SEE_OTHER, "/ui/")
    );

    // The form: no script or style inline, a password field, a one-off CSRF cookie.
    let form = v.get("/ui/sign-in?next=%2Fui%2Faudit").await;
    assert_strict_headers(&form, "sign-in form");
    assert!(form.body.contains("type=\"password\""));
    assert!(!form.body.contains("<script>") && !form.body.contains("style="));
    let csrf = form.csrf();
    let sign_in_cookie = form
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("fa_sign_in="))
        .expect("the form's CSRF cookie");
    assert!(sign_in_cookie.contains("HttpOnly") && sign_in_cookie.contains("SameSite=Strict"));

    // The token is checked; a wrong one and an agent token get the form again, no session.
    let wrong = "wrong-token-0123456789-abcdef";
    for (token, status) in [
        (wrong, StatusCode::UNAUTHORIZED),
        (AGENT, StatusCode::FORBIDDEN),
    ] {
        let form = v.get("/ui/sign-in").await;
        let csrf = form.csrf();
        let page = v
            .post("/ui/sign-in", &[("token", token), ("csrf", &csrf)])
            .await;
        assert_eq!(page.status, status, "{}", page.body);
        assert!(page.body.contains("<code>token</code>") || page.body.contains("token:"));
        assert!(!v.cookies.contains_key("fa_session"));
    }
    // A sign-in form posted from elsewhere (no matching cookie) is refused.
    let mut stranger = Visitor::new(&server);
    let page = stranger
        .post("/ui/sign-in", &[("token", ADMIN), ("csrf", &csrf)])
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(!stranger.cookies.contains_key("fa_session"));

    // The right token: a session cookie that scripts cannot read, sent to this site only,
    // with the configured lifetime; then back to the page asked for.
    let form = v.get("/ui/sign-in?next=%2Fui%2Faudit").await;
    let csrf = form.csrf();
    let page = v
        .post(
            "/ui/sign-in",
            &[("token", ADMIN), ("csrf", &csrf), ("next", "/ui/audit")],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.location(), "/ui/audit");
    let cookie = page
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("fa_session="))
        .expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=7200"] {
        assert!(cookie.contains(attribute), "{attribute} missing: {cookie}");
    }
    assert!(!cookie.contains(ADMIN), "the token is not the session id");
    // No next page that leaves the console.
    let form = v.get("/ui/sign-in").await;
    let csrf = form.csrf();
    let page = v
        .post(
            "/ui/sign-in",
            &[
                ("token", ADMIN),
                ("csrf", &csrf),
                ("next", "//evil.example/"),
            ],
        )
        .await;
    assert_eq!(page.location(), "/ui/");

    let fleet = v.get("/ui/").await;
    assert_eq!(fleet.status, StatusCode::OK);
    assert_eq!(fleet.headers["cache-control"], "no-store");
    assert!(
        fleet.body.contains("signed in as <b>token-") && fleet.body.contains(" (admin)</span>"),
        "the admin's name (a bare token's is token-<digest>) and role"
    );
    assert_strict_headers(&fleet, "fleet");

    // The assets, from the binary, cacheable (their URLs carry a content digest).
    let css_url = fleet
        .body
        .split("href=\"")
        .find_map(|s| s.split('"').next().filter(|u| u.contains(".css")))
        .expect("stylesheet link")
        .to_string();
    assert!(css_url.starts_with("/ui/assets/console.css?v="));
    let css = v.get(&css_url).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(css.headers["content-type"], "text/css; charset=utf-8");
    assert!(css.headers["cache-control"]
        .to_str()
        .unwrap()
        .contains("immutable"));
    assert!(v
        .get("/ui/assets/console.js")
        .await
        .body
        .contains("data-refresh"));
    assert_eq!(
        v.get("/ui/assets/nothing.js").await.status,
        StatusCode::NOT_FOUND
    );

    // No token in any log line.
    let log = server.stderr();
    assert!(!log.contains(ADMIN) && !log.contains(wrong), "{log}");
}

async fn forms_need_the_session_csrf_token(db: Db) {
    let server = Server::start(&db, &[]);
    let mut v = Visitor::new(&server);
    v.sign_in(ADMIN).await;
    let regions = v.get("/ui/regions").await;
    let csrf = regions.csrf();

    let flagged = || async {
        let (_, body) = server.call("GET", "/v1/regions", Some(ADMIN), None).await;
        body["regions"].as_array().map_or(0, Vec::len)
    };
    // Without the token, with another one, or from a page of another session: refused.
    let mut other = Visitor::new(&server);
    other.sign_in(ADMIN).await;
    let others_csrf = other.get("/ui/regions").await.csrf();
    for fields in [
        vec![("region", "eu-west-1"), ("reason", "drill")],
        vec![
            ("region", "eu-west-1"),
            ("reason", "drill"),
            ("csrf", "0000"),
        ],
        vec![
            ("region", "eu-west-1"),
            ("reason", "drill"),
            ("csrf", &others_csrf),
        ],
    ] {
        let page = v.post("/ui/regions", &fields).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
        assert!(page.body.contains("<code>csrf</code>"), "{}", page.body);
    }
    // Not a form: 415.
    let (status, _, _) = server
        .request(
            "POST",
            "/ui/regions",
            &[
                ("cookie", &format!("fa_session={}", v.cookies["fa_session"])),
                ("content-type", "application/json"),
            ],
            br#"{"region":"eu-west-1"}"#.to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(flagged().await, 0, "nothing may have been flagged");

    // With it: flagged, and listed on the page and in the API.
    let page = v
        .post(
            "/ui/regions",
            &[
                ("region", "eu-west-1"),
                ("reason", "failover drill"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/ui/regions")
    );
    assert_eq!(flagged().await, 1);
    let regions = v.get("/ui/regions").await;
    assert!(regions.body.contains("failover drill"));
    let page = v
        .post("/ui/regions/eu-west-1/clear", &[("csrf", "nope")])
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert_eq!(flagged().await, 1);
    let page = v
        .post("/ui/regions/eu-west-1/clear", &[("csrf", &csrf)])
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(flagged().await, 0);
    let page = v
        .post("/ui/regions/eu-west-1/clear", &[("csrf", &csrf)])
        .await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);

    // Signed out, a form sends the browser to sign in and changes nothing.
    let mut nobody = Visitor::new(&server);
    let page = nobody
        .post(
            "/ui/regions",
            &[("region", "x"), ("reason", "y"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/ui/sign-in")
    );
    assert_eq!(flagged().await, 0);
}

async fn pages_show_the_fleet_and_escape_what_agents_send(db: Db) {
    let server = Server::start(&db, &["--min-interval-seconds", "0"]);
    let mut v = Visitor::new(&server);
    v.sign_in(ADMIN).await;
    let empty = v.get("/ui/").await;
    assert!(
        empty.body.contains("No job has sent a proposal yet"),
        "{}",
        empty.body
    );

    // Job 1 scales 4 -> 6 and is applied; job 2, named with markup, is refused a scale-down.
    let (status, _) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(AGENT),
            Some(proposal("up", &job(1), 4, 6)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    server
        .report_outcome("up", json!({"status": "applied", "restart_ms": 2500}))
        .await;
    server
        .call(
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            Some(json!({"reason": "drill"})),
        )
        .await;
    let mut evil = proposal("down", &job(2), 4, 2);
    evil["job_name"] = json!("<script>alert(1)</script>");
    let (_, refused) = server
        .call("POST", "/v1/proposals", Some(AGENT), Some(evil))
        .await;
    assert_eq!(refused["verdict"], "refused");

    let fleet = v.get("/ui/").await;
    assert!(
        !fleet.body.contains("<script>alert"),
        "markup from an agent ran"
    );
    assert!(fleet.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // Slots: job 1 from 4 to 6, job 2 stays at 4 (refused).
    let number = |id: &str| -> String {
        let at = fleet.body.find(&format!("id=\"{id}\">")).expect(id);
        let rest = &fleet.body[at + id.len() + 6..];
        rest[..rest.find('<').unwrap()].trim().to_string()
    };
    assert_eq!(number("slots-now"), "10");
    assert_eq!(number("slots-before"), "8");
    assert!(fleet.body.contains("outcome-applied"));
    assert!(fleet.body.contains("2.5 s restart"));
    // A refusal shows no outcome.
    let refused_row = fleet
        .body
        .split("<tr data-job=")
        .find(|row| row.contains("verdict-refused"))
        .expect("the refused job's row");
    assert!(refused_row.contains("refused: nothing to apply"));
    assert!(!refused_row.contains("outcome-"));

    // The audit filters by verdict and by job name; the job page has the chart and evidence.
    let audit = v.get("/ui/audit?verdict=approved").await;
    assert!(audit.body.contains("data-proposal=\"up\""));
    assert!(!audit.body.contains("data-proposal=\"down\""));
    let by_name = v.get("/ui/audit?job=orders").await;
    assert!(by_name.body.contains("data-proposal=\"up\""));
    let job_page = v.get(&format!("/ui/jobs/{}", job(1))).await;
    assert_eq!(job_page.status, StatusCode::OK);
    assert!(job_page.body.contains("<svg class=\"chart\""));
    assert!(job_page.body.contains("True rate/s"));
    assert_eq!(
        v.get(&format!("/ui/jobs/{}", job(3))).await.status,
        StatusCode::NOT_FOUND
    );
    // The JSON API has the same filters.
    let (status, page) = server
        .call("GET", "/v1/decisions?verdict=refused", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["decisions"].as_array().unwrap().len(), 1);
    let (_, page) = server
        .call("GET", "/v1/decisions?until=1", Some(ADMIN), None)
        .await;
    assert_eq!(page["decisions"].as_array().unwrap().len(), 0);
}

async fn bad_input_names_the_field(db: Db) {
    let server = Server::start(&db, &[]);
    let mut v = Visitor::new(&server);
    v.sign_in(ADMIN).await;
    let csrf = v.get("/ui/regions").await.csrf();
    for (path, field) in [
        ("/ui/audit?verdict=maybe", "verdict"),
        ("/ui/audit?from=yesterday", "from"),
        ("/ui/audit?to=2026-02-30T00:00", "to"),
        ("/ui/audit?cluster=a%2Fb", "cluster"),
        ("/ui/audit?cursor=-1", "cursor"),
        ("/ui/audit?colour=red", "colour"),
        ("/ui/?region=x&region=y", "region"),
        ("/ui/jobs/not-a-job-id", "job"),
    ] {
        let page = v.get(path).await;
        assert_eq!(
            page.status,
            StatusCode::BAD_REQUEST,
            "{path}: {}",
            page.body
        );
        assert!(
            page.body.contains(&format!("<code>{field}</code>")),
            "{path} should name {field}: {}",
            page.body
        );
        assert_strict_headers(&page, path);
    }
    for (fields, field) in [
        (vec![("reason", "r")], "region"),
        (vec![("region", "eu")], "reason"),
        (vec![("region", "../x"), ("reason", "r")], "region"),
        (
            vec![("region", "eu"), ("reason", "r"), ("colour", "red")],
            "colour",
        ),
    ] {
        let mut fields = fields;
        fields.push(("csrf", &csrf));
        let page = v.post("/ui/regions", &fields).await;
        assert_eq!(
            page.status,
            StatusCode::BAD_REQUEST,
            "{fields:?}: {}",
            page.body
        );
        assert!(
            page.body.contains(&format!("<code>{field}</code>")),
            "{}",
            page.body
        );
    }
    let wrong_method = v.send("DELETE", "/ui/regions", None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
}

async fn sessions_survive_restarts_and_end_on_revocation_expiry_or_sign_out(db: Db) {
    let server = Server::start(&db, &[]);
    let cookie = {
        let mut v = Visitor::new(&server);
        assert_eq!(v.sign_in(ADMIN).await.status, StatusCode::SEE_OTHER);
        v.cookies["fa_session"].clone()
    };
    // Only digests are stored: the database never holds the cookie or the token.
    server.terminate();
    let server = Server::start(&db, &[]);
    let mut v = Visitor::new(&server);
    v.cookies.insert("fa_session".into(), cookie.clone());
    assert_eq!(
        v.get("/ui/").await.status,
        StatusCode::OK,
        "the session survives a restart"
    );

    // Revoking the token (token file rewritten, SIGHUP) ends its sessions.
    let admin_file = db.dir().join("admin.tokens");
    std::fs::write(&admin_file, "another-admin-token-0123456789\n").expect("tokens");
    assert!(send_signal(server.pid(), Signal::Hup, false));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while v.get("/ui/").await.status == StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "the revoked token's session lives on"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(v.get("/ui/").await.location(), "/ui/sign-in?next=%2Fui%2F");
    std::fs::write(&admin_file, format!("{ADMIN}\n")).expect("tokens");
    assert!(send_signal(server.pid(), Signal::Hup, false));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        v.get("/ui/").await.status,
        StatusCode::OK,
        "token back, session back"
    );

    // Expiry is checked against the stored time.
    db.execute_in_store("UPDATE console_sessions SET expires_at = 1")
        .await;
    assert_eq!(v.get("/ui/").await.status, StatusCode::SEE_OTHER, "expired");

    // Signing out ends the session for good.
    v.sign_in(ADMIN).await;
    let csrf = v.get("/ui/").await.csrf();
    let old = v.cookies["fa_session"].clone();
    let page = v.post("/ui/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/ui/sign-in")
    );
    assert!(!v.cookies.contains_key("fa_session"), "cookie cleared");
    v.cookies.insert("fa_session".into(), old);
    assert_eq!(
        v.get("/ui/").await.status,
        StatusCode::SEE_OTHER,
        "signed out"
    );
    server.terminate();
}

async fn admins_approve_and_deny_pending_proposals(db: Db) {
    let server = start_named(&db);
    let rules = json!({ "rules": [
        { "name": "orders-by-hand", "jobs": ["orders*"], "action": "manual" }
    ]});
    let (status, body) = server
        .call("PUT", "/v1/policies", Some(ADMIN), Some(rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for (id, n) in [("p1", 1), ("p2", 2)] {
        assert_eq!(server.propose(id, n, 4, 8).await["verdict"], "pending");
    }

    // The admin sees both, with the evidence, the rule, the expiry and the forms.
    let mut admin = Visitor::new(&server);
    admin.sign_in(ADMIN).await;
    let page = admin.get("/ui/pending").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_strict_headers(&page, "pending");
    for expected in [
        "<tr data-proposal=\"p1\"",
        "<tr data-proposal=\"p2\"",
        "id=\"pending\" data-refresh=",
        "orders-by-hand",
        "True rate/s",
        "<td class=\"num\">1000</td>",
        "scale <b class=\"up\">up</b>",
        "cluster <b>c1</b> · region <b>eu-west-1</b>",
        "<div class=\"detail\" title=\"",
        ">expires in ",
        "action=\"/ui/pending/p1/approve\"",
        "formaction=\"/ui/pending/p1/deny\"",
        "name=\"comment\"",
        "id=\"pending-count\">2<",
    ] {
        assert!(page.body.contains(expected), "{expected}: {}", page.body);
    }
    let csrf = page.csrf();

    // A viewer sees the list without buttons and may not post.
    let mut viewer = Visitor::new(&server);
    viewer.sign_in(VIEWER).await;
    let page = viewer.get("/ui/pending").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<tr data-proposal=\"p1\""));
    assert!(!page.body.contains("/approve") && !page.body.contains("name=\"comment\""));
    let viewer_csrf = page.csrf();
    let refused = viewer
        .post(
            "/ui/pending/p1/approve",
            &[("comment", "mine"), ("csrf", &viewer_csrf)],
        )
        .await;
    assert_names(
        &refused,
        StatusCode::FORBIDDEN,
        "role",
        "a viewer's approval",
    );
    // No CSRF token, or another session's: refused.
    for token in ["", viewer_csrf.as_str()] {
        let page = admin
            .post(
                "/ui/pending/p1/approve",
                &[("comment", "go"), ("csrf", token)],
            )
            .await;
        assert_names(
            &page,
            StatusCode::FORBIDDEN,
            "csrf",
            "approval without CSRF",
        );
    }
    assert_eq!(decision(&server, "p1").await["verdict"], "pending");

    // Approved through the form: the audit has the admin's name and comment.
    let page = admin
        .post(
            "/ui/pending/p1/approve",
            &[("comment", "peak traffic, go"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/ui/pending"),
        "{}",
        page.body
    );
    let record = decision(&server, "p1").await;
    assert_eq!(record["verdict"], "approved", "{record}");
    assert_eq!(record["review"]["by"], "alice", "{record}");
    assert_eq!(record["review"]["comment"], "peak traffic, go", "{record}");
    let audit = admin.get("/ui/audit?verdict=approved").await;
    assert!(
        audit
            .body
            .contains("approved by <b>alice</b>: peak traffic, go"),
        "{}",
        audit.body
    );
    // Deciding again: the page says it was already decided, and by whom.
    let again = admin
        .post("/ui/pending/p1/deny", &[("comment", "no"), ("csrf", &csrf)])
        .await;
    assert_names(
        &again,
        StatusCode::CONFLICT,
        "proposal_id",
        "a second decision",
    );
    assert!(again.body.contains("approved by alice"), "{}", again.body);
    let unknown = admin
        .post("/ui/pending/nope/approve", &[("csrf", &csrf)])
        .await;
    assert_names(
        &unknown,
        StatusCode::NOT_FOUND,
        "proposal_id",
        "an unknown proposal",
    );

    // A denial needs a comment.
    let page = admin
        .post("/ui/pending/p2/deny", &[("comment", " "), ("csrf", &csrf)])
        .await;
    assert_names(
        &page,
        StatusCode::BAD_REQUEST,
        "comment",
        "a denial without a comment",
    );
    let page = admin
        .post(
            "/ui/pending/p2/deny",
            &[("comment", "not during the freeze"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let record = decision(&server, "p2").await;
    assert_eq!(record["verdict"], "refused", "{record}");
    assert_eq!(record["reasons"][0]["code"], "denied", "{record}");
    assert_eq!(record["review"]["by"], "alice", "{record}");

    // The gates run again at approval time: the region is evacuating by now.
    assert_eq!(server.propose("p3", 3, 8, 4).await["verdict"], "pending");
    let (status, body) = server
        .call(
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            Some(json!({ "reason": "failover" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let page = admin
        .post(
            "/ui/pending/p3/approve",
            &[("comment", "ok"), ("csrf", &csrf)],
        )
        .await;
    assert_names(
        &page,
        StatusCode::CONFLICT,
        "proposal_id",
        "a refused approval",
    );
    assert!(page.body.contains("region_evacuating"), "{}", page.body);
    assert_eq!(decision(&server, "p3").await["verdict"], "refused");

    let page = admin.get("/ui/pending").await;
    assert!(
        page.body.contains("No proposal is waiting"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("id=\"pending-count\""));
    server.terminate();
}

async fn admins_pause_and_lift_from_the_regions_page(db: Db) {
    let server = start_named(&db);
    let pauses = || async {
        let (status, body) = server.call("GET", "/v1/pauses", Some(ADMIN), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["pauses"].as_array().cloned().unwrap_or_default()
    };
    let mut admin = Visitor::new(&server);
    admin.sign_in(ADMIN).await;
    let page = admin.get("/ui/regions").await;
    assert!(page.body.contains("Nothing is paused."), "{}", page.body);
    assert!(page.body.contains("action=\"/ui/pauses\""));
    let csrf = page.csrf();

    // Missing CSRF: refused, nothing paused.
    let page = admin
        .post(
            "/ui/pauses",
            &[("kind", "cluster"), ("value", "c1"), ("reason", "INC-4711")],
        )
        .await;
    assert_names(&page, StatusCode::FORBIDDEN, "csrf", "a pause without CSRF");
    assert!(pauses().await.is_empty());

    // Pause the cluster for half an hour: listed, and its proposals are refused.
    let page = admin
        .post(
            "/ui/pauses",
            &[
                ("kind", "cluster"),
                ("value", "c1"),
                ("reason", "INC-4711"),
                ("expires_in_minutes", "30"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(
        (page.status, page.location()),
        (StatusCode::SEE_OTHER, "/ui/regions"),
        "{}",
        page.body
    );
    let listed = pauses().await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["scope"], "cluster/c1");
    assert_eq!(listed[0]["set_by"], "alice");
    assert!(listed[0]["expires_at"].as_i64().is_some(), "{listed:?}");
    let page = admin.get("/ui/regions").await;
    for expected in [
        "<tr data-pause=\"cluster/c1\">",
        "INC-4711",
        "<td>alice</td>",
        "action=\"/ui/pauses/cluster/c1/clear\"",
        "id=\"pauses\" data-refresh=",
    ] {
        assert!(page.body.contains(expected), "{expected}: {}", page.body);
    }
    let refused = server.propose("q1", 1, 4, 8).await;
    assert_eq!(refused["verdict"], "refused", "{refused}");
    assert_eq!(refused["reasons"][0]["code"], "paused", "{refused}");

    // A viewer sees the pause, without forms, and may not pause or lift.
    let mut viewer = Visitor::new(&server);
    viewer.sign_in(VIEWER).await;
    let page = viewer.get("/ui/regions").await;
    assert!(page.body.contains("<tr data-pause=\"cluster/c1\">"));
    assert!(!page.body.contains("/ui/pauses") && !page.body.contains("Lift"));
    let viewer_csrf = page.csrf();
    for (path, fields) in [
        (
            "/ui/pauses",
            vec![("kind", "fleet"), ("reason", "x"), ("csrf", &viewer_csrf)],
        ),
        ("/ui/pauses/cluster/c1/clear", vec![("csrf", &viewer_csrf)]),
    ] {
        let page = viewer.post(path, &fields).await;
        assert_names(&page, StatusCode::FORBIDDEN, "role", path);
    }
    assert_eq!(pauses().await.len(), 1);

    // Lifted: proposals pass again; lifting twice is a 404 naming the scope.
    let page = admin
        .post("/ui/pauses/cluster/c1/clear", &[("csrf", &csrf)])
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(pauses().await.is_empty());
    assert_eq!(server.propose("q2", 1, 4, 8).await["verdict"], "approved");
    let page = admin
        .post("/ui/pauses/cluster/c1/clear", &[("csrf", &csrf)])
        .await;
    assert_names(&page, StatusCode::NOT_FOUND, "scope", "lifting twice");

    // The fleet has no value, in the form and in the Lift path.
    let page = admin
        .post(
            "/ui/pauses",
            &[
                ("kind", "fleet"),
                ("reason", "deploy freeze"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(pauses().await[0]["scope"], "fleet");
    assert!(admin
        .get("/ui/regions")
        .await
        .body
        .contains("action=\"/ui/pauses/fleet/clear\""));
    let page = admin
        .post("/ui/pauses/fleet/clear", &[("csrf", &csrf)])
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(pauses().await.is_empty());

    // Bad input names the field, and pauses nothing.
    for (fields, field) in [
        (
            vec![("kind", "planet"), ("value", "x"), ("reason", "r")],
            "kind",
        ),
        (vec![("value", "x"), ("reason", "r")], "kind"),
        (
            vec![("kind", "fleet"), ("value", "x"), ("reason", "r")],
            "value",
        ),
        (vec![("kind", "cluster"), ("reason", "r")], "value"),
        (
            vec![("kind", "region"), ("value", "../x"), ("reason", "r")],
            "value",
        ),
        (
            vec![("kind", "job"), ("value", "orders"), ("reason", "r")],
            "value",
        ),
        (
            vec![("kind", "cluster"), ("value", "c1"), ("reason", " ")],
            "reason",
        ),
        (
            vec![
                ("kind", "cluster"),
                ("value", "c1"),
                ("reason", "r"),
                ("expires_in_minutes", "soon"),
            ],
            "expires_in_minutes",
        ),
        (
            vec![
                ("kind", "cluster"),
                ("value", "c1"),
                ("reason", "r"),
                ("expires_in_minutes", "0"),
            ],
            "expires_in_minutes",
        ),
        (
            vec![
                ("kind", "cluster"),
                ("value", "c1"),
                ("reason", "r"),
                ("colour", "red"),
            ],
            "colour",
        ),
    ] {
        let mut fields = fields;
        fields.push(("csrf", &csrf));
        let page = admin.post("/ui/pauses", &fields).await;
        assert_names(
            &page,
            StatusCode::BAD_REQUEST,
            field,
            &format!("{fields:?}"),
        );
    }
    let page = admin
        .post("/ui/pauses/planet/x/clear", &[("csrf", &csrf)])
        .await;
    assert_names(
        &page,
        StatusCode::BAD_REQUEST,
        "scope",
        "an unknown kind to lift",
    );
    assert!(pauses().await.is_empty());
    server.terminate();
}
