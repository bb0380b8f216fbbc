//! Telling approvers: the [`Notifier`] trait and its e-mail and Slack implementations.
//!
//! A notifier delivers one [`ApprovalMessage`] to one recipient (an *offer*: the approval with
//! its Approve / Deny links or buttons), and later replaces or follows it up with the outcome
//! once the approval is decided, expires or is resolved elsewhere — so no message keeps
//! offering buttons that no longer work. Retries, backoff, auditing and metrics are the
//! caller's (the approval stage's dispatcher): a notifier makes one attempt and says what
//! happened. Nothing here decides anything.
//!
//! [`email::EmailNotifier`] speaks SMTP (lettre, rustls with ring); [`slack::SlackNotifier`]
//! speaks the Slack Web API or an incoming webhook (reqwest), and [`slack`] also holds the pure
//! functions the interaction endpoint needs (signature check, payload parsing). Both render the
//! same facts (`render`, which the dashboard's approval card uses too), and treat every value of the approval as untrusted text: alert text
//! and model output are escaped for the medium (HTML, Slack mrkdwn) and never interpreted.

pub mod email;
pub mod render;
pub mod slack;

use async_trait::async_trait;
use serde_json::Value;

use crate::domain::{ApprovalMessage, ApprovalRequest, Channel};

/// One delivery attempt failed. `retryable`: a later attempt may succeed (connection refused,
/// timeout, 5xx, 429); otherwise (bad address, auth refused, invalid token) it will not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NotifyError {
    pub message: String,
    pub retryable: bool,
    /// How long the service asked us to wait before the next attempt (Slack's `Retry-After`
    /// on HTTP 429), if it said.
    pub retry_after: Option<std::time::Duration>,
}

impl NotifyError {
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
            retry_after: None,
        }
    }
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }
    /// The service asked for `wait` before the next attempt.
    #[must_use]
    pub fn after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }
}

/// A notifier's settings are wrong. `setting` is the flag an operator sets (`--smtp-url`,
/// `--slack-channel`, …), so the message can be shown as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct SettingsError {
    pub setting: &'static str,
    pub message: String,
}

impl SettingsError {
    pub fn new(setting: &'static str, message: impl Into<String>) -> Self {
        Self {
            setting,
            message: message.into(),
        }
    }
}

#[async_trait]
pub trait Notifier: Send + Sync {
    fn channel(&self) -> Channel;

    /// Who this notifier offers an approval to: e-mail addresses, or the Slack channel (or
    /// `webhook`). One offer is sent per recipient.
    fn recipients(&self, approval: &ApprovalRequest) -> Vec<String>;

    /// Deliver the offer. Returns what is needed to find the message again for
    /// [`Notifier::outcome`] (Slack: `{"channel": …, "ts": …}`), if anything.
    async fn offer(&self, message: &ApprovalMessage) -> Result<Option<Value>, NotifyError>;

    /// The approval is decided (or expired): replace the offer's buttons with the outcome
    /// (Slack `chat.update`), or follow it up (e-mail, incoming webhook). `external_ref` is
    /// what [`Notifier::offer`] returned.
    async fn outcome(
        &self,
        message: &ApprovalMessage,
        external_ref: Option<&Value>,
    ) -> Result<(), NotifyError>;
}
