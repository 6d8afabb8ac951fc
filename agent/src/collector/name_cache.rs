//! The per-job cache of resolved metric names, one entry per vertex, kept for one
//! incarnation, and the rule for when a vertex must be listed again. Pure; the metric source
//! does the listing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::names::ResolvedNames;
use flink_autoscale_core::samples::VertexSpec;

#[derive(Debug, Clone)]
struct CachedNames {
    names: Arc<ResolvedNames>,
    listed_at_ms: u64,
}

/// What a vertex needs from the cache this poll.
#[derive(Debug, Clone, PartialEq)]
pub enum NameNeed {
    /// The cached names serve (a cache hit).
    Cached(Arc<ResolvedNames>),
    /// List the vertex's names. `miss` says whether this counts as a cache miss (nothing
    /// cached, or a listing that lacked a required name) rather than a slow refresh.
    List { miss: bool },
}

/// Resolved names per vertex id.
#[derive(Debug, Default)]
pub struct NameCache {
    entries: HashMap<String, CachedNames>,
}

impl NameCache {
    /// Whether `spec`'s names must be listed now. A listing that lacks a required name is
    /// not final: right after a job (re)starts Flink lists no or only some names for a
    /// while, so such a vertex is listed again on its next poll until the listing is
    /// complete. Sources whose lazily registered metrics (`pendingRecords`, partition
    /// offsets) are still missing are listed again every `refresh_ms`, never every poll.
    pub fn need(&self, spec: &VertexSpec, now_ms: u64, refresh_ms: u64) -> NameNeed {
        let Some(cached) = self.entries.get(&spec.id) else {
            return NameNeed::List { miss: true };
        };
        if cached.names.missing_required().is_some() {
            return NameNeed::List { miss: true };
        }
        let lazy_missing = spec.is_source()
            && (cached.names.pending_records.is_empty() || cached.names.source_partitions == 0);
        let due = now_ms.saturating_sub(cached.listed_at_ms) >= refresh_ms;
        if lazy_missing && due {
            NameNeed::List { miss: false }
        } else {
            NameNeed::Cached(Arc::clone(&cached.names))
        }
    }

    /// Keeps a fresh listing of `vertex_id`.
    pub fn store(
        &mut self,
        vertex_id: &str,
        names: ResolvedNames,
        now_ms: u64,
    ) -> Arc<ResolvedNames> {
        let names = Arc::new(names);
        self.entries.insert(
            vertex_id.to_string(),
            CachedNames {
                names: Arc::clone(&names),
                listed_at_ms: now_ms,
            },
        );
        names
    }

    /// Distinct source partitions seen in `vertex_id`'s names (0 = unknown).
    pub fn source_partitions(&self, vertex_id: &str) -> Option<u32> {
        self.entries
            .get(vertex_id)
            .map(|c| c.names.source_partitions)
    }

    /// Every vertex's names, for the snapshot.
    pub fn to_map(&self) -> BTreeMap<String, ResolvedNames> {
        self.entries
            .iter()
            .map(|(k, v)| (k.clone(), (*v.names).clone()))
            .collect()
    }

    /// Forgets everything (a new incarnation).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::names::resolve;
    use flink_autoscale_core::samples::Input;

    fn spec(source: bool) -> VertexSpec {
        VertexSpec {
            id: "v".into(),
            name: "v".into(),
            parallelism: 2,
            max_parallelism: 128,
            source_partitions: 0,
            finished_subtasks: 0,
            inputs: if source {
                vec![]
            } else {
                vec![Input {
                    id: "up".into(),
                    ship_strategy: "HASH".into(),
                }]
            },
        }
    }

    const SOURCE: [&str; 4] = [
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "Source__s.numRecordsIn",
        "Source__s.numRecordsInPerSecond",
    ];

    #[test]
    fn when_a_vertex_is_listed() {
        let complete_source = resolve(
            SOURCE.into_iter().chain([
                "Source__s.pendingRecords",
                "Source__s.KafkaSourceReader.topic.t.partition.0.currentOffset",
            ]),
            true,
        );
        let lazy_source = resolve(SOURCE, true);
        let map = resolve(["busyTimeMsPerSecond", "numRecordsIn"], false);
        let starting = resolve(["numRecordsIn"], false);
        // (listed names, is a source, ms since the listing, expected need)
        let cases = [
            (None, false, 0, Some(true)),
            (Some(&map), false, 0, None),
            (Some(&map), false, 10_000_000, None),
            (Some(&starting), false, 0, Some(true)),
            (Some(&complete_source), true, 10_000_000, None),
            (Some(&lazy_source), true, 59_999, None),
            (Some(&lazy_source), true, 60_000, Some(false)),
        ];
        for (listed, source, age, expected) in cases {
            let mut cache = NameCache::default();
            if let Some(names) = listed {
                cache.store("v", names.clone(), 1_000);
            }
            let got = match cache.need(&spec(source), 1_000 + age, 60_000) {
                NameNeed::Cached(n) => {
                    assert_eq!(Some(&*n), listed);
                    None
                }
                NameNeed::List { miss } => Some(miss),
            };
            assert_eq!(got, expected, "{listed:?} source={source} age={age}");
        }
    }

    #[test]
    fn keeps_partitions_and_forgets_on_clear() {
        let mut cache = NameCache::default();
        let names = resolve(
            SOURCE.into_iter().chain([
                "Source__s.KafkaSourceReader.topic.t.partition.0.currentOffset",
                "Source__s.KafkaSourceReader.topic.t.partition.1.currentOffset",
            ]),
            true,
        );
        cache.store("v", names, 0);
        assert_eq!(cache.source_partitions("v"), Some(2));
        assert_eq!(cache.to_map().len(), 1);
        cache.clear();
        assert_eq!(cache.source_partitions("v"), None);
        assert_eq!(cache.need(&spec(true), 0, 1), NameNeed::List { miss: true });
    }
}
