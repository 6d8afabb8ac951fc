//! Flink's number and error encodings on the wire.

use serde_json::{json, Value};

/// Java's `Double.toString`: `376.0`, `1001.45`, `1.0E10`, `NaN`, `Infinity`.
pub(crate) fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let a = x.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

/// A JSON number, or Flink's string form for non-finite doubles.
pub(crate) fn json_f64(x: f64) -> Value {
    match serde_json::Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None => Value::String(java_double(x)),
    }
}

/// Appends a double the way Flink's aggregated endpoints print it.
pub(crate) fn push_json_f64(out: &mut String, x: f64) {
    if x.is_finite() {
        let mut buf = ryu_like(x);
        if !buf.contains(['.', 'e', 'E']) {
            buf.push_str(".0");
        }
        out.push_str(&buf);
    } else {
        out.push('"');
        out.push_str(&java_double(x));
        out.push('"');
    }
}

fn ryu_like(x: f64) -> String {
    // serde_json prints finite doubles with their shortest round-trip representation.
    serde_json::Number::from_f64(x)
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Flink's error body: `{"errors":[...]}`. Real 2.x bodies carry the exception class and a
/// stack trace; the simulator keeps the class prefix so clients that log them look familiar.
pub(crate) fn error_body(messages: &[String]) -> Value {
    json!({ "errors": messages })
}

/// A handler exception message as Flink 2.x renders it.
pub(crate) fn handler_exception(class: &str, message: &str) -> String {
    format!("{class}: {message}\n\tat flink-sim (simulated JobManager)")
}

/// An "Internal server error." body as Flink renders unexpected exceptions.
pub(crate) fn internal_error(class: &str, message: &str) -> Vec<String> {
    vec![
        "Internal server error.".into(),
        format!("<Exception on server side:\n{class}: {message}\n\tat flink-sim (simulated JobManager)\n\nEnd of exception on server side>"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_double_matches_java() {
        assert_eq!(java_double(376.0), "376.0");
        assert_eq!(java_double(1001.45), "1001.45");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1.2e10), "1.2E10");
        assert_eq!(java_double(1e10), "1.0E10");
        assert_eq!(java_double(1e-4), "1.0E-4");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn aggregated_numbers() {
        let mut s = String::new();
        push_json_f64(&mut s, 751.0);
        s.push(',');
        push_json_f64(&mut s, f64::NAN);
        assert_eq!(s, "751.0,\"NaN\"");
    }
}
