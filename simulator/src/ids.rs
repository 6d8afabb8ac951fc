//! Stable identifiers: Flink ids are 32 lowercase hex characters. The simulator derives them
//! from scenario names so that a scenario yields the same job and vertex ids on every run.

/// 64-bit FNV-1a over `parts`, separated so that `("ab","c")` and `("a","bc")` differ.
fn fnv1a(seed: u64, parts: &[&str]) -> u64 {
    let mut h = seed;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// A 32-hex id that depends only on `parts`.
pub(crate) fn stable_id(parts: &[&str]) -> String {
    let hi = fnv1a(0xcbf2_9ce4_8422_2325, parts);
    let lo = fnv1a(0x9e37_79b9_7f4a_7c15, parts);
    format!("{hi:016x}{lo:016x}")
}

/// A deterministic value in [0, 1) for noise and filler metrics.
pub(crate) fn unit_hash(seed: u64, a: u64, b: u64) -> f64 {
    let mut x =
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// True when `s` looks like a Flink id (32 hex digits).
pub(crate) fn is_flink_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let a = stable_id(&["job", "orders"]);
        assert_eq!(a, stable_id(&["job", "orders"]));
        assert_ne!(a, stable_id(&["job", "order", "s"]));
        assert!(is_flink_id(&a));
        assert_eq!(a, a.to_lowercase());
    }

    #[test]
    fn unit_hash_is_in_range() {
        for i in 0..1000 {
            let v = unit_hash(7, i, i * 3);
            assert!((0.0..1.0).contains(&v));
        }
    }
}
