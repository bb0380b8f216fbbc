//! The notification dispatcher: delivers every offer and outcome message in the store's
//! outbox, one attempt at a time, and retries with backoff.
//!
//! A failed attempt is retried after 30 s, then 60, 120, 240 and at most 480 s, five attempts
//! in all (an error no retry can fix gives up at once). Every attempt is audited on the
//! approval's request and counted in `kubemedic_notifications`. A notification that never
//! arrives loses nothing: the approval exists in the store and can be decided through the API
//! (and the dashboard). The outbox is shared by replicas: a claimed message is not due again
//! for the lease, so two replicas do not send it together.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, warn};

use super::Approvals;
use crate::domain::{AuditDraft, Notification, NotificationKind};
use crate::notify::NotifyError;
use crate::store::DeliveryResult;

/// Retry schedule of a failed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub cap: Duration,
    pub attempts: i32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(30),
            cap: Duration::from_secs(480),
            attempts: 5,
        }
    }
}

impl Backoff {
    /// The wait after failed attempt `n` (1-based).
    pub fn after(&self, n: i32) -> Duration {
        let doublings = u32::try_from(n.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
        self.first
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.cap)
    }

    /// The wait after failed attempt `n`: the backoff, or longer when the service asked for
    /// longer (a rate limit's `Retry-After`, honoured up to [`MAX_RETRY_AFTER`]).
    pub fn wait(&self, n: i32, error: &NotifyError) -> Duration {
        let asked = error.retry_after.unwrap_or_default().min(MAX_RETRY_AFTER);
        self.after(n).max(asked)
    }
}

/// The longest `Retry-After` honoured; a longer one is taken as this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How long a claimed message is not due again: longer than any one attempt takes.
const LEASE: Duration = Duration::from_secs(120);
/// How often the outbox is looked at when nothing wakes the dispatcher.
const POLL: Duration = Duration::from_secs(1);

pub struct Dispatcher {
    pub approvals: Arc<Approvals>,
    pub backoff: Backoff,
}

impl Dispatcher {
    pub fn new(approvals: Arc<Approvals>) -> Self {
        Self {
            approvals,
            backoff: Backoff::default(),
        }
    }

    /// Deliver until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let wake = self.approvals.wake.clone();
        loop {
            loop {
                if shutdown.is_cancelled() {
                    return;
                }
                match self
                    .approvals
                    .store
                    .approvals
                    .claim_notification(LEASE)
                    .await
                {
                    Ok(Some(n)) => self.deliver(n).await,
                    Ok(None) => break,
                    Err(e) => {
                        debug!(error = %e, "cannot read the notification outbox");
                        break;
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// One attempt at one message.
    pub async fn deliver(&self, n: Notification) {
        let a = &self.approvals;
        let attempt = n.attempts + 1;
        let what = format!("{} {} to {}", n.channel, n.kind.as_str(), n.recipient);
        let Some(notifier) = a.notifier(n.channel) else {
            self.finish(
                &n,
                DeliveryResult::GaveUp {
                    error: format!("no {} notifier is configured", n.channel),
                },
                format!("{what}: not sent, no {} channel is configured", n.channel),
                "failed",
            )
            .await;
            return;
        };
        let approval = match a.store.approvals.get_approval(n.approval_id).await {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.finish(
                    &n,
                    DeliveryResult::GaveUp {
                        error: "the approval no longer exists".into(),
                    },
                    format!("{what}: not sent, the approval no longer exists"),
                    "failed",
                )
                .await;
                return;
            }
            Err(e) => {
                // The store is down: the claim lapses and the message is tried again.
                debug!(error = %e, "cannot load an approval to notify");
                return;
            }
        };
        if n.kind == NotificationKind::Offer
            && let Some(d) = &approval.decision
        {
            // Decided while this offer waited (or was retried): its buttons would be stale.
            self.finish(
                &n,
                DeliveryResult::Cancelled {
                    reason: format!("the approval was {} first", d.decision),
                },
                format!("{what}: not sent, the approval was already {}", d.decision),
                "cancelled",
            )
            .await;
            return;
        }
        let message = a.message(&approval, &n.recipient, n.channel);
        // The delivery is a span of its request's trace (looked up only when tracing is on).
        let span = tracing::info_span!(
            target: crate::telemetry::TRACE_TARGET,
            "notify",
            otel.name = %format_args!("notify {} {}", n.channel, n.kind.as_str()),
            otel.kind = "client",
            kubemedic.request_id = %approval.request_id,
            kubemedic.notification.channel = %n.channel,
            kubemedic.notification.kind = n.kind.as_str(),
            kubemedic.notification.attempt = i64::from(attempt),
            kubemedic.notification.result = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        if crate::telemetry::tracing_enabled()
            && let Ok(Some(request)) = a.store.requests.get_request(approval.request_id).await
        {
            crate::telemetry::continue_trace(&span, &request.trace);
        }
        let sent = async {
            match n.kind {
                NotificationKind::Offer => notifier.offer(&message).await,
                NotificationKind::Outcome
                | NotificationKind::NotExecuted
                | NotificationKind::MadeWorse => notifier
                    .outcome(&message, n.external_ref.as_ref())
                    .await
                    .map(|()| None),
            }
        }
        .instrument(span.clone())
        .await;
        span.record(
            "kubemedic.notification.result",
            match &sent {
                Ok(_) => "delivered",
                Err(e) if e.retryable => "retry",
                Err(_) => "failed",
            },
        );
        if sent.is_err() {
            span.record("otel.status_code", "ERROR");
        }
        match sent {
            Ok(external_ref) => {
                self.finish(
                    &n,
                    DeliveryResult::Delivered {
                        external_ref: external_ref.clone(),
                    },
                    format!("{what}: delivered (attempt {attempt})"),
                    "delivered",
                )
                .await;
                if n.kind == NotificationKind::Offer {
                    self.decided_meanwhile(&n, notifier.as_ref(), external_ref)
                        .await;
                }
            }
            Err(e) if e.retryable && attempt < self.backoff.attempts => {
                let at = a.clock.now()
                    + chrono::Duration::from_std(self.backoff.wait(attempt, &e))
                        .unwrap_or(chrono::Duration::seconds(30));
                warn!(channel = %n.channel, recipient = %n.recipient, attempt, error = %e, "notification failed; will retry");
                self.finish(
                    &n,
                    DeliveryResult::Retry {
                        error: e.message.clone(),
                        at,
                    },
                    format!(
                        "{what}: attempt {attempt} of {} failed ({}); next attempt at {}",
                        self.backoff.attempts,
                        e.message,
                        at.to_rfc3339()
                    ),
                    "retry",
                )
                .await;
            }
            Err(e) => {
                warn!(channel = %n.channel, recipient = %n.recipient, attempt, error = %e, "notification failed; giving up");
                self.finish(
                    &n,
                    DeliveryResult::GaveUp {
                        error: e.message.clone(),
                    },
                    format!(
                        "{what}: gave up after attempt {attempt} ({}); the approval can still be decided through the API",
                        e.message
                    ),
                    "failed",
                )
                .await;
            }
        }
    }

    /// An offer that went out while the approval was being decided (the decision queued no
    /// outcome for it, it was not delivered yet): replace its buttons now.
    async fn decided_meanwhile(
        &self,
        n: &Notification,
        notifier: &dyn crate::notify::Notifier,
        external_ref: Option<serde_json::Value>,
    ) {
        let a = &self.approvals;
        let Ok(Some(now)) = a.store.approvals.get_approval(n.approval_id).await else {
            return;
        };
        if now.decision.is_none() {
            return;
        }
        let message = a.message(&now, &n.recipient, n.channel);
        let text = match notifier.outcome(&message, external_ref.as_ref()).await {
            Ok(()) => format!(
                "{} outcome to {}: delivered (decided while the offer was sent)",
                n.channel, n.recipient
            ),
            Err(e) => format!(
                "{} outcome to {}: failed ({e}); the offer's links no longer work",
                n.channel, n.recipient
            ),
        };
        let draft = AuditDraft::new(crate::domain::audit::NOTIFICATION, "approval", text);
        let request = Some(now.request_id);
        if let Err(e) = a.store.audit.append_audit(request, None, &draft).await {
            warn!(error = %e, "cannot audit a notification");
        }
    }

    async fn finish(&self, n: &Notification, result: DeliveryResult, message: String, label: &str) {
        let a = &self.approvals;
        let draft = AuditDraft::new(crate::domain::audit::NOTIFICATION, "approval", message)
            .with_payload(serde_json::json!({
                "notification_id": n.id,
                "approval_id": n.approval_id,
                "channel": n.channel,
                "recipient": n.recipient,
                "kind": n.kind,
                "attempt": n.attempts + 1,
                "result": label,
            }));
        if let Err(e) = a
            .store
            .approvals
            .finish_notification(n.id, &result, &draft)
            .await
        {
            warn!(error = %e, "cannot record a notification attempt");
        }
        if let Some(m) = &a.metrics {
            m.notification(n.channel.as_str(), n.kind.as_str(), label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_thirty_seconds_to_eight_minutes() {
        let b = Backoff::default();
        let waits: Vec<u64> = (1..=6).map(|n| b.after(n).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 480]);
    }

    #[test]
    fn a_rate_limits_retry_after_is_waited_out() {
        let b = Backoff::default();
        let limited = |s| NotifyError::retryable("rate limited").after(Duration::from_secs(s));
        // Longer than the backoff: the service's wait.
        assert_eq!(b.wait(1, &limited(90)).as_secs(), 90);
        // Shorter: the backoff still applies.
        assert_eq!(b.wait(3, &limited(5)).as_secs(), 120);
        // Absurd: capped at an hour.
        assert_eq!(b.wait(1, &limited(86_400)).as_secs(), 3600);
        // Not said: the backoff.
        assert_eq!(b.wait(2, &NotifyError::retryable("timeout")).as_secs(), 60);
    }
}
