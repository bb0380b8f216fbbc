//! Signals: one alert or prediction as ingest normalised it ([`NewSignal`]), and what a request
//! keeps of the signal that opened it ([`SignalContext`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::severity::Severity;
use super::target::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalStatus {
    Firing,
    Resolved,
}

impl SignalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalStatus::Firing => "firing",
            SignalStatus::Resolved => "resolved",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "firing" => Some(SignalStatus::Firing),
            "resolved" => Some(SignalStatus::Resolved),
            _ => None,
        }
    }
}

/// Reactive: something is broken now. Proactive: a prediction; "no action needed" is a valid
/// outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalMode {
    Reactive,
    Proactive,
}

impl SignalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalMode::Reactive => "reactive",
            SignalMode::Proactive => "proactive",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reactive" => Some(SignalMode::Reactive),
            "proactive" => Some(SignalMode::Proactive),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalSource {
    Alertmanager,
    Native,
    /// A question asked in a conversation (`POST /v1/chat/completions`).
    Chat,
    /// A reviewer's request to run a workflow on a request kubemedic left to a human
    /// (`POST /api/v1/requests/{id}/remediate`).
    Review,
}

impl SignalSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalSource::Alertmanager => "alertmanager",
            SignalSource::Native => "native",
            SignalSource::Chat => "chat",
            SignalSource::Review => "review",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "alertmanager" => Some(SignalSource::Alertmanager),
            "native" => Some(SignalSource::Native),
            "chat" => Some(SignalSource::Chat),
            "review" => Some(SignalSource::Review),
            _ => None,
        }
    }
}

/// One alert or prediction, normalised, as the store records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewSignal {
    /// Alertmanager's fingerprint (a hash of the label set), or one computed the same way.
    pub fingerprint: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub status: SignalStatus,
    /// `alertname` for Alertmanager alerts.
    pub name: String,
    pub severity: Option<Severity>,
    pub mode: SignalMode,
    pub source: SignalSource,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub generator_url: Option<String>,
    pub receiver: Option<String>,
    pub group_key: Option<String>,
    pub external_url: Option<String>,
    /// The most specific target named by the labels, if any.
    pub target: Option<Target>,
    /// Fingerprint of `target`, or of the alert itself when it names no target, so that
    /// repeats of a target-less alert still fold into one request.
    pub target_fingerprint: String,
    /// Every target fingerprint the labels name (pod and its deployment, say), primary first.
    /// A new signal joins an active request that holds any of them.
    pub target_aliases: Vec<String>,
    /// The workflow a reviewer asked for (source `review` only). Set by kubemedic for an
    /// authenticated approver, never read from a payload: no webhook body can carry it.
    #[serde(skip)]
    pub requested: Option<RequestedWorkflow>,
    /// The trace the request it opens continues: the span that received it (or the caller's,
    /// from its `traceparent`). Set by kubemedic, never read from a payload; `None` lets the
    /// store derive one from the request id.
    #[serde(skip)]
    pub trace: Option<super::trace::TraceContext>,
}

/// A reviewer's request: run this workflow on the target of a request kubemedic sent to a
/// human. The new request is investigated afresh (evidence, signature, proof), then this
/// workflow is proposed instead of the investigator's choice — validated, proven, gated and
/// approved like any proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestedWorkflow {
    pub workflow_id: String,
    /// The parameters the reviewer gave (the target's are bound from the verified root owner).
    #[serde(default)]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// The API key or user who asked.
    pub requested_by: String,
    /// The request that was reviewed.
    pub follows: uuid::Uuid,
    /// What the reviewer wrote, if anything (sanitised and clipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl NewSignal {
    /// The trace context of the request `id` this signal opens: its own, or one derived from
    /// the id.
    pub fn trace_for(&self, id: uuid::Uuid) -> super::trace::TraceContext {
        self.trace
            .unwrap_or_else(|| super::trace::TraceContext::for_request(id))
    }

    /// Who the audit trail says delivered it: `alertmanager/<receiver>` or `native/<source>`.
    pub fn actor(&self) -> String {
        match &self.receiver {
            Some(r) if !r.is_empty() => format!("{}/{r}", self.source.as_str()),
            _ => self.source.as_str().to_owned(),
        }
    }
}

/// What the request knows about the signal that opened it (the first occurrence).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalContext {
    pub fingerprint: String,
    pub name: String,
    pub severity: Option<Severity>,
    pub mode: SignalMode,
    pub source: SignalSource,
    pub starts_at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub generator_url: Option<String>,
    #[serde(default)]
    pub external_url: Option<String>,
    /// The workflow a reviewer asked for (source `review`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<RequestedWorkflow>,
}

impl SignalContext {
    /// The container of the alert's subject, when its labels name one (never the exporter's).
    pub fn subject_container(&self) -> Option<String> {
        super::target::subject_from_labels(&self.labels).container
    }

    /// The alert is about the alerting pipeline itself (`Watchdog`, `InfoInhibitor`), not about
    /// a Kubernetes object.
    pub fn about_alerting_pipeline(&self) -> bool {
        super::target::ALERTING_PIPELINE_ALERTS.contains(&self.name.as_str())
    }

    /// `alertname=…, namespace=…, service=…, job=…, instance=…, …`: what identifies an alert
    /// that names no object.
    pub fn identifying_labels(&self) -> String {
        super::target::identifying_labels(&self.labels)
    }

    pub fn from_signal(s: &NewSignal, received_at: DateTime<Utc>) -> Self {
        Self {
            fingerprint: s.fingerprint.clone(),
            name: s.name.clone(),
            severity: s.severity.clone(),
            mode: s.mode,
            source: s.source,
            starts_at: s.starts_at,
            received_at,
            labels: s.labels.clone(),
            annotations: s.annotations.clone(),
            generator_url: s.generator_url.clone(),
            external_url: s.external_url.clone(),
            requested: s.requested.clone(),
        }
    }
}
