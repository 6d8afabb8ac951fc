//! Our extension "sink limits": a sink that cannot absorb more caps the flow of everything
//! that flows only into limited sinks, so no vertex scales up for records the sink cannot
//! take. A sink is limited when its max rate is configured
//! (`flink-autoscale.sink-limits.max-rates`), when `evaluate` detected it at capacity, or when
//! its last scale-up did not raise its throughput.

use super::config::AutoscalerConfig;
use super::effectiveness::last_scale_up_ineffective;
use super::model::DecideVertex;
use super::state::ScalingState;
use super::topology::Topology;

/// How a vertex's flow is capped by a limited sink downstream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SinkCap {
    /// Share (0..1) of the vertex's target and catch-up rates that the sink can take.
    pub factor: f64,
    /// Index of the limiting sink.
    pub sink: usize,
    /// What the sink absorbs at most (records/s).
    pub capacity: f64,
    /// The limit was detected rather than configured: the sink itself is at an external
    /// limit, so more parallelism there does not help.
    pub detected: bool,
}

/// Per vertex, the cap from limited sinks, if every sink it feeds is limited. With several
/// limited sinks the least restrictive one counts.
pub fn sink_caps(
    topology: &Topology,
    vertices: &[DecideVertex],
    state: &ScalingState,
    config: &AutoscalerConfig,
) -> Vec<Option<SinkCap>> {
    let mut caps = vec![None; vertices.len()];
    for &v in topology.order.iter().rev() {
        caps[v] = if topology.is_sink(v) {
            sink_capacity(&vertices[v], state, config).and_then(|(capacity, detected)| {
                let vertex = &vertices[v];
                let demand = vertex.target_data_rate.0 + vertex.catch_up_data_rate.0;
                (demand.is_finite() && demand > capacity).then(|| SinkCap {
                    factor: capacity / demand,
                    sink: v,
                    capacity,
                    detected,
                })
            })
        } else {
            topology.outputs[v]
                .iter()
                .map(|&c| caps[c])
                .try_fold(None::<SinkCap>, |best, cap| {
                    let cap = cap?;
                    Some(Some(match best {
                        Some(b) if b.factor >= cap.factor => b,
                        _ => cap,
                    }))
                })
                .flatten()
        };
    }
    caps
}

/// The most a sink absorbs (records/s), if it is limited, and whether that limit was
/// detected (as opposed to configured).
fn sink_capacity(
    vertex: &DecideVertex,
    state: &ScalingState,
    config: &AutoscalerConfig,
) -> Option<(f64, bool)> {
    let ext = &config.extensions;
    let configured = ext.sink_max_rates.get(&vertex.id).copied();
    let detected = ext
        .sink_detection_enabled
        .then(|| {
            let reported = vertex.sink_limit_rate.map(|r| r.0);
            let tpr = vertex.true_processing_rate.0;
            let stalled = state.history.get(&vertex.id).and_then(|history| {
                last_scale_up_ineffective(
                    history,
                    vertex.parallelism,
                    tpr,
                    config.effectiveness_threshold,
                )
                .filter(|ineffective| *ineffective)
                .map(|_| tpr)
            });
            [reported, stalled]
                .into_iter()
                .flatten()
                .filter(|r| r.is_finite() && *r > 0.0)
                .reduce(f64::min)
        })
        .flatten();
    match (configured, detected) {
        (Some(c), Some(d)) if d < c => Some((d, true)),
        (Some(c), _) => Some((c, false)),
        (None, Some(d)) => Some((d, true)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{FlinkF64, Input};

    fn vertex(id: &str, inputs: &[&str], tdr: f64) -> DecideVertex {
        DecideVertex {
            id: id.into(),
            name: String::new(),
            parallelism: 4,
            max_parallelism: 128,
            source_partitions: 0,
            inputs: inputs
                .iter()
                .map(|i| Input {
                    id: (*i).into(),
                    ship_strategy: "REBALANCE".into(),
                })
                .collect(),
            true_processing_rate: FlinkF64(1000.0),
            target_data_rate: FlinkF64(tdr),
            catch_up_data_rate: FlinkF64(0.0),
            sink_limit_rate: None,
        }
    }

    fn caps(vertices: &[DecideVertex], max_rates: &[(&str, f64)]) -> Vec<Option<f64>> {
        let topology = Topology::build(
            vertices
                .iter()
                .map(|v| (v.id.as_str(), v.inputs.as_slice())),
        )
        .unwrap();
        let mut config = AutoscalerConfig::default();
        config.extensions.sink_max_rates = max_rates
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        sink_caps(&topology, vertices, &ScalingState::default(), &config)
            .into_iter()
            .map(|c| c.map(|c| c.factor))
            .collect()
    }

    #[test]
    fn a_limited_sink_caps_what_flows_only_into_it() {
        // src -> map -> sink_a (limited to half its demand), map -> sink_b (unlimited),
        // src -> side -> sink_a.
        let vertices = [
            vertex("src", &[], 1000.0),
            vertex("map", &["src"], 1000.0),
            vertex("side", &["src"], 500.0),
            vertex("sink_a", &["map", "side"], 1000.0),
            vertex("sink_b", &["map"], 1000.0),
        ];
        let got = caps(&vertices, &[("sink_a", 500.0)]);
        assert_eq!(got, vec![None, None, Some(0.5), Some(0.5), None]);
        let both = caps(&vertices, &[("sink_a", 500.0), ("sink_b", 250.0)]);
        assert_eq!(
            both,
            vec![Some(0.5), Some(0.5), Some(0.5), Some(0.5), Some(0.25)]
        );
    }

    #[test]
    fn a_sink_below_its_limit_caps_nothing() {
        let vertices = [vertex("src", &[], 100.0), vertex("sink", &["src"], 100.0)];
        assert_eq!(caps(&vertices, &[("sink", 500.0)]), vec![None, None]);
    }

    #[test]
    fn detected_limits_count_when_detection_is_on() {
        let mut vertices = [vertex("src", &[], 1000.0), vertex("sink", &["src"], 1000.0)];
        vertices[1].sink_limit_rate = Some(FlinkF64(250.0));
        assert_eq!(caps(&vertices, &[]), vec![Some(0.25), Some(0.25)]);
    }
}
