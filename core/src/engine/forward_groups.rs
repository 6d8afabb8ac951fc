//! Our extension "forward-connected groups": vertices joined by FORWARD edges get one
//! parallelism, so Flink never turns a forward edge into a shuffle. The group takes the
//! largest parallelism any member needs, capped by the smallest cap of its members.

use super::topology::{ShipStrategy, Topology};

/// Connected components over FORWARD edges with at least two members.
pub fn forward_groups(topology: &Topology) -> Vec<Vec<usize>> {
    let n = topology.inputs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut v: usize) -> usize {
        while parent[v] != v {
            parent[v] = parent[parent[v]];
            v = parent[v];
        }
        v
    }
    for (v, inputs) in topology.inputs.iter().enumerate() {
        for &(u, strategy) in inputs {
            if strategy == ShipStrategy::Forward {
                let (a, b) = (root(&mut parent, u), root(&mut parent, v));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    // Group members by root without a vector per vertex: sort (root, vertex) pairs.
    let mut by_root: Vec<(usize, usize)> = (0..n).map(|v| (root(&mut parent, v), v)).collect();
    by_root.sort_unstable();
    by_root
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|chunk| chunk.len() > 1)
        .map(|chunk| chunk.iter().map(|&(_, v)| v).collect())
        .collect()
}

/// What a member brings to its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub current: u32,
    /// The parallelism this vertex alone would get.
    pub wanted: u32,
    /// The most this vertex may get (key groups and `vertex.max-parallelism`).
    pub cap: u32,
    /// The vertex must keep `current` (for example, excluded from scaling).
    pub pinned: bool,
}

/// The one parallelism of a group: pinned members hold it at their parallelism; otherwise
/// the largest wanted value, capped by the smallest member cap.
pub fn group_parallelism(members: impl Iterator<Item = Member> + Clone) -> u32 {
    let pinned = members
        .clone()
        .filter(|m| m.pinned)
        .map(|m| m.current)
        .max();
    if let Some(p) = pinned {
        return p;
    }
    let wanted = members.clone().map(|m| m.wanted).max().unwrap_or(1);
    let cap = members.map(|m| m.cap).min().unwrap_or(u32::MAX);
    wanted.min(cap).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::Input;

    fn topology(spec: &[(&str, &[(&str, &str)])]) -> Topology {
        let inputs: Vec<Vec<Input>> = spec
            .iter()
            .map(|(_, ins)| {
                ins.iter()
                    .map(|(id, s)| Input {
                        id: (*id).into(),
                        ship_strategy: (*s).into(),
                    })
                    .collect()
            })
            .collect();
        Topology::build(
            spec.iter()
                .zip(&inputs)
                .map(|((id, _), ins)| (*id, ins.as_slice())),
        )
        .unwrap()
    }

    #[test]
    fn groups_follow_forward_edges_only() {
        let t = topology(&[
            ("src", &[]),
            ("a", &[("src", "FORWARD")]),
            ("b", &[("a", "HASH")]),
            ("c", &[("b", "FORWARD")]),
            ("d", &[("c", "forward"), ("a", "REBALANCE")]),
            ("e", &[("d", "REBALANCE")]),
        ]);
        assert_eq!(forward_groups(&t), vec![vec![0, 1], vec![2, 3, 4]]);
    }

    fn member(current: u32, wanted: u32, cap: u32, pinned: bool) -> Member {
        Member {
            current,
            wanted,
            cap,
            pinned,
        }
    }

    #[test]
    fn group_parallelism_cases() {
        let cases = [
            (vec![member(4, 8, 128, false), member(4, 6, 128, false)], 8),
            (vec![member(4, 8, 128, false), member(4, 6, 5, false)], 5),
            (vec![member(4, 2, 128, false), member(4, 3, 128, false)], 3),
            (vec![member(4, 8, 128, false), member(4, 4, 128, true)], 4),
        ];
        for (i, (members, expected)) in cases.into_iter().enumerate() {
            assert_eq!(group_parallelism(members.into_iter()), expected, "case {i}");
        }
    }
}
