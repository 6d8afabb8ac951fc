//! Region failover: while a region is evacuating, its jobs see traffic fall only because it
//! was moved away; it comes back, so no vertex may be scaled down there.

use super::reason;
use crate::protocol::{GateName, Proposal, Reason};

/// Refuses a proposal that lowers any vertex's parallelism in an evacuating region.
pub fn check(proposal: &Proposal, region_evacuating: bool) -> Option<Reason> {
    if !region_evacuating || !proposal.lowers_any_parallelism() {
        return None;
    }
    let lowered: Vec<&str> = proposal
        .vertices
        .iter()
        .filter(|v| v.proposed_parallelism < v.current_parallelism)
        .map(|v| v.name.as_str())
        .collect();
    Some(reason(
        GateName::RegionFailover,
        "region_evacuating",
        format!(
            "region {} is evacuating; scale-down of {} refused until the failover is over",
            proposal.region,
            lowered.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::proposal;
    use super::*;

    #[test]
    fn table() {
        // (vertices as (current, proposed), evacuating, refused)
        type Case = (&'static [(u32, u32)], bool, bool);
        let cases: &[Case] = &[
            (&[(4, 8)], true, false),         // scale-up in an evacuating region passes
            (&[(4, 2)], true, true),          // scale-down refused
            (&[(4, 8), (4, 2)], true, true),  // mixed: any lowered vertex refuses
            (&[(4, 4), (4, 4)], true, false), // unchanged
            (&[(4, 2)], false, false),        // region healthy
            (&[(4, 8), (4, 2)], false, false),
        ];
        for (vertices, evacuating, refused) in cases {
            let spec: Vec<_> = vertices.iter().map(|(c, n)| ("default", *c, *n)).collect();
            let got = check(&proposal(&spec), *evacuating);
            assert_eq!(
                got.is_some(),
                *refused,
                "{vertices:?} evacuating={evacuating}"
            );
            if let Some(r) = got {
                assert_eq!(r.gate, GateName::RegionFailover);
                assert_eq!(r.code, "region_evacuating");
            }
        }
    }
}
