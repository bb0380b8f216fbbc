//! The Enriching stage (DESIGN §3.2): environment, priority, business unit and risk tolerance of
//! a request's target, for the prompt and the gate.
//!
//! Input: the request (its target and its alert's labels), the namespace object read through a
//! [`ClusterReader`], and the optional enrichment policy (package `kubemedic.enrichment` in the
//! policy directory). Output: [`Enrichment`] in `StageState.enrichment`, with one `sources` line per
//! value saying where it came from, an `enrichment` audit event, and the move to `Investigating`.
//!
//! Precedence per value: the namespace label (`kubemedic.io/environment`, `…/priority`,
//! `…/business-unit`, `…/risk-tolerance`) → what the enrichment policy derives → for the
//! environment only, the configured default (`production`, the safe side). A cluster-scoped
//! target (a Node) takes the namespace of the alert (`namespace` label), if it names one.
//! Invariants: an unreachable cluster makes the request wait (`Unavailable{cluster}`); a
//! namespace that does not exist or may not be read gives defaults with that reason recorded,
//! never a failed request; a broken enrichment policy is skipped with its error recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::instrument;

use crate::cluster::{ClusterError, ClusterReader, ErrorKind, obj};
use crate::domain::{
    ASKED_BY_ANNOTATION, AuditDraft, Enrichment, MAX_MEMORY_CHARS, PINNED_CLUSTER, Phase,
    PinnedNote, RemediationRequest, Stage, StageError, StageOutcome, is_cluster_scoped,
};
use crate::policy::{
    Derived, EnrichmentPolicyInput, NamespaceFacts, RegoGate, SignalFacts, non_empty,
    short_revision,
};
use crate::redact::sanitize_text;

/// The enrichment settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrichSettings {
    /// The environment of a target whose namespace says nothing and no policy derives one.
    pub default_environment: String,
}

pub const ENVIRONMENT_LABEL: &str = "kubemedic.io/environment";
pub const PRIORITY_LABEL: &str = "kubemedic.io/priority";
pub const BUSINESS_UNIT_LABEL: &str = "kubemedic.io/business-unit";
pub const RISK_TOLERANCE_LABEL: &str = "kubemedic.io/risk-tolerance";

/// What the namespace labels say, each value possibly unknown.
fn derived_from_labels(labels: &BTreeMap<String, String>) -> Derived {
    let get = |key: &str| labels.get(key).and_then(|v| non_empty(v));
    Derived {
        environment: get(ENVIRONMENT_LABEL),
        priority: get(PRIORITY_LABEL),
        business_unit: get(BUSINESS_UNIT_LABEL),
        risk_tolerance: get(RISK_TOLERANCE_LABEL),
    }
}

/// The Enriching stage.
pub struct EnrichmentStage {
    cluster: Arc<dyn ClusterReader>,
    gate: Arc<RegoGate>,
    default_environment: String,
    /// Where pinned context is kept, when the daemon has a store.
    memory: Option<Arc<dyn crate::store::Chat>>,
}

impl EnrichmentStage {
    pub fn new(
        cluster: Arc<dyn ClusterReader>,
        gate: Arc<RegoGate>,
        default_environment: impl Into<String>,
    ) -> Self {
        Self {
            cluster,
            gate,
            default_environment: default_environment.into(),
            memory: None,
        }
    }

    /// Read the pinned context from `memory` for every request.
    pub fn with_memory(mut self, memory: Arc<dyn crate::store::Chat>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The pinned context that applies to `request`: the cluster's, and the asker's own when
    /// the request was asked in a conversation. Sanitised and bounded like everything a model
    /// reads; a store that cannot answer is noted, never a reason to stop.
    async fn pinned(
        &self,
        request: &RemediationRequest,
        sources: &mut Vec<String>,
    ) -> Vec<PinnedNote> {
        let Some(memory) = &self.memory else {
            return vec![];
        };
        let mut scopes = vec![PINNED_CLUSTER.to_owned()];
        if let Some(asker) = request.signal.annotations.get(ASKED_BY_ANNOTATION) {
            scopes.push(format!("user:{asker}"));
        }
        let mut notes = Vec::new();
        for scope in scopes {
            match memory.memory(&scope).await {
                Ok(Some(n)) => {
                    let mut text = sanitize_text(&n.content);
                    if text.chars().count() > MAX_MEMORY_CHARS {
                        text = text.chars().take(MAX_MEMORY_CHARS).collect();
                    }
                    sources.push(format!("pinned context: {scope}, set by {}", n.updated_by));
                    notes.push(PinnedNote {
                        scope,
                        text,
                        updated_by: n.updated_by,
                    });
                }
                Ok(None) => {}
                Err(e) => sources.push(format!("pinned context of {scope} not read: {e}")),
            }
        }
        notes
    }

    async fn namespace_labels(&self, ns: &str) -> Result<BTreeMap<String, String>, ClusterError> {
        let res = self.cluster.resource("Namespace").await?;
        let o = self.cluster.get(&res, None, ns).await?;
        Ok(obj::labels(&o)
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect())
    }
}

/// Which namespace describes the request's target, and a note when that needs explaining.
fn namespace_of(request: &RemediationRequest) -> (Option<String>, Option<String>) {
    let alert_ns = request
        .signal
        .labels
        .get("namespace")
        .and_then(|n| non_empty(n));
    match &request.target {
        Some(t) if t.namespace.is_some() => (t.namespace.clone(), None),
        Some(t) if is_cluster_scoped(&t.kind) => {
            let note = match &alert_ns {
                Some(ns) => format!(
                    "namespace: {} {} is cluster-scoped; using the alert's namespace {ns}",
                    t.kind, t.name
                ),
                None => format!(
                    "namespace: {} {} is cluster-scoped and the alert names no namespace",
                    t.kind, t.name
                ),
            };
            (alert_ns, Some(note))
        }
        _ => {
            let note = alert_ns
                .is_none()
                .then(|| "namespace: the alert names none".to_owned());
            (alert_ns, note)
        }
    }
}

fn unreadable_note(ns: &str, e: &ClusterError) -> String {
    match e.kind {
        ErrorKind::NotFound => format!("namespace {ns} not found: its labels are unknown"),
        ErrorKind::Forbidden => {
            format!(
                "namespace {ns} may not be read by kubemedic (forbidden): its labels are unknown"
            )
        }
        ErrorKind::Blocked => {
            format!("namespace {ns} is blocked by kubemedic's read policy: its labels are unknown")
        }
        _ => format!("namespace {ns} could not be read ({e}): its labels are unknown"),
    }
}

#[async_trait]
impl Stage for EnrichmentStage {
    fn phase(&self) -> Phase {
        Phase::Enriching
    }

    #[instrument(skip_all, fields(request_id = %request.id, trace_id = %request.trace.trace_id_hex(), phase = "Enriching"))]
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let mut sources = Vec::new();
        let (namespace, note) = namespace_of(request);
        sources.extend(note);
        let mut facts = NamespaceFacts {
            name: namespace.clone(),
            ..Default::default()
        };
        if let Some(ns) = &namespace {
            match self.namespace_labels(ns).await {
                Ok(labels) => {
                    facts.found = true;
                    facts.labels = labels;
                }
                // The cluster itself is down or refuses our credentials: wait, do not guess.
                Err(e) if e.is_unreachable() || e.kind == ErrorKind::Unauthorized => {
                    return Err(StageError::Unavailable {
                        dependency: "cluster".into(),
                        message: format!("reading namespace {ns}: {e}"),
                    });
                }
                Err(e) => sources.push(unreadable_note(ns, &e)),
            }
        }
        let from_labels = derived_from_labels(&facts.labels);
        let ns_name = namespace.as_deref().unwrap_or("-");

        let policy_input = EnrichmentPolicyInput {
            namespace: facts.clone(),
            target: request.target.clone(),
            signal: SignalFacts {
                name: request.signal.name.clone(),
                severity: request.signal.severity.clone(),
                mode: request.signal.mode.as_str().to_owned(),
                labels: request.signal.labels.clone(),
            },
            labels: from_labels.clone(),
        };
        let snapshot = self.gate.snapshot();
        let (revision, derived) = if snapshot.has_enrichment() || snapshot.error().is_some() {
            let (revision, result) = self.gate.enrich(&policy_input).await;
            match result {
                Ok(d) => (revision, d.unwrap_or_default()),
                Err(e) => {
                    sources.push(format!("enrichment policy not applied: {e}"));
                    (revision, Derived::default())
                }
            }
        } else {
            (snapshot.revision().map(str::to_owned), Derived::default())
        };
        let policy_name = format!("enrichment policy {}", short_revision(revision.as_deref()));

        let mut pick = |what: &str, label: &str, l: &Option<String>, p: &Option<String>| {
            if let Some(v) = l {
                sources.push(format!("{what}: namespace label {label} on {ns_name}"));
                Some(v.clone())
            } else if let Some(v) = p {
                sources.push(format!("{what}: {policy_name}"));
                Some(v.clone())
            } else {
                None
            }
        };
        let environment = pick(
            "environment",
            ENVIRONMENT_LABEL,
            &from_labels.environment,
            &derived.environment,
        );
        let priority = pick(
            "priority",
            PRIORITY_LABEL,
            &from_labels.priority,
            &derived.priority,
        );
        let business_unit = pick(
            "business_unit",
            BUSINESS_UNIT_LABEL,
            &from_labels.business_unit,
            &derived.business_unit,
        );
        let risk_tolerance = pick(
            "risk_tolerance",
            RISK_TOLERANCE_LABEL,
            &from_labels.risk_tolerance,
            &derived.risk_tolerance,
        );
        let environment = environment.unwrap_or_else(|| {
            sources.push(format!(
                "environment: default ({}) — no label and no policy value",
                self.default_environment
            ));
            self.default_environment.clone()
        });

        let pinned = self.pinned(request, &mut sources).await;
        let enrichment = Enrichment {
            environment,
            priority,
            business_unit,
            risk_tolerance,
            sources,
            pinned,
        };
        let mut message = format!("environment {}", enrichment.environment);
        for (name, value) in [
            ("priority", &enrichment.priority),
            ("business unit", &enrichment.business_unit),
            ("risk tolerance", &enrichment.risk_tolerance),
        ] {
            if let Some(v) = value {
                message.push_str(&format!(", {name} {v}"));
            }
        }
        for note in &enrichment.pinned {
            message.push_str(&format!("; pinned context ({}): {}", note.scope, note.text));
        }
        let event = AuditDraft::new(crate::domain::audit::ENRICHMENT, "enrichment", message)
            .with_payload(serde_json::json!({
                "enrichment": enrichment,
                "namespace": facts,
                "policy_revision": revision,
                "policy_derived": derived,
            }));
        let mut state = request.state.clone();
        state.enrichment = Some(enrichment);
        Ok(StageOutcome {
            next: Phase::Investigating,
            reason: None,
            state,
            events: vec![event],
            not_before: None,
        })
    }
}
