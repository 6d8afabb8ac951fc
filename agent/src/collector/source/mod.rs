//! How a poll's numbers are fetched: one [`MetricSource`] per way of asking the JobManager.
//! Given the job's vertices and what to read from each, a source fills the name cache as
//! needed and returns each vertex's names and aggregated values; everything after that
//! (samples, usability, gauges, the window) does not know which source read them.
//!
//! - [`per_vertex`]: stock Flink. A name listing per vertex, one filtered, aggregated
//!   request per vertex (one slice of subtasks per vertex for large jobs), the
//!   all-or-nothing retry. The default.
//! - [`batch`]: the batch endpoints proposed in FLINK-39617 (not in released Flink): the
//!   names of many vertices in one request, the values of every vertex asking for the same
//!   names in one request.
//!
//! [`Sources`] picks one per poll: the batch source when the JobManager answered a probe of
//! the batch endpoints and the job is read whole, else per vertex. A new source goes in its
//! own file here, with a [`SourceKind`] and a rule in [`Sources::choose`].

pub mod batch;
pub mod per_vertex;

use std::sync::Arc;

use serde::Serialize;

use super::name_cache::{NameCache, NameNeed};
use super::names::{ResolvedNames, Selection};
use super::CollectorSettings;
use crate::daemon::clock::BoxFuture;
use crate::flink::features::BatchAnswer;
use crate::flink::model::AggregatedMetric;
use crate::flink::{FlinkClient, FlinkError};
use flink_autoscale_core::samples::VertexSpec;

/// Which source read a poll, as `collect` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    #[default]
    PerVertex,
    Batch,
}

/// Requests and name-cache events of one poll.
#[derive(Debug, Default)]
pub struct PollCounters {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub resolutions: u64,
}

/// What every vertex read of one poll shares.
pub struct ReadContext<'a> {
    pub client: &'a FlinkClient,
    pub job_id: &'a str,
    pub settings: &'a CollectorSettings,
    pub now_ms: u64,
    /// Slices per vertex this poll (1 = whole) and which slice is read.
    pub slices: u32,
    pub slice: u32,
}

/// One vertex to read and what to read from it.
#[derive(Debug, Clone, Copy)]
pub struct VertexAsk<'a> {
    pub spec: &'a VertexSpec,
    pub sel: Selection,
}

/// What reading one vertex gave: its names, its (merged) values, and for a sliced vertex how
/// many of its slices have been read since its names were listed, out of how many.
pub struct VertexRead {
    pub names: Arc<ResolvedNames>,
    pub values: Vec<AggregatedMetric>,
    pub slices_read: Option<(u32, u32)>,
}

/// The cached names of `spec` when they serve this poll, counting the cache hit or miss;
/// `None` means list them.
fn cached_names(
    ctx: &ReadContext<'_>,
    cache: &NameCache,
    spec: &VertexSpec,
    counters: &mut PollCounters,
) -> Option<Arc<ResolvedNames>> {
    match cache.need(spec, ctx.now_ms, ctx.settings.names_refresh_ms) {
        NameNeed::Cached(names) => {
            counters.hits += 1;
            Some(names)
        }
        NameNeed::List { miss } => {
            if miss {
                counters.misses += 1;
            } else {
                counters.hits += 1;
            }
            None
        }
    }
}

/// One way of fetching a poll's numbers. A source keeps what it needs between polls of one
/// job (slices, for one) and forgets it on [`MetricSource::clear`].
pub trait MetricSource: Send {
    /// Reads every vertex in `asks`, in order, listing names into `cache` where it says so.
    fn read<'a>(
        &'a mut self,
        ctx: &'a ReadContext<'a>,
        cache: &'a mut NameCache,
        asks: &'a [VertexAsk<'a>],
        counters: &'a mut PollCounters,
    ) -> BoxFuture<'a, Result<Vec<VertexRead>, FlinkError>>;

    /// Forgets per-incarnation state.
    fn clear(&mut self);
}

/// The sources a job's collector can read with, and the choice between them.
#[derive(Default)]
pub struct Sources {
    per_vertex: per_vertex::PerVertexSource,
    batch: batch::BatchSource,
}

impl Sources {
    /// Forgets per-incarnation state in every source.
    pub fn clear(&mut self) {
        self.per_vertex.clear();
        self.batch.clear();
    }

    /// Reads with the source [`Sources::choose`] picks; a batch read whose endpoint stopped
    /// answering falls back to per-vertex in the same poll.
    pub async fn read(
        &mut self,
        ctx: &ReadContext<'_>,
        cache: &mut NameCache,
        asks: &[VertexAsk<'_>],
        counters: &mut PollCounters,
    ) -> Result<(SourceKind, Vec<VertexRead>), FlinkError> {
        let kind = self.choose(ctx, asks, counters).await?;
        if kind == SourceKind::Batch {
            match self.batch.read(ctx, cache, asks, counters).await {
                Err(err) if batch::means_unsupported(&err) => {
                    tracing::warn!(error = %err, "the batch metric endpoints stopped answering; reading per vertex");
                    ctx.client.features().batch_metrics_gone();
                }
                result => return result.map(|reads| (kind, reads)),
            }
        }
        let reads = self.per_vertex.read(ctx, cache, asks, counters).await?;
        Ok((SourceKind::PerVertex, reads))
    }

    /// Batch when the JobManager serves the batch endpoints (probed once, by the first job
    /// that gets to it) and the job is read whole: the batch endpoint cannot select
    /// subtasks, so sliced jobs stay per vertex.
    async fn choose(
        &mut self,
        ctx: &ReadContext<'_>,
        asks: &[VertexAsk<'_>],
        counters: &mut PollCounters,
    ) -> Result<SourceKind, FlinkError> {
        let Some(first) = asks.first().filter(|_| ctx.slices == 1) else {
            return Ok(SourceKind::PerVertex);
        };
        let served = match ctx.client.features().batch_metrics() {
            BatchAnswer::Known(served) => served,
            BatchAnswer::Pending => false,
            BatchAnswer::Probe(ticket) => {
                let served = batch::probe(ctx, first.spec, counters).await?;
                ticket.settle(served);
                if served {
                    tracing::info!("the JobManager serves the batch metric endpoints (FLINK-39617); reading with them");
                }
                served
            }
        };
        Ok(if served {
            SourceKind::Batch
        } else {
            SourceKind::PerVertex
        })
    }
}
