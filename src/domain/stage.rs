//! The seams between the pipeline and its stages.
//!
//! Each runnable phase is handled by one [`Stage`]: it reads the request (and the typed results
//! earlier stages left in [`StageState`]) and returns the next phase with its own typed result
//! added. A stage reaches the outside world only through the traits it was built with
//! (`ClusterReader`, `Llm`, …); the pipeline never sees them. A phase with no stage configured
//! ends the request in `ManualReviewRequired` with "<stage> not available" — never a faked
//! success.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::audit::AuditDraft;
use super::phase::Phase;
use super::request::{RemediationRequest, StageState};

/// What a stage decided.
#[derive(Debug, Clone)]
pub struct StageOutcome {
    pub next: Phase,
    /// Required for terminal phases; shown to humans.
    pub reason: Option<String>,
    pub state: StageState,
    pub events: Vec<AuditDraft>,
    /// With `next` equal to the current phase: run the stage again no earlier than this (a
    /// verification window that is still open). Ignored otherwise.
    pub not_before: Option<DateTime<Utc>>,
}

impl StageOutcome {
    /// Move to `next` with `state` and these events.
    pub fn to(
        next: Phase,
        reason: Option<String>,
        state: StageState,
        events: Vec<AuditDraft>,
    ) -> Self {
        Self {
            next,
            reason,
            state,
            events,
            not_before: None,
        }
    }

    /// Stay in `phase` and come back at `until` (not a dependency wait: no backoff, no
    /// give-up).
    pub fn later(
        phase: Phase,
        state: StageState,
        until: DateTime<Utc>,
        events: Vec<AuditDraft>,
    ) -> Self {
        Self {
            next: phase,
            reason: None,
            state,
            events,
            not_before: Some(until),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StageError {
    /// A dependency is unreachable: the request waits and retries, and ends in
    /// `ManualReviewRequired` naming the dependency if it stays unreachable too long.
    #[error("{dependency} unavailable: {message}")]
    Unavailable { dependency: String, message: String },
    /// The stage cannot complete for this request; the request ends in `Failed`.
    #[error("{0}")]
    Failed(String),
}

#[async_trait]
pub trait Stage: Send + Sync {
    /// The phase this stage runs in.
    fn phase(&self) -> Phase;
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError>;
}
