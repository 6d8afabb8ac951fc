//! Alignment of a new parallelism to key groups or source partitions (reference section 6),
//! so that work spreads evenly over subtasks.

use super::config::AlignmentMode;

/// What alignment needs to know about a vertex whose parallelism changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignmentInput {
    pub current: u32,
    /// The bounded new parallelism (different from `current`).
    pub new: u32,
    /// Key groups (`maxParallelism`).
    pub max_parallelism: u32,
    /// Known source partitions; 0 = unknown.
    pub source_partitions: u32,
    pub has_hash_input: bool,
    /// `min(p, vertex.min-parallelism)`.
    pub lower: u32,
    /// `max(p, vertex.max-parallelism)`.
    pub upper: u32,
}

/// The aligned parallelism; it may be `current` (a cancelled change). Vertices without a
/// keyed input and without known partitions keep `new`.
pub fn align(mode: AlignmentMode, a: &AlignmentInput) -> u32 {
    if a.source_partitions == 0 && !a.has_hash_input {
        return a.new;
    }
    let n = if a.source_partitions > 0 {
        a.source_partitions
    } else {
        a.max_parallelism
    };
    let align_cap = n.min(a.max_parallelism).min(a.upper);
    let scale_up = a.new > a.current;
    let region_end = if scale_up {
        align_cap
    } else {
        a.current.min(align_cap)
    };
    let divides = |q: u32| n.is_multiple_of(q);
    let reduces_load = |q: u32| n / q < n / a.new;
    let first_in_region = |accept: &dyn Fn(u32) -> bool| (a.new..=region_end).find(|&q| accept(q));
    match mode {
        AlignmentMode::Off => a.new,
        AlignmentMode::Balanced => {
            first_in_region(&|q| divides(q) || reduces_load(q)).unwrap_or(a.new)
        }
        AlignmentMode::EvenlySpread => first_in_region(&divides).unwrap_or(a.new),
        AlignmentMode::LegacyEvenlySpread => {
            first_in_region(&divides).unwrap_or_else(|| legacy_fallback(a, n, scale_up))
        }
        AlignmentMode::LegacyMaximizeUtilisation => {
            first_in_region(&|q| divides(q) || reduces_load(q))
                .unwrap_or_else(|| legacy_fallback(a, n, scale_up))
        }
    }
}

/// The legacy relaxed fallback: the largest q below `new` that gives each subtask more
/// key groups (or its divisor successor), bounded below, then the direction guard, which
/// returns `current` instead of reversing the intended direction.
fn legacy_fallback(a: &AlignmentInput, n: u32, scale_up: bool) -> u32 {
    let per_subtask = n / a.new;
    let mut q = (1..=a.new)
        .rev()
        .find(|&q| n / q > per_subtask)
        .unwrap_or(0);
    if q > 0 && !n.is_multiple_of(q) {
        q += 1;
    }
    let q = q.max(a.lower);
    let reverses = if scale_up {
        q <= a.current
    } else {
        q >= a.current
    };
    if reverses {
        a.current
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AlignmentMode::*;

    fn input(
        current: u32,
        new: u32,
        max_parallelism: u32,
        partitions: u32,
        upper: u32,
    ) -> AlignmentInput {
        AlignmentInput {
            current,
            new,
            max_parallelism,
            source_partitions: partitions,
            has_hash_input: true,
            lower: 1,
            upper,
        }
    }

    #[test]
    fn alignment_per_mode_follows_the_reference() {
        // (mode, current, new, key groups, partitions, upper, expected)
        let cases = [
            // N=720, new=7, p=10 (scale-down): 8 in all modes but OFF.
            (Balanced, 10, 7, 720, 0, 200, 8),
            (EvenlySpread, 10, 7, 720, 0, 200, 8),
            (LegacyEvenlySpread, 10, 7, 720, 0, 200, 8),
            (LegacyMaximizeUtilisation, 10, 7, 720, 0, 200, 8),
            (Off, 10, 7, 720, 0, 200, 7),
            // N=128, new=24: EVENLY_SPREAD 32, BALANCED and MAXIMIZE_UTILISATION 26.
            (EvenlySpread, 10, 24, 128, 0, 200, 32),
            (LegacyEvenlySpread, 10, 24, 128, 0, 200, 32),
            (Balanced, 10, 24, 128, 0, 200, 26),
            (LegacyMaximizeUtilisation, 10, 24, 128, 0, 200, 26),
            (Off, 10, 24, 128, 0, 200, 24),
            // N=720, new capped at 300 by upper: legacy 240, BALANCED and EVENLY_SPREAD 300.
            (LegacyEvenlySpread, 10, 300, 720, 0, 300, 240),
            (LegacyMaximizeUtilisation, 10, 300, 720, 0, 300, 240),
            (Balanced, 10, 300, 720, 0, 300, 300),
            (EvenlySpread, 10, 300, 720, 0, 300, 300),
            // Source partitions replace key groups: 12 partitions, new 5 -> 6.
            (Balanced, 2, 5, 128, 12, 200, 6),
            (EvenlySpread, 2, 5, 128, 12, 200, 6),
            // Scale-down region ends at p: may return p itself (cancels).
            (EvenlySpread, 9, 7, 20, 0, 200, 7), // 7 no, 8 no, 9 no -> keep new
            // No divisor of 10 in [7, 9]: the legacy fallback walks down to 5.
            (LegacyEvenlySpread, 9, 7, 10, 0, 200, 5),
            // Direction guard: legacy scale-up whose fallback would go down returns p.
            (LegacyEvenlySpread, 20, 25, 30, 0, 25, 20),
            // Scale-up beyond partition count: region empty, BALANCED keeps new.
            (Balanced, 2, 10, 128, 4, 200, 10),
        ];
        for (i, (mode, current, new, kg, parts, upper, expected)) in cases.into_iter().enumerate() {
            let got = align(mode, &input(current, new, kg, parts, upper));
            assert_eq!(
                got, expected,
                "case {i}: {mode:?} p={current} new={new} N={kg}/{parts}"
            );
        }
    }

    #[test]
    fn vertices_without_keyed_input_or_partitions_keep_new() {
        let mut a = input(10, 7, 720, 0, 200);
        a.has_hash_input = false;
        for mode in [
            Balanced,
            EvenlySpread,
            LegacyEvenlySpread,
            LegacyMaximizeUtilisation,
        ] {
            assert_eq!(align(mode, &a), 7);
        }
    }

    #[test]
    fn legacy_fallback_respects_lower_bound() {
        // N=10, new=4 scale-down from 5, no divisor in [4, 5]: 5 divides 10 -> 5 (cancel).
        assert_eq!(align(LegacyEvenlySpread, &input(5, 4, 10, 0, 200)), 5);
        // N=7 prime, new=3 from 6: region [3, 6] has no divisor; fallback walks down:
        // 7/3 = 2, q=2 gives 3 > 2 -> q=2, 7 % 2 != 0 -> 3; 3 < 6 -> 3.
        assert_eq!(align(LegacyEvenlySpread, &input(6, 3, 7, 0, 200)), 3);
    }

    fn any_mode() -> impl Strategy<Value = AlignmentMode> {
        prop_oneof![
            Just(Balanced),
            Just(EvenlySpread),
            Just(Off),
            Just(LegacyEvenlySpread),
            Just(LegacyMaximizeUtilisation),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// Alignment never turns a scale-up into a scale-down or the reverse, and stays
        /// within the parallelism cap.
        #[test]
        fn alignment_never_reverses_the_direction(
            mode in any_mode(),
            current in 1u32..400,
            new in 1u32..400,
            key_groups in 1u32..1000,
            partitions in prop_oneof![Just(0u32), 1u32..300],
            has_hash_input in any::<bool>(),
            vertex_min in 1u32..20,
            vertex_max in 1u32..400,
        ) {
            let lower = current.min(vertex_min);
            let upper = current.max(vertex_max);
            let new = new.clamp(lower, key_groups.min(upper).max(lower));
            prop_assume!(new != current);
            let a = AlignmentInput {
                current,
                new,
                max_parallelism: key_groups,
                source_partitions: partitions,
                has_hash_input,
                lower,
                upper,
            };
            let aligned = align(mode, &a);
            if new > current {
                prop_assert!(aligned >= current, "{mode:?} {a:?} -> {aligned}");
            } else {
                prop_assert!(aligned <= current, "{mode:?} {a:?} -> {aligned}");
            }
            prop_assert!(aligned <= key_groups.max(current).max(new), "{mode:?} {a:?} -> {aligned}");
        }
    }
}
