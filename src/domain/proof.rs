//! What was proven about a proposed remediation before anyone may approve or run it (DESIGN
//! §3.7a): the facts that must hold in the cluster for the action to be the right one and safe
//! (its obligations), each with the evidence it was judged on, the change a server-side dry run
//! says the action would make, and the target's spec hash the proof is bound to.
//!
//! A proof is made for every proposal whoever made it ([`Proposer`]) at selection, and again
//! right before the first write; the request keeps the latest one per point
//! ([`ProofPoint`]). Invariant: a proof whose [`ProofVerdict`] is not `Proven` never lets an
//! action run without a human: `Refuted` ends the request, `Unverified` (a custom action type
//! kubemedic has no obligations for) goes to the policy, which asks a human.

use super::action::ActionType;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::target::Target;

/// Who proposed the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proposer {
    /// The offline investigator's rules.
    Offline,
    /// A model (invocation 2).
    Model,
    /// An approver who picked one of the alternatives.
    Approver,
    /// A reviewer who asked for a workflow on a request kubemedic left to a human.
    Reviewer,
}

impl Proposer {
    pub fn as_str(self) -> &'static str {
        match self {
            Proposer::Offline => "offline",
            Proposer::Model => "model",
            Proposer::Approver => "approver",
            Proposer::Reviewer => "reviewer",
        }
    }
}

/// When the proof was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProofPoint {
    /// Right after the workflow was selected (or an approver picked an alternative).
    Selection,
    /// Right before the first write.
    BeforeWrite,
    /// Right before restoring the spec recorded before a remediation that made its target
    /// worse (the undo's own obligations).
    BeforeUndo,
}

/// Whether one obligation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObligationStatus {
    Holds,
    Fails,
    /// The cluster could not be read for it: not proven, so treated as failing.
    Unknown,
}

/// One fact that must hold for the action, as checked against the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Obligation {
    /// Stable id, `<action area>.<fact>`, e.g. `rollback.target-revision-healthy`.
    pub id: String,
    /// What must hold, in a sentence.
    pub statement: String,
    pub status: ObligationStatus,
    /// What the cluster showed, one fact a line (objects named).
    #[serde(default)]
    pub evidence: Vec<String>,
}

impl Obligation {
    pub fn holds(&self) -> bool {
        self.status == ObligationStatus::Holds
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProofVerdict {
    /// Every obligation holds.
    Proven,
    /// At least one does not (or could not be checked).
    Refuted,
    /// A custom action type: kubemedic knows no obligations for it.
    Unverified,
}

impl ProofVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ProofVerdict::Proven => "proven",
            ProofVerdict::Refuted => "refuted",
            ProofVerdict::Unverified => "unverified",
        }
    }
}

/// One object a dry-run step would change, and how, in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectChange {
    /// `Deployment shop/checkout`.
    pub object: String,
    /// `image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1`, …
    pub changes: Vec<String>,
}

/// What the API server said the action would do (`dryRun=All`), readable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DryRunChange {
    /// Every changed object.
    #[serde(default)]
    pub objects: Vec<ObjectChange>,
    /// A step the API server refused in the dry run, with its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Set when no dry run was possible (a proposal or a Job), saying what would happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl DryRunChange {
    /// One line for a subject or a card: the first changes, joined.
    pub fn summary(&self) -> String {
        if let Some(r) = &self.refused {
            return format!("the API server refused the dry run: {r}");
        }
        let lines: Vec<String> = self
            .objects
            .iter()
            .flat_map(|o| o.changes.iter().map(move |c| format!("{}: {c}", o.object)))
            .collect();
        match (lines.is_empty(), &self.note) {
            (true, Some(n)) => n.clone(),
            (true, None) => "no change".into(),
            (false, _) => lines.join("; "),
        }
    }

    /// Every change, a line each.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .objects
            .iter()
            .flat_map(|o| o.changes.iter().map(move |c| format!("{}: {c}", o.object)))
            .collect();
        if let Some(n) = &self.note {
            out.push(n.clone());
        }
        if let Some(r) = &self.refused {
            out.push(format!("refused by the API server: {r}"));
        }
        out
    }
}

/// The proof of one proposal (or of a "no action needed" claim, [`ActionType::NoAction`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proof {
    pub action_type: ActionType,
    pub workflow_id: String,
    /// The parameters proven (with `TARGET_RESOURCE_*` from the verified root owner).
    #[serde(default)]
    pub parameters: Map<String, Value>,
    pub proposer: Proposer,
    pub point: ProofPoint,
    pub verdict: ProofVerdict,
    pub obligations: Vec<Obligation>,
    /// The target as proven (the verified root owner).
    pub target: Target,
    /// The target's spec hash when the proof was made: the approval is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// The same without `replicas` (an autoscaled target's replicas move on their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_hash: Option<String>,
    /// The dry run's change (at selection; not repeated before the write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<DryRunChange>,
    pub checked_at: DateTime<Utc>,
}

impl Proof {
    /// The obligations that do not hold.
    pub fn failed(&self) -> impl Iterator<Item = &Obligation> {
        self.obligations.iter().filter(|o| !o.holds())
    }

    /// Why the proof does not hold, for a reason line: each failed obligation with its first
    /// pieces of evidence.
    pub fn refutation(&self) -> String {
        let parts: Vec<String> = self
            .failed()
            .map(|o| {
                let ev: Vec<&str> = o.evidence.iter().take(3).map(String::as_str).collect();
                if ev.is_empty() {
                    format!("{} ({})", o.statement, o.id)
                } else {
                    format!("{} ({}): {}", o.statement, o.id, ev.join("; "))
                }
            })
            .collect();
        parts.join(" | ")
    }
}
