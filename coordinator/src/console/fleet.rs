//! The Fleet page: every job with its current and recommended parallelism, its last verdict
//! and outcome, and the slots the fleet takes now against the slots before autoscaling.

use flink_autoscale_core::gates::disk_capacity::slots_of;
use flink_autoscale_core::protocol::{OutcomeStatus, Verdict};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::form::Fields;
use super::html::{self, escape, query_value, Section};
use super::session::Session;
use super::{time, Failure};
use crate::api::App;
use crate::store::{now_ms, FleetJob, JobFilter};

/// Jobs per page of the table (the totals cover every job).
const PAGE: usize = 200;
/// Jobs per store read while totalling.
const READ_CHUNK: u32 = 1000;

/// One vertex: where it runs now and what the engine recommends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexFigures {
    pub name: String,
    pub current: u32,
    pub recommended: u32,
}

/// A job's figures, from its first and latest proposals and the latest outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFigures {
    pub vertices: Vec<VertexFigures>,
    pub slots_now: u64,
    pub slots_before: u64,
}

/// The parallelism a job runs at now is its latest proposal's current parallelism, or, when
/// that proposal was approved and reported applied, what the agent observed (the plan where
/// it observed nothing). The slots before autoscaling are those of its first proposal's
/// current parallelism.
pub fn figures(job: &FleetJob) -> JobFigures {
    let proposal = &job.latest_proposal;
    let applied = match (&job.latest.verdict, &job.latest.outcome, &job.latest.plan) {
        (Verdict::Approved, Some(o), Some(plan)) if o.status == OutcomeStatus::Applied => {
            Some((&o.observed_parallelism, &plan.parallelism))
        }
        _ => None,
    };
    let vertices: Vec<VertexFigures> = proposal
        .vertices
        .iter()
        .map(|v| {
            let current = match applied {
                Some((observed, planned)) => observed
                    .get(&v.id)
                    .or_else(|| planned.get(&v.id))
                    .copied()
                    .unwrap_or(v.proposed_parallelism),
                None => v.current_parallelism,
            };
            VertexFigures {
                name: v.name.clone(),
                current,
                recommended: v.proposed_parallelism,
            }
        })
        .collect();
    let slots_now = slots_of(
        proposal
            .vertices
            .iter()
            .zip(&vertices)
            .map(|(v, f)| (v.slot_sharing_group(), f.current)),
    );
    let slots_before = slots_of(
        job.first_proposal
            .vertices
            .iter()
            .map(|v| (v.slot_sharing_group(), v.current_parallelism)),
    );
    JobFigures {
        vertices,
        slots_now,
        slots_before,
    }
}

/// `GET /ui/?cluster=&region=&cursor=`.
pub async fn page(app: &App, req: &Request, session: &Session) -> Result<Response, Failure> {
    let mut query = Fields::of_query(req);
    let cluster = query.take("cluster")?;
    let region = query.take("region")?;
    let cursor = query.take("cursor")?;
    query.finish("cluster, region, cursor")?;
    let store = app.store.get()?;
    let mut filter = JobFilter {
        cluster_id: cluster.clone(),
        region: region.clone(),
        after_job_id: None,
        limit: READ_CHUNK,
    };
    let (mut slots_now, mut slots_before, mut jobs) = (0u64, 0u64, 0usize);
    let mut rows = Vec::new();
    let mut next = None;
    loop {
        let (chunk, more) = store.fleet(&filter).await?;
        for job in chunk {
            let f = figures(&job);
            slots_now += f.slots_now;
            slots_before += f.slots_before;
            jobs += 1;
            let on_page = cursor
                .as_deref()
                .is_none_or(|c| job.latest.job_id.as_str() > c);
            if on_page && rows.len() < PAGE {
                rows.push((job, f));
            } else if on_page && next.is_none() {
                next = rows
                    .last()
                    .map(|(j, _): &(FleetJob, _)| j.latest.job_id.clone());
            }
        }
        match more {
            Some(after) => filter.after_job_id = Some(after),
            None => break,
        }
    }
    let now = now_ms();
    let saving = slots_before as i64 - slots_now as i64;
    // More slots than before (the fleet grew with its load) is no saving: say so plainly.
    let (saving_label, saving_class, saving_text) = match (slots_before, saving) {
        (0, _) => ("Saved", "card saving", "—".to_string()),
        (_, s) if s >= 0 => (
            "Saved",
            "card saving",
            format!(
                "{s} <small>({:.0} %)</small>",
                s as f64 * 100.0 / slots_before as f64
            ),
        ),
        (_, s) => (
            "Added by scale-ups",
            "card added",
            format!(
                "{} <small>(+{:.0} %)</small>",
                -s,
                -s as f64 * 100.0 / slots_before as f64
            ),
        ),
    };
    let mut main = format!(
        "<h1>Fleet</h1><section class=\"cards\">\
         <div class=\"card\"><span class=\"label\">Jobs</span><span class=\"value\" id=\"jobs-total\">{jobs}</span></div>\
         <div class=\"card\"><span class=\"label\">Slots now</span><span class=\"value\" id=\"slots-now\">{slots_now}</span></div>\
         <div class=\"card\"><span class=\"label\">Slots before autoscaling</span><span class=\"value\" id=\"slots-before\">{slots_before}</span></div>\
         <div class=\"{saving_class}\"><span class=\"label\">{saving_label}</span><span class=\"value\" id=\"slots-saved\">{saving_text}</span></div>\
         </section>{filters}",
        filters = filter_form(cluster.as_deref(), region.as_deref()),
    );
    main.push_str("<div id=\"fleet\" data-refresh=\"10\">");
    if rows.is_empty() {
        main.push_str(&html::empty(
            "No job has sent a proposal yet: agents appear here with their first proposal.",
        ));
    } else {
        main.push_str(
            "<table><thead><tr><th>Job</th><th>Cluster</th><th>Region</th>\
             <th>Parallelism now → recommended</th><th class=\"num\">Slots now / before</th>\
             <th>Last verdict</th><th>Outcome</th><th>Last proposal</th></tr></thead><tbody>",
        );
        for (job, f) in &rows {
            main.push_str(&row(job, f, now));
        }
        main.push_str("</tbody></table>");
    }
    if let Some(next) = next {
        main.push_str(&format!(
            "<nav class=\"pager\"><a href=\"/ui/?{}cursor={}\">Next jobs →</a></nav>",
            keep_filters(cluster.as_deref(), region.as_deref()),
            query_value(&next)
        ));
    }
    main.push_str("</div>");
    Ok(html::response(
        StatusCode::OK,
        html::page("Fleet", Section::Fleet, Some(session), &main),
    ))
}

fn row(job: &FleetJob, f: &JobFigures, now: i64) -> String {
    let record = &job.latest;
    let vertices: String = f
        .vertices
        .iter()
        .map(|v| {
            let change = match v.recommended.cmp(&v.current) {
                std::cmp::Ordering::Greater => format!(" → <b class=\"up\">{}</b>", v.recommended),
                std::cmp::Ordering::Less => format!(" → <b class=\"down\">{}</b>", v.recommended),
                std::cmp::Ordering::Equal => String::new(),
            };
            format!(
                "<li><span class=\"name\">{}</span> <b>{}</b>{change}</li>",
                escape(&v.name),
                v.current
            )
        })
        .collect();
    format!(
        "<tr data-job=\"{id}\"><td><a href=\"/ui/jobs/{id}\">{name}</a><div class=\"id\">{id}</div></td>\
         <td>{cluster}</td><td>{region}</td><td><ul class=\"vertices\">{vertices}</ul></td>\
         <td class=\"num\">{now_slots} / {before}</td><td>{verdict}{reasons}</td><td>{outcome}</td>\
         <td title=\"{at}\">{ago}</td></tr>",
        id = escape(&record.job_id),
        name = escape(&record.job_name),
        cluster = escape(&record.cluster_id),
        region = escape(&record.region),
        now_slots = f.slots_now,
        before = f.slots_before,
        verdict = html::verdict(record.verdict),
        reasons = html::reasons(record),
        outcome = html::outcome(record),
        at = time::utc(record.received_at),
        ago = time::ago(now, record.received_at),
    )
}

fn filter_form(cluster: Option<&str>, region: Option<&str>) -> String {
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/ui/\">\
         <label>Cluster <input name=\"cluster\" value=\"{}\"></label>\
         <label>Region <input name=\"region\" value=\"{}\"></label>\
         <button type=\"submit\">Filter</button> <a href=\"/ui/\">Clear</a></form>",
        escape(cluster.unwrap_or("")),
        escape(region.unwrap_or("")),
    )
}

fn keep_filters(cluster: Option<&str>, region: Option<&str>) -> String {
    let mut out = String::new();
    for (key, value) in [("cluster", cluster), ("region", region)] {
        if let Some(v) = value {
            out.push_str(&format!("{key}={}&amp;", query_value(v)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::protocol::{
        DecisionRecord, Plan, Proposal, RecordedOutcome, VertexProposal,
    };
    use std::collections::BTreeMap;

    fn proposal(current: [u32; 3], proposed: [u32; 3]) -> Proposal {
        let vertex = |i: usize, group: Option<&str>| VertexProposal {
            id: format!("{i:032x}"),
            name: format!("v{i}"),
            slot_sharing_group: group.map(str::to_string),
            current_parallelism: current[i],
            proposed_parallelism: proposed[i],
            evidence: None,
        };
        Proposal {
            proposal_id: "p".into(),
            agent_id: "a".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            job_id: format!("{:032x}", 7),
            job_name: "j".into(),
            // v0 and v1 share the default group; v2 has its own.
            vertices: vec![vertex(0, None), vertex(1, None), vertex(2, Some("sink"))],
            checkpoint_state_bytes: None,
            slots_per_task_manager: 4,
            disk_bytes_per_task_manager: 0,
            current_task_managers: 1,
        }
    }

    fn record(verdict: Verdict, outcome: Option<OutcomeStatus>, plan: [u32; 3]) -> DecisionRecord {
        let ids = |p: [u32; 3]| -> BTreeMap<String, u32> {
            (0..3).map(|i| (format!("{i:032x}"), p[i])).collect()
        };
        DecisionRecord {
            proposal_id: "p".into(),
            agent_id: "a".into(),
            job_id: format!("{:032x}", 7),
            job_name: "j".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            verdict,
            reasons: vec![],
            plan: (verdict == Verdict::Approved).then(|| Plan {
                task_managers: 1,
                standby_task_managers: 0,
                parallelism: ids(plan),
            }),
            received_at: 0,
            outcome: outcome.map(|status| RecordedOutcome {
                status,
                // The agent saw only v0 at its new parallelism: the plan fills in the rest.
                observed_parallelism: [(format!("{:032x}", 0), plan[0])].into(),
                error: None,
                restart_ms: None,
                rescale: None,
                reported_at: 1,
            }),
            proposal: None,
            approval: None,
            review: None,
        }
    }

    #[test]
    fn slots_now_follow_the_applied_plan_and_before_the_first_proposal() {
        let first = proposal([4, 2, 2], [8, 2, 2]);
        let latest = proposal([8, 2, 2], [3, 2, 1]);
        let job = |latest_record| FleetJob {
            latest: latest_record,
            latest_proposal: latest.clone(),
            first_proposal: first.clone(),
            open_action: None,
        };
        // Refused: the job still runs at the latest proposal's current parallelism.
        let refused = figures(&job(record(Verdict::Refused, None, [0; 3])));
        assert_eq!((refused.slots_now, refused.slots_before), (8 + 2, 4 + 2));
        assert_eq!(
            refused.vertices[0],
            VertexFigures {
                name: "v0".into(),
                current: 8,
                recommended: 3
            }
        );
        // Approved, not yet applied: unchanged.
        let waiting = figures(&job(record(Verdict::Approved, None, [3, 2, 1])));
        assert_eq!(waiting.slots_now, 10);
        // Applied: observed where reported, the plan elsewhere.
        let applied = figures(&job(record(
            Verdict::Approved,
            Some(OutcomeStatus::Applied),
            [3, 2, 1],
        )));
        assert_eq!(applied.slots_now, 3 + 1);
        assert_eq!(applied.vertices[2].current, 1);
        // Failed: unchanged.
        let failed = figures(&job(record(
            Verdict::Approved,
            Some(OutcomeStatus::Failed),
            [3, 2, 1],
        )));
        assert_eq!(failed.slots_now, 10);
    }
}
