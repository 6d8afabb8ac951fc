//! Pause switches: an admin stops every rescale of the fleet, a region, a cluster or a job
//! (an incident, a freeze). While a pause covers a proposal it is refused with `paused`,
//! naming the scope and the admin; the agents keep collecting and recommending.
//!
//! Pure: which pauses are in force is a function of the list and the time.

use std::fmt;

use crate::protocol::{
    is_flink_id, validate_identifier, FieldError, GateName, Pause, Proposal, Reason,
};

/// What a pause covers, written `fleet`, `region/R`, `cluster/C` or `job/J`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PauseScope {
    Fleet,
    Region(String),
    Cluster(String),
    /// A Flink job id, lowercase.
    Job(String),
}

impl PauseScope {
    /// Parses `fleet`, `region/R`, `cluster/C` or `job/J`; the error names `scope`.
    pub fn parse(text: &str) -> Result<PauseScope, FieldError> {
        match text.split_once('/') {
            None if text == "fleet" => Ok(PauseScope::Fleet),
            Some((kind, value)) => PauseScope::of(kind, Some(value)),
            None => PauseScope::of(text, None),
        }
    }

    /// The scope of kind `fleet`, `region`, `cluster` or `job` with its value (none for
    /// `fleet`); the error names `scope`.
    pub fn of(kind: &str, value: Option<&str>) -> Result<PauseScope, FieldError> {
        let expected = "must be fleet, region/R, cluster/C or job/J";
        match (kind, value) {
            ("fleet", None) => Ok(PauseScope::Fleet),
            ("region" | "cluster", Some(v)) => {
                validate_identifier("scope", v)?;
                Ok(if kind == "region" {
                    PauseScope::Region(v.to_string())
                } else {
                    PauseScope::Cluster(v.to_string())
                })
            }
            ("job", Some(v)) if is_flink_id(v) => Ok(PauseScope::Job(v.to_ascii_lowercase())),
            ("job", Some(_)) => Err(FieldError::new(
                "scope",
                "job/J needs a Flink job id: 32 hex digits",
            )),
            _ => Err(FieldError::new("scope", expected)),
        }
    }

    /// True when a proposal falls under this scope.
    pub fn covers(&self, proposal: &Proposal) -> bool {
        match self {
            PauseScope::Fleet => true,
            PauseScope::Region(r) => *r == proposal.region,
            PauseScope::Cluster(c) => *c == proposal.cluster_id,
            PauseScope::Job(j) => j.eq_ignore_ascii_case(&proposal.job_id),
        }
    }
}

impl fmt::Display for PauseScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PauseScope::Fleet => f.write_str("fleet"),
            PauseScope::Region(r) => write!(f, "region/{r}"),
            PauseScope::Cluster(c) => write!(f, "cluster/{c}"),
            PauseScope::Job(j) => write!(f, "job/{j}"),
        }
    }
}

/// True while `pause` has not expired.
pub fn is_active(pause: &Pause, now_ms: i64) -> bool {
    pause.expires_at.is_none_or(|at| now_ms < at)
}

/// The pause that stops `proposal` now, the broadest first (fleet, region, cluster, job).
/// A pause whose scope does not parse covers everything: a switch that cannot be read
/// stops rather than lets through.
pub fn in_force<'a>(pauses: &'a [Pause], proposal: &Proposal, now_ms: i64) -> Option<&'a Pause> {
    pauses
        .iter()
        .filter(|p| is_active(p, now_ms))
        .filter_map(|p| match PauseScope::parse(&p.scope) {
            Ok(scope) => scope.covers(proposal).then_some((scope, p)),
            Err(_) => Some((PauseScope::Fleet, p)),
        })
        .min_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, p)| p)
}

/// The refusal a pause gives, naming its scope and the admin who set it.
pub fn refusal(pause: &Pause) -> Reason {
    Reason {
        gate: GateName::Pause,
        code: "paused".to_string(),
        message: format!(
            "{} is paused by {}: {}",
            pause.scope, pause.set_by, pause.reason
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::test_support::proposal;

    fn pause(scope: &str, expires_at: Option<i64>) -> Pause {
        Pause {
            scope: scope.into(),
            reason: "incident".into(),
            set_by: "alice".into(),
            since: 0,
            expires_at,
        }
    }

    #[test]
    fn scopes_parse_and_print_back() {
        let job = "0123456789ABCDEF0123456789abcdef";
        let cases: &[(&str, Result<PauseScope, &str>)] = &[
            ("fleet", Ok(PauseScope::Fleet)),
            (
                "region/eu-west-1",
                Ok(PauseScope::Region("eu-west-1".into())),
            ),
            ("cluster/c1", Ok(PauseScope::Cluster("c1".into()))),
            ("fleet/x", Err("scope")),
            ("region", Err("scope")),
            ("region/", Err("scope")),
            ("region/..", Err("scope")),
            ("job/xyz", Err("scope")),
            ("team/a", Err("scope")),
            ("", Err("scope")),
        ];
        for (text, want) in cases {
            let got = PauseScope::parse(text);
            match want {
                Ok(scope) => {
                    assert_eq!(got.as_ref().ok(), Some(scope), "{text}");
                    assert_eq!(scope.to_string(), *text);
                }
                Err(field) => assert_eq!(got.unwrap_err().field, *field, "{text}"),
            }
        }
        let parsed = PauseScope::parse(&format!("job/{job}")).unwrap();
        assert_eq!(parsed, PauseScope::Job(job.to_ascii_lowercase()));
    }

    #[test]
    fn the_broadest_active_covering_pause_wins() {
        let p = proposal(&[("default", 2, 4)]); // cluster c, region r, job 0123…
        let job_scope = format!("job/{}", p.job_id);
        // (pauses, now, scope expected to stop it)
        let cases: Vec<(Vec<Pause>, i64, Option<&str>)> = vec![
            (vec![], 0, None),
            (vec![pause("region/other", None)], 0, None),
            (vec![pause("cluster/c", None)], 0, Some("cluster/c")),
            (
                vec![pause(&job_scope, None), pause("region/r", None)],
                0,
                Some("region/r"),
            ),
            (
                vec![pause("cluster/c", None), pause("fleet", None)],
                0,
                Some("fleet"),
            ),
            (vec![pause("fleet", Some(100))], 99, Some("fleet")),
            (vec![pause("fleet", Some(100))], 100, None),
            (
                vec![pause("fleet", Some(100)), pause(&job_scope, None)],
                100,
                Some(job_scope.as_str()),
            ),
            (vec![pause("garbled", None)], 0, Some("garbled")),
        ];
        for (pauses, now, want) in cases {
            let got = in_force(&pauses, &p, now).map(|p| p.scope.as_str());
            assert_eq!(got, want, "{pauses:?} at {now}");
        }
    }

    #[test]
    fn the_refusal_names_scope_and_admin() {
        let r = refusal(&pause("cluster/c1", None));
        assert_eq!((r.gate, r.code.as_str()), (GateName::Pause, "paused"));
        assert!(r.message.contains("cluster/c1"), "{}", r.message);
        assert!(r.message.contains("alice"), "{}", r.message);
    }
}
