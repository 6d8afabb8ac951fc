//! Signing in and out, the session cookie and CSRF tokens.
//!
//! - Sign-in posts an admin or viewer token in a form body (never a URL) and gets a random
//!   session id in an `HttpOnly`, `SameSite=Strict` cookie with a `Max-Age`; `Secure` with
//!   TLS or `console.secure_cookie`.
//! - The store keeps the session under the SHA-256 of its id, with the SHA-256 of the token
//!   and a CSRF token; every request looks the token up again by that digest, so revoking a
//!   token ends its sessions and a role change applies at once.
//! - Every form carries the session's CSRF token; the sign-in form, which has no session yet,
//!   a one-off token that must match a cookie set with the form (double submit).

use flink_autoscale_shared::http::{Request, Response};
use hyper::header::{HeaderValue, COOKIE, SET_COOKIE};
use hyper::StatusCode;
use ring::rand::SecureRandom;
use subtle::ConstantTimeEq;

use super::form::Fields;
use super::html::{self, escape, Section};
use super::Failure;
use crate::api::App;
use crate::auth::{Principal, Role};
use crate::store::{now_ms, StoredSession};

const SESSION_COOKIE: &str = "fa_session";
const SIGN_IN_COOKIE: &str = "fa_sign_in";
/// How long a sign-in form stays usable.
const SIGN_IN_FORM_SECONDS: u64 = 600;
/// Random bytes in a session id or a CSRF token.
const SECRET_BYTES: usize = 32;

/// A signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    principal: Principal,
    id_digest: String,
    csrf: String,
    /// Proposals waiting for an admin, for the navigation bar; `None` when not counted.
    pending: Option<i64>,
}

impl Session {
    /// Admins act; everyone else who may sign in only reads.
    pub fn can_act(&self) -> bool {
        self.principal.role == Role::Admin
    }

    pub fn role_name(&self) -> &'static str {
        self.principal.role.as_str()
    }

    /// The signed-in token's name, recorded in the audit for the session's actions.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    pub fn pending(&self) -> Option<i64> {
        self.pending
    }

    pub fn set_pending(&mut self, count: Option<i64>) {
        self.pending = count;
    }

    /// Reads a posted form of this session, refusing it unless it carries the session's
    /// CSRF token.
    pub async fn read_form(&self, app: &App, req: Request) -> Result<Fields, Failure> {
        let mut fields = Fields::of_body(app, req).await?;
        let given = fields.take("csrf")?.unwrap_or_default();
        if !same_secret(&given, &self.csrf) {
            return Err(Failure::stale_form());
        }
        Ok(fields)
    }
}

/// Whether a token of `role` may sign in to the console.
fn may_sign_in(role: Role) -> bool {
    role != Role::Agent
}

/// The browser's session, or where to send it: the sign-in page for a missing or ended
/// session, a 403 for a viewer at an admin's form.
pub async fn require(app: &App, req: &Request, admin: bool) -> Result<Session, Failure> {
    let session = current(app, req).await?;
    let Some(session) = session else {
        return Err(Failure::SignIn { next: next_of(req) });
    };
    if admin && !session.can_act() {
        return Err(Failure::page(
            StatusCode::FORBIDDEN,
            "role",
            "viewers can see the console but not act; sign in with an admin token",
        ));
    }
    Ok(session)
}

/// The unexpired session of the request's cookie whose token is still configured.
async fn current(app: &App, req: &Request) -> Result<Option<Session>, Failure> {
    let Some(id) = cookie(req, SESSION_COOKIE) else {
        return Ok(None);
    };
    let id_digest = digest_hex(id.as_bytes());
    let Some(stored) = app.store.get()?.session(&id_digest, now_ms()).await? else {
        return Ok(None);
    };
    let token_digest = hex_bytes(&stored.token_digest).unwrap_or_default();
    let principal = app
        .tokens
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .principal_of_digest(&token_digest);
    Ok(principal
        .filter(|p| may_sign_in(p.role))
        .map(|principal| Session {
            principal,
            id_digest,
            csrf: stored.csrf,
            pending: None,
        }))
}

/// `GET /ui/sign-in`: the form, with a fresh one-off CSRF token in it and in a cookie.
pub fn form_page(app: &App, req: &Request) -> Result<Response, Failure> {
    let mut query = Fields::of_query(req);
    let next = query.take("next")?.filter(|n| safe_next(n));
    query.finish("next")?;
    Ok(sign_in_page(app, StatusCode::OK, next.as_deref(), None))
}

fn sign_in_page(
    app: &App,
    status: StatusCode,
    next: Option<&str>,
    error: Option<&str>,
) -> Response {
    let csrf = random_hex();
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    let next = next
        .map(|n| {
            format!(
                "<input type=\"hidden\" name=\"next\" value=\"{}\">",
                escape(n)
            )
        })
        .unwrap_or_default();
    let main = format!(
        "<section class=\"sign-in\"><h1>Sign in</h1>\
         <p>Paste an admin or viewer token of this coordinator. It is sent once, in this form's \
         body, and exchanged for a session cookie; it never appears in a URL or a log.</p>{error}\
         <form method=\"post\" action=\"/ui/sign-in\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{next}\
         <label for=\"token\">Token</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
         <button type=\"submit\">Sign in</button></form></section>"
    );
    let mut resp = html::response(status, html::page("Sign in", Section::None, None, &main));
    set_cookie(
        &mut resp,
        &cookie_header(app, SIGN_IN_COOKIE, &csrf, SIGN_IN_FORM_SECONDS),
    );
    resp
}

/// `POST /ui/sign-in`: token in, session cookie out.
pub async fn sign_in(app: &App, req: Request) -> Result<Response, Failure> {
    let form_cookie = cookie(&req, SIGN_IN_COOKIE).unwrap_or_default();
    let mut fields = Fields::of_body(app, req).await?;
    let csrf = fields.take("csrf")?.unwrap_or_default();
    let token = fields.take("token")?;
    let next = fields.take("next")?.filter(|n| safe_next(n));
    fields.finish("token, csrf, next")?;
    if form_cookie.is_empty() || !same_secret(&csrf, &form_cookie) {
        return Err(Failure::stale_form());
    }
    let Some(token) = token else {
        return Ok(sign_in_page(
            app,
            StatusCode::BAD_REQUEST,
            next.as_deref(),
            Some("token: is required"),
        ));
    };
    let header = format!("Bearer {token}");
    let role = app
        .tokens
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .authenticate(Some(header.as_bytes()));
    let principal = match role {
        Ok(principal) if may_sign_in(principal.role) => principal,
        Ok(_) => {
            metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => "wrong_role").increment(1);
            return Ok(sign_in_page(
                app,
                StatusCode::FORBIDDEN,
                next.as_deref(),
                Some("token: agent tokens cannot sign in; use an admin or viewer token"),
            ));
        }
        Err(e) => {
            metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => e.as_str()).increment(1);
            tracing::warn!("console sign-in refused: unknown token");
            return Ok(sign_in_page(
                app,
                StatusCode::UNAUTHORIZED,
                next.as_deref(),
                Some("token: not a token of this coordinator"),
            ));
        }
    };
    let id = random_hex();
    let ttl = app.console.session_ttl;
    let now = now_ms();
    let stored = StoredSession {
        token_digest: digest_hex(token.as_bytes()),
        csrf: random_hex(),
        expires_at: now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
    };
    app.store
        .get()?
        .create_session(&digest_hex(id.as_bytes()), &stored, now)
        .await?;
    tracing::info!(
        role = principal.role.as_str(),
        admin = %principal.name,
        "console sign-in"
    );
    let mut resp = html::redirect(next.as_deref().unwrap_or("/ui/"));
    set_cookie(
        &mut resp,
        &cookie_header(app, SESSION_COOKIE, &id, ttl.as_secs()),
    );
    set_cookie(&mut resp, &cookie_header(app, SIGN_IN_COOKIE, "", 0));
    Ok(resp)
}

/// `POST /ui/sign-out`: ends the session here and in the store.
pub async fn sign_out(app: &App, req: Request, session: &Session) -> Result<Response, Failure> {
    session.read_form(app, req).await?.finish("csrf")?;
    app.store.get()?.delete_session(&session.id_digest).await?;
    let mut resp = html::redirect("/ui/sign-in");
    set_cookie(&mut resp, &cookie_header(app, SESSION_COOKIE, "", 0));
    Ok(resp)
}

/// Where to come back to after signing in: this request's page, for a `GET`.
fn next_of(req: &Request) -> Option<String> {
    if req.method() != hyper::Method::GET {
        return None;
    }
    let next = req.uri().path_and_query().map(|p| p.as_str().to_string())?;
    safe_next(&next).then_some(next)
}

/// A console path of this origin (no `//host`, no backslash tricks, printable ASCII).
fn safe_next(next: &str) -> bool {
    next.starts_with("/ui/")
        && !next.contains("//")
        && next
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'\\' && b != b'"')
}

fn cookie_header(app: &App, name: &str, value: &str, max_age_seconds: u64) -> String {
    let secure = if app.console.secure_cookie {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{name}={value}; Path=/ui; Max-Age={max_age_seconds}; HttpOnly; SameSite=Strict{secure}"
    )
}

fn set_cookie(resp: &mut Response, header: &str) {
    if let Ok(value) = HeaderValue::from_str(header) {
        resp.headers_mut().append(SET_COOKIE, value);
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

fn same_secret(given: &str, expected: &str) -> bool {
    !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// 32 random bytes from the operating system, in hex.
fn random_hex() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    // The system generator only fails when the OS has no entropy source at all; a fixed
    // value would be a guessable session, so that is fatal.
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random number generator failed");
    hex(&bytes)
}

fn digest_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_pages_stay_on_this_console() {
        for ok in [
            "/ui/",
            "/ui/audit?verdict=refused&cursor=12",
            "/ui/jobs/abc",
        ] {
            assert!(safe_next(ok), "{ok}");
        }
        for bad in [
            "https://evil.example/",
            "//evil.example/ui/",
            "/ui//evil",
            "/v1/decisions",
            "/ui/\\evil",
            "/ui/a b",
            "/ui/\"x",
        ] {
            assert!(!safe_next(bad), "{bad}");
        }
    }

    #[test]
    fn secrets_are_random_hex_and_digests_round_trip() {
        let a = random_hex();
        assert_eq!(a.len(), 64);
        assert_ne!(a, random_hex());
        let d = digest_hex(b"admin-token-0123456789");
        assert_eq!(hex_bytes(&d).map(|b| hex(&b)), Some(d));
        assert!(!same_secret("", ""));
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
    }
}
