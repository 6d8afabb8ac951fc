//! Webhook notifications: on `pending`, `refused`, `applied`, `failed` and
//! `approval_expired`, each configured webhook that subscribes to the event gets a JSON POST
//! with a Slack-compatible `text` field.
//!
//! A notification is queued in the store in the same transaction as the decision it reports
//! (so it is durable and never sent for a decision that did not commit), and delivered by a
//! background task ([`delivery`]) with retries and backoff: a slow or failing webhook never
//! slows a proposal.

pub mod delivery;

use flink_autoscale_core::duration::Dur;
use flink_autoscale_core::protocol::{
    validate_identifier, Decision, Outcome, Proposal, Review, Verdict,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::ConfigError;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// An approval rule asks a person to approve a proposal.
    Pending,
    /// A proposal was refused: by a gate, a pause, a person (denied) or a newer proposal
    /// (superseded).
    Refused,
    /// An approved rescale was applied.
    Applied,
    /// An approved rescale failed (or was not applied).
    Failed,
    /// A pending proposal expired without a decision.
    ApprovalExpired,
}

impl Event {
    pub const ALL: [Event; 5] = [
        Event::Pending,
        Event::Refused,
        Event::Applied,
        Event::Failed,
        Event::ApprovalExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Event::Pending => "pending",
            Event::Refused => "refused",
            Event::Applied => "applied",
            Event::Failed => "failed",
            Event::ApprovalExpired => "approval_expired",
        }
    }

    /// The event a new verdict raises, if any.
    pub fn of_verdict(verdict: Verdict) -> Option<Event> {
        match verdict {
            Verdict::Pending => Some(Event::Pending),
            Verdict::Refused => Some(Event::Refused),
            Verdict::Approved => None,
        }
    }
}

/// `[notifications]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationsConfig {
    pub webhooks: Vec<WebhookConfig>,
    /// Most deliveries waiting in the store; beyond it the oldest are dropped (and counted).
    pub queue_capacity: u64,
    /// Attempts per delivery before it is given up (and counted).
    pub max_attempts: u32,
    /// First wait before retrying a failed delivery; doubles up to `retry_max`.
    pub retry_initial: Dur,
    pub retry_max: Dur,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            webhooks: Vec::new(),
            queue_capacity: 10_000,
            max_attempts: 10,
            retry_initial: Dur::secs(1),
            retry_max: Dur::secs(300),
        }
    }
}

/// `[[notifications.webhooks]]`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Names the webhook in logs and metrics (the URL may hold a secret and is never logged).
    pub name: String,
    /// `http://` or `https://` (the system's trusted roots).
    pub url: String,
    /// Events it receives (default: all).
    #[serde(default = "all_events")]
    pub events: Vec<Event>,
    /// Deadline for one delivery attempt.
    #[serde(default = "default_timeout")]
    pub timeout: Dur,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL of a Slack webhook is its secret.
        f.debug_struct("WebhookConfig")
            .field("name", &self.name)
            .field("events", &self.events)
            .finish()
    }
}

fn all_events() -> Vec<Event> {
    Event::ALL.to_vec()
}

fn default_timeout() -> Dur {
    Dur::secs(5)
}

impl NotificationsConfig {
    /// Checks every setting; errors name it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key: String, message: &str| Err(ConfigError::new(key, message));
        let range = |key: &str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError::new(
                    key,
                    format!("must be between {min} and {max}, got {value}"),
                ))
            }
        };
        range(
            "notifications.queue_capacity",
            self.queue_capacity,
            1,
            10_000_000,
        )?;
        range(
            "notifications.max_attempts",
            self.max_attempts.into(),
            1,
            1000,
        )?;
        let ms = |d: Dur| d.as_millis_u64();
        range(
            "notifications.retry_initial",
            ms(self.retry_initial),
            10,
            3_600_000,
        )
        .map_err(|e| ConfigError::new(e.setting, "must be between 10ms and 1h"))?;
        if self.retry_max < self.retry_initial || self.retry_max > Dur::secs(86_400) {
            return err(
                "notifications.retry_max".into(),
                "must be between notifications.retry_initial and 1d",
            );
        }
        for (i, w) in self.webhooks.iter().enumerate() {
            let key = |name: &str| format!("notifications.webhooks[{i}].{name}");
            validate_identifier(&key("name"), &w.name)
                .map_err(|e| ConfigError::new(e.field, e.message))?;
            if self.webhooks[..i].iter().any(|o| o.name == w.name) {
                return err(key("name"), "is used by another webhook");
            }
            let url = w.url.trim();
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.parse::<http::Uri>().is_err()
            {
                // Not echoed: the URL may be a secret.
                return err(key("url"), "is not an http:// or https:// URL");
            }
            if w.events.is_empty() {
                return err(key("events"), "must list at least one event");
            }
            if w.timeout < Dur::millis(10) || w.timeout > Dur::secs(300) {
                return err(key("timeout"), "must be between 10ms and 5min");
            }
        }
        Ok(())
    }

    /// The webhooks that receive `event`.
    pub fn subscribers(&self, event: Event) -> impl Iterator<Item = &WebhookConfig> {
        self.webhooks
            .iter()
            .filter(move |w| w.events.contains(&event))
    }
}

/// A notification to queue: the same body for every webhook that receives its event.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub event: Event,
    pub body: String,
}

/// What a notification tells about.
pub struct Subject<'a> {
    pub proposal: &'a Proposal,
    pub decision: &'a Decision,
    pub outcome: Option<&'a Outcome>,
    pub review: Option<&'a Review>,
    /// Unix time in milliseconds.
    pub at: i64,
}

/// The documented JSON body (docs/coordinator.md, "Webhooks"): the event and the decision's
/// facts, and a one-line `text` for Slack-compatible receivers.
pub fn notice(event: Event, s: &Subject<'_>) -> Notice {
    let p = s.proposal;
    let changes: Vec<String> = p
        .vertices
        .iter()
        .filter(|v| v.proposed_parallelism != v.current_parallelism)
        .map(|v| {
            format!(
                "{} {}→{}",
                v.name, v.current_parallelism, v.proposed_parallelism
            )
        })
        .collect();
    let why = s
        .decision
        .reasons
        .iter()
        .map(|r| format!("{}: {}", r.code, r.message))
        .collect::<Vec<_>>()
        .join("; ");
    let what = match event {
        Event::Pending => format!("waits for approval ({why})"),
        Event::Refused => format!("was refused ({why})"),
        Event::Applied => "was applied".to_string(),
        Event::Failed => format!(
            "failed: {}",
            s.outcome
                .and_then(|o| o.error.as_deref())
                .unwrap_or("no error given")
        ),
        Event::ApprovalExpired => format!("expired without approval ({why})"),
    };
    let text = format!(
        "flink-autoscale: rescale of {} ({}, cluster {}, region {}) [{}] {what}. Proposal {}.",
        if p.job_name.is_empty() {
            &p.job_id
        } else {
            &p.job_name
        },
        p.job_id,
        p.cluster_id,
        p.region,
        changes.join(", "),
        p.proposal_id
    );
    let body = json!({
        "event": event.as_str(),
        "text": text,
        "at": s.at,
        "proposal_id": p.proposal_id,
        "job_id": p.job_id,
        "job_name": p.job_name,
        "cluster_id": p.cluster_id,
        "region": p.region,
        "verdict": s.decision.verdict,
        "reasons": s.decision.reasons,
        "vertices": p.vertices.iter().map(|v| json!({
            "id": v.id,
            "name": v.name,
            "current_parallelism": v.current_parallelism,
            "proposed_parallelism": v.proposed_parallelism,
        })).collect::<Vec<_>>(),
        "outcome": s.outcome,
        "review": s.review,
    });
    Notice {
        event,
        body: body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::protocol::{GateName, Reason, VertexProposal};

    fn proposal() -> Proposal {
        let mut p: Proposal =
            serde_json::from_str(flink_autoscale_core::protocol::MINIMAL_PROPOSAL_JSON).unwrap();
        p.job_name = "orders".into();
        p.vertices.push(VertexProposal {
            id: "fedcba9876543210fedcba9876543210".into(),
            name: "Sink".into(),
            slot_sharing_group: None,
            current_parallelism: 3,
            proposed_parallelism: 3,
            evidence: None,
        });
        p
    }

    #[test]
    fn the_body_is_documented_json_with_a_slack_text() {
        let p = proposal();
        let decision = Decision {
            proposal_id: "x".into(),
            verdict: Verdict::Refused,
            reasons: vec![Reason {
                gate: GateName::Pause,
                code: "paused".into(),
                message: "fleet is paused by alice: freeze".into(),
            }],
            plan: None,
        };
        let n = notice(
            Event::Refused,
            &Subject {
                proposal: &p,
                decision: &decision,
                outcome: None,
                review: None,
                at: 7,
            },
        );
        let v: serde_json::Value = serde_json::from_str(&n.body).unwrap();
        assert_eq!(v["event"], "refused");
        assert_eq!(v["verdict"], "refused");
        assert_eq!(v["reasons"][0]["code"], "paused");
        assert_eq!(v["vertices"][0]["proposed_parallelism"], 2);
        let text = v["text"].as_str().unwrap();
        assert!(text.contains("orders"), "{text}");
        assert!(text.contains("Map 1→2"), "{text}");
        assert!(
            !text.contains("Sink"),
            "unchanged vertices are left out: {text}"
        );
        assert!(text.contains("paused by alice"), "{text}");
    }

    #[test]
    fn webhook_settings_are_checked_and_the_url_never_echoed() {
        let hook = |url: &str| WebhookConfig {
            name: "ops".into(),
            url: url.into(),
            events: all_events(),
            timeout: Dur::secs(5),
        };
        let mut c = NotificationsConfig {
            webhooks: vec![hook("https://hooks.example/services/SECRET")],
            ..NotificationsConfig::default()
        };
        c.validate().unwrap();
        c.webhooks = vec![hook("ftp://hooks.example/SECRET")];
        let e = c.validate().unwrap_err();
        assert_eq!(e.setting, "notifications.webhooks[0].url");
        assert!(!e.to_string().contains("SECRET"));
        assert!(!format!("{:?}", c.webhooks[0]).contains("SECRET"));
        c.webhooks = vec![hook("http://a/"), hook("http://b/")];
        assert_eq!(
            c.validate().unwrap_err().setting,
            "notifications.webhooks[1].name"
        );
        c.webhooks = vec![];
        c.retry_max = Dur::secs(0);
        assert_eq!(c.validate().unwrap_err().setting, "notifications.retry_max");
    }
}
