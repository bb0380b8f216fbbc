//! `GET /api/v1/openapi.json`: the API described from the handlers' own annotations (utoipa),
//! so the document cannot drift from the routes it names.

use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

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

/// The audit chain checked.
#[derive(Serialize, ToSchema)]
pub struct ChainCheck {
    pub intact: bool,
    /// Events checked, events written before the chain existed, the head hash, and the first
    /// broken link (event id, request, reason).
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
}

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`kubemedic apikey create`) or the configured --api-token",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                super::auth::SESSION_COOKIE,
                "The dashboard's session (from /login); state-changing calls also need x-csrf-token",
            ))),
        );
        components.add_security_scheme(
            "webhook",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The webhook token (or basic auth) Alertmanager sends"))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kubemedic",
        description = "Alertmanager alerts into safe, audited Kubernetes remediations. Roles: viewer reads, approver also decides approvals, admin also checks the whole audit chain and sends native signals. Every error has one shape (ErrorBody)."
    ),
    paths(
        super::api::list_requests,
        super::api::get_request,
        super::events::stream,
        super::api::list_signals,
        super::api::target_history,
        super::api::summary,
        super::api::catalog,
        super::api::policy,
        super::api::verify_audit,
        super::approvals::list,
        super::approvals::get,
        super::approvals::decide,
        super::ingest::alertmanager,
        super::ingest::native,
    ),
    components(schemas(
        ErrorBody,
        RequestList,
        RequestItem,
        RequestDetail,
        RequestState,
        Approval,
        ApprovalList,
        ApprovalDecision,
        Proof,
        Obligation,
        ObligationStatus,
        ProofVerdict,
        ProofPoint,
        Proposer,
        DryRunChange,
        ObjectChange,
        Target,
        DecisionRequest,
        ChainCheck
    )),
    modifiers(&Security)
)]
pub struct ApiDoc;

/// `GET /api/v1/openapi.json` (public: it describes, it holds nothing).
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    Json(doc)
}

#[cfg(test)]
mod tests {
    //! The schemas above describe domain types the API serializes; these tests keep the two
    //! from drifting apart field by field.

    use std::collections::BTreeSet;

    use chrono::TimeZone;
    use serde_json::{Value, json};

    use super::ApiDoc;
    use crate::domain::{
        self, ApprovalRequest, DryRunChange, ObjectChange, ObligationStatus, Proof, ProofPoint,
        ProofVerdict, Proposer, StageState,
    };
    use utoipa::OpenApi;

    fn schemas() -> Value {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null);
        doc["components"]["schemas"].clone()
    }

    fn properties(schema: &Value) -> BTreeSet<String> {
        schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn full_proof() -> Proof {
        let at = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 0).unwrap();
        let mut parameters = serde_json::Map::new();
        parameters.insert("TO_REVISION".into(), json!(1));
        Proof {
            action_type: "RollbackDeployment".into(),
            workflow_id: "rollback-deployment".into(),
            parameters,
            proposer: Proposer::Offline,
            point: ProofPoint::Selection,
            verdict: ProofVerdict::Proven,
            obligations: vec![domain::Obligation {
                id: "rollback.revision-named".into(),
                statement: "The revision to return to is named".into(),
                status: ObligationStatus::Holds,
                evidence: vec!["revision 1 (shop/checkout:1.4.1) is kept".into()],
            }],
            target: domain::Target::new("Deployment", "checkout", Some("shop".into())),
            spec_hash: Some("sha256:aa".into()),
            drift_hash: Some("sha256:bb".into()),
            change: Some(DryRunChange {
                objects: vec![ObjectChange {
                    object: "Deployment shop/checkout".into(),
                    changes: vec!["image of container checkout 1.4.2 → 1.4.1".into()],
                }],
                refused: Some("denied".into()),
                note: Some("a note".into()),
            }),
            checked_at: at,
        }
    }

    #[test]
    fn the_proof_schemas_name_every_field_a_proof_has() {
        let s = schemas();
        let proof = serde_json::to_value(full_proof()).unwrap_or(Value::Null);
        assert_eq!(properties(&s["Proof"]), keys(&proof));
        assert_eq!(properties(&s["Obligation"]), keys(&proof["obligations"][0]));
        assert_eq!(properties(&s["DryRunChange"]), keys(&proof["change"]));
        assert_eq!(
            properties(&s["ObjectChange"]),
            keys(&proof["change"]["objects"][0])
        );
        assert_eq!(properties(&s["Target"]), keys(&proof["target"]));
        // The enums' values are the ones serialized.
        let values = |name: &str| s[name]["enum"].clone();
        assert_eq!(
            values("ObligationStatus"),
            json!(["holds", "fails", "unknown"])
        );
        assert_eq!(
            values("ProofVerdict"),
            json!(["proven", "refuted", "unverified"])
        );
        assert_eq!(values("ProofPoint"), json!(["selection", "before_write"]));
        assert_eq!(values("Proposer"), json!(["offline", "model", "approver"]));
        for (status, word) in [
            (ObligationStatus::Holds, "holds"),
            (ObligationStatus::Fails, "fails"),
            (ObligationStatus::Unknown, "unknown"),
        ] {
            assert_eq!(json!(status), json!(word));
        }
        assert_eq!(json!(ProofPoint::BeforeWrite), json!("before_write"));
    }

    #[test]
    fn the_approval_schema_names_every_field_the_api_sends() {
        let at = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 0).unwrap();
        let a = ApprovalRequest {
            id: uuid::Uuid::nil(),
            request_id: uuid::Uuid::nil(),
            created_at: at,
            expires_at: at,
            signal_name: "KubePodCrashLooping".into(),
            target: domain::Target::new("Deployment", "checkout", Some("shop".into())),
            environment: Some("production".into()),
            summary: String::new(),
            evidence: vec![],
            workflow_id: String::new(),
            workflow_version: String::new(),
            action_type: String::new(),
            parameters: serde_json::Map::new(),
            rationale: String::new(),
            alternatives: vec![],
            confidence: 0.5,
            risk_score: 85,
            risk_reason: String::new(),
            required_because: vec![],
            policy_revision: Some("sha256:cc".into()),
            approvers: vec![],
            slack_approvers: vec![],
            proof: Some(full_proof()),
            decision: Some(domain::ApprovalDecision {
                decision: domain::Decision::Approved,
                decided_by: "alice@example.com".into(),
                decided_via: domain::Channel::Email,
                decided_at: at,
                message: Some("go".into()),
                alternative: Some("restart-deployment".into()),
            }),
            note: Some("Not executed: target_changed: …".into()),
        };
        let mut sent = serde_json::to_value(&a).unwrap_or(Value::Null);
        // What `GET /api/v1/approvals/{id}` adds.
        sent["status"] = json!("approved");
        sent["notifications"] = json!([]);
        let s = schemas();
        assert_eq!(properties(&s["Approval"]), keys(&sent));
        assert_eq!(properties(&s["ApprovalDecision"]), keys(&sent["decision"]));
        assert_eq!(
            s["Approval"]["properties"]["proof"]["oneOf"][0]["$ref"], "#/components/schemas/Proof",
            "{}",
            s["Approval"]
        );
    }

    #[test]
    fn the_request_state_schema_names_the_proofs() {
        let state = StageState {
            phase_entered_at: Some(chrono::Utc::now()),
            proof: Some(full_proof()),
            proof_before_write: Some(Proof {
                point: ProofPoint::BeforeWrite,
                change: None,
                ..full_proof()
            }),
            ..StageState::default()
        };
        let sent = serde_json::to_value(&state).unwrap_or(Value::Null);
        let described = properties(&schemas()["RequestState"]);
        assert!(
            keys(&sent).is_subset(&described),
            "{:?} not all in {described:?}",
            keys(&sent)
        );
        for stage in [
            "waiting",
            "enrichment",
            "analysis",
            "selection",
            "proof",
            "gate",
            "approval",
            "proof_before_write",
            "execution",
            "assessment",
        ] {
            assert!(described.contains(stage), "{stage}");
        }
    }
}
