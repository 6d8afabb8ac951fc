//! The batch source, for JobManagers that serve the endpoints proposed in FLINK-39617
//! (apache/flink PR #29012, not merged upstream):
//!
//! - `GET /jobs/:jid/vertices/subtasks/metrics/names?vertices=a,b&regex=r1,r2`
//! - `GET /jobs/:jid/vertices/subtasks/metrics/values?vertices=a,b&get=m1,m2&agg=..`
//!
//! Both answer `[{"vertexId": "<vid>", "metrics": [..]}, ..]`, one entry per vertex asked,
//! with the entries of the per-vertex endpoint inside (names only, or aggregates), and the
//! per-vertex semantics: a vertex missing one requested name answers `"metrics": []`. One
//! `get=` list serves every vertex of a request, so vertices are grouped by the names they
//! ask for (the sources, the middle, the sinks, typically). Names are listed with
//! [`LISTING_FILTER`], so only the names the collector reads travel. The endpoints take no
//! subtask selection, so sliced jobs are not read here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{cached_names, MetricSource, PollCounters, ReadContext, VertexAsk, VertexRead};
use crate::collector::name_cache::NameCache;
use crate::collector::names::{resolve, ResolvedNames, LISTING_FILTER};
use crate::collector::query::{aggregates, build_queries, encode};
use crate::daemon::clock::BoxFuture;
use crate::flink::model::{AggregatedMetric, VertexMetrics};
use crate::flink::FlinkError;
use flink_autoscale_core::samples::VertexSpec;

/// The batch source keeps nothing between polls beyond the shared name cache.
#[derive(Debug, Default)]
pub struct BatchSource;

impl MetricSource for BatchSource {
    fn read<'a>(
        &'a mut self,
        ctx: &'a ReadContext<'a>,
        cache: &'a mut NameCache,
        asks: &'a [VertexAsk<'a>],
        counters: &'a mut PollCounters,
    ) -> BoxFuture<'a, Result<Vec<VertexRead>, FlinkError>> {
        Box::pin(read(ctx, cache, asks, counters))
    }

    fn clear(&mut self) {}
}

/// Whether a batch request's error says the endpoints are not served (any more).
pub fn means_unsupported(err: &FlinkError) -> bool {
    matches!(err.status(), Some(400 | 404 | 405))
}

/// Asks for one vertex's names: the endpoints are served when the answer is a 200 in the
/// batch shape that names the vertex asked for. A 400, 404 or 405, or a 200 of another shape,
/// says they are not; other failures (timeouts, 5xx) decide nothing and fail the poll.
pub async fn probe(
    ctx: &ReadContext<'_>,
    spec: &VertexSpec,
    counters: &mut PollCounters,
) -> Result<bool, FlinkError> {
    counters.requests += 1;
    let query = names_query(&[spec.id.as_str()]);
    match ctx.client.batch_metric_names(ctx.job_id, &query).await {
        Ok(answer) => Ok(answer.iter().any(|v| same_id(&v.vertex_id, &spec.id))),
        Err(err)
            if means_unsupported(&err)
                || matches!(
                    err,
                    FlinkError::WrongShape { .. }
                        | FlinkError::MalformedJson { .. }
                        | FlinkError::Html { .. }
                ) =>
        {
            tracing::debug!(error = %err, "no batch metric endpoints; reading per vertex");
            Ok(false)
        }
        Err(err) => Err(err),
    }
}

async fn read(
    ctx: &ReadContext<'_>,
    cache: &mut NameCache,
    asks: &[VertexAsk<'_>],
    counters: &mut PollCounters,
) -> Result<Vec<VertexRead>, FlinkError> {
    let cached: Vec<Option<Arc<ResolvedNames>>> = asks
        .iter()
        .map(|a| cached_names(ctx, cache, a.spec, counters))
        .collect();
    let to_list: Vec<&VertexSpec> = asks
        .iter()
        .zip(&cached)
        .filter(|(_, c)| c.is_none())
        .map(|(a, _)| a.spec)
        .collect();
    let mut listed = list_names(ctx, cache, &to_list, counters).await?;
    let mut names: Vec<Arc<ResolvedNames>> = asks
        .iter()
        .zip(cached)
        .map(|(a, c)| c.unwrap_or_else(|| Arc::clone(&listed[&a.spec.id])))
        .collect();
    let everyone: Vec<usize> = (0..asks.len()).collect();
    let mut values = fetch_values(ctx, asks, &names, &everyone, counters).await?;
    // All-or-nothing per vertex: one requested name has no value any more. Vertices listed
    // this poll are fresh already; the others are listed again and read once more.
    let retry: Vec<usize> = everyone
        .into_iter()
        .filter(|&i| {
            values[i].is_empty()
                && !listed.contains_key(&asks[i].spec.id)
                && !names[i].requested(asks[i].sel).is_empty()
        })
        .collect();
    if !retry.is_empty() {
        tracing::info!(job_id = %ctx.job_id, vertices = retry.len(), "filtered batch request returned [] for some vertices; resolving their names again");
        let specs: Vec<&VertexSpec> = retry.iter().map(|&i| asks[i].spec).collect();
        listed = list_names(ctx, cache, &specs, counters).await?;
        for &i in &retry {
            names[i] = Arc::clone(&listed[&asks[i].spec.id]);
        }
        let again = fetch_values(ctx, asks, &names, &retry, counters).await?;
        for (&i, v) in retry.iter().zip(again) {
            values[i] = v;
        }
    }
    Ok(names
        .into_iter()
        .zip(values)
        .map(|(names, values)| VertexRead {
            names,
            values,
            slices_read: None,
        })
        .collect())
}

/// Lists the names of `specs` (as few requests as the request line allows) into the cache;
/// a vertex missing from the answer is taken to list nothing.
async fn list_names(
    ctx: &ReadContext<'_>,
    cache: &mut NameCache,
    specs: &[&VertexSpec],
    counters: &mut PollCounters,
) -> Result<HashMap<String, Arc<ResolvedNames>>, FlinkError> {
    let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
    let fixed = line_len(ctx, "names") + names_query(&[]).len();
    let mut out = HashMap::with_capacity(specs.len());
    for chunk in chunks_within(&ids, fixed, ctx.settings.max_request_line_bytes) {
        counters.requests += 1;
        counters.resolutions += 1;
        let answer = ctx
            .client
            .batch_metric_names(ctx.job_id, &names_query(&chunk))
            .await?;
        for id in chunk {
            let spec = specs.iter().find(|s| s.id == id).copied();
            let listed = metrics_of(&answer, id);
            let resolved = resolve(
                listed.iter().map(|m| m.id.as_str()),
                spec.is_some_and(VertexSpec::is_source),
            );
            out.insert(id.to_string(), cache.store(id, resolved, ctx.now_ms));
        }
    }
    Ok(out)
}

/// The values of the vertices `which` (indexes into `asks`), one request per group of
/// vertices asking for the same names (more when a group does not fit one request line).
/// A vertex whose answer to any part is empty gets an empty answer.
async fn fetch_values(
    ctx: &ReadContext<'_>,
    asks: &[VertexAsk<'_>],
    names: &[Arc<ResolvedNames>],
    which: &[usize],
    counters: &mut PollCounters,
) -> Result<Vec<Vec<AggregatedMetric>>, FlinkError> {
    let mut groups: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
    for &i in which {
        let requested = names[i].requested(asks[i].sel);
        if !requested.is_empty() {
            groups.entry(requested).or_default().push(&asks[i].spec.id);
        }
    }
    let agg = aggregates(ctx.settings.busy_aggregator);
    let max_line = ctx.settings.max_request_line_bytes;
    // Half the request line for the vertex list, the rest for the names.
    let fixed = line_len(ctx, "values") + "vertices=&".len();
    let mut answers: HashMap<&str, Option<Vec<AggregatedMetric>>> = HashMap::new();
    for (requested, ids) in &groups {
        for chunk in chunks_within(ids, fixed, fixed + (max_line.saturating_sub(fixed)) / 2) {
            let vertices = format!("vertices={}", chunk.join(","));
            let line = |q: usize| fixed + vertices.len() + q;
            for query in build_queries(requested, agg, max_line, line) {
                counters.requests += 1;
                let answer = ctx
                    .client
                    .batch_metric_values(ctx.job_id, &format!("{vertices}&{query}"))
                    .await?;
                for &id in &chunk {
                    let part = metrics_of(&answer, id);
                    let slot = answers.entry(id).or_insert_with(|| Some(Vec::new()));
                    match (slot.as_mut(), part.is_empty()) {
                        (Some(_), true) => *slot = None,
                        (Some(v), false) => v.extend_from_slice(part),
                        (None, _) => {}
                    }
                }
            }
        }
    }
    Ok(asks
        .iter()
        .map(|a| {
            answers
                .remove(a.spec.id.as_str())
                .flatten()
                .unwrap_or_default()
        })
        .collect())
}

/// `vertices=a,b&regex=..` with the collector's name filter.
fn names_query(ids: &[&str]) -> String {
    let regex: Vec<String> = LISTING_FILTER.iter().map(|r| encode(r)).collect();
    format!("vertices={}&regex={}", ids.join(","), regex.join(","))
}

/// The request line of a batch endpoint without its query string.
fn line_len(ctx: &ReadContext<'_>, which: &str) -> usize {
    ctx.client.request_line_len("")
        + format!("/jobs/{}/vertices/subtasks/metrics/{which}?", ctx.job_id).len()
}

/// Splits `ids` into comma-joined runs that keep `fixed + run` within `max`; every run holds
/// at least one id.
fn chunks_within<'a>(ids: &[&'a str], fixed: usize, max: usize) -> Vec<Vec<&'a str>> {
    let mut chunks: Vec<Vec<&'a str>> = Vec::new();
    let mut len = 0;
    for &id in ids {
        match chunks.last_mut() {
            Some(chunk) if fixed + len + 1 + id.len() <= max => {
                chunk.push(id);
                len += 1 + id.len();
            }
            _ => {
                chunks.push(vec![id]);
                len = id.len();
            }
        }
    }
    chunks
}

/// The entries the answer has for vertex `id` (none when it is missing).
fn metrics_of<'a>(answer: &'a [VertexMetrics], id: &str) -> &'a [AggregatedMetric] {
    answer
        .iter()
        .find(|v| same_id(&v.vertex_id, id))
        .map_or(&[], |v| &v.metrics)
}

/// Flink writes ids in lower case; compare without regard to case.
fn same_id(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertex_lists_are_cut_to_fit() {
        let ids = ["aaaa", "bbbb", "cccc", "dddd", "eeeeeeeeeeee"];
        let chunks = chunks_within(&ids, 10, 20);
        assert_eq!(
            chunks,
            vec![
                vec!["aaaa", "bbbb"],
                vec!["cccc", "dddd"],
                vec!["eeeeeeeeeeee"]
            ]
        );
        for c in &chunks[..2] {
            assert!(10 + c.join(",").len() <= 20);
        }
        assert_eq!(chunks_within(&ids, 0, 1000).len(), 1);
        assert!(chunks_within(&[], 0, 10).is_empty());
    }

    #[test]
    fn the_names_query_carries_the_filter_encoded() {
        let q = names_query(&["v1", "v2"]);
        assert!(
            q.starts_with("vertices=v1,v2&regex=busyTimeMsPerSecond%7C"),
            "{q}"
        );
        assert_eq!(
            q.split_once("&regex=").unwrap().1.split(',').count(),
            LISTING_FILTER.len()
        );
    }

    #[test]
    fn missing_vertices_answer_nothing() {
        let answer: Vec<VertexMetrics> = serde_json::from_str(
            r#"[{"vertexId":"ABC","metrics":[{"id":"busyTimeMsPerSecond","max":1.0}]}]"#,
        )
        .unwrap();
        assert_eq!(metrics_of(&answer, "abc").len(), 1);
        assert!(metrics_of(&answer, "def").is_empty());
        assert!(means_unsupported(&FlinkError::Status {
            endpoint: "x",
            status: 404,
            detail: String::new()
        }));
        assert!(!means_unsupported(&FlinkError::Status {
            endpoint: "x",
            status: 503,
            detail: String::new()
        }));
    }
}
