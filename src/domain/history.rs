//! Remediation history as the investigation sees it: past remediations of a target
//! ([`HistoryRecord`]) and the two-tier context built from them ([`HistoryContext`], DESIGN
//! §3.7). Serde names are camelCase, as in the seed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::target::Target;

/// One completed remediation as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub remediation_uid: String,
    pub target: Target,
    pub completed_at: DateTime<Utc>,
    pub signal_name: String,
    /// The action type (`RollbackDeployment`…).
    pub workflow_type: String,
    pub workflow_id: String,
    pub outcome: String,
    pub effectiveness_score: Option<f64>,
    pub pre_remediation_spec_hash: Option<String>,
    pub post_remediation_spec_hash: Option<String>,
    pub signal_resolved: Option<bool>,
    /// e.g. `SpecDrift` when the spec changed during the assessment window.
    pub assessment_reason: Option<String>,
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
    pub workflow_type: String,
    pub outcome: String,
    pub effectiveness_score: Option<f64>,
    pub hash_match: HashMatch,
    pub signal_resolved: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessment_reason: Option<String>,
    /// Tier 1 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_remediation_spec_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_remediation_spec_hash: Option<String>,
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
