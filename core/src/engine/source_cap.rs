//! A source never gets more subtasks than it can use: each of its partitions or splits is
//! read by one subtask, and a subtask beyond that count reads nothing (an unbounded source's
//! stays idle, a bounded one's FINISHES), together with whatever is chained to it or fed
//! through a FORWARD edge. Upstream's FLINK-40389 (operator 1.16): the result is capped at
//! the partition count in every alignment mode, also when that turns the wanted scale-up
//! into a scale-down (subtasks above the count did no work, so no capacity is lost).
//!
//! The cap never forces a change on its own: it bounds a parallelism that changes anyway.

/// The most subtasks a vertex with `source_partitions` partitions or splits can use (0 =
/// unknown: no cap), but never below `lower` (`min(current, vertex.min-parallelism)`).
pub fn source_cap(source_partitions: u32, lower: u32) -> Option<u32> {
    (source_partitions > 0).then(|| source_partitions.max(lower))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_partitions_do_not_cap_and_the_lower_bound_wins() {
        assert_eq!(source_cap(0, 1), None);
        assert_eq!(source_cap(15, 1), Some(15));
        assert_eq!(source_cap(2, 3), Some(3), "vertex.min-parallelism is kept");
    }
}
