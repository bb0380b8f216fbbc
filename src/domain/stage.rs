//! The seams between the pipeline and its stages.
//!
//! Each runnable phase is handled by one [`Stage`]: it reads the request (and the typed results
//! earlier stages left in [`StageState`]) and returns the next phase with its own typed result
//! added. A stage reaches the outside world only through the traits it was built with
//! (`ClusterReader`, `Llm`, …); the pipeline never sees them. A phase with no stage configured
//! ends the request in `ManualReviewRequired` with "<stage> not available" — never a faked
//! success.

use async_trait::async_trait;

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
