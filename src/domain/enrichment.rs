//! The business context of a request's namespace (DESIGN §3.2): the enrichment stage's result,
//! read by the prompt and the gate.

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
}
