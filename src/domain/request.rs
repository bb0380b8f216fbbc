//! The durable [`RemediationRequest`] and the typed results its stages leave in it.
//!
//! Every stage's result is a domain type held in [`StageState`], stored as one JSON column.
//! The serde names of these fields are the stored format: renaming one breaks every stored
//! request (a test in `tests/` reads a stored state of today's shape).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::approval::ApprovalDecision;
use super::enrichment::Enrichment;
use super::execution::{Assessment, Execution};
use super::gate::GateDecision;
use super::investigation::{Analysis, Selection};
use super::phase::Phase;
use super::proof::Proof;
use super::signal::{NewSignal, SignalContext};
use super::target::Target;
use super::trace::TraceContext;

/// A dependency the request is waiting for (cluster, LLM, mail server…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub dependency: String,
    pub message: String,
    pub since: DateTime<Utc>,
}

/// Stage results carried by the request, so a restart resumes from the last committed phase.
/// Stored as one JSON column; each stage adds its typed field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageState {
    /// When the request entered its current phase (`None`: at creation). The phase timeouts
    /// count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_entered_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrichment: Option<Enrichment>,
    /// Invocation 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
    /// Invocation 2, merged and routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// What was proven about the selected action (or an approver's alternative) at selection:
    /// the approval is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateDecision>,
    /// The human decision, when the gate required one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalDecision>,
    /// The obligations checked again right before the first write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof_before_write: Option<Proof>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Execution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessment: Option<Assessment>,
    /// The remediation made its target worse: what, and whether kubemedic restores the spec
    /// it recorded before its first write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<super::Undo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemediationRequest {
    pub id: Uuid,
    pub phase: Phase,
    pub reason: Option<String>,
    pub target: Option<Target>,
    pub target_fingerprint: String,
    pub signal: SignalContext,
    pub occurrence_count: i64,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub attempts: i32,
    pub not_before: Option<DateTime<Utc>>,
    pub state: StageState,
    /// The trace its spans continue (see [`TraceContext`]).
    pub trace: TraceContext,
}

impl RemediationRequest {
    /// A request for one signal, not yet stored: what `kubemedic investigate` runs through the
    /// stages (the store opens requests itself, in the ingest transaction).
    pub fn for_signal(signal: &NewSignal, phase: Phase, now: DateTime<Utc>) -> Self {
        let id = Uuid::new_v4();
        Self {
            id,
            phase,
            reason: None,
            target: signal.target.clone(),
            target_fingerprint: signal.target_fingerprint.clone(),
            signal: SignalContext::from_signal(signal, now),
            occurrence_count: 1,
            first_seen: now,
            last_seen: now,
            created_at: now,
            updated_at: now,
            attempts: 0,
            not_before: None,
            state: StageState::default(),
            trace: signal
                .trace
                .unwrap_or_else(|| TraceContext::for_request(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's `state` column as the daemon stored it (the demo's production rollback
    /// waiting for approval): moving the types into `domain` kept every serde name, so stored
    /// requests still read without a migration, and write back unchanged.
    #[test]
    fn a_stored_state_reads_and_writes_back_unchanged() {
        let stored: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/stored-state/awaiting-approval.json"
        ))
        .unwrap();
        let state: StageState = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(
            state.enrichment.as_ref().map(|e| e.environment.as_str()),
            Some("production")
        );
        let analysis = state.analysis.as_ref().unwrap();
        assert_eq!(analysis.rca.confidence, 0.9);
        assert_eq!(
            analysis.root_owner.as_ref().map(ToString::to_string),
            Some("shop/Deployment/checkout".to_owned())
        );
        let selected = state.selection.as_ref().and_then(|s| s.selected.as_ref());
        assert_eq!(
            selected.map(|w| w.workflow_id.as_str()),
            Some("rollback-deployment-previous-revision")
        );
        assert!(state.gate.as_ref().is_some_and(|g| g.require_approval));
        assert_eq!(serde_json::to_value(&state).unwrap(), stored);
    }
}
