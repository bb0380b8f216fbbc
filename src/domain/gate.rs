//! What the approval gate decided about a selected remediation.
//!
//! Fail closed: [`GateDecision::degraded`] is the decision for every error, and it requires
//! approval whatever the input.

use serde::{Deserialize, Serialize};

/// One reason to ask a human, scored 0–100.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskFactor {
    pub score: i64,
    pub reason: String,
}

/// What the gate decided for one input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateDecision {
    pub require_approval: bool,
    /// Shown to approvers: the highest-scoring risk factor's reason (or why it was
    /// auto-approved).
    pub reason: String,
    /// Highest score first.
    #[serde(default)]
    pub risk_factors: Vec<RiskFactor>,
    /// The policy could not be loaded or evaluated; approval is required whatever the input.
    #[serde(default)]
    pub degraded: bool,
    /// `sha256:<hex>` of the policy sources that decided (or failed to); `None` when the policy
    /// directory could not even be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_revision: Option<String>,
}

impl GateDecision {
    /// The fail-closed decision.
    pub fn degraded(error: &impl std::fmt::Display, policy_revision: Option<String>) -> Self {
        let reason = format!("approval policy unavailable: {error}");
        Self {
            require_approval: true,
            risk_factors: vec![RiskFactor {
                score: 100,
                reason: reason.clone(),
            }],
            reason,
            degraded: true,
            policy_revision,
        }
    }

    /// The highest risk factor's score, if any factor matched.
    pub fn top_score(&self) -> Option<i64> {
        self.risk_factors.iter().map(|f| f.score).max()
    }

    /// The metric label of this decision.
    pub fn label(&self) -> &'static str {
        if self.degraded {
            "degraded"
        } else if self.require_approval {
            "approval_required"
        } else {
            "auto_approved"
        }
    }
}
