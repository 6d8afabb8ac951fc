//! The coordinator's text parsers fed generated input (proptest): token files and the
//! configuration loader never panic, refusals name a setting, and an error about a token
//! line never repeats the line (it may hold a secret).

use flink_autoscale_coordinator::auth::{parse_token_entry, parse_token_file};
use flink_autoscale_coordinator::config::{from_layers, Overrides};
use flink_autoscale_shared::config_layers::parse_toml;
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "listen",
    "log_level",
    "max_body_bytes",
    "body_read_timeout",
    "max_connections",
    "shutdown_grace",
    "open_action_timeout",
    "database.url",
    "database.writers",
    "auth.agent_tokens",
    "auth.admin_tokens",
    "gates.order",
    "gates.min_interval",
    "gates.disk_headroom",
    "console.session_ttl",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,20}",
        "[0-9]{1,6}(ms|s|min|h|d|x)?".prop_map(|s| format!("{s:?}")),
        "[a-z:/.0-9_]{0,30}".prop_map(|s| format!("{s:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[0-9.e+-]{1,12}",
        "[a-z_]{16,24}".prop_map(|s| format!("[{s:?}]")),
        Just("[]".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn token_files_never_panic_nor_echo_a_line(text in any::<String>()) {
        if let Err(e) = parse_token_file(&text) {
            let line = text.lines().nth(e.line - 1).unwrap_or("").trim();
            if line.len() >= 12 {
                prop_assert!(!e.message.contains(line), "{} repeats its line", e.message);
            }
        }
    }

    #[test]
    fn a_named_token_reads_back(name in "[A-Za-z0-9._@-]{1,64}", token in "[!-~]{16,64}") {
        let entry = parse_token_entry(&format!("{name}:{token}")).expect("a valid entry");
        prop_assert_eq!(entry.name, name);
        prop_assert_eq!(entry.token, token);
    }

    #[test]
    fn generated_configurations_load_or_name_a_setting(
        rows in prop::collection::vec((0..KEYS.len(), value()), 0..6)
    ) {
        // One line per key, top-level keys before any table ("" sorts first).
        let mut sections: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, String>> =
            Default::default();
        for (k, v) in rows {
            let (section, key) = KEYS[k].split_once('.').unwrap_or(("", KEYS[k]));
            sections.entry(section).or_default().insert(key, v);
        }
        let text: String = sections
            .iter()
            .map(|(section, keys)| {
                let header = if section.is_empty() { String::new() } else { format!("[{section}]\n") };
                let body: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
                format!("{header}{body}")
            })
            .collect();
        // Some generated numbers are not TOML: the file's error names it, and that is all.
        let table = match parse_toml(&text) {
            Ok(table) => table,
            Err(e) => {
                prop_assert!(!e.key.is_empty(), "{e:?}");
                return Ok(());
            }
        };
        if let Err(e) = from_layers(table, &[], &Overrides::default()) {
            prop_assert!(!e.setting.is_empty(), "{e:?} names no setting for:\n{text}");
        }
    }
}
