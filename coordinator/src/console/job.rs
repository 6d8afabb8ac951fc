//! The Job page: one job's decisions, newest first, with the evidence behind each proposal,
//! and a chart of its parallelism over time.

use std::collections::BTreeMap;

use flink_autoscale_core::protocol::{
    is_flink_id, DecisionRecord, OutcomeStatus, Proposal, Verdict,
};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::chart::{self, Series};
use super::form::Fields;
use super::html::{self, escape, query_value, Section};
use super::session::Session;
use super::{time, Failure};
use crate::api::App;
use crate::store::{now_ms, DecisionFilter};

/// Decisions per page of the table.
const PAGE: u32 = 50;
/// Decisions the chart covers (the newest).
const CHART_DECISIONS: u32 = 500;

/// `GET /ui/jobs/{job}?cursor=`.
pub async fn page(
    app: &App,
    req: &Request,
    session: &Session,
    raw_job_id: &str,
) -> Result<Response, Failure> {
    if !is_flink_id(raw_job_id) {
        return Err(Failure::invalid(
            "job",
            "must be a Flink job id: 32 hex digits",
        ));
    }
    let job_id = raw_job_id.to_ascii_lowercase();
    let mut query = Fields::of_query(req);
    let cursor = query.take("cursor")?;
    query.finish("cursor")?;
    let before_seq = cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>()
                .ok()
                .filter(|c| *c >= 0)
                .ok_or_else(|| Failure::invalid("cursor", "must be a cursor from an Older link"))
        })
        .transpose()?;
    let store = app.store.get()?;
    let filter = DecisionFilter {
        job_id: Some(job_id.clone()),
        limit: CHART_DECISIONS,
        ..DecisionFilter::default()
    };
    let (recent, _) = store.decisions_with_proposals(&filter).await?;
    let Some((latest, _)) = recent.first() else {
        return Err(Failure::page(
            StatusCode::NOT_FOUND,
            "job",
            format!("no decision is on record for job {job_id}"),
        ));
    };
    let (rows, next) = store
        .decisions_with_proposals(&DecisionFilter {
            limit: PAGE,
            before_seq,
            ..filter
        })
        .await?;

    let mut main = format!(
        "<h1>{name}</h1><p class=\"meta\"><span class=\"id\">{id}</span> · cluster <b>{cluster}</b> · \
         region <b>{region}</b> · <a href=\"/ui/audit?job={id}\">in the audit</a></p>",
        name = escape(&latest.job_name),
        id = escape(&job_id),
        cluster = escape(&latest.cluster_id),
        region = escape(&latest.region),
    );
    main.push_str("<div id=\"job\" data-refresh=\"10\">");
    main.push_str("<h2>Parallelism</h2>");
    main.push_str(&chart::parallelism(&series(&recent), now_ms()));
    main.push_str(
        "<h2>Decisions</h2><table><thead><tr><th>Received</th><th>Change</th><th>Verdict</th>\
         <th>Outcome</th><th>Evidence</th></tr></thead><tbody>",
    );
    for (record, proposal) in &rows {
        main.push_str(&format!(
            "<tr data-proposal=\"{pid}\"><td>{at}<div class=\"id\">{pid}</div></td><td>{changes}</td>\
             <td>{verdict}{reasons}</td><td>{outcome}</td><td>{evidence}</td></tr>",
            pid = escape(&record.proposal_id),
            at = time::utc(record.received_at),
            changes = html::changes(proposal),
            verdict = html::verdict(record.verdict),
            reasons = html::reasons(record),
            outcome = html::outcome(record),
            evidence = html::evidence(proposal, false),
        ));
    }
    main.push_str("</tbody></table><nav class=\"pager\">");
    if cursor.is_some() {
        main.push_str(&format!(
            "<a href=\"/ui/jobs/{}\">← Newest</a>",
            escape(&job_id)
        ));
    }
    if let Some(next) = next {
        main.push_str(&format!(
            "<a href=\"/ui/jobs/{}?cursor={}\" rel=\"next\">Older →</a>",
            escape(&job_id),
            query_value(&next)
        ));
    }
    main.push_str("</nav></div>");
    Ok(html::response(
        StatusCode::OK,
        html::page(&latest.job_name, Section::Fleet, Some(session), &main),
    ))
}

/// Per vertex, oldest first: the current parallelism of each proposal and the parallelism
/// each applied rescale reached. Named as in the newest proposal.
fn series(newest_first: &[(DecisionRecord, Proposal)]) -> Vec<Series> {
    let mut by_vertex: BTreeMap<&str, Series> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (record, proposal) in newest_first.iter().rev() {
        let applied = match (&record.verdict, &record.outcome, &record.plan) {
            (Verdict::Approved, Some(o), Some(plan)) if o.status == OutcomeStatus::Applied => {
                Some((o, plan))
            }
            _ => None,
        };
        for v in &proposal.vertices {
            let s = by_vertex.entry(&v.id).or_insert_with(|| {
                order.push(&v.id);
                Series {
                    name: String::new(),
                    points: Vec::new(),
                }
            });
            s.name.clone_from(&v.name);
            s.points.push((record.received_at, v.current_parallelism));
            if let Some((outcome, plan)) = applied {
                let reached = outcome
                    .observed_parallelism
                    .get(&v.id)
                    .or_else(|| plan.parallelism.get(&v.id))
                    .copied()
                    .unwrap_or(v.proposed_parallelism);
                s.points.push((outcome.reported_at, reached));
            }
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_vertex.remove(id))
        .collect()
}
