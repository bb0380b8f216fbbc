//! The business context of a request's namespace (DESIGN §3.2), and the pinned context that
//! applies to it: the enrichment stage's result, read by the prompt and the gate.

use serde::{Deserialize, Serialize};

/// Business context of the target's namespace (DESIGN §3.2), input to the prompt and the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrichment {
    pub environment: String,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub business_unit: Option<String>,
    #[serde(default)]
    pub risk_tolerance: Option<String>,
    /// Where the values came from (namespace labels, enrichment policy, defaults).
    #[serde(default)]
    pub sources: Vec<String>,
    /// Pinned context an admin wrote for every investigation (cluster-wide, and the asker's
    /// own): read by both investigators and shown as such in the evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<PinnedNote>,
}

/// One scope's pinned context as an investigation read it (sanitised, bounded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedNote {
    /// `cluster` or `user:<name>`.
    pub scope: String,
    pub text: String,
    pub updated_by: String,
}
