//! The Audit page: every decision, newest first, filtered by job, cluster, region, verdict
//! and time, a page at a time.

use flink_autoscale_core::protocol::{is_flink_id, validate_identifier, Verdict};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::form::Fields;
use super::html::{self, escape, query_value, Section};
use super::session::Session;
use super::{time, Failure};
use crate::api::App;
use crate::store::DecisionFilter;

/// Decisions per page.
const PAGE: u32 = 50;

/// The filters as typed, to fill the form and the paging links again.
#[derive(Debug, Default)]
struct Typed {
    job: Option<String>,
    cluster: Option<String>,
    region: Option<String>,
    verdict: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// `GET /ui/audit?job=&cluster=&region=&verdict=&from=&to=&cursor=`.
pub async fn page(app: &App, req: &Request, session: &Session) -> Result<Response, Failure> {
    let mut query = Fields::of_query(req);
    let typed = Typed {
        job: query.take("job")?,
        cluster: query.take("cluster")?,
        region: query.take("region")?,
        verdict: query.take("verdict")?,
        from: query.take("from")?,
        to: query.take("to")?,
    };
    let cursor = query.take("cursor")?;
    query.finish("job, cluster, region, verdict, from, to, cursor")?;
    let filter = filter(&typed, cursor.as_deref())?;
    let (records, next) = app.store.get()?.decisions_with_proposals(&filter).await?;

    let mut main = format!("<h1>Audit</h1>{}", form(&typed));
    main.push_str("<div id=\"audit\" data-refresh=\"10\">");
    if records.is_empty() {
        main.push_str(&html::empty("No decision matches these filters."));
    } else {
        main.push_str(
            "<table><thead><tr><th>Received</th><th>Job</th><th>Cluster</th><th>Region</th>\
             <th>Change</th><th>Verdict</th><th>Outcome</th><th>Proposal</th></tr></thead><tbody>",
        );
        for (record, proposal) in &records {
            main.push_str(&format!(
                "<tr data-proposal=\"{pid}\"><td>{at}</td>\
                 <td><a href=\"/ui/jobs/{job_id}\">{job_name}</a></td><td>{cluster}</td><td>{region}</td>\
                 <td>{changes}</td><td>{verdict}{reasons}</td><td>{outcome}</td><td class=\"id\">{pid}</td></tr>",
                pid = escape(&record.proposal_id),
                at = time::utc(record.received_at),
                job_id = escape(&record.job_id),
                job_name = escape(&record.job_name),
                cluster = escape(&record.cluster_id),
                region = escape(&record.region),
                changes = html::changes(proposal),
                verdict = html::verdict(record.verdict),
                reasons = html::reasons(record),
                outcome = html::outcome(record),
            ));
        }
        main.push_str("</tbody></table>");
    }
    let filters = links(&typed);
    main.push_str("<nav class=\"pager\">");
    if cursor.is_some() {
        main.push_str(&format!("<a href=\"/ui/audit?{filters}\">← Newest</a>"));
    }
    if let Some(next) = next {
        main.push_str(&format!(
            "<a href=\"/ui/audit?{filters}cursor={}\" rel=\"next\">Older →</a>",
            query_value(&next)
        ));
    }
    main.push_str("</nav></div>");
    Ok(html::response(
        StatusCode::OK,
        html::page("Audit", Section::Audit, Some(session), &main),
    ))
}

fn filter(typed: &Typed, cursor: Option<&str>) -> Result<DecisionFilter, Failure> {
    let mut filter = DecisionFilter {
        limit: PAGE,
        ..DecisionFilter::default()
    };
    if let Some(job) = &typed.job {
        let job = job.trim();
        // A Flink job id, or else a job name.
        if is_flink_id(job) {
            filter.job_id = Some(job.to_ascii_lowercase());
        } else {
            validate_identifier("job", job).map_err(|e| Failure::invalid("job", &e.message))?;
            filter.job_name = Some(job.to_string());
        }
    }
    for (field, value, target) in [
        ("cluster", &typed.cluster, &mut filter.cluster_id),
        ("region", &typed.region, &mut filter.region),
    ] {
        if let Some(value) = value {
            let value = value.trim();
            validate_identifier(field, value).map_err(|e| Failure::invalid(field, &e.message))?;
            *target = Some(value.to_string());
        }
    }
    if let Some(verdict) = &typed.verdict {
        filter.verdict = Some(
            Verdict::parse(verdict)
                .ok_or_else(|| Failure::invalid("verdict", "must be approved or refused"))?,
        );
    }
    for (field, value, target) in [
        ("from", &typed.from, &mut filter.since_ms),
        ("to", &typed.to, &mut filter.until_ms),
    ] {
        if let Some(value) = value {
            *target = Some(time::parse_input(value).ok_or_else(|| {
                Failure::invalid(
                    field,
                    "must be a UTC date and time such as 2026-11-01T12:30",
                )
            })?);
        }
    }
    if let Some(cursor) = cursor {
        filter.before_seq = Some(
            cursor
                .parse::<i64>()
                .ok()
                .filter(|c| *c >= 0)
                .ok_or_else(|| Failure::invalid("cursor", "must be a cursor from an Older link"))?,
        );
    }
    Ok(filter)
}

fn form(typed: &Typed) -> String {
    let value = |v: &Option<String>| escape(v.as_deref().unwrap_or(""));
    let verdicts: String = ["", "approved", "refused"]
        .iter()
        .map(|v| {
            let selected = if typed.verdict.as_deref().unwrap_or("") == *v {
                " selected"
            } else {
                ""
            };
            let label = if v.is_empty() { "any" } else { v };
            format!("<option value=\"{v}\"{selected}>{label}</option>")
        })
        .collect();
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/ui/audit\">\
         <label>Job (id or name) <input name=\"job\" value=\"{job}\"></label>\
         <label>Cluster <input name=\"cluster\" value=\"{cluster}\"></label>\
         <label>Region <input name=\"region\" value=\"{region}\"></label>\
         <label>Verdict <select name=\"verdict\">{verdicts}</select></label>\
         <label>From (UTC) <input type=\"datetime-local\" name=\"from\" value=\"{from}\"></label>\
         <label>To (UTC) <input type=\"datetime-local\" name=\"to\" value=\"{to}\"></label>\
         <button type=\"submit\">Search</button> <a href=\"/ui/audit\">Clear</a></form>",
        job = value(&typed.job),
        cluster = value(&typed.cluster),
        region = value(&typed.region),
        from = value(&typed.from),
        to = value(&typed.to),
    )
}

/// The filters as a query prefix for paging links (`key=value&amp;`...).
fn links(typed: &Typed) -> String {
    [
        ("job", &typed.job),
        ("cluster", &typed.cluster),
        ("region", &typed.region),
        ("verdict", &typed.verdict),
        ("from", &typed.from),
        ("to", &typed.to),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}&amp;", query_value(v))))
    .collect()
}
