//! What the execution stage did ([`Execution`]) and what verification found afterwards
//! ([`Assessment`]) — DESIGN §3.6–3.7.
//!
//! Both are stored in the request's state and copied into the remediation history; their serde
//! names are the stored format.

use super::action::ActionType;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::step::StepDone;
use super::target::Target;

/// The annotation kubemedic puts on every object it changes: `<request id>/<step>`.
pub const REMEDIATION_ANNOTATION: &str = "kubemedic.io/remediation";
/// The opt-out: an object (or its namespace) annotated `kubemedic.io/remediate: "false"` is
/// never changed by kubemedic.
pub const OPT_OUT_ANNOTATION: &str = "kubemedic.io/remediate";

/// How a workflow runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Steps through the Kubernetes API.
    Builtin,
    /// A Kubernetes Job.
    Job,
    /// A change proposed to a human (a Git revert); nothing is applied.
    Proposal,
}

/// What became of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The change was made now.
    Applied,
    /// A previous attempt (before a crash) had made it; found on the object and not repeated.
    AlreadyApplied,
    /// Dry run: the API server accepted the change with `dryRun=All`; nothing was changed.
    DryRun,
    /// The step could not be made; the execution stopped here.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionStep {
    /// 1-based, in workflow order.
    pub index: u32,
    pub action: StepDone,
    pub status: StepStatus,
    /// What the step did (from the write), or why it failed.
    #[serde(default)]
    pub detail: Value,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionOutcome {
    /// Every step was applied (or found applied).
    Succeeded,
    /// A step failed; the steps before it stay applied.
    Failed,
    /// Dry run: what would have run is recorded; nothing changed.
    DryRun,
    /// A proposal for a human; nothing was applied.
    Proposed,
}

/// The result of the Executing phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub workflow_id: String,
    pub workflow_version: String,
    pub action_type: ActionType,
    pub engine: EngineKind,
    /// The verified root owner the workflow acted on.
    pub target: Target,
    pub parameters: Map<String, Value>,
    pub dry_run: bool,
    /// `sha256:…` of the target's spec before the first write.
    #[serde(default)]
    pub pre_spec_hash: Option<String>,
    /// The target's pods before the first write, for verification to tell whether the
    /// remediation made things worse (workloads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<super::TargetHealth>,
    /// The spec hash right after the last write: verification compares against it to tell
    /// somebody else's change (spec drift) from ours.
    #[serde(default)]
    pub post_spec_hash: Option<String>,
    /// The same, without the fields autoscalers own (`replicas`): what verification compares
    /// to tell somebody else's change from an HPA at work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_drift_hash: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub steps: Vec<ExecutionStep>,
    pub outcome: ExecutionOutcome,
    /// One line for humans.
    pub message: String,
    /// The proposed change, for the proposal engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
}

/// Why an assessment says what it says (the effectiveness monitor's reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssessmentReason {
    /// Every configured part could be assessed.
    Full,
    /// Some part could not be assessed (no metrics, the target unreadable…).
    Partial,
    /// Somebody else changed the target during the window: the result says nothing about the
    /// remediation (inconclusive, not a failure — but it counts as not effective).
    SpecDrift,
    /// Verification ran out of time before it could assess.
    Expired,
    /// Nothing was executed to assess.
    NoExecution,
}

impl AssessmentReason {
    /// The history's spelling (`SpecDrift`…), which the prompt warnings read.
    pub fn history_name(self) -> &'static str {
        match self {
            AssessmentReason::Full => "Full",
            AssessmentReason::Partial => "Partial",
            AssessmentReason::SpecDrift => "SpecDrift",
            AssessmentReason::Expired => "Expired",
            AssessmentReason::NoExecution => "NoExecution",
        }
    }

    /// The reason a history record spells (`SpecDrift`, or `spec_drift` as serde writes it).
    pub fn from_history_name(name: &str) -> Option<Self> {
        [
            AssessmentReason::Full,
            AssessmentReason::Partial,
            AssessmentReason::SpecDrift,
            AssessmentReason::Expired,
            AssessmentReason::NoExecution,
        ]
        .into_iter()
        .find(|r| {
            let spelled = r.history_name();
            spelled.eq_ignore_ascii_case(name)
                || spelled.eq_ignore_ascii_case(&name.replace('_', ""))
        })
    }
}

/// Serde for a history record's assessment reason, in the history's spelling (`SpecDrift`):
/// stored records and the prompts read that spelling, not the assessment's `spec_drift`.
pub mod history_spelling {
    use super::AssessmentReason;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(r: &Option<AssessmentReason>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Some(r) => s.serialize_some(r.history_name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<AssessmentReason>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|name| {
                AssessmentReason::from_history_name(&name)
                    .ok_or_else(|| D::Error::custom(format!("unknown assessment reason {name:?}")))
            })
            .transpose()
    }
}

/// The effectiveness score (0..1) at or above which a remediation helped, unless configured:
/// verification judges by it and the guardrails count the ineffective ones by it.
pub const DEFAULT_EFFECTIVENESS_THRESHOLD: f64 = 0.7;

/// The result of the Verifying phase: the effectiveness score and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// Weighted mean of the assessed parts, 0–1; `None` when nothing could be assessed.
    pub score: Option<f64>,
    /// 1.0 all pods ready; 0.75 ready but restarted since; 0.5 partially ready; 0.25 ready but
    /// OOMKilled since; 0 crash-looping, none ready or target gone.
    pub health_score: Option<f64>,
    /// 1 when the signal resolved within the window, else 0.
    pub alert_score: Option<f64>,
    /// From Prometheus, when configured.
    #[serde(default)]
    pub metrics_score: Option<f64>,
    pub post_spec_hash: Option<String>,
    pub signal_resolved: bool,
    pub reason: AssessmentReason,
    /// At or above the effectiveness threshold, and not drifted.
    pub effective: bool,
    /// What each part rests on, for humans.
    #[serde(default)]
    pub details: Vec<String>,
    pub assessed_at: DateTime<Utc>,
}
