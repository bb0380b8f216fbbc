//! A human's approval of one remediation (DESIGN §3.9), after Kubernaut's
//! RemediationApprovalRequest: everything an approver needs to decide, and the decision.
//!
//! Invariants: one approval per remediation request; the first decision wins (the store decides
//! atomically, later ones are refused and audited); `decided_by` is the identity kubemedic
//! authenticated (a signed link's recipient, a Slack user it verified, the API caller) — never
//! a value the client sent.

use super::action::ActionType;
use std::fmt;

/// Seconds a request waits for a human's decision before it expires, unless configured: the
/// approval stage's expiry and the pipeline's AwaitingApproval limit both start from it.
pub const DEFAULT_APPROVAL_TIMEOUT_SECONDS: u64 = 900;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{AlternativeWorkflow, Proof, Target};

/// What a human is asked to approve, as the approval request shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub id: Uuid,
    /// The remediation request this approval belongs to.
    pub request_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The alert (or prediction) that started it.
    pub signal_name: String,
    /// The verified root owner the workflow would change.
    pub target: Target,
    pub environment: Option<String>,
    /// The investigation's root cause summary.
    pub summary: String,
    /// The evidence it rests on (contributing factors).
    pub evidence: Vec<String>,
    pub workflow_id: String,
    pub workflow_version: String,
    pub action_type: ActionType,
    pub parameters: Map<String, Value>,
    pub rationale: String,
    /// Other workflows the selection considered; an approver may pick one instead.
    pub alternatives: Vec<AlternativeWorkflow>,
    /// The selection's confidence, 0..=1.
    pub confidence: f64,
    /// The highest risk factor's score (0..=100) and reason.
    pub risk_score: i64,
    pub risk_reason: String,
    /// Why approval is required: every risk factor the policy matched, highest first.
    pub required_because: Vec<String>,
    /// `sha256:…` of the policy that required it.
    pub policy_revision: Option<String>,
    /// Who may decide: e-mail addresses, Slack user ids.
    pub approvers: Vec<String>,
    #[serde(default)]
    pub slack_approvers: Vec<String>,
    /// What was checked against the cluster before asking (the obligations with their
    /// evidence), the change the API server's dry run described, and the spec the approval is
    /// bound to: executed only while the target is still that spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// What happened after the decision that the approvers are told, e.g. why an approved
    /// change was not executed (the target changed since it was approved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ApprovalRequest {
    pub fn status(&self) -> ApprovalStatus {
        match &self.decision {
            None => ApprovalStatus::Pending,
            Some(d) => match d.decision {
                Decision::Approved => ApprovalStatus::Approved,
                Decision::Rejected => ApprovalStatus::Rejected,
                Decision::Expired => ApprovalStatus::Expired,
            },
        }
    }
}

/// A decision, as it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    pub decision: Decision,
    pub decided_by: String,
    pub decided_via: Channel,
    pub decided_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The approver chose this alternative instead of the selected workflow (validated against
    /// the catalog before it was accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternative: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approved,
    Rejected,
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
            Decision::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "approved" => Some(Decision::Approved),
            "rejected" => Some(Decision::Rejected),
            "expired" => Some(Decision::Expired),
            _ => None,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Expired,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ApprovalStatus::Pending),
            "approved" => Some(ApprovalStatus::Approved),
            "rejected" => Some(ApprovalStatus::Rejected),
            "expired" => Some(ApprovalStatus::Expired),
            _ => None,
        }
    }
}

/// How a decision (or a notification) travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Email,
    Slack,
    Dashboard,
    Api,
    /// An answer in a conversation (`POST /v1/chat/completions`, `kubemedic ask`).
    Chat,
    /// A tool call of an MCP client (`/mcp`, `kubemedic mcp`).
    Mcp,
    /// kubemedic itself (expiry).
    System,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Slack => "slack",
            Channel::Dashboard => "dashboard",
            Channel::Api => "api",
            Channel::Chat => "chat",
            Channel::Mcp => "mcp",
            Channel::System => "system",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "email" => Some(Channel::Email),
            "slack" => Some(Channel::Slack),
            "dashboard" => Some(Channel::Dashboard),
            "api" => Some(Channel::Api),
            "chat" => Some(Channel::Chat),
            "mcp" => Some(Channel::Mcp),
            "system" => Some(Channel::System),
            _ => None,
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The store's answer to a decision: the first one wins.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This decision was recorded.
    Decided(ApprovalRequest),
    /// Somebody decided first; theirs stands (this one was audited as refused).
    AlreadyDecided(ApprovalRequest),
    NotFound,
}

/// One message offered to one recipient on one channel, and its delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub id: Uuid,
    pub approval_id: Uuid,
    pub channel: Channel,
    /// An e-mail address, a Slack channel, or `webhook`.
    pub recipient: String,
    /// `offer`: the approval request with its buttons or links; `outcome`: the update that
    /// replaces them once the approval is decided.
    pub kind: NotificationKind,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// What the channel returned to find the message again (Slack `channel` + `ts`).
    pub external_ref: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotificationKind {
    Offer,
    Outcome,
    /// After an approval: the change was not executed (the target changed, its obligations
    /// no longer hold); sent to every recipient the offer reached.
    #[serde(rename = "not_executed")]
    NotExecuted,
    /// After an execution: it made its target worse (undone or not); sent to every recipient
    /// the offer reached.
    #[serde(rename = "made_worse")]
    MadeWorse,
}

impl NotificationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationKind::Offer => "offer",
            NotificationKind::Outcome => "outcome",
            NotificationKind::NotExecuted => "not_executed",
            NotificationKind::MadeWorse => "made_worse",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "offer" => Some(NotificationKind::Offer),
            "outcome" => Some(NotificationKind::Outcome),
            "not_executed" => Some(NotificationKind::NotExecuted),
            "made_worse" => Some(NotificationKind::MadeWorse),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet; `next_attempt_at` says when to try.
    Pending,
    Delivered,
    /// Every attempt failed.
    Failed,
    /// No longer worth sending (the approval was decided before the offer went out).
    Cancelled,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(DeliveryStatus::Pending),
            "delivered" => Some(DeliveryStatus::Delivered),
            "failed" => Some(DeliveryStatus::Failed),
            "cancelled" => Some(DeliveryStatus::Cancelled),
            _ => None,
        }
    }
}

/// What a notifier needs to render one message: the approval, and per recipient the signed
/// links (e-mail) or the page to open (Slack without interactivity).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalMessage {
    pub approval: ApprovalRequest,
    pub recipient: String,
    /// The confirmation pages behind the Approve / Deny links for this recipient.
    pub approve_url: Option<String>,
    pub deny_url: Option<String>,
    /// The approval's page (for channels whose buttons cannot carry a signed link).
    pub view_url: Option<String>,
}
