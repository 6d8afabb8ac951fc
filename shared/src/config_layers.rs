//! The configuration dialect both daemons share: a TOML file, then environment variables
//! `<PREFIX><SECTION>__<KEY>` (a top-level key is `<PREFIX><KEY>`), then flags; each layer
//! wins over the one before. Keys renamed in a release are still read under their old name,
//! with a deprecation warning, for one more release ([`Renamed`]). Durations are strings
//! ("15s"); a bare number of seconds still reads, with a warning ([`integer_durations`]).
//!
//! The layers work on the TOML table, so each daemon's strict `serde` types (unknown keys are
//! errors) see one merged table and every error names the key (`section.key`).

use std::ffi::OsString;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A layer that cannot be applied, naming the key or variable it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct LayerError {
    pub key: String,
    pub message: String,
}

impl LayerError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        LayerError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A key renamed in a release, read under its `old` dotted name until the next one.
#[derive(Debug, Clone, Copy)]
pub struct Renamed {
    pub old: &'static str,
    pub new: &'static str,
    /// The old key held whole seconds; the new one holds a duration string.
    pub seconds_to_duration: bool,
}

/// Parses a configuration file's text.
pub fn parse_toml(text: &str) -> Result<toml::Table, LayerError> {
    text.parse()
        .map_err(|e: toml::de::Error| LayerError::new("config", format!("invalid TOML: {e}")))
}

/// Reads and parses a configuration file (at most [`crate::files::MAX_FILE_BYTES`]).
pub fn read_toml_file(path: &Path) -> Result<toml::Table, LayerError> {
    let text = crate::files::read_text_bounded(path, crate::files::MAX_FILE_BYTES)
        .map_err(|e| LayerError::new("config", e.to_string()))?;
    parse_toml(&text)
        .map_err(|e| LayerError::new("config", format!("{}: {}", path.display(), e.message)))
}

/// The process environment's variables that start with `prefix`, sorted. Other variables are
/// never looked at, so one that is not UTF-8 does no harm; one of ours that is not UTF-8 is
/// an error naming it.
pub fn environment(prefix: &str) -> Result<Vec<(String, String)>, LayerError> {
    select_environment(std::env::vars_os(), prefix)
}

/// [`environment`] over any list of variables.
pub fn select_environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    prefix: &str,
) -> Result<Vec<(String, String)>, LayerError> {
    let mut ours = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|n| n.starts_with(prefix)) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| LayerError::new(name, "the value is not valid UTF-8"))?;
        ours.push((name.to_string(), value));
    }
    ours.sort();
    Ok(ours)
}

/// Applies `<prefix><SECTION>__<KEY>=value` variables (case does not matter in the name) to
/// `table`. Values are read as TOML when they parse as such (numbers, booleans, arrays),
/// else as strings.
pub fn apply_environment(
    table: &mut toml::Table,
    prefix: &str,
    vars: &[(String, String)],
    renamed: &[Renamed],
) -> Result<(), LayerError> {
    for (name, raw) in vars {
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        if path.iter().any(String::is_empty) {
            return Err(LayerError::new(
                name,
                format!("expected {prefix}<SECTION>__<KEY> or {prefix}<KEY>"),
            ));
        }
        set(table, &path, value_from_text(raw), name, renamed)?;
    }
    Ok(())
}

/// A value given as text (environment, flags): TOML if it parses as a TOML value, else a
/// string.
pub fn value_from_text(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Sets `path` in `table` to `value`, creating sections; `origin` (a variable or flag) is
/// named in errors. A later layer replaces a key written under its other name too, so the
/// old and new spellings never meet.
pub fn set(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
    origin: &str,
    renamed: &[Renamed],
) -> Result<(), LayerError> {
    let dotted = path.join(".");
    for r in renamed {
        let twin = if r.old == dotted {
            r.new
        } else if r.new == dotted {
            r.old
        } else {
            continue;
        };
        remove(table, twin);
    }
    let Some((last, parents)) = path.split_last() else {
        return Err(LayerError::new(origin, "names no key"));
    };
    let mut cur = table;
    for p in parents {
        let entry = cur
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry
            .as_table_mut()
            .ok_or_else(|| LayerError::new(origin, format!("{dotted}: {p} is not a section")))?;
    }
    cur.insert(last.clone(), value);
    Ok(())
}

fn remove(table: &mut toml::Table, dotted: &str) -> Option<toml::Value> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let last = parts.pop()?;
    let mut cur = table;
    for p in parts {
        cur = cur.get_mut(p)?.as_table_mut()?;
    }
    cur.remove(last)
}

/// Moves every key written under an old name to its new name, converting whole seconds to a
/// duration string, and returns one deprecation warning per key moved.
pub fn apply_renames(
    table: &mut toml::Table,
    renamed: &[Renamed],
) -> Result<Vec<String>, LayerError> {
    let mut warnings = Vec::new();
    for r in renamed {
        let Some(value) = remove(table, r.old) else {
            continue;
        };
        if lookup(table, r.new).is_some() {
            return Err(LayerError::new(
                r.old,
                format!(
                    "both {} and its new name {} are set; keep only {}",
                    r.old, r.new, r.new
                ),
            ));
        }
        let value = match (r.seconds_to_duration, value) {
            (true, toml::Value::Integer(s)) if s >= 0 => toml::Value::String(format!("{s}s")),
            (true, toml::Value::Integer(_)) => {
                return Err(LayerError::new(r.old, "must not be negative"))
            }
            (_, other) => other,
        };
        let hint = match &value {
            toml::Value::String(s) if r.seconds_to_duration => format!("{} = {s:?}", r.new),
            _ => r.new.to_string(),
        };
        warnings.push(format!(
            "{} is deprecated and will be removed in the next release: write {hint}",
            r.old
        ));
        let path: Vec<String> = r.new.split('.').map(str::to_string).collect();
        set(table, &path, value, r.old, &[])?;
    }
    Ok(warnings)
}

fn lookup<'a>(table: &'a toml::Table, dotted: &str) -> Option<&'a toml::Value> {
    let mut parts = dotted.split('.');
    let first = table.get(parts.next()?)?;
    parts.try_fold(first, |v, p| v.get(p))
}

/// Deserializes the merged table; the error names the key (`section.key`).
pub fn deserialize<T: DeserializeOwned>(table: toml::Table) -> Result<T, LayerError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = e.path().to_string();
        LayerError::new(
            if key == "." {
                "config".to_string()
            } else {
                key
            },
            e.into_inner().to_string(),
        )
    })
}

/// Deprecation warnings for durations written as bare numbers: keys whose value was an
/// integer in `input` and is a (duration) string once `parsed` is written back.
pub fn integer_durations<T: Serialize>(input: &toml::Table, parsed: &T) -> Vec<String> {
    let Ok(toml::Value::Table(output)) = toml::Value::try_from(parsed) else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    walk_integer_durations(input, &output, "", &mut warnings);
    warnings
}

fn walk_integer_durations(
    input: &toml::Table,
    output: &toml::Table,
    prefix: &str,
    warnings: &mut Vec<String>,
) {
    for (key, value) in input {
        let dotted = format!("{prefix}{key}");
        match (value, output.get(key)) {
            (toml::Value::Table(inner), Some(toml::Value::Table(out))) => {
                walk_integer_durations(inner, out, &format!("{dotted}."), warnings)
            }
            (toml::Value::Integer(s), Some(toml::Value::String(d))) => warnings.push(format!(
                "{dotted} = {s} (a bare number of seconds) is deprecated and will be refused in the next release: write {dotted} = {d:?}"
            )),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENAMED: &[Renamed] = &[Renamed {
        old: "gates.min_interval_seconds",
        new: "gates.min_interval",
        seconds_to_duration: true,
    }];

    #[test]
    fn only_our_variables_are_read_and_must_be_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(vec![0xff]);
        let vars = vec![
            (OsString::from("UNRELATED"), bad.clone()),
            (OsString::from_vec(vec![b'X', 0xff]), OsString::from("1")),
            (OsString::from("P__B__C"), OsString::from("2")),
            (OsString::from("P__A"), OsString::from("1")),
        ];
        assert_eq!(
            select_environment(vars.clone(), "P__").unwrap(),
            [
                ("P__A".to_string(), "1".to_string()),
                ("P__B__C".to_string(), "2".to_string())
            ]
        );
        let mut ours_bad = vars;
        ours_bad.push((OsString::from("P__LOG__LEVEL"), bad));
        let e = select_environment(ours_bad, "P__").unwrap_err();
        assert_eq!(e.key, "P__LOG__LEVEL");
        assert!(e.message.contains("UTF-8"), "{e}");
    }

    #[test]
    fn layers_set_keys_and_replace_the_other_spelling() {
        let mut table = parse_toml("[gates]\nmin_interval = \"5min\"\n").unwrap();
        let vars = [
            ("P__LISTEN".to_string(), "127.0.0.1:0".to_string()),
            (
                "P__GATES__MIN_INTERVAL_SECONDS".to_string(),
                "60".to_string(),
            ),
            (
                "P__GATES__ORDER".to_string(),
                "[\"rate_limit\"]".to_string(),
            ),
        ];
        apply_environment(&mut table, "P__", &vars, RENAMED).unwrap();
        let warnings = apply_renames(&mut table, RENAMED).unwrap();
        assert_eq!(table["listen"].as_str(), Some("127.0.0.1:0"));
        assert_eq!(table["gates"]["min_interval"].as_str(), Some("60s"));
        assert!(table["gates"]["order"].is_array());
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("gates.min_interval = \"60s\""),
            "{warnings:?}"
        );

        let e = apply_environment(&mut table, "P__", &[("P__A____B".into(), "1".into())], &[])
            .unwrap_err();
        assert_eq!(e.key, "P__A____B");
        let e = apply_environment(
            &mut table,
            "P__",
            &[("P__LISTEN__X".into(), "1".into())],
            &[],
        )
        .unwrap_err();
        assert!(e.message.contains("not a section"), "{e}");
    }

    #[test]
    fn both_spellings_in_one_file_are_an_error() {
        let mut table =
            parse_toml("[gates]\nmin_interval = \"5min\"\nmin_interval_seconds = 60\n").unwrap();
        let e = apply_renames(&mut table, RENAMED).unwrap_err();
        assert_eq!(e.key, "gates.min_interval_seconds");
    }

    #[test]
    fn bare_seconds_are_found_by_comparing_with_the_parsed_value() {
        /// Writes itself back as text, as durations do.
        #[derive(serde::Deserialize)]
        struct Secs(u64);
        impl Serialize for Secs {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(&format_args!("{}s", self.0))
            }
        }
        #[derive(Serialize, serde::Deserialize)]
        struct C {
            grace: Secs,
            count: u32,
        }
        let input = parse_toml("grace = 10\ncount = 3\n").unwrap();
        let parsed: C = deserialize(input.clone()).unwrap();
        let warnings = integer_durations(&input, &parsed);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("write grace = \"10s\""),
            "{warnings:?}"
        );
    }

    #[test]
    fn errors_name_the_key() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct C {
            a: Inner,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            b: u32,
        }
        let e = deserialize::<C>(parse_toml("[a]\nb = \"x\"").unwrap()).unwrap_err();
        assert_eq!(e.key, "a.b");
        let e = deserialize::<C>(parse_toml("[a]\nb = 1\nc = 2").unwrap()).unwrap_err();
        assert_eq!(e.key, "a.c", "{e}");
        assert!(parse_toml("a = ")
            .unwrap_err()
            .message
            .contains("invalid TOML"));
    }
}
