//! The durable `RemediationRequest` and its phase state machine (DESIGN §1).
//!
//! Invariants: a terminal phase is final; every phase change is checked by
//! [`Phase::can_move_to`] before the store commits it together with its audit event; terminal
//! phases always carry a reason.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ingest::{NewSignal, SignalMode, SignalSource};
use crate::target::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Received,
    Enriching,
    Investigating,
    Selecting,
    Gating,
    AwaitingApproval,
    Executing,
    Verifying,
    Completed,
    NoActionRequired,
    ManualReviewRequired,
    Rejected,
    Expired,
    Failed,
    Blocked,
}

impl Phase {
    pub const ALL: [Phase; 15] = [
        Phase::Received,
        Phase::Enriching,
        Phase::Investigating,
        Phase::Selecting,
        Phase::Gating,
        Phase::AwaitingApproval,
        Phase::Executing,
        Phase::Verifying,
        Phase::Completed,
        Phase::NoActionRequired,
        Phase::ManualReviewRequired,
        Phase::Rejected,
        Phase::Expired,
        Phase::Failed,
        Phase::Blocked,
    ];

    /// Phases a worker picks up and drives forward. `AwaitingApproval` is one so that, while no
    /// approval stage is configured, a request the gate sent there ends honestly ("human
    /// approval not available") instead of waiting for a decision nobody can make.
    pub const RUNNABLE: [Phase; 8] = [
        Phase::Received,
        Phase::Enriching,
        Phase::Investigating,
        Phase::Selecting,
        Phase::Gating,
        Phase::AwaitingApproval,
        Phase::Executing,
        Phase::Verifying,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Received => "Received",
            Phase::Enriching => "Enriching",
            Phase::Investigating => "Investigating",
            Phase::Selecting => "Selecting",
            Phase::Gating => "Gating",
            Phase::AwaitingApproval => "AwaitingApproval",
            Phase::Executing => "Executing",
            Phase::Verifying => "Verifying",
            Phase::Completed => "Completed",
            Phase::NoActionRequired => "NoActionRequired",
            Phase::ManualReviewRequired => "ManualReviewRequired",
            Phase::Rejected => "Rejected",
            Phase::Expired => "Expired",
            Phase::Failed => "Failed",
            Phase::Blocked => "Blocked",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Phase::Completed
                | Phase::NoActionRequired
                | Phase::ManualReviewRequired
                | Phase::Rejected
                | Phase::Expired
                | Phase::Failed
                | Phase::Blocked
        )
    }

    pub fn is_runnable(self) -> bool {
        Phase::RUNNABLE.contains(&self)
    }

    /// The transitions of DESIGN §1. Staying in the same non-terminal phase (a wait) is allowed;
    /// any non-terminal phase may end in review, failure or a guardrail block.
    pub fn can_move_to(self, to: Phase) -> bool {
        use Phase::*;
        if self.is_terminal() {
            return false;
        }
        if self == to || matches!(to, ManualReviewRequired | Failed | Blocked) {
            return true;
        }
        matches!(
            (self, to),
            (Received, Enriching)
                | (Enriching, Investigating)
                | (Investigating, Selecting)
                | (Investigating, NoActionRequired)
                | (Selecting, Gating)
                | (Selecting, NoActionRequired)
                | (Gating, AwaitingApproval)
                | (Gating, Executing)
                | (AwaitingApproval, Executing)
                | (AwaitingApproval, Rejected)
                | (AwaitingApproval, Expired)
                | (Executing, Verifying)
                | (Verifying, Completed)
        )
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the request knows about the signal that opened it (the first occurrence).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalContext {
    pub fingerprint: String,
    pub name: String,
    pub severity: Option<String>,
    pub mode: SignalMode,
    pub source: SignalSource,
    pub starts_at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub generator_url: Option<String>,
    #[serde(default)]
    pub external_url: Option<String>,
}

impl SignalContext {
    pub fn from_signal(s: &NewSignal, received_at: DateTime<Utc>) -> Self {
        Self {
            fingerprint: s.fingerprint.clone(),
            name: s.name.clone(),
            severity: s.severity.clone(),
            mode: s.mode,
            source: s.source,
            starts_at: s.starts_at,
            received_at,
            labels: s.labels.clone(),
            annotations: s.annotations.clone(),
            generator_url: s.generator_url.clone(),
            external_url: s.external_url.clone(),
        }
    }
}

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrichment: Option<super::stages::Enrichment>,
    /// Invocation 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::investigate::Analysis>,
    /// Invocation 2, merged and routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<crate::investigate::Selection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<crate::gate::GateDecision>,
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
}

impl RemediationRequest {
    /// A request for one signal, not yet stored: what `kubemedic investigate` runs through the
    /// stages (the store opens requests itself, in the ingest transaction).
    pub fn for_signal(signal: &NewSignal, phase: Phase, now: DateTime<Utc>) -> Self {
        Self {
            id: Uuid::new_v4(),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
    }

    #[test]
    fn terminal_is_final_and_happy_path_is_allowed() {
        use Phase::*;
        let happy = [
            Received,
            Enriching,
            Investigating,
            Selecting,
            Gating,
            AwaitingApproval,
            Executing,
            Verifying,
            Completed,
        ];
        for pair in happy.windows(2) {
            assert!(pair[0].can_move_to(pair[1]), "{:?}", pair);
        }
        for t in Phase::ALL.into_iter().filter(|p| p.is_terminal()) {
            for to in Phase::ALL {
                assert!(!t.can_move_to(to), "{t} -> {to}");
            }
        }
        assert!(!Received.can_move_to(Executing), "no skipping the gate");
        assert!(!Gating.can_move_to(Verifying));
    }
}
