//! The enrichment policy's contract: its `input` ([`EnrichmentPolicyInput`]) and the values it
//! derives ([`Derived`]), package `kubemedic.enrichment`. The Enriching stage builds the input;
//! [`super::RegoGate::enrich`] evaluates it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::GateError;
use crate::domain::Severity;
use crate::domain::Target;

/// The optional enrichment package.
pub const ENRICHMENT_PACKAGE: &str = "data.kubemedic.enrichment";

/// Enrichment values, each possibly unknown. Also the enrichment policy's output shape: the
/// package document's keys `environment`, `priority`, `business_unit`, `risk_tolerance`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Derived {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_tolerance: Option<String>,
}

impl Derived {
    /// Read the four keys from the enrichment package document; other rules are helpers and
    /// ignored. A key with a value that is not a string is a policy error.
    pub fn from_document(doc: &serde_json::Value) -> Result<Self, GateError> {
        let field = |key: &str| -> Result<Option<String>, GateError> {
            match doc.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(non_empty(s)),
                Some(other) => Err(GateError::Shape {
                    document: format!("{}.{key}", ENRICHMENT_PACKAGE),
                    message: format!("expected a string, got {other}"),
                }),
            }
        };
        Ok(Self {
            environment: field("environment")?,
            priority: field("priority")?,
            business_unit: field("business_unit")?,
            risk_tolerance: field("risk_tolerance")?,
        })
    }
}

pub(crate) fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// The namespace as the enrichment policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NamespaceFacts {
    /// `None` when neither the target nor the alert names a namespace.
    pub name: Option<String>,
    /// False when the namespace does not exist or could not be read: `labels` are unknown.
    pub found: bool,
    pub labels: BTreeMap<String, String>,
}

/// The alert as the enrichment policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SignalFacts {
    pub name: String,
    pub severity: Option<Severity>,
    pub mode: String,
    pub labels: BTreeMap<String, String>,
}

/// `input` of the enrichment policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EnrichmentPolicyInput {
    pub namespace: NamespaceFacts,
    pub target: Option<Target>,
    pub signal: SignalFacts,
    /// What the namespace labels already gave; kubemedic keeps those whatever the policy says.
    pub labels: Derived,
}
