//! The job graph as index-based adjacency: validated ids, edges with their ship strategy,
//! and a topological order (every vertex after all of its inputs).

use std::collections::HashMap;

use super::error::EngineError;
use crate::samples::Input;

/// How records travel along an edge; only these matter to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShipStrategy {
    /// keyBy: the consumer is aligned to key groups.
    Hash,
    /// One-to-one: our forward groups keep both ends at one parallelism.
    Forward,
    Other,
}

impl ShipStrategy {
    pub fn parse(text: &str) -> ShipStrategy {
        if text.eq_ignore_ascii_case("HASH") {
            ShipStrategy::Hash
        } else if text.eq_ignore_ascii_case("FORWARD") {
            ShipStrategy::Forward
        } else {
            ShipStrategy::Other
        }
    }
}

#[derive(Debug, Clone)]
pub struct Topology {
    /// Per vertex: (input vertex index, strategy).
    pub inputs: Vec<Vec<(usize, ShipStrategy)>>,
    /// Per vertex: consumer vertex indexes.
    pub outputs: Vec<Vec<usize>>,
    /// Topological order of vertex indexes.
    pub order: Vec<usize>,
}

impl Topology {
    /// Builds and validates the graph of `vertices` (id, inputs), in input order.
    pub fn build<'a>(
        vertices: impl ExactSizeIterator<Item = (&'a str, &'a [Input])> + Clone,
    ) -> Result<Topology, EngineError> {
        let n = vertices.len();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
        for (i, (id, _)) in vertices.clone().enumerate() {
            if id.is_empty() {
                return Err(EngineError::invalid(
                    format!("vertices[{i}].id"),
                    "must not be empty",
                ));
            }
            if index.insert(id, i).is_some() {
                return Err(EngineError::invalid(
                    format!("vertices[{i}].id"),
                    format!("duplicate vertex id `{id}`"),
                ));
            }
        }
        let mut inputs = vec![Vec::new(); n];
        let mut outputs = vec![Vec::new(); n];
        for (i, (id, edges)) in vertices.enumerate() {
            for (j, edge) in edges.iter().enumerate() {
                let field = || format!("vertices[{i}].inputs[{j}].id");
                let &from = index.get(edge.id.as_str()).ok_or_else(|| {
                    EngineError::invalid(field(), format!("unknown vertex `{}`", edge.id))
                })?;
                if from == i {
                    return Err(EngineError::invalid(
                        field(),
                        format!("`{id}` cannot consume itself"),
                    ));
                }
                inputs[i].push((from, ShipStrategy::parse(&edge.ship_strategy)));
                outputs[from].push(i);
            }
        }
        let order = topological_order(&inputs, &outputs).ok_or_else(|| {
            EngineError::invalid(
                "vertices",
                "the inputs form a cycle; a job graph is acyclic",
            )
        })?;
        Ok(Topology {
            inputs,
            outputs,
            order,
        })
    }

    pub fn is_source(&self, v: usize) -> bool {
        self.inputs[v].is_empty()
    }

    pub fn is_sink(&self, v: usize) -> bool {
        self.outputs[v].is_empty()
    }

    pub fn has_hash_input(&self, v: usize) -> bool {
        self.inputs[v].iter().any(|(_, s)| *s == ShipStrategy::Hash)
    }
}

/// Checks `(parallelism, max_parallelism)` of each vertex, in input order.
pub fn check_parallelism(vertices: impl Iterator<Item = (u32, u32)>) -> Result<(), EngineError> {
    for (i, (parallelism, max_parallelism)) in vertices.enumerate() {
        for (name, value) in [
            ("parallelism", parallelism),
            ("max_parallelism", max_parallelism),
        ] {
            if value == 0 {
                return Err(EngineError::invalid(
                    format!("vertices[{i}].{name}"),
                    "must be at least 1",
                ));
            }
        }
    }
    Ok(())
}

/// Kahn's algorithm; `None` on a cycle.
fn topological_order(
    inputs: &[Vec<(usize, ShipStrategy)>],
    outputs: &[Vec<usize>],
) -> Option<Vec<usize>> {
    let mut pending: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..inputs.len()).filter(|v| pending[*v] == 0).collect();
    ready.reverse();
    let mut order = Vec::with_capacity(inputs.len());
    while let Some(v) = ready.pop() {
        order.push(v);
        for &c in &outputs[v] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.push(c);
            }
        }
    }
    (order.len() == inputs.len()).then_some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(id: &str, s: &str) -> Input {
        Input {
            id: id.into(),
            ship_strategy: s.into(),
        }
    }

    fn build(spec: &[(&str, Vec<Input>)]) -> Result<Topology, EngineError> {
        Topology::build(spec.iter().map(|(id, ins)| (*id, ins.as_slice())))
    }

    #[test]
    fn orders_vertices_after_their_inputs() {
        let t = build(&[
            ("sink", vec![edge("map", "FORWARD")]),
            ("map", vec![edge("src", "HASH")]),
            ("src", vec![]),
        ])
        .unwrap();
        assert_eq!(t.order, vec![2, 1, 0]);
        assert!(t.is_source(2) && t.is_sink(0) && t.has_hash_input(1));
    }

    #[test]
    fn rejects_bad_graphs_naming_the_field() {
        let cases = [
            (vec![("a", vec![]), ("a", vec![])], "vertices[1].id"),
            (
                vec![("a", vec![edge("x", "HASH")])],
                "vertices[0].inputs[0].id",
            ),
            (
                vec![("a", vec![edge("a", "HASH")])],
                "vertices[0].inputs[0].id",
            ),
            (
                vec![
                    ("a", vec![edge("b", "HASH")]),
                    ("b", vec![edge("a", "HASH")]),
                ],
                "vertices",
            ),
            (vec![("", vec![])], "vertices[0].id"),
        ];
        for (spec, field) in cases {
            match build(&spec) {
                Err(EngineError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected an error on {field}, got {other:?}"),
            }
        }
    }
}
