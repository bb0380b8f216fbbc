//! Conversations with kubemedic (`POST /v1/chat/completions`): what the store keeps of them.
//!
//! A conversation belongs to one user (the API key's name). Each message a user sends is a
//! [`ChatTurn`]: the question as asked, what kubemedic made of it, and — when it became one —
//! the remediation request it follows. The turn's live events are read from that request's
//! audit trail, so the store keeps no second copy of an investigation; the turn keeps only what
//! happened before the request existed (its preamble) and, once it is done, the answer.
//!
//! Pinned context ([`MemoryNote`]) is text an admin writes for every investigation to read:
//! cluster-wide or for one user.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::target::Target;

/// A conversation: its id is also the `session_id` of its event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: Uuid,
    /// Who it belongs to: the API key's (or session's) subject.
    pub owner: String,
    /// The first question, shortened.
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a user's message was taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// A question about a target: it follows a remediation request to its first decision.
    Question,
    /// "anything wrong in namespace X": the namespace's unhealthy objects, listed.
    Scan,
    /// A decision on a pending approval: it follows the request to its end.
    Decision,
    /// Nothing could be resolved: the answer asks back.
    Clarify,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Question => "question",
            TurnKind::Scan => "scan",
            TurnKind::Decision => "decision",
            TurnKind::Clarify => "clarify",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "question" => Some(TurnKind::Question),
            "scan" => Some(TurnKind::Scan),
            "decision" => Some(TurnKind::Decision),
            "clarify" => Some(TurnKind::Clarify),
            _ => None,
        }
    }
}

/// One line of what happened before a turn's request existed (or instead of one): how the
/// question was read, the plan, a clarification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatLine {
    /// A typed event name: `status`, `plan`, `token`, `error`.
    pub kind: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

impl ChatLine {
    pub fn new(kind: &str, text: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            text: text.into(),
            data: serde_json::Value::Null,
        }
    }
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = data;
        self
    }
}

/// A turn before the store numbers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTurn {
    pub conversation_id: Uuid,
    pub at: DateTime<Utc>,
    pub asked_by: String,
    pub kind: TurnKind,
    /// The user's message as sent (after the sanitiser).
    pub question: String,
    /// What the question was resolved to, when it named something.
    pub target: Option<Target>,
    /// The remediation request the turn follows.
    pub request_id: Option<Uuid>,
    /// The request's trail is followed after this audit event (a decision turn starts where
    /// the question turn stopped).
    pub after_audit: i64,
    /// The approval a decision turn decided.
    pub action_id: Option<Uuid>,
    pub preamble: Vec<ChatLine>,
    /// Set at once when the turn needs nothing more (a clarification, a scan).
    pub answer: Option<String>,
}

/// A stored turn: [`NewTurn`] with its id (increasing within the store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatTurn {
    pub id: i64,
    #[serde(flatten)]
    pub turn: NewTurn,
}

/// Pinned context for investigations: `scope` is `cluster` or `user:<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryNote {
    pub scope: String,
    pub content: String,
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

/// The longest pinned context one scope may hold, in characters.
pub const MAX_MEMORY_CHARS: usize = 4_000;
/// The scope of the cluster-wide pinned context.
pub const PINNED_CLUSTER: &str = "cluster";
/// How the memory names ClusterContext objects as the writer of the cluster-wide context
/// (`ClusterContext/<namespace>/<names>`): while they exist, they own it.
pub const CLUSTER_CONTEXT_WRITER: &str = "ClusterContext/";
/// The annotation a question's request carries naming who asked (their pinned context
/// applies to it too).
pub const ASKED_BY_ANNOTATION: &str = "kubemedic.io/asked-by";
