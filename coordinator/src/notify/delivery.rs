//! The delivery task: leases due notifications from the store, POSTs them to their webhooks
//! concurrently, and deletes what was delivered or given up or reschedules the rest with
//! exponential backoff. It runs beside the HTTP server; proposals never wait for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_shared::http_client::{trusted_roots, JsonClient};
use http::Method;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{NotificationsConfig, WebhookConfig};
use crate::store::{now_ms, Queued, Store};

/// How often due deliveries are looked for.
const POLL: Duration = Duration::from_millis(250);
/// Most deliveries leased (and sent concurrently) at once.
const LEASE_BATCH: u32 = 32;
/// Longest error text kept with a delivery.
const ERROR_CHARS: usize = 300;

/// One webhook's client (its own deadline).
struct Target {
    config: WebhookConfig,
    client: JsonClient,
}

/// Delivers until `shutdown`; deliveries in flight at shutdown are leased and retried after
/// their lease by this or another replica.
pub async fn run(store: Store, shutdown: CancellationToken) {
    let config = Arc::new(store.notifications().clone());
    let roots = match trusted_roots(None) {
        Ok(roots) => roots,
        Err(e) => {
            tracing::error!(error = %e, "webhook delivery cannot load the system's trusted roots; https webhooks will fail");
            tokio_rustls::rustls::RootCertStore::empty()
        }
    };
    let mut targets: HashMap<String, Arc<Target>> = HashMap::new();
    for w in &config.webhooks {
        match JsonClient::new(w.timeout.0, roots.clone()) {
            Ok(client) => {
                targets.insert(
                    w.name.clone(),
                    Arc::new(Target {
                        config: w.clone(),
                        client,
                    }),
                );
            }
            Err(e) => tracing::error!(webhook = %w.name, error = %e, "webhook client not built"),
        }
    }
    let lease_ms = config
        .webhooks
        .iter()
        .map(|w| w.timeout.as_millis_u64() as i64)
        .max()
        .unwrap_or(0)
        .saturating_add(30_000);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
        if let Err(e) = round(&store, &config, &targets, lease_ms).await {
            tracing::warn!(error = %e, "webhook delivery round failed; retrying");
        }
    }
}

/// One round: trim the queue to its capacity, lease due deliveries, send them.
async fn round(
    store: &Store,
    config: &Arc<NotificationsConfig>,
    targets: &HashMap<String, Arc<Target>>,
    lease_ms: i64,
) -> Result<(), crate::store::StoreError> {
    for (webhook, event) in store.trim_notifications(config.queue_capacity).await? {
        tracing::warn!(%webhook, %event, "webhook queue over notifications.queue_capacity; oldest delivery dropped");
        crate::metrics::webhook_delivery(&webhook, &event, "dropped");
    }
    metrics::gauge!(crate::metrics::WEBHOOK_QUEUE).set(store.queued_notifications().await? as f64);
    let leased = store
        .lease_notifications(now_ms(), lease_ms, LEASE_BATCH)
        .await?;
    let mut sends = JoinSet::new();
    for queued in leased {
        let store = store.clone();
        let config = Arc::clone(config);
        let target = targets.get(&queued.webhook).cloned();
        sends.spawn(async move { deliver(&store, &config, target, queued).await });
    }
    while let Some(done) = sends.join_next().await {
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "recording a webhook delivery failed; it is retried after its lease");
        }
    }
    Ok(())
}

async fn deliver(
    store: &Store,
    config: &NotificationsConfig,
    target: Option<Arc<Target>>,
    q: Queued,
) -> Result<(), crate::store::StoreError> {
    let Some(target) = target else {
        // The webhook was removed from the configuration since this was queued.
        crate::metrics::webhook_delivery(&q.webhook, &q.event, "dropped");
        return store.finish_notification(q.id).await;
    };
    let sent = target
        .client
        .send(
            Method::POST,
            &target.config.url,
            None,
            q.body.clone().into_bytes(),
        )
        .await;
    let error = match sent {
        Ok(answer) if (200..300).contains(&answer.status) => {
            crate::metrics::webhook_delivery(&q.webhook, &q.event, "delivered");
            return store.finish_notification(q.id).await;
        }
        Ok(answer) => format!("answered {}: {}", answer.status, answer.excerpt()),
        // The URL may hold a secret: say what failed without it.
        Err(e) => redact(&e.to_string(), &target.config.url),
    };
    let error: String = error.chars().take(ERROR_CHARS).collect();
    let attempts = q.attempts.saturating_add(1);
    if attempts >= config.max_attempts {
        tracing::warn!(webhook = %q.webhook, event = %q.event, attempts, %error, "webhook delivery given up");
        crate::metrics::webhook_delivery(&q.webhook, &q.event, "given_up");
        return store.finish_notification(q.id).await;
    }
    let delay = backoff_ms(attempts, config);
    tracing::info!(webhook = %q.webhook, event = %q.event, attempts, retry_in_ms = delay, %error, "webhook delivery failed; retrying");
    crate::metrics::webhook_delivery(&q.webhook, &q.event, "retried");
    store
        .retry_notification(q.id, attempts, now_ms().saturating_add(delay), &error)
        .await
}

/// Wait before attempt `attempts + 1`: `retry_initial` doubled per failed attempt, capped at
/// `retry_max`.
pub fn backoff_ms(attempts: u32, config: &NotificationsConfig) -> i64 {
    let initial = config.retry_initial.as_millis_u64() as i64;
    let doubled = initial.saturating_mul(1i64 << attempts.saturating_sub(1).min(40));
    doubled.min(config.retry_max.as_millis_u64() as i64)
}

fn redact(text: &str, url: &str) -> String {
    text.replace(url, "<webhook url>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::duration::Dur;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let config = NotificationsConfig {
            retry_initial: Dur::secs(1),
            retry_max: Dur::secs(10),
            ..NotificationsConfig::default()
        };
        let waits: Vec<i64> = (1..=6).map(|a| backoff_ms(a, &config)).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    }

    #[test]
    fn errors_never_carry_the_url() {
        let url = "https://hooks.example/services/SECRET";
        let e = format!("cannot connect to {url}: refused");
        assert_eq!(redact(&e, url), "cannot connect to <webhook url>: refused");
    }
}
