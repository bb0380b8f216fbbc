//! Outcome learning (docs/adr/0024-outcome-learning.md): the signature of an incident class,
//! one verified outcome of a workflow on it ([`PatternOutcome`], what verification writes), and
//! the pattern the investigation reads back ([`LearnedPattern`], outcomes of one workflow on
//! one signature, weighed by age). Serde names are stored formats.

use super::action::ActionType;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::target::Target;

/// The facts an incident class is recognised by, normalised (trimmed, sorted, deduplicated),
/// so the same failure on another object or namespace has the same facts. Names of objects and
/// namespaces are never among them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureFacts {
    /// The signal's name (`KubePodNotReady`).
    pub alert: String,
    /// The verified root owner's kind (`Deployment`).
    pub kind: String,
    /// How the root owner's unhealthy pods are failing: `not-ready`, `phase:Pending`,
    /// `waiting:CrashLoopBackOff`, `terminated:OOMKilled` (the current or last termination).
    #[serde(default)]
    pub pod_states: Vec<String>,
    /// Reasons of the Warning events about the root owner or its pods (`Unhealthy`).
    #[serde(default)]
    pub events: Vec<String>,
}

/// A signature: the facts and their hash (`sig:` and 16 hex digits of their SHA-256).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub hash: String,
    pub facts: SignatureFacts,
}

/// One verified outcome of a workflow that ran on an incident of a signature: written once per
/// request by verification, effective or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternOutcome {
    pub request_id: Uuid,
    pub signature: Signature,
    /// The workflow that ran (an approver's alternative included).
    pub workflow_id: String,
    pub action_type: ActionType,
    /// The workflow kubemedic had proposed, when an approver chose this one instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// The object it ran on (for the evidence; never part of the signature).
    pub target: Target,
    pub effective: bool,
    #[serde(default)]
    pub score: Option<f64>,
    pub recorded_at: DateTime<Utc>,
}

/// What the outcomes of one workflow on one signature add up to, at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedPattern {
    pub signature: String,
    pub workflow_id: String,
    pub action_type: ActionType,
    /// Effective outcomes count +1, ineffective −1, each halved every half-life of its age.
    pub weight: f64,
    pub effective: u32,
    pub ineffective: u32,
    /// Until when it is not suggested: its last ineffective outcome plus the cooldown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_until: Option<DateTime<Utc>>,
    /// In cooldown now.
    #[serde(default)]
    pub suppressed: bool,
    /// Workflows kubemedic proposed that approvers replaced with this one, in effective runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// The requests it was learned from, newest first (at most a few).
    #[serde(default)]
    pub learned_from: Vec<Uuid>,
    pub last_outcome_at: DateTime<Utc>,
}

/// How a selection used a learned pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedUse {
    pub pattern: LearnedPattern,
    /// The workflow the rules proposed and the learned one replaced, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead_of: Option<String>,
    /// Why, in a sentence.
    pub reason: String,
}
