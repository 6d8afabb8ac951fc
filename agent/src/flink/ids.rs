//! Ids and other strings the JobManager sends, made safe before they reach a URL, a metric
//! label or a log line. Flink's job and vertex ids are 32 hexadecimal characters; anything
//! else is refused where it enters (the parsed response), so a hostile or broken JobManager
//! cannot turn an id into a query string (`x?get=1`), a path (`../../jobmanager/config`), a
//! 5,000-character label or a forged log line.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Longest excerpt of a refused string kept for a log line or an error message.
const EXCERPT_CHARS: usize = 40;

/// Characters kept literal in a path segment (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A Flink id: exactly 32 hexadecimal characters.
pub fn is_flink_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `segment` percent-encoded for one path segment. For a valid id it is the id itself; it
/// keeps anything else from changing the path's shape (`/`, `?`, `#`, `%`).
pub fn path_segment(segment: &str) -> String {
    let encoded: String = utf8_percent_encode(segment, SEGMENT).collect();
    match encoded.as_str() {
        // Dot segments are unreserved yet still mean "here" and "up".
        "." => "%2E".into(),
        ".." => "%2E%2E".into(),
        _ => encoded,
    }
}

/// A string from the JobManager made fit for one log line: control characters escaped (no
/// forged lines), at most [`EXCERPT_CHARS`] characters, with the full length when cut.
pub fn printable(s: &str) -> String {
    let escaped: String = s.chars().flat_map(char::escape_debug).collect();
    match escaped.char_indices().nth(EXCERPT_CHARS) {
        None => escaped,
        Some((cut, _)) => format!("{}… ({} chars)", &escaped[..cut], s.chars().count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_32_hex_characters_are_ids() {
        for (id, ok) in [
            ("0123456789abcdef0123456789ABCDEF", true),
            ("0123456789abcdef0123456789abcde", false),
            ("0123456789abcdef0123456789abcdef0", false),
            ("x?get=1", false),
            ("../../jobmanager/config", false),
            ("0123456789abcdef0123456789abcdeg", false),
            ("", false),
        ] {
            assert_eq!(is_flink_id(id), ok, "{id}");
        }
        assert!(!is_flink_id(&"a".repeat(5000)));
    }

    #[test]
    fn path_segments_cannot_change_the_path() {
        assert_eq!(
            path_segment("0123456789abcdef0123456789abcdef"),
            "0123456789abcdef0123456789abcdef"
        );
        assert_eq!(path_segment("x?get=1"), "x%3Fget%3D1");
        assert_eq!(
            path_segment("../../jobmanager/config"),
            "..%2F..%2Fjobmanager%2Fconfig"
        );
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(path_segment("a#b%c d"), "a%23b%25c%20d");
    }

    #[test]
    fn printable_strings_stay_on_one_short_line() {
        assert_eq!(printable("RUNNING"), "RUNNING");
        let forged = printable("x\n2026-01-01T00:00:00Z ERROR forged");
        assert!(!forged.contains('\n') && forged.contains("\\n"), "{forged}");
        let long = printable(&"a".repeat(5000));
        assert!(
            long.starts_with(&"a".repeat(EXCERPT_CHARS)) && long.ends_with("(5000 chars)"),
            "{long}"
        );
        assert!(long.chars().count() < EXCERPT_CHARS + 20);
    }
}
