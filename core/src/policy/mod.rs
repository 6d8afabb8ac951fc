//! Approval policies: which proposals a person must approve.
//!
//! After the gates approve a proposal, the rules are tried in order and the first whose
//! conditions all hold decides: `auto` approves as before, `manual` makes the verdict
//! `pending` until an admin approves or denies it (or it expires). No rule matching means
//! `auto`. Pure: the proposal, the planned TaskManagers and the time go in, the matching rule
//! comes out.

mod glob;
pub mod verdicts;

use serde::{Deserialize, Serialize};

use crate::engine::ExcludedPeriod;
use crate::protocol::{is_flink_id, validate_identifier, FieldError, Proposal};

pub use glob::matches as glob_matches;

/// Default time a pending proposal waits for a person before it is refused.
pub const DEFAULT_APPROVAL_TTL_MS: i64 = 30 * 60 * 1000;
/// Most rules in one list (configuration or API).
pub const MAX_RULES: usize = 256;

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Approved by the gates alone.
    Auto,
    /// Pending until a person approves or denies it.
    Manual,
}

/// Which way a proposal moves parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Raises some vertex.
    Up,
    /// Lowers some vertex.
    Down,
}

/// One approval rule. Every condition given must hold; a list condition holds when any of
/// its entries matches; an absent condition always holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique within the policy; recorded with each pending proposal.
    pub name: String,
    /// Region globs (`eu-*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<String>,
    /// Cluster globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// Flink job ids (32 hex digits) or job-name globs (`payments-*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Some vertex loses at least this share of its subtasks (1..=100 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_percent_at_least: Option<f64>,
    /// The planned TaskManagers differ from the current ones by at least this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_managers_change_at_least: Option<u32>,
    /// The checkpoint state is larger than this (an unknown size counts as larger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_state_bytes_above: Option<u64>,
    /// Time windows (UTC) in the syntax of `job.autoscaler.excluded.periods`: a daily
    /// `HH:mm:ss-HH:mm:ss` range, a Quartz cron expression, or both joined by `&&`. The rule
    /// holds only inside one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<String>,
    pub action: Action,
}

/// Where a rule comes from: the coordinator's configuration (tried first, changed only by
/// editing it) or the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleSource {
    Config,
    Api,
}

/// A rule with its source, as `GET /v1/policies` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcedRule {
    pub source: RuleSource,
    #[serde(flatten)]
    pub rule: Rule,
}

/// `GET /v1/policies`: every rule in the order tried (configuration first), and how long a
/// pending proposal waits. A proposal no rule matches is approved (`auto`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyView {
    pub rules: Vec<SourcedRule>,
    pub approval_ttl_seconds: i64,
    /// Who last set the API's rules, and when (Unix ms).
    pub updated_by: Option<String>,
    pub updated_at: Option<i64>,
}

/// `PUT /v1/policies`: the API's rules, replacing the previous ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequest {
    pub rules: Vec<Rule>,
}

/// What a proposal looks like to the rules.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub proposal: &'a Proposal,
    /// TaskManagers the gates planned for it.
    pub planned_task_managers: u32,
    /// Unix time in milliseconds.
    pub now_ms: i64,
}

impl Subject<'_> {
    /// The deepest cut of any vertex, in percent of its current parallelism.
    pub fn scale_down_percent(&self) -> f64 {
        self.proposal
            .vertices
            .iter()
            .filter(|v| v.proposed_parallelism < v.current_parallelism)
            .map(|v| {
                f64::from(v.current_parallelism - v.proposed_parallelism) * 100.0
                    / f64::from(v.current_parallelism)
            })
            .fold(0.0, f64::max)
    }

    fn moves(&self, direction: Direction) -> bool {
        self.proposal.vertices.iter().any(|v| match direction {
            Direction::Up => v.proposed_parallelism > v.current_parallelism,
            Direction::Down => v.proposed_parallelism < v.current_parallelism,
        })
    }
}

/// A rule with its windows parsed.
#[derive(Debug, Clone, PartialEq)]
struct CompiledRule {
    rule: Rule,
    windows: Vec<ExcludedPeriod>,
}

impl CompiledRule {
    fn matches(&self, s: &Subject<'_>) -> bool {
        let r = &self.rule;
        let p = s.proposal;
        let any = |globs: &[String], text: &str| {
            globs.is_empty() || globs.iter().any(|g| glob::matches(g, text))
        };
        let job_matches = r.jobs.is_empty()
            || r.jobs.iter().any(|j| {
                if is_flink_id(j) {
                    j.eq_ignore_ascii_case(&p.job_id)
                } else {
                    glob::matches(j, &p.job_name)
                }
            });
        any(&r.regions, &p.region)
            && any(&r.clusters, &p.cluster_id)
            && job_matches
            && r.direction.is_none_or(|d| s.moves(d))
            && r.scale_down_percent_at_least
                .is_none_or(|at_least| s.scale_down_percent() >= at_least)
            && r.task_managers_change_at_least.is_none_or(|at_least| {
                s.planned_task_managers.abs_diff(p.current_task_managers) >= at_least
            })
            && r.checkpoint_state_bytes_above
                .is_none_or(|above| p.checkpoint_state_bytes.is_none_or(|b| b > above))
            && (self.windows.is_empty()
                || self
                    .windows
                    .iter()
                    .any(|w| w.contains(u64::try_from(s.now_ms).unwrap_or(0))))
    }
}

/// Rules in the order they are tried, and how long a pending proposal waits.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    rules: Vec<CompiledRule>,
    approval_ttl_ms: i64,
}

impl Default for Policy {
    /// No rules: everything the gates approve is approved.
    fn default() -> Self {
        Policy {
            rules: Vec::new(),
            approval_ttl_ms: DEFAULT_APPROVAL_TTL_MS,
        }
    }
}

impl Policy {
    /// Compiles rules tried in the order given (they must have passed [`validate_rules`]).
    pub fn new(rules: &[Rule], approval_ttl_ms: i64) -> Result<Policy, FieldError> {
        validate_rules(rules, "rules")?;
        let rules = rules
            .iter()
            .map(|r| CompiledRule {
                rule: r.clone(),
                windows: r
                    .windows
                    .iter()
                    .map(|w| ExcludedPeriod::parse(w))
                    .collect::<Result<_, _>>()
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Policy {
            rules,
            approval_ttl_ms,
        })
    }

    pub fn approval_ttl_ms(&self) -> i64 {
        self.approval_ttl_ms
    }

    /// The first rule that matches, if any.
    pub fn first_match(&self, subject: &Subject<'_>) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.matches(subject))
            .map(|r| &r.rule)
    }

    /// The rule that asks for a person, or `None` when the proposal is approved as is.
    pub fn manual_rule(&self, subject: &Subject<'_>) -> Option<&Rule> {
        self.first_match(subject)
            .filter(|r| r.action == Action::Manual)
    }
}

/// Checks a rule list; errors name the field below `prefix` (e.g. `approval.rules`), such as
/// `approval.rules[2].windows[0]`.
pub fn validate_rules(rules: &[Rule], prefix: &str) -> Result<(), FieldError> {
    if rules.len() > MAX_RULES {
        return Err(FieldError::new(
            prefix,
            format!("at most {MAX_RULES} rules"),
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let field = |name: &str| format!("{prefix}[{i}].{name}");
        validate_identifier(&field("name"), &rule.name)?;
        if rules[..i].iter().any(|r| r.name == rule.name) {
            return Err(FieldError::new(
                field("name"),
                format!("rule name {:?} is used twice", rule.name),
            ));
        }
        for (list, entries) in [
            ("regions", &rule.regions),
            ("clusters", &rule.clusters),
            ("jobs", &rule.jobs),
        ] {
            for (j, entry) in entries.iter().enumerate() {
                let f = field(&format!("{list}[{j}]"));
                if entry.is_empty() {
                    return Err(FieldError::new(f, "must not be empty"));
                }
                if entry.len() > crate::protocol::MAX_TEXT_LEN
                    || entry.chars().any(char::is_control)
                {
                    return Err(FieldError::new(
                        f,
                        "must be at most 256 bytes without control characters",
                    ));
                }
            }
        }
        if let Some(p) = rule.scale_down_percent_at_least {
            if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                return Err(FieldError::new(
                    field("scale_down_percent_at_least"),
                    "must be above 0 and at most 100",
                ));
            }
        }
        if rule.task_managers_change_at_least == Some(0) {
            return Err(FieldError::new(
                field("task_managers_change_at_least"),
                "must be >= 1",
            ));
        }
        for (j, window) in rule.windows.iter().enumerate() {
            ExcludedPeriod::parse(window)
                .map_err(|e| FieldError::new(field(&format!("windows[{j}]")), e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::test_support::proposal;

    const HOUR_MS: i64 = 3_600_000;
    /// 1970-01-05 was a Monday.
    const MONDAY_MS: i64 = 4 * 24 * HOUR_MS;

    fn rule(name: &str, action: Action) -> Rule {
        Rule {
            name: name.into(),
            regions: vec![],
            clusters: vec![],
            jobs: vec![],
            direction: None,
            scale_down_percent_at_least: None,
            task_managers_change_at_least: None,
            checkpoint_state_bytes_above: None,
            windows: vec![],
            action,
        }
    }

    fn manual(name: &str, edit: impl FnOnce(&mut Rule)) -> Rule {
        let mut r = rule(name, Action::Manual);
        edit(&mut r);
        r
    }

    #[test]
    fn each_condition_matches_alone() {
        // test_support::proposal: region r, cluster c, job 0123…, name "job", state 0 bytes,
        // one TaskManager now.
        let job_id = "0123456789abcdef0123456789abcdef".to_string();
        // (rule, vertices (current, proposed), planned TMs, now, state, matches)
        type Case = (Rule, Vec<(u32, u32)>, u32, i64, Option<u64>, bool);
        let cases: Vec<Case> = vec![
            (manual("any", |_| {}), vec![(2, 4)], 1, 0, Some(0), true),
            (
                manual("region", |r| r.regions = vec!["r".into()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("region-glob", |r| r.regions = vec!["eu-*".into()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("cluster", |r| r.clusters = vec!["x".into(), "c*".into()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("job-id", |r| r.jobs = vec![job_id.to_uppercase()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("job-name", |r| r.jobs = vec!["jo?".into()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("job-other", |r| r.jobs = vec!["payments-*".into()]),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("down", |r| r.direction = Some(Direction::Down)),
                vec![(2, 4)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("down", |r| r.direction = Some(Direction::Down)),
                vec![(2, 4), (4, 3)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("up", |r| r.direction = Some(Direction::Up)),
                vec![(4, 3)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("depth", |r| r.scale_down_percent_at_least = Some(50.0)),
                vec![(4, 3)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("depth", |r| r.scale_down_percent_at_least = Some(50.0)),
                vec![(4, 3), (8, 4)],
                1,
                0,
                Some(0),
                true,
            ),
            (
                manual("depth", |r| r.scale_down_percent_at_least = Some(50.0)),
                vec![(2, 8)],
                1,
                0,
                Some(0),
                false,
            ),
            (
                manual("tms", |r| r.task_managers_change_at_least = Some(3)),
                vec![(2, 4)],
                3,
                0,
                Some(0),
                false,
            ),
            (
                manual("tms", |r| r.task_managers_change_at_least = Some(3)),
                vec![(2, 4)],
                4,
                0,
                Some(0),
                true,
            ),
            (
                manual("tms-down", |r| r.task_managers_change_at_least = Some(1)),
                vec![(2, 1)],
                0,
                0,
                Some(0),
                true,
            ),
            (
                manual("state", |r| r.checkpoint_state_bytes_above = Some(1 << 30)),
                vec![(2, 4)],
                1,
                0,
                Some(1 << 30),
                false,
            ),
            (
                manual("state", |r| r.checkpoint_state_bytes_above = Some(1 << 30)),
                vec![(2, 4)],
                1,
                0,
                Some((1 << 30) + 1),
                true,
            ),
            (
                manual("state-unknown", |r| {
                    r.checkpoint_state_bytes_above = Some(1 << 30)
                }),
                vec![(2, 4)],
                1,
                0,
                None,
                true,
            ),
            (
                manual("office", |r| {
                    r.windows = vec!["09:00:00-17:00:00 && * * * ? * MON-FRI".into()]
                }),
                vec![(2, 4)],
                1,
                MONDAY_MS + 10 * HOUR_MS,
                Some(0),
                true,
            ),
            (
                manual("office", |r| {
                    r.windows = vec!["09:00:00-17:00:00 && * * * ? * MON-FRI".into()]
                }),
                vec![(2, 4)],
                1,
                MONDAY_MS + 20 * HOUR_MS,
                Some(0),
                false,
            ),
            (
                manual("office", |r| {
                    r.windows = vec!["09:00:00-17:00:00 && * * * ? * MON-FRI".into()]
                }),
                vec![(2, 4)],
                1,
                MONDAY_MS - 14 * HOUR_MS,
                Some(0),
                false,
            ),
            (
                manual("two-windows", |r| {
                    r.windows = vec!["01:00:00-02:00:00".into(), "19:00:00-21:00:00".into()]
                }),
                vec![(2, 4)],
                1,
                MONDAY_MS + 20 * HOUR_MS,
                Some(0),
                true,
            ),
            (
                manual("all", |r| {
                    r.regions = vec!["r".into()];
                    r.direction = Some(Direction::Down);
                    r.checkpoint_state_bytes_above = Some(10);
                }),
                vec![(4, 2)],
                1,
                0,
                Some(5),
                false,
            ),
        ];
        for (i, (rule, vertices, planned, now, state, want)) in cases.into_iter().enumerate() {
            let shape: Vec<(&str, u32, u32)> =
                vertices.iter().map(|(c, p)| ("default", *c, *p)).collect();
            let mut p = proposal(&shape);
            p.checkpoint_state_bytes = state;
            let policy = Policy::new(std::slice::from_ref(&rule), DEFAULT_APPROVAL_TTL_MS).unwrap();
            let subject = Subject {
                proposal: &p,
                planned_task_managers: planned,
                now_ms: now,
            };
            let got = policy.manual_rule(&subject).map(|r| r.name.as_str());
            assert_eq!(got.is_some(), want, "case {i}: {}", rule.name);
        }
    }

    #[test]
    fn the_first_matching_rule_wins_and_the_default_is_auto() {
        let p = proposal(&[("default", 4, 2)]);
        let subject = Subject {
            proposal: &p,
            planned_task_managers: 1,
            now_ms: 0,
        };
        let exempt = {
            let mut r = rule("exempt-job", Action::Auto);
            r.jobs = vec!["job".into()];
            r
        };
        let downs = manual("downs", |r| r.direction = Some(Direction::Down));
        let ups = manual("ups", |r| r.direction = Some(Direction::Up));
        // (rules, first match, manual rule)
        let cases: Vec<(Vec<Rule>, Option<&str>, Option<&str>)> = vec![
            (vec![], None, None),
            (vec![ups.clone()], None, None),
            (
                vec![ups.clone(), downs.clone()],
                Some("downs"),
                Some("downs"),
            ),
            (
                vec![exempt.clone(), downs.clone()],
                Some("exempt-job"),
                None,
            ),
            (
                vec![downs.clone(), exempt.clone()],
                Some("downs"),
                Some("downs"),
            ),
        ];
        for (rules, first, manual_rule) in cases {
            let policy = Policy::new(&rules, DEFAULT_APPROVAL_TTL_MS).unwrap();
            let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(
                policy.first_match(&subject).map(|r| r.name.as_str()),
                first,
                "{names:?}"
            );
            assert_eq!(
                policy.manual_rule(&subject).map(|r| r.name.as_str()),
                manual_rule,
                "{names:?}"
            );
        }
        assert!(Policy::default().manual_rule(&subject).is_none());
    }

    #[test]
    fn bad_rules_are_named() {
        type Case = (fn(&mut Rule), &'static str);
        let cases: Vec<Case> = vec![
            (|r| r.name = "".into(), "approval.rules[1].name"),
            (|r| r.name = "a b".into(), "approval.rules[1].name"),
            (|r| r.name = "first".into(), "approval.rules[1].name"),
            (
                |r| r.regions = vec!["".into()],
                "approval.rules[1].regions[0]",
            ),
            (
                |r| r.jobs = vec!["ok".into(), "bad\n".into()],
                "approval.rules[1].jobs[1]",
            ),
            (
                |r| r.scale_down_percent_at_least = Some(0.0),
                "approval.rules[1].scale_down_percent_at_least",
            ),
            (
                |r| r.scale_down_percent_at_least = Some(101.0),
                "approval.rules[1].scale_down_percent_at_least",
            ),
            (
                |r| r.task_managers_change_at_least = Some(0),
                "approval.rules[1].task_managers_change_at_least",
            ),
            (
                |r| r.windows = vec!["09:00:00-17:00:00".into(), "nonsense".into()],
                "approval.rules[1].windows[1]",
            ),
        ];
        for (edit, field) in cases {
            let mut second = rule("second", Action::Manual);
            edit(&mut second);
            let rules = [rule("first", Action::Auto), second];
            let err = validate_rules(&rules, "approval.rules").unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        let rules = [rule("first", Action::Auto), rule("second", Action::Manual)];
        assert!(validate_rules(&rules, "approval.rules").is_ok());
    }

    #[test]
    fn rules_read_from_json_and_reject_unknown_keys() {
        let r: Rule = serde_json::from_str(
            r#"{"name":"big-downs","direction":"down","scale_down_percent_at_least":50,"action":"manual"}"#,
        )
        .unwrap();
        assert_eq!(r.direction, Some(Direction::Down));
        assert_eq!(r.action, Action::Manual);
        let err =
            serde_json::from_str::<Rule>(r#"{"name":"x","action":"manual","size":3}"#).unwrap_err();
        assert!(err.to_string().contains("size"), "{err}");
        assert!(serde_json::from_str::<Rule>(r#"{"name":"x","action":"later"}"#).is_err());
    }
}
