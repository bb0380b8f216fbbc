//! The shapes of the API's bodies, as its description (`openapi.rs`) names them and the
//! handlers declare them. Some mirror domain types the API serializes (the tests in
//! `openapi.rs` keep them in step); the handlers never construct these, they only name them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error, in one shape.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong, for a human.
    pub error: String,
    /// The query parameter, field or header at fault, when there is one.
    pub field: Option<String>,
}

/// A page of requests.
#[derive(Serialize, ToSchema)]
pub struct RequestList {
    pub items: Vec<RequestItem>,
    /// Pass as `before` for the next page; absent on the last page.
    pub next: Option<String>,
}

/// A request as lists show it.
#[derive(Serialize, ToSchema)]
pub struct RequestItem {
    pub id: uuid::Uuid,
    /// Its phase (`Received` … `Completed`, `Failed`, …).
    pub phase: String,
    pub reason: Option<String>,
    /// `{kind, name, namespace}` of the alert's target.
    #[schema(value_type = Option<Object>)]
    pub target: Option<serde_json::Value>,
    pub target_fingerprint: String,
    pub signal_name: String,
    pub severity: Option<String>,
    /// `reactive` or `proactive`.
    pub signal_mode: String,
    pub occurrence_count: i64,
    pub first_seen: chrono::DateTime<chrono::Utc>,
    pub last_seen: chrono::DateTime<chrono::Utc>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// What the request waits for (a cluster, a dependency), when it waits.
    #[schema(value_type = Option<Object>)]
    pub waiting: Option<serde_json::Value>,
    /// The request's trace id (32 hex digits): search the trace backend for it.
    pub trace_id: String,
    /// The W3C `traceparent` its spans continue.
    pub traceparent: String,
}

/// A request with everything known about it (`GET /api/v1/requests/{id}`).
#[derive(Serialize, ToSchema)]
pub struct RequestDetail {
    #[serde(flatten)]
    pub request: RequestItem,
    /// The alert (or prediction) as received.
    #[schema(value_type = Object)]
    pub signal: serde_json::Value,
    /// What each stage found and decided.
    pub state: RequestState,
    #[schema(value_type = Vec<Object>)]
    pub signals: Vec<serde_json::Value>,
    /// The audit trail, oldest first (`kind`, `actor`, `message`, `payload`, hash chain).
    #[schema(value_type = Vec<Object>)]
    pub timeline: Vec<serde_json::Value>,
}

/// The stage results of a request; a stage not reached is absent.
#[derive(Serialize, ToSchema)]
pub struct RequestState {
    pub phase_entered_at: Option<chrono::DateTime<chrono::Utc>>,
    /// What the request waits for (a cluster, a dependency).
    #[schema(value_type = Option<Object>)]
    pub waiting: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    pub enrichment: Option<serde_json::Value>,
    /// The investigation: root cause, root owner, plan, tool calls, model usage.
    #[schema(value_type = Option<Object>)]
    pub analysis: Option<serde_json::Value>,
    /// The workflow selected, its alternatives, and where the request was routed.
    #[schema(value_type = Option<Object>)]
    pub selection: Option<serde_json::Value>,
    /// What was proven about the selected action at selection (or about the approver's
    /// alternative): the approval is bound to it.
    pub proof: Option<Proof>,
    /// The policy's decision.
    #[schema(value_type = Option<Object>)]
    pub gate: Option<serde_json::Value>,
    /// The human decision, when the policy required one.
    pub approval: Option<ApprovalDecision>,
    /// The obligations checked again right before the first write (no dry run repeated).
    pub proof_before_write: Option<Proof>,
    #[schema(value_type = Option<Object>)]
    pub execution: Option<serde_json::Value>,
    /// The verification of the outcome.
    #[schema(value_type = Option<Object>)]
    pub assessment: Option<serde_json::Value>,
}

/// The object a proof is about, as `{kind, name, namespace}`.
#[derive(Serialize, ToSchema)]
pub struct Target {
    pub kind: String,
    pub name: String,
    /// Absent for cluster-scoped kinds.
    pub namespace: Option<String>,
}

/// Who proposed the action proven.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Proposer {
    Offline,
    Model,
    Approver,
    Reviewer,
}

/// When the proof was made.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProofPoint {
    Selection,
    BeforeWrite,
}

/// `proven`: every obligation holds; `refuted`: one does not (or could not be checked);
/// `unverified`: a custom action type kubemedic knows no obligations for (a human decides).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProofVerdict {
    Proven,
    Refuted,
    Unverified,
}

/// `unknown`: the cluster could not be read for it (counts as failing).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObligationStatus {
    Holds,
    Fails,
    Unknown,
}

/// One fact that must hold for the action, as checked against the cluster.
#[derive(Serialize, ToSchema)]
pub struct Obligation {
    /// `<action area>.<fact>`, e.g. `rollback.target-revision-healthy`.
    pub id: String,
    /// What must hold, in a sentence.
    pub statement: String,
    pub status: ObligationStatus,
    /// What the cluster showed, one fact a line.
    pub evidence: Vec<String>,
}

/// One object the dry run would change, and how, in words.
#[derive(Serialize, ToSchema)]
pub struct ObjectChange {
    /// `Deployment shop/checkout`
    pub object: String,
    /// `image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1`, …
    pub changes: Vec<String>,
}

/// What the API server said the action would change (a server-side dry run, `dryRun=All`).
#[derive(Serialize, ToSchema)]
pub struct DryRunChange {
    pub objects: Vec<ObjectChange>,
    /// A step the API server refused in the dry run, with its message.
    pub refused: Option<String>,
    /// Where no dry run was possible (a proposal, a Job): what would happen.
    pub note: Option<String>,
}

/// What was proven about one proposal before anyone may approve or run it.
#[derive(Serialize, ToSchema)]
pub struct Proof {
    pub action_type: String,
    pub workflow_id: String,
    /// The parameters proven.
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    pub proposer: Proposer,
    pub point: ProofPoint,
    pub verdict: ProofVerdict,
    pub obligations: Vec<Obligation>,
    /// The target as proven (the verified root owner).
    pub target: Target,
    /// The target's spec hash when proven: the approval is bound to it, and nothing is
    /// written if the target differs right before the first write.
    pub spec_hash: Option<String>,
    /// The same without `replicas` (an autoscaled target's replicas move on their own).
    pub drift_hash: Option<String>,
    /// The dry run's change (at selection only).
    pub change: Option<DryRunChange>,
    pub checked_at: chrono::DateTime<chrono::Utc>,
}

/// An approval's decision.
#[derive(Serialize, ToSchema)]
pub struct ApprovalDecision {
    /// `approved`, `rejected` or `expired`.
    pub decision: String,
    /// The identity kubemedic authenticated.
    pub decided_by: String,
    /// `email`, `slack`, `dashboard`, `api` or `system`.
    pub decided_via: String,
    pub decided_at: chrono::DateTime<chrono::Utc>,
    pub message: Option<String>,
    /// The alternative workflow chosen instead.
    pub alternative: Option<String>,
}

/// What a human is asked to approve, and the decision.
#[derive(Serialize, ToSchema)]
pub struct Approval {
    pub id: uuid::Uuid,
    pub request_id: uuid::Uuid,
    /// `pending`, `approved`, `rejected` or `expired`.
    pub status: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub expires_at: chrono::DateTime<chrono::Utc>,
    pub signal_name: String,
    /// The verified root owner the workflow would change.
    pub target: Target,
    pub environment: Option<String>,
    /// The investigation's root cause summary.
    pub summary: String,
    pub evidence: Vec<String>,
    pub workflow_id: String,
    pub workflow_version: String,
    pub action_type: String,
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    pub rationale: String,
    /// `{workflow_id, rationale}` of each alternative an approver may pick instead.
    #[schema(value_type = Vec<Object>)]
    pub alternatives: Vec<serde_json::Value>,
    pub confidence: f64,
    pub risk_score: i64,
    pub risk_reason: String,
    pub required_because: Vec<String>,
    pub policy_revision: Option<String>,
    pub approvers: Vec<String>,
    pub slack_approvers: Vec<String>,
    /// What was checked against the cluster before asking, the change the dry run describes,
    /// and the spec the approval is bound to.
    pub proof: Option<Proof>,
    pub decision: Option<ApprovalDecision>,
    /// What the approvers were told after the decision, e.g. `Not executed: target_changed: …`.
    pub note: Option<String>,
    /// Its mails and Slack messages (`GET /api/v1/approvals/{id}` only).
    #[schema(value_type = Option<Vec<Object>>)]
    pub notifications: Option<Vec<serde_json::Value>>,
}

/// A page of approvals.
#[derive(Serialize, ToSchema)]
pub struct ApprovalList {
    pub total: i64,
    pub items: Vec<Approval>,
}

/// An approver's decision.
#[derive(Deserialize, ToSchema)]
pub struct DecisionRequest {
    /// `approve` or `deny`.
    pub decision: String,
    /// A workflow id among the selection's alternatives, to approve instead.
    pub alternative: Option<String>,
    pub message: Option<String>,
}

/// A reviewer's request on a request kubemedic left to a human.
#[derive(Deserialize, ToSchema)]
pub struct RemediateRequest {
    /// A workflow of the catalog that fits the request's verified target.
    pub workflow_id: String,
    /// Its parameters (the target's are bound by kubemedic).
    #[schema(value_type = Object)]
    pub parameters: Option<serde_json::Map<String, serde_json::Value>>,
    /// Why, for the trail and the approver (sanitised, clipped to 500 characters).
    pub message: Option<String>,
}

/// The audit chain checked.
#[derive(Serialize, ToSchema)]
pub struct ChainCheck {
    pub intact: bool,
    /// Events checked, events written before the chain existed, the head hash, and the first
    /// broken link (event id, request, reason).
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
}
