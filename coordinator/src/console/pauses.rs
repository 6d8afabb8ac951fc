//! Pauses, on the Regions page: the pauses in force, a form to pause the fleet, a region, a
//! cluster or a job, and a Lift button. Scopes are spelled as in the API's
//! `/v1/pauses/{kind}[/{value}]`; the store calls are the API's.

use flink_autoscale_core::pause::PauseScope;
use flink_autoscale_core::protocol::{Pause, PauseRequest};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::html::{self, csrf_field, escape, path_segment};
use super::session::Session;
use super::{time, Failure};
use crate::api::{self, App};
use crate::store::now_ms;

/// The kinds of scope, broadest first; the form preselects `cluster`, so that a pause of
/// the whole fleet is chosen on purpose.
const KINDS: [&str; 4] = ["fleet", "region", "cluster", "job"];
/// The longest expiry the form takes: a year, in minutes.
const MAX_MINUTES: i64 = 525_600;

/// The pauses table and, for admins, the form to pause a scope.
pub fn section(session: &Session, pauses: &[Pause], now: i64) -> String {
    let mut out = String::from(
        "<h2>Pauses</h2><p class=\"hint\">While a pause covers a proposal, it is refused \
         (<code>paused</code>), naming the scope and the admin; the agents keep collecting.</p>\
         <div id=\"pauses\" data-refresh=\"15\">",
    );
    if pauses.is_empty() {
        out.push_str(&html::empty("Nothing is paused."));
    } else {
        out.push_str(
            "<table><thead><tr><th>Scope</th><th>Reason</th><th>By</th><th>Since</th>\
             <th>Expires</th><th></th></tr></thead><tbody>",
        );
        for p in pauses {
            let lift = match PauseScope::parse(&p.scope) {
                Ok(scope) if session.can_act() => {
                    html::button_form(session, &lift_path(&scope), "Lift")
                }
                _ => String::new(),
            };
            let expires = p.expires_at.map_or(
                "<span class=\"none\">when lifted</span>".to_string(),
                |at| {
                    format!(
                        "<span title=\"{}\">{}</span>",
                        time::utc(at),
                        time::until(now, at)
                    )
                },
            );
            out.push_str(&format!(
                "<tr data-pause=\"{scope}\"><td><b>{scope}</b></td><td>{reason}</td><td>{by}</td>\
                 <td title=\"{at}\">{ago}</td><td>{expires}</td><td>{lift}</td></tr>",
                scope = escape(&p.scope),
                reason = escape(&p.reason),
                by = escape(&p.set_by),
                at = time::utc(p.since),
                ago = time::ago(now, p.since),
            ));
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</div>");
    if session.can_act() {
        let kinds: String = KINDS
            .iter()
            .map(|k| {
                let selected = if *k == "cluster" { " selected" } else { "" };
                format!("<option value=\"{k}\"{selected}>{k}</option>")
            })
            .collect();
        out.push_str(&format!(
            "<form class=\"action\" id=\"pause\" method=\"post\" action=\"/ui/pauses\">{csrf}\
             <h3>Pause</h3>\
             <label>Scope <select name=\"kind\">{kinds}</select></label>\
             <label>Region, cluster or job id <input name=\"value\" placeholder=\"empty for the fleet\"></label>\
             <label>Reason <input name=\"reason\" required placeholder=\"deploy freeze, INC-4711\"></label>\
             <label>Expires in minutes <input type=\"number\" name=\"expires_in_minutes\" min=\"1\" \
             max=\"{MAX_MINUTES}\" placeholder=\"never\"></label>\
             <button type=\"submit\">Pause</button></form>",
            csrf = csrf_field(session),
        ));
    }
    out
}

/// The Lift form's target for `scope`.
fn lift_path(scope: &PauseScope) -> String {
    match scope {
        PauseScope::Fleet => "/ui/pauses/fleet/clear".to_string(),
        PauseScope::Region(v) => format!("/ui/pauses/region/{}/clear", path_segment(v)),
        PauseScope::Cluster(v) => format!("/ui/pauses/cluster/{}/clear", path_segment(v)),
        PauseScope::Job(v) => format!("/ui/pauses/job/{}/clear", path_segment(v)),
    }
}

/// `POST /ui/pauses` (form: kind, value, reason, expires_in_minutes).
pub async fn set(app: &App, req: Request, session: &Session) -> Result<Response, Failure> {
    let mut form = session.read_form(app, req).await?;
    let kind = form.require("kind")?;
    let value = form.take("value")?;
    let reason = form.require("reason")?;
    let minutes = form.take("expires_in_minutes")?;
    form.finish("kind, value, reason, expires_in_minutes")?;
    let kind = kind.trim();
    if !KINDS.contains(&kind) {
        return Err(Failure::invalid(
            "kind",
            "must be fleet, region, cluster or job",
        ));
    }
    let scope = match (kind, value.as_deref().map(str::trim)) {
        ("fleet", None) => PauseScope::Fleet,
        ("fleet", Some(_)) => {
            return Err(Failure::invalid(
                "value",
                "must be empty to pause the fleet",
            ))
        }
        (_, None) => {
            return Err(Failure::invalid(
                "value",
                "is required: the region, cluster or job id to pause",
            ))
        }
        (kind, Some(value)) => {
            PauseScope::of(kind, Some(value)).map_err(|e| Failure::invalid("value", &e.message))?
        }
    };
    let now = now_ms();
    let expires_at = match minutes {
        None => None,
        Some(text) => {
            let minutes = text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|m| (1..=MAX_MINUTES).contains(m))
                .ok_or_else(|| {
                    Failure::invalid(
                        "expires_in_minutes",
                        &format!(
                            "must be a whole number of minutes from 1 to {MAX_MINUTES}, or empty for no expiry"
                        ),
                    )
                })?;
            Some(now + minutes * 60_000)
        }
    };
    let request = PauseRequest { reason, expires_at };
    request.validate(now).map_err(|e| {
        let field = if e.field == "expires_at" {
            "expires_in_minutes"
        } else {
            &e.field
        };
        Failure::invalid(field, &e.message)
    })?;
    let by = &session.principal().name;
    app.store.get()?.set_pause(&scope, &request, by).await?;
    tracing::warn!(%scope, admin = %by, reason = %request.reason, expires_at = ?request.expires_at, via = "console", "paused");
    Ok(html::redirect("/ui/regions"))
}

/// `POST /ui/pauses/{kind}[/{value}]/clear`: lift a pause.
pub async fn lift(
    app: &App,
    req: Request,
    session: &Session,
    kind: &str,
    value: Option<&str>,
) -> Result<Response, Failure> {
    session.read_form(app, req).await?.finish("csrf")?;
    let scope = api::pause_scope(kind, value)?;
    let by = &session.principal().name;
    if !app.store.get()?.clear_pause(&scope, by).await? {
        return Err(Failure::page(
            StatusCode::NOT_FOUND,
            "scope",
            format!("{scope} is not paused"),
        ));
    }
    tracing::warn!(%scope, admin = %by, via = "console", "pause lifted");
    Ok(html::redirect("/ui/regions"))
}
