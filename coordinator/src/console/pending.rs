//! The Pending page: the proposals an approval policy holds for an admin, with the evidence
//! behind each, and a form to approve or deny each one. The form goes through the API's own
//! review ([`crate::api::decide`]): an approval runs the gates again.

use flink_autoscale_core::protocol::{
    DecisionRecord, Proposal, ReviewAction, ReviewRequest, Verdict,
};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::form::Fields;
use super::html::{self, csrf_field, escape, path_segment, Section};
use super::session::Session;
use super::{time, Failure};
use crate::api::{self, App};
use crate::store::{now_ms, DecisionFilter};

/// Pending proposals listed (newest first); more are unusual, the API pages through them.
const PAGE: u32 = 200;

/// `GET /ui/pending`.
pub async fn page(app: &App, req: &Request, session: &Session) -> Result<Response, Failure> {
    Fields::of_query(req).finish("none")?;
    let filter = DecisionFilter {
        verdict: Some(Verdict::Pending),
        limit: PAGE,
        ..DecisionFilter::default()
    };
    let (records, next) = app.store.get()?.decisions_with_proposals(&filter).await?;
    let now = now_ms();
    let mut main = String::from(
        "<h1>Pending approval</h1><p class=\"hint\">An approval rule holds these proposals \
         for an admin. Approving runs the gates again, so a proposal the fleet can no longer \
         take is refused then; a denial needs a comment. Unanswered ones are refused when \
         they expire (<code>approval_expired</code>).</p>",
    );
    main.push_str("<div id=\"pending\" data-refresh=\"10\">");
    if records.is_empty() {
        main.push_str(&html::empty("No proposal is waiting for an approval."));
    } else {
        main.push_str(
            "<table class=\"pending\"><thead><tr><th>Job</th><th>Change</th><th>Evidence</th>\
             <th>Waiting</th>",
        );
        if session.can_act() {
            main.push_str("<th>Decision</th>");
        }
        main.push_str("</tr></thead><tbody>");
        for (record, proposal) in &records {
            main.push_str(&row(session, record, proposal, now));
        }
        main.push_str("</tbody></table>");
        if next.is_some() {
            main.push_str(&format!(
                "<p class=\"hint\">The newest {PAGE} are shown; <code>GET /v1/pending</code> \
                 pages through all of them.</p>"
            ));
        }
    }
    main.push_str("</div>");
    Ok(html::response(
        StatusCode::OK,
        html::page("Pending approval", Section::Pending, Some(session), &main),
    ))
}

fn row(session: &Session, record: &DecisionRecord, proposal: &Proposal, now: i64) -> String {
    let expires = match &record.approval {
        Some(a) => format!(
            "<div class=\"detail\" title=\"{at}\">{when}</div>\
             <div class=\"detail\">rule <code>{rule}</code></div>",
            at = time::utc(a.expires_at),
            when = if a.expires_at > now {
                format!("expires {}", time::until(now, a.expires_at))
            } else {
                "expired".to_string()
            },
            rule = escape(&a.rule),
        ),
        None => String::new(),
    };
    let decision = if session.can_act() {
        let at = escape(&path_segment(&record.proposal_id));
        format!(
            "<td class=\"decide\"><form class=\"review\" method=\"post\" action=\"/ui/pending/{at}/approve\">{csrf}\
             <input type=\"text\" name=\"comment\" aria-label=\"Comment\" \
             placeholder=\"comment (a denial needs one)\">\
             <button type=\"submit\" class=\"approve\">Approve</button>\
             <button type=\"submit\" class=\"deny\" formaction=\"/ui/pending/{at}/deny\">Deny</button>\
             </form></td>",
            csrf = csrf_field(session),
        )
    } else {
        String::new()
    };
    format!(
        "<tr data-proposal=\"{pid}\"><td><a href=\"/ui/jobs/{job_id}\">{job_name}</a>\
         <div class=\"meta\">cluster <b>{cluster}</b> · region <b>{region}</b></div>\
         <div class=\"id\">job {job_id}</div><div class=\"id\">proposal {pid}</div></td>\
         <td>{direction}{changes}</td><td>{evidence}</td>\
         <td><span title=\"{at}\">{ago}</span>{expires}</td>{decision}</tr>",
        pid = escape(&record.proposal_id),
        job_id = escape(&record.job_id),
        job_name = escape(&record.job_name),
        cluster = escape(&record.cluster_id),
        region = escape(&record.region),
        direction = direction(proposal),
        changes = html::changes(proposal),
        evidence = html::evidence(proposal, true),
        at = time::utc(record.received_at),
        ago = time::ago(now, record.received_at),
    )
}

/// Which way the proposal moves parallelism.
fn direction(proposal: &Proposal) -> &'static str {
    let moved = |up: bool| {
        proposal.vertices.iter().any(|v| {
            if up {
                v.proposed_parallelism > v.current_parallelism
            } else {
                v.proposed_parallelism < v.current_parallelism
            }
        })
    };
    match (moved(true), moved(false)) {
        (true, false) => "<div class=\"direction\">scale <b class=\"up\">up</b></div>",
        (false, true) => "<div class=\"direction\">scale <b class=\"down\">down</b></div>",
        (true, true) => {
            "<div class=\"direction\">scale <b class=\"up\">up</b> and <b class=\"down\">down</b></div>"
        }
        (false, false) => "",
    }
}

/// `POST /ui/pending/{proposal}/approve` and `/deny` (form: comment).
pub async fn review(
    app: &App,
    req: Request,
    session: &Session,
    raw_id: &str,
    action: ReviewAction,
) -> Result<Response, Failure> {
    let mut form = session.read_form(app, req).await?;
    let comment = form.take("comment")?.unwrap_or_default();
    form.finish("comment")?;
    let proposal_id = api::path_segment(raw_id, "proposal_id")?;
    let record = api::decide(
        app,
        &proposal_id,
        action,
        &ReviewRequest { comment },
        &session.principal().name,
    )
    .await
    .map_err(|e| Failure::from(e).or_field("proposal_id"))?;
    if action == ReviewAction::Approve && record.verdict == Verdict::Refused {
        // Approved by the admin, refused by the gates that ran again: nothing is applied.
        let why: Vec<String> = record
            .reasons
            .iter()
            .map(|r| format!("{} ({})", r.message, r.code))
            .collect();
        return Err(Failure::page(
            StatusCode::CONFLICT,
            "proposal_id",
            format!(
                "the gates refused proposal {proposal_id} when it was approved, so it is refused \
                 and nothing is applied: {}",
                why.join("; ")
            ),
        ));
    }
    Ok(html::redirect("/ui/pending"))
}
