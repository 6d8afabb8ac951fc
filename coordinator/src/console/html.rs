//! HTML output: escaping, the page frame every page shares, and the answer's headers.
//!
//! Everything that did not come from this module's own literals goes through [`escape`].

use bytes::Bytes;
use flink_autoscale_core::protocol::{DecisionRecord, OutcomeStatus, Proposal, Verdict};
use flink_autoscale_shared::http::Response;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::StatusCode;

use super::assets;
use super::session::Session;

/// Text made safe for HTML element content and double-quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value for a URL query, percent-encoded (then still [`escape`]d inside an attribute).
pub fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A value for one URL path segment, percent-encoded (then still [`escape`]d inside an
/// attribute).
pub fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The console's sections, for the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Fleet,
    Pending,
    Regions,
    Audit,
    /// Sign-in and error pages: no section is current.
    None,
}

const NAV: [(Section, &str, &str); 4] = [
    (Section::Fleet, "/ui/", "Fleet"),
    (Section::Pending, "/ui/pending", "Pending"),
    (Section::Regions, "/ui/regions", "Regions and pauses"),
    (Section::Audit, "/ui/audit", "Audit"),
];

/// A whole page: head, navigation (when signed in), `main`.
pub fn page(title: &str, section: Section, session: Option<&Session>, main: &str) -> String {
    let mut nav = String::new();
    if let Some(session) = session {
        nav.push_str("<nav>");
        for (s, href, label) in NAV {
            let current = if s == section {
                " aria-current=\"page\""
            } else {
                ""
            };
            let count = match (s, session.pending()) {
                (Section::Pending, Some(n)) if n > 0 => {
                    format!(" <span class=\"count\" id=\"pending-count\">{n}</span>")
                }
                _ => String::new(),
            };
            nav.push_str(&format!("<a href=\"{href}\"{current}>{label}{count}</a>"));
        }
        nav.push_str("</nav>");
        nav.push_str(&format!(
            "<form class=\"who\" method=\"post\" action=\"/ui/sign-out\">\
             <span>signed in as <b>{name}</b> ({role}{viewer})</span>{csrf}\
             <button type=\"submit\">Sign out</button></form>",
            name = escape(&session.principal().name),
            role = session.role_name(),
            viewer = if session.can_act() { "" } else { ", read only" },
            csrf = csrf_field(session),
        ));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · flink-autoscale</title>\
         <link rel=\"stylesheet\" href=\"{css}\">\
         <script src=\"{js}\" defer></script></head>\
         <body><header><a class=\"brand\" href=\"/ui/\">flink-autoscale</a>{nav}</header>\
         <main>{main}</main></body></html>\n",
        title = escape(title),
        css = assets::url("console.css"),
        js = assets::url("console.js"),
    )
}

/// The hidden field every form of a signed-in page carries.
pub fn csrf_field(session: &Session) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(session.csrf())
    )
}

/// A one-button form posting only the CSRF token to `action` (a console path, escaped
/// here), such as Lift.
pub fn button_form(session: &Session, action: &str, label: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{}\">{}\
         <button type=\"submit\" class=\"secondary\">{}</button></form>",
        escape(action),
        csrf_field(session),
        escape(label)
    )
}

/// An HTML answer that no cache keeps (pages show live state and the CSRF token).
pub fn response(status: StatusCode, html: String) -> Response {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(html)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A `303 See Other` to `location` (a path of this console).
pub fn redirect(location: &str) -> Response {
    let mut resp = response(StatusCode::SEE_OTHER, String::new());
    if let Ok(value) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(hyper::header::LOCATION, value);
    }
    resp
}

/// An empty-state line, for tables without rows.
pub fn empty(text: &str) -> String {
    format!("<p class=\"empty\">{}</p>", escape(text))
}

/// `<span class="badge verdict-approved">approved</span>`.
pub fn badge(kind: &str, text: &str) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        escape(kind),
        escape(text)
    )
}

/// The vertices a proposal changes, as `name 4 → 8` lines.
pub fn changes(proposal: &Proposal) -> String {
    let lines: String = proposal
        .vertices
        .iter()
        .filter(|v| v.proposed_parallelism != v.current_parallelism)
        .map(|v| {
            let direction = if v.proposed_parallelism > v.current_parallelism {
                "up"
            } else {
                "down"
            };
            format!(
                "<li><span class=\"name\">{}</span> {} → <b class=\"{direction}\">{}</b></li>",
                escape(&v.name),
                v.current_parallelism,
                v.proposed_parallelism
            )
        })
        .collect();
    if lines.is_empty() {
        "<span class=\"none\">no change</span>".to_string()
    } else {
        format!("<ul class=\"vertices\">{lines}</ul>")
    }
}

/// The agent's figures for each vertex it proposed to change, in a disclosure (`open`: shown
/// unfolded).
pub fn evidence(proposal: &Proposal, open: bool) -> String {
    let rows: String = proposal
        .vertices
        .iter()
        .filter(|v| v.proposed_parallelism != v.current_parallelism)
        .filter_map(|v| v.evidence.as_ref().map(|e| (v, e)))
        .map(|(v, e)| {
            let figure =
                |value: Option<f64>| value.map_or("—".to_string(), |x| format!("{x:.0}"));
            format!(
                "<tr><td>{}</td><td class=\"num\">{} → {}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(&v.name),
                v.current_parallelism,
                v.proposed_parallelism,
                figure(e.true_processing_rate),
                figure(e.target_data_rate),
                e.busy_ratio
                    .map_or("—".to_string(), |b| format!("{:.0} %", b * 100.0)),
                escape(e.reason.as_deref().unwrap_or("")),
            )
        })
        .collect();
    if rows.is_empty() {
        return "<span class=\"none\">—</span>".to_string();
    }
    format!(
        "<details{open}><summary>evidence</summary><table class=\"evidence\"><thead><tr><th>Vertex</th>\
         <th class=\"num\">Parallelism</th><th class=\"num\">True rate/s</th>\
         <th class=\"num\">Target rate/s</th><th class=\"num\">Busy</th>\
         <th>Reason</th></tr></thead><tbody>{rows}</tbody></table></details>",
        open = if open { " open" } else { "" },
    )
}

/// A verdict as a badge.
pub fn verdict(verdict: Verdict) -> String {
    badge(&format!("verdict-{verdict}"), verdict.as_str())
}

/// Each refusal reason on its own line (code, message), then who approved or denied it.
pub fn reasons(record: &DecisionRecord) -> String {
    let mut out: String = record
        .reasons
        .iter()
        .map(|r| {
            format!(
                "<div class=\"reason\"><code>{}</code> {}</div>",
                escape(&r.code),
                escape(&r.message)
            )
        })
        .collect();
    if let Some(review) = &record.review {
        out.push_str(&format!(
            "<div class=\"reviewed\">{}d by <b>{}</b>{}</div>",
            review.action.as_str(),
            escape(&review.by),
            if review.comment.is_empty() {
                String::new()
            } else {
                format!(": {}", escape(&review.comment))
            }
        ));
    }
    out
}

/// The outcome, only where there can be one: a refusal has none; an approval waits for the
/// agent's report.
pub fn outcome(record: &DecisionRecord) -> String {
    match (&record.verdict, &record.outcome) {
        (Verdict::Refused, _) => {
            "<span class=\"none\" title=\"refused: nothing to apply\">—</span>".to_string()
        }
        (Verdict::Pending, _) => {
            "<span class=\"waiting\">awaiting an admin's approval</span>".to_string()
        }
        (Verdict::Approved, None) => {
            "<span class=\"waiting\">awaiting the agent's report</span>".to_string()
        }
        (Verdict::Approved, Some(o)) => {
            let detail = match (o.status, &o.error, o.restart_ms) {
                (OutcomeStatus::Failed, Some(error), _) => {
                    format!(" <span class=\"detail\">{}</span>", escape(error))
                }
                (OutcomeStatus::Applied, _, Some(ms)) => format!(
                    " <span class=\"detail\">{:.1} s restart</span>",
                    ms as f64 / 1000.0
                ),
                _ => String::new(),
            };
            format!(
                "{}{detail}",
                badge(&format!("outcome-{}", o.status.as_str()), o.status.as_str())
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_data_is_escaped() {
        assert_eq!(
            escape("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(query_value("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }
}
