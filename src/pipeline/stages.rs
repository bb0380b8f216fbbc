//! The seams between the pipeline and its stages.
//!
//! Each runnable phase is handled by one [`Stage`]: it reads the request (and the typed results
//! earlier stages left in [`StageState`]) and returns the next phase with its own typed result
//! added. A stage reaches the outside world only through the traits it was built with
//! (`ClusterReader`, `Llm`, …); the pipeline never sees them. A phase with no stage configured
//! ends the request in `ManualReviewRequired` with "<stage> not available" — never a faked
//! success.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::AuditDraft;
use super::request::{Phase, RemediationRequest, StageState};

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

/// The human name of the stage behind a phase, as used in "<stage> not available".
pub fn stage_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Enriching => "enrichment",
        Phase::Investigating => "investigation",
        Phase::Selecting => "workflow selection",
        Phase::Gating => "approval gate",
        Phase::AwaitingApproval => "human approval",
        Phase::Executing => "execution",
        Phase::Verifying => "verification",
        _ => "pipeline",
    }
}

/// Business context of the target's namespace (DESIGN §3.2), input to the prompt and the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrichment {
    pub environment: String,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub business_unit: Option<String>,
    #[serde(default)]
    pub risk_tolerance: Option<String>,
    /// Where the values came from (namespace labels, enrichment policy, defaults).
    #[serde(default)]
    pub sources: Vec<String>,
}
