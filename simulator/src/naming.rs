//! Flink's metric scope naming: what an operator name becomes inside a metric key.

/// Flink truncates operator names longer than this before using them in metric scopes.
const MAX_OPERATOR_NAME_LEN: usize = 80;

/// The scope component Flink's MetricQueryService uses for an operator name:
/// truncated to 80 characters, then ` `, `.`, `:` and `,` replaced with `_`.
/// `Source: Kafka Source` becomes `Source__Kafka_Source`.
pub(crate) fn operator_scope(name: &str) -> String {
    name.chars()
        .take(MAX_OPERATOR_NAME_LEN)
        .map(|c| {
            if matches!(c, ' ' | '.' | ':' | ',') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// A component inside a nested metric group (topic names and the like).
pub(crate) fn group_component(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, ' ' | '.' | ':' | ',') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_like_flink() {
        assert_eq!(
            operator_scope("Source: Kafka Source"),
            "Source__Kafka_Source"
        );
        assert_eq!(
            operator_scope("discard-sink: Writer"),
            "discard-sink__Writer"
        );
        assert_eq!(operator_scope("Calc[2]"), "Calc[2]");
        assert_eq!(operator_scope(&"x".repeat(100)).len(), 80);
        assert_eq!(group_component("orders.v1"), "orders_v1");
    }
}
