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

/// What the execution's intent 0 records before the first write, once (a resumed run reads it
/// back): the spec's hash, the spec itself (what an undo restores) and the workload's health
/// then (what verification compares with). Stored as the intent's detail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrepareDetail {
    pub pre_spec_hash: Option<String>,
    #[serde(default)]
    pub pre_spec: Option<Value>,
    #[serde(default)]
    pub before: Option<super::TargetHealth>,
}

impl PrepareDetail {
    /// As stored; an unreadable detail reads as nothing recorded.
    pub fn read(detail: &Value) -> Self {
        serde_json::from_value(detail.clone()).unwrap_or_default()
    }
}

/// Why a step or an undo failed, as its detail (and intent) records it: the message, and what
/// it was about where one applies (the API server's error kind; the Job's name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFailure {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl StepFailure {
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            kind: None,
            job: None,
        }
    }

    /// The failure a detail records, if it records one.
    pub fn of(detail: &Value) -> Option<Self> {
        serde_json::from_value(detail.clone()).ok()
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
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
    /// The same, without the fields autoscalers own (`replicas`): what the history compares
    /// for a target an autoscaler scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_drift_hash: Option<String>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn intent_and_step_details_keep_the_stored_shape() {
        // Recorded by earlier versions: read as the types, written back the same.
        let prepare = json!({"pre_spec_hash": "abc", "pre_spec": {"replicas": 2}, "before": null});
        let read = PrepareDetail::read(&prepare);
        assert_eq!(read.pre_spec_hash.as_deref(), Some("abc"));
        assert_eq!(read.pre_spec, Some(json!({"replicas": 2})));
        assert_eq!(serde_json::to_value(&read).unwrap(), prepare);
        assert_eq!(
            PrepareDetail::read(&json!("garbled")),
            PrepareDetail::default()
        );
        let failed = json!({"error": "forbidden", "kind": "Forbidden"});
        let f = StepFailure::of(&failed).expect("a failure");
        assert_eq!(f.error, "forbidden");
        assert_eq!(f.to_value(), failed);
        assert_eq!(
            StepFailure::new("gone").to_value(),
            json!({"error": "gone"})
        );
        // A step that did its write records no failure.
        assert_eq!(
            StepFailure::of(&json!({"action": "scale", "replicas": 3})),
            None
        );
    }
}
