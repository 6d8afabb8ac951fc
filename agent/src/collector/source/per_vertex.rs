//! The stock-Flink source, one vertex at a time: a name listing per vertex when the cache
//! needs one, one filtered, aggregated value request per vertex (one slice of subtasks per
//! vertex for large jobs), and the all-or-nothing retry.

use std::collections::HashMap;
use std::sync::Arc;

use super::{cached_names, MetricSource, PollCounters, ReadContext, VertexAsk, VertexRead};
use crate::collector::name_cache::NameCache;
use crate::collector::names::{resolve, ResolvedNames, Selection};
use crate::collector::query::{aggregates, build_queries};
use crate::collector::slices::{SlicePlan, SlicedAnswers};
use crate::daemon::clock::BoxFuture;
use crate::flink::model::AggregatedMetric;
use crate::flink::FlinkError;
use flink_autoscale_core::samples::VertexSpec;

/// The per-vertex source's state for one job: each sliced vertex's latest answer per slice.
#[derive(Debug, Default)]
pub struct PerVertexSource {
    slices: HashMap<String, SlicedAnswers>,
}

impl MetricSource for PerVertexSource {
    fn read<'a>(
        &'a mut self,
        ctx: &'a ReadContext<'a>,
        cache: &'a mut NameCache,
        asks: &'a [VertexAsk<'a>],
        counters: &'a mut PollCounters,
    ) -> BoxFuture<'a, Result<Vec<VertexRead>, FlinkError>> {
        Box::pin(async move {
            let mut reads = Vec::with_capacity(asks.len());
            for ask in asks {
                reads.push(
                    self.read_vertex(ctx, cache, ask.spec, ask.sel, counters)
                        .await?,
                );
            }
            Ok(reads)
        })
    }

    fn clear(&mut self) {
        self.slices.clear();
    }
}

impl PerVertexSource {
    /// Reads one vertex: cached (or freshly listed) names, then its values, whole or one
    /// slice merged with the other slices' latest answers.
    async fn read_vertex(
        &mut self,
        ctx: &ReadContext<'_>,
        cache: &mut NameCache,
        spec: &VertexSpec,
        mut sel: Selection,
        counters: &mut PollCounters,
    ) -> Result<VertexRead, FlinkError> {
        // Subtasks that FINISHED report nothing: a slice of only those would answer `[]`, so
        // a vertex with finished subtasks is read whole.
        let slices = if spec.finished_subtasks > 0 {
            1
        } else {
            ctx.slices
        };
        let plan = SlicePlan::new(spec.parallelism, slices);
        let filter = plan.filter(ctx.slice);
        let filter = filter.as_deref();
        let (mut names, listed) = match cached_names(ctx, cache, spec, counters) {
            Some(names) => (names, false),
            None => (list_names(ctx, cache, spec, counters).await?, true),
        };
        if plan.is_sliced() {
            // Newly listed names may differ from what earlier slices were asked for.
            let current = self.slices.get(&spec.id);
            if listed || current.is_none_or(|a| a.plan() != plan) {
                self.slices
                    .insert(spec.id.clone(), SlicedAnswers::new(plan));
            }
            sel.backlog = !self.slices[&spec.id].without_backlog(ctx.slice);
        } else {
            self.slices.remove(&spec.id);
        }
        let mut values = fetch_values(ctx, &spec.id, &names, sel, filter, counters).await?;
        if values.is_empty() && plan.is_sliced() && sel.backlog && !names.pending_records.is_empty()
        {
            // A slice whose subtasks hold no partitions reports no backlog, and asking for it
            // empties the whole answer. Remembered for this slice until names are listed again.
            sel.backlog = false;
            values = fetch_values(ctx, &spec.id, &names, sel, filter, counters).await?;
            if let (false, Some(answers)) = (values.is_empty(), self.slices.get_mut(&spec.id)) {
                answers.mark_without_backlog(ctx.slice);
            }
        }
        // A vertex is listed at most once per poll: a listing this poll is already fresh.
        if values.is_empty() && !listed && !names.requested(sel).is_empty() {
            // All-or-nothing: one requested name has no value any more. Resolve again.
            tracing::info!(job_id = %ctx.job_id, vertex_id = %spec.id, "filtered request returned []; resolving names again");
            names = list_names(ctx, cache, spec, counters).await?;
            if let Some(answers) = self.slices.get_mut(&spec.id) {
                *answers = SlicedAnswers::new(plan);
            }
            values = fetch_values(ctx, &spec.id, &names, sel, filter, counters).await?;
        }
        let mut slices_read = None;
        if let Some(answers) = self.slices.get_mut(&spec.id) {
            answers.record(ctx.slice, values);
            values = answers.merged();
            slices_read = Some((answers.read(), plan.count()));
        }
        Ok(VertexRead {
            names,
            values,
            slices_read,
        })
    }
}

/// Lists one vertex's names (the expensive union over its subtasks) and caches them.
async fn list_names(
    ctx: &ReadContext<'_>,
    cache: &mut NameCache,
    spec: &VertexSpec,
    counters: &mut PollCounters,
) -> Result<Arc<ResolvedNames>, FlinkError> {
    counters.requests += 1;
    counters.resolutions += 1;
    let listed = ctx.client.metric_names(ctx.job_id, &spec.id).await?;
    let names = resolve(listed.iter().map(|m| m.id.as_str()), spec.is_source());
    Ok(cache.store(&spec.id, names, ctx.now_ms))
}

/// One request per vertex (more only when the names do not fit one request line), over
/// the subtasks `filter` selects (all when `None`). An empty answer to any part means the
/// whole answer is empty.
async fn fetch_values(
    ctx: &ReadContext<'_>,
    vertex_id: &str,
    names: &ResolvedNames,
    sel: Selection,
    filter: Option<&str>,
    counters: &mut PollCounters,
) -> Result<Vec<AggregatedMetric>, FlinkError> {
    let all = names.requested(sel);
    let filter = filter.map(|f| format!("&{f}")).unwrap_or_default();
    let path_len = format!(
        "/jobs/{}/vertices/{vertex_id}/subtasks/metrics?",
        ctx.job_id
    )
    .len()
        + filter.len();
    let queries = build_queries(
        &all,
        aggregates(ctx.settings.busy_aggregator),
        ctx.settings.max_request_line_bytes,
        |q| ctx.client.request_line_len("") + path_len + q,
    );
    let mut values = Vec::with_capacity(all.len());
    for query in queries {
        counters.requests += 1;
        let part = ctx
            .client
            .metric_values(ctx.job_id, vertex_id, &format!("{query}{filter}"))
            .await?;
        if part.is_empty() {
            return Ok(Vec::new());
        }
        values.extend(part);
    }
    Ok(values)
}
