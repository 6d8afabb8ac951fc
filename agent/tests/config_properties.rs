//! The agent's configuration loader fed generated files and environments (proptest): it
//! never panics, and every refusal names a key.

use std::collections::BTreeMap;

use flink_autoscale_agent::config::{Config, Overrides};
use proptest::prelude::*;

const SECTIONS: &[&str] = &[
    "jobmanager",
    "collector",
    "server",
    "log",
    "autoscaler",
    "control",
];
const KEYS: &[&str] = &[
    "url",
    "poll_interval",
    "poll_deadline",
    "request_timeout",
    "max_concurrent_requests",
    "listen",
    "level",
    "\"metrics.window\"",
    "\"target.utilization\"",
    "mode",
    "jobs",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,20}".prop_map(|s| s),
        "[0-9]{1,6}(ms|s|min|h|d|x)?".prop_map(|s| format!("{s:?}")),
        "[a-z:/.0-9]{0,30}".prop_map(|s| format!("{s:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[0-9.e+-]{1,12}",
        Just("[]".to_string()),
        Just("[\"0123456789abcdef0123456789abcdef\", 1]".to_string()),
    ]
}

fn file() -> impl Strategy<Value = String> {
    prop::collection::vec((0..SECTIONS.len(), 0..KEYS.len(), value()), 0..8).prop_map(|rows| {
        let mut by_section: BTreeMap<usize, BTreeMap<usize, String>> = BTreeMap::new();
        for (s, k, v) in rows {
            by_section.entry(s).or_default().insert(k, v);
        }
        by_section
            .into_iter()
            .map(|(s, keys)| {
                let body: String = keys
                    .into_iter()
                    .map(|(k, v)| format!("{} = {v}\n", KEYS[k]))
                    .collect();
                format!("[{}]\n{body}", SECTIONS[s])
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn generated_files_load_or_name_a_key(text in file()) {
        if let Err(e) = Config::from_layers(&text, &BTreeMap::new(), &Overrides::default()) {
            prop_assert!(!e.key.is_empty(), "{e} names no key for:\n{text}");
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = Config::from_layers(&text, &BTreeMap::new(), &Overrides::default());
    }

    #[test]
    fn generated_environments_load_or_name_a_key(
        vars in prop::collection::vec((0..SECTIONS.len(), 0..KEYS.len(), "[ -~]{0,20}"), 0..4)
    ) {
        let env: BTreeMap<String, String> = vars
            .into_iter()
            .map(|(s, k, v)| {
                let key = KEYS[k].trim_matches('"').replace('.', "_").to_ascii_uppercase();
                (format!("FLINK_AUTOSCALE_AGENT__{}__{key}", SECTIONS[s].to_ascii_uppercase()), v)
            })
            .collect();
        if let Err(e) = Config::from_layers("", &env, &Overrides::default()) {
            prop_assert!(!e.key.is_empty(), "{e} names no key for {env:?}");
        }
    }
}
