//! Remediation history as the investigation sees it: past remediations of a target
//! ([`HistoryRecord`]) and the two-tier context built from them ([`HistoryContext`], DESIGN
//! §3.7). Serde names are camelCase, as in the seed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::execution::{AssessmentReason, history_spelling};
use super::target::Target;

/// How a recorded remediation ended, in the history's spelling (`completed`, `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryOutcome {
    /// Executed and assessed (whatever the score).
    Completed,
    /// The execution failed.
    Failed,
}

impl HistoryOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryOutcome::Completed => "completed",
            HistoryOutcome::Failed => "failed",
        }
    }
}

impl std::fmt::Display for HistoryOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One completed remediation as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub remediation_uid: String,
    pub target: Target,
    pub completed_at: DateTime<Utc>,
    pub signal_name: String,
    /// The action type (`RollbackDeployment`…), stored by its name.
    pub workflow_type: super::ActionType,
    pub workflow_id: String,
    pub outcome: HistoryOutcome,
    pub effectiveness_score: Option<f64>,
    pub pre_remediation_spec_hash: Option<String>,
    pub post_remediation_spec_hash: Option<String>,
    /// The same spec hashes without `replicas` ([`crate::cluster::context::drift_hash`]): what
    /// the history compares for a target an autoscaler scales, whose scaling is nobody's change
    /// to its configuration. Absent in records written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_remediation_drift_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_remediation_drift_hash: Option<String>,
    pub signal_resolved: Option<bool>,
    /// e.g. `SpecDrift` when the spec changed during the assessment window.
    #[serde(default, with = "history_spelling")]
    pub assessment_reason: Option<AssessmentReason>,
    #[serde(default)]
    pub health_checks: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HashMatch {
    /// The current spec equals the spec before that remediation: a regression.
    PreRemediation,
    /// The current spec equals the spec after it: unchanged since.
    PostRemediation,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub remediation_uid: String,
    pub completed_at: DateTime<Utc>,
    pub workflow_type: super::ActionType,
    pub outcome: HistoryOutcome,
    pub effectiveness_score: Option<f64>,
    pub hash_match: HashMatch,
    pub signal_resolved: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "history_spelling"
    )]
    pub assessment_reason: Option<AssessmentReason>,
    /// Tier 1 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_remediation_spec_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_remediation_spec_hash: Option<String>,
    /// Tier 1 of an autoscaled target only: the hashes without `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_remediation_drift_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_remediation_drift_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_checks: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    pub window: String,
    pub chain: Vec<HistoryEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryContext {
    pub target_resource: String,
    pub current_spec_hash: Option<String>,
    /// The current spec's hash without `replicas`, for a target an autoscaler scales: its
    /// scaling leaves the configuration the history compares as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_drift_hash: Option<String>,
    pub regression_detected: bool,
    pub tier1: Tier,
    pub tier2: Tier,
}

impl HistoryContext {
    pub fn is_empty(&self) -> bool {
        self.tier1.chain.is_empty() && self.tier2.chain.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryWarning {
    pub kind: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(outcome: &str, reason: &str) -> Value {
        json!({
            "remediationUid": "r1",
            "target": {"kind": "Deployment", "name": "api", "namespace": "shop"},
            "completedAt": "2026-11-30T10:00:00Z",
            "signalName": "KubePodCrashLooping",
            "workflowType": "RestartDeployment",
            "workflowId": "restart-deployment",
            "outcome": outcome,
            "effectivenessScore": 0.4,
            "preRemediationSpecHash": null,
            "postRemediationSpecHash": null,
            "signalResolved": false,
            "assessmentReason": reason,
        })
    }

    #[test]
    fn a_stored_record_reads_and_writes_the_histories_spelling() {
        let r: HistoryRecord = serde_json::from_value(stored("failed", "SpecDrift")).unwrap();
        assert_eq!(r.outcome, HistoryOutcome::Failed);
        assert_eq!(r.assessment_reason, Some(AssessmentReason::SpecDrift));
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["outcome"], "failed");
        assert_eq!(back["assessmentReason"], "SpecDrift");
        // The assessment's own spelling reads as the same reason.
        let r: HistoryRecord = serde_json::from_value(stored("completed", "spec_drift")).unwrap();
        assert_eq!(r.assessment_reason, Some(AssessmentReason::SpecDrift));
    }

    #[test]
    fn an_unknown_outcome_or_reason_is_an_error_naming_it() {
        let e = serde_json::from_value::<HistoryRecord>(stored("Success", "Full")).unwrap_err();
        assert!(e.to_string().contains("Success"), "{e}");
        let e = serde_json::from_value::<HistoryRecord>(stored("completed", "Bogus")).unwrap_err();
        assert!(e.to_string().contains("Bogus"), "{e}");
    }
}
