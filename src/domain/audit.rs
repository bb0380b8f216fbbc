//! Audit events: what happened to a request, by whom, written in the same transaction as the
//! change they describe.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::phase::Phase;

/// An audit event before the store gives it an id and a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditDraft {
    /// What happened, machine-readable: `received`, `occurrence`, `transition`, `waiting`, …
    pub kind: String,
    /// Who did it: `alertmanager`, `worker/<id>`, `user:<name>`, …
    pub actor: String,
    /// One line for humans.
    pub message: String,
    #[serde(default)]
    pub payload: serde_json::Value,
}

impl AuditDraft {
    pub fn new(kind: &str, actor: &str, message: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            actor: actor.to_owned(),
            message: message.into(),
            payload: serde_json::Value::Null,
        }
    }

    pub fn with_payload(mut self, payload: serde_json::Value) -> Self {
        self.payload = payload;
        self
    }

    /// The event with its request's trace id in the payload (`trace_id`), so the trail links
    /// to the trace. In the payload, the id is hashed with the event like the rest of it:
    /// events written before trace ids were kept verify as they were.
    pub fn with_trace(mut self, trace: &super::trace::TraceContext) -> Self {
        let id = serde_json::Value::String(trace.trace_id_hex());
        match &mut self.payload {
            serde_json::Value::Object(map) => {
                map.insert("trace_id".into(), id);
            }
            serde_json::Value::Null => self.payload = serde_json::json!({ "trace_id": id }),
            _ => {}
        }
        self
    }
}

/// The audit event every phase change carries; the store writes it in the same transaction
/// as the change, so no transition can go unrecorded.
pub fn transition_event(from: Phase, to: Phase, reason: Option<&str>, actor: &str) -> AuditDraft {
    let message = match reason {
        Some(r) => format!("{from} -> {to}: {r}"),
        None => format!("{from} -> {to}"),
    };
    AuditDraft::new("transition", actor, message).with_payload(serde_json::json!({
        "from": from,
        "to": to,
        "reason": reason,
    }))
}

/// An audit event as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub id: i64,
    pub request_id: Option<uuid::Uuid>,
    pub at: DateTime<Utc>,
    pub phase: Option<Phase>,
    pub kind: String,
    pub actor: String,
    pub message: String,
    pub payload: serde_json::Value,
}
