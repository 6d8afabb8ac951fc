//! The web console at `/ui/`: server-rendered HTML pages and plain forms over the store, for
//! the central team. Every page works without JavaScript; the script only refreshes lists in
//! place.
//!
//! Every answer carries a strict Content-Security-Policy (scripts, styles and images from
//! this origin only, no inline code, no framing, forms post here only). Signing in, the
//! session cookie and CSRF tokens are in [`session`].

mod assets;
mod audit;
mod chart;
mod fleet;
mod form;
mod html;
mod job;
mod pauses;
mod pending;
mod regions;
mod session;
mod time;

use std::time::Duration;

use flink_autoscale_core::protocol::ReviewAction;
use flink_autoscale_shared::http::{Request, Response};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};

use crate::api::{ApiError, App};
use crate::route::{Access, ConsoleRoute};
use crate::store::StoreError;
use html::Section;

/// What `[console]` configures.
#[derive(Debug, Clone)]
pub struct ConsoleSettings {
    pub enabled: bool,
    pub session_ttl: Duration,
    /// Mark cookies `Secure` (TLS here or at a proxy in front).
    pub secure_cookie: bool,
}

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

/// Answers one console request.
pub async fn serve(app: &App, req: Request, route: ConsoleRoute<'_>) -> Response {
    let mut resp = if app.console.enabled {
        answer(app, req, route)
            .await
            .unwrap_or_else(Failure::into_response)
    } else {
        Failure::page(
            StatusCode::NOT_FOUND,
            "path",
            "the console is turned off on this coordinator (console.enabled = false)",
        )
        .into_response()
    };
    let headers = resp.headers_mut();
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
    ] {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    resp
}

async fn answer(app: &App, req: Request, route: ConsoleRoute<'_>) -> Result<Response, Failure> {
    use ConsoleRoute as C;
    let mut session = match route.access() {
        Access::ConsoleSignedIn => Some(session::require(app, &req, false).await?),
        Access::ConsoleAdmin => Some(session::require(app, &req, true).await?),
        _ => None,
    };
    if let Some(session) = session.as_mut().filter(|_| route.method() == Method::GET) {
        // One COUNT over the open actions, for the navigation bar; a page still shows
        // without it.
        session.set_pending(app.store.get()?.pending_count().await.ok());
    }
    let signed_in = || session.as_ref().ok_or_else(Failure::no_session);
    match route {
        C::Root => Ok(html::redirect("/ui/")),
        C::Asset { name } => assets::serve(name)
            .ok_or_else(|| Failure::page(StatusCode::NOT_FOUND, "name", "no such asset")),
        C::SignInForm => session::form_page(app, &req),
        C::SignIn => session::sign_in(app, req).await,
        C::SignOut => session::sign_out(app, req, signed_in()?).await,
        C::Fleet => fleet::page(app, &req, signed_in()?).await,
        C::Audit => audit::page(app, &req, signed_in()?).await,
        C::Job { job_id } => job::page(app, &req, signed_in()?, job_id).await,
        C::Regions => regions::page(app, &req, signed_in()?).await,
        C::FlagRegion => regions::flag(app, req, signed_in()?).await,
        C::UnflagRegion { region } => regions::unflag(app, req, signed_in()?, region).await,
        C::Pending => pending::page(app, &req, signed_in()?).await,
        C::ApprovePending { proposal_id } => {
            pending::review(app, req, signed_in()?, proposal_id, ReviewAction::Approve).await
        }
        C::DenyPending { proposal_id } => {
            pending::review(app, req, signed_in()?, proposal_id, ReviewAction::Deny).await
        }
        C::Pause => pauses::set(app, req, signed_in()?).await,
        C::LiftPause { kind, value } => pauses::lift(app, req, signed_in()?, kind, value).await,
    }
}

/// Why a console request ends without its page.
#[derive(Debug)]
pub enum Failure {
    /// No valid session: go to the sign-in form (and come back to `next`).
    SignIn { next: Option<String> },
    /// An error page. `field` names the input at fault, if one is.
    Page {
        status: StatusCode,
        field: Option<String>,
        message: String,
    },
}

impl Failure {
    pub fn page(status: StatusCode, field: &str, message: impl Into<String>) -> Failure {
        Failure::Page {
            status,
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    /// A 400 for a form field or query parameter.
    pub fn invalid(field: &str, message: &str) -> Failure {
        Failure::page(StatusCode::BAD_REQUEST, field, message)
    }

    /// A form without the right CSRF token: posted from elsewhere, or from a page older than
    /// the session.
    pub fn stale_form() -> Failure {
        Failure::page(
            StatusCode::FORBIDDEN,
            "csrf",
            "this form is not from your current session (it expired, or came from another site); reload the page and send it again",
        )
    }

    fn no_session() -> Failure {
        Failure::SignIn { next: None }
    }

    /// Names `field` where the failure names none (the API's 404 for an unknown id).
    pub fn or_field(self, field: &str) -> Failure {
        match self {
            Failure::Page {
                status,
                field: None,
                message,
            } => Failure::Page {
                status,
                field: Some(field.to_string()),
                message,
            },
            other => other,
        }
    }

    /// The field at fault, if one is.
    pub fn field(&self) -> Option<&str> {
        match self {
            Failure::Page { field, .. } => field.as_deref(),
            Failure::SignIn { .. } => None,
        }
    }

    fn into_response(self) -> Response {
        match self {
            Failure::SignIn { next } => html::redirect(&match next {
                Some(next) => format!("/ui/sign-in?next={}", html::query_value(&next)),
                None => "/ui/sign-in".to_string(),
            }),
            Failure::Page {
                status,
                field,
                message,
            } => {
                let what = match field {
                    Some(field) => format!("<code>{}</code>: ", html::escape(&field)),
                    None => String::new(),
                };
                let main = format!(
                    "<h1>{} {}</h1><p class=\"error\" role=\"alert\">{what}{}</p>\
                     <p><a href=\"/ui/\">Back to the fleet</a></p>",
                    status.as_u16(),
                    html::escape(status.canonical_reason().unwrap_or("")),
                    html::escape(&message),
                );
                let title = status.canonical_reason().unwrap_or("Error");
                html::response(status, html::page(title, Section::None, None, &main))
            }
        }
    }
}

impl From<ApiError> for Failure {
    fn from(err: ApiError) -> Self {
        Failure::Page {
            status: err.status(),
            field: err.body().field.clone(),
            message: err.body().message.clone(),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        ApiError::from(err).into()
    }
}
