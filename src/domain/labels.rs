//! Infrastructure facts detected about a remediation target's root owner (the seed's
//! `DetectedLabels`): read by the prompt, the catalog's filters and the approval policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaUsage {
    pub hard: String,
    pub used: String,
}

/// Infrastructure facts about the root owner (names as in the Kubernaut seed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectedLabels {
    pub git_ops_managed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_ops_tool: Option<String>,
    pub helm_managed: bool,
    pub pdb_protected: bool,
    pub hpa_enabled: bool,
    pub stateful: bool,
    pub network_isolated: bool,
    pub service_mesh: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_mesh_type: Option<String>,
    pub resource_quota_constrained: bool,
    #[serde(
        rename = "quota_details",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub quota_details: BTreeMap<String, QuotaUsage>,
    /// Detections that could not be made (API not served, forbidden, timeout): their value
    /// above is unknown, not false.
    #[serde(default)]
    pub failed_detections: Vec<String>,
}

impl DetectedLabels {
    /// "GitOps-managed with argocd, Helm-managed, PDB-protected" — for prompts and catalog
    /// context.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.git_ops_managed {
            parts.push(format!(
                "GitOps-managed with {}",
                self.git_ops_tool.as_deref().unwrap_or("an unknown tool")
            ));
        }
        for (on, text) in [
            (self.helm_managed, "Helm-managed"),
            (self.pdb_protected, "PDB-protected"),
            (self.hpa_enabled, "HPA-scaled"),
            (self.stateful, "stateful (PVCs)"),
            (self.network_isolated, "NetworkPolicy in namespace"),
            (self.resource_quota_constrained, "ResourceQuota-constrained"),
        ] {
            if on {
                parts.push(text.to_owned());
            }
        }
        if self.service_mesh {
            parts.push(format!(
                "in the {} service mesh",
                self.service_mesh_type.as_deref().unwrap_or("a")
            ));
        }
        if parts.is_empty() {
            "no special infrastructure detected".into()
        } else {
            parts.join(", ")
        }
    }
}
