//! The phases of a remediation request and the transitions between them (DESIGN §1).
//!
//! Invariants: a terminal phase is final; every phase change is checked by
//! [`Phase::can_move_to`] before the store commits it together with its audit event; terminal
//! phases always carry a reason.

use serde::{Deserialize, Serialize};

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
                // A remediation that made its target worse goes back to the executor, which
                // restores the spec it recorded (docs/adr/0035-undo-what-made-it-worse.md).
                | (Verifying, Executing)
        )
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
