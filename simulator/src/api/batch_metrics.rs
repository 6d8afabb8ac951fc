//! The batch metric endpoints proposed in FLINK-39617 (apache/flink PR #29012, not merged
//! upstream), served only when the scenario sets `[server] batch_metrics = true`:
//!
//! - `GET /jobs/:jobid/vertices/subtasks/metrics/names?vertices=<ids>&regex=<java regexes>`
//! - `GET /jobs/:jobid/vertices/subtasks/metrics/values?vertices=<ids>&get=<names>&agg=<aggs>`
//!
//! Both answer a top-level array with one `{"vertexId":..,"metrics":[..]}` per vertex asked,
//! in the order asked. Inside, the per-vertex endpoint's entries and semantics: names sorted
//! and kept when any regex matches the whole name (no regex: all); values all-or-nothing
//! per vertex; an unknown vertex gets `"metrics":[]`. No vertex is a 400, and so is an id
//! that is not one, or a regex that does not compile. Entries touched are counted as if
//! each vertex were asked on its own.

use super::metrics::{aggregated, array, listed_names, parse_aggs, push_name, resolve, AggSet};
use super::{Query, Reply};
use crate::format::push_json_str;
use crate::ids::is_flink_id;
use crate::world::World;

/// The vertex ids of `vertices=`, lower-cased, or the 400 Flink answers.
fn vertex_ids(q: &Query) -> Result<Vec<String>, Reply> {
    let ids = q.list("vertices").unwrap_or_default();
    if ids.is_empty() {
        return Err(Reply::handler_error(
            400,
            "org.apache.flink.runtime.rest.handler.RestHandlerException",
            "At least one job vertex must be specified.",
        ));
    }
    ids.into_iter()
        .map(|id| {
            if is_flink_id(id) {
                Ok(id.to_ascii_lowercase())
            } else {
                Err(Reply::bad_query_param("vertices", id))
            }
        })
        .collect()
}

/// Full-match patterns for `regex=` (Java's `Matcher.matches`).
fn patterns(q: &Query) -> Result<Vec<regex::Regex>, Reply> {
    q.list("regex")
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            regex::Regex::new(&format!("^(?:{r})$")).map_err(|_| {
                Reply::handler_error(
                    400,
                    "org.apache.flink.runtime.rest.handler.RestHandlerException",
                    "Invalid metric name regex.",
                )
            })
        })
        .collect()
}

/// Writes `{"vertexId":"<id>","metrics":<array>}`.
fn push_vertex(out: &mut String, id: &str, metrics: &str) {
    out.push_str("{\"vertexId\":");
    push_json_str(out, id);
    out.push_str(",\"metrics\":");
    out.push_str(metrics);
    out.push('}');
}

/// `GET /jobs/:jobid/vertices/subtasks/metrics/names`
pub(super) fn names(world: &mut World, jid: &str, q: &Query) -> Reply {
    let (ids, patterns) = match (vertex_ids(q), patterns(q)) {
        (Ok(ids), Ok(p)) => (ids, p),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let mut entries = 0;
    let body = array(&ids, |out, id| {
        let metrics = match resolve(world, jid, id) {
            None => "[]".to_string(),
            Some((j, v, view)) => {
                let job = &world.jobs[j];
                let all: Vec<usize> = (0..view.vertices[v].subtasks.len()).collect();
                let (mut names, touched) = listed_names(job, v, &view, &all, true);
                entries += touched;
                names.retain(|n| patterns.is_empty() || patterns.iter().any(|p| p.is_match(n)));
                names.sort_unstable();
                array(names, push_name)
            }
        };
        push_vertex(out, id, &metrics);
    });
    Reply::raw(200, body).with_entries(entries)
}

/// `GET /jobs/:jobid/vertices/subtasks/metrics/values`
pub(super) fn values(world: &mut World, jid: &str, q: &Query) -> Reply {
    let (ids, set): (Vec<String>, AggSet) = match (vertex_ids(q), parse_aggs(q)) {
        (Ok(ids), Ok(set)) => (ids, set),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let names = q.list("get").unwrap_or_default();
    let mut entries = 0;
    let body = array(&ids, |out, id| {
        let metrics = match resolve(world, jid, id) {
            Some((j, v, view)) if !names.is_empty() => {
                let job = &world.jobs[j];
                let all: Vec<usize> = (0..view.vertices[v].subtasks.len()).collect();
                let (body, touched) = aggregated(job, v, &view, &all, &names, set);
                entries += touched;
                body
            }
            _ => "[]".to_string(),
        };
        push_vertex(out, id, &metrics);
    });
    Reply::raw(200, body).with_entries(entries)
}
