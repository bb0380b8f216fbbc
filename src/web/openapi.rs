//! `GET /api/v1/openapi.json`: the API described from the handlers' own annotations (utoipa),
//! so the document cannot drift from the routes it names.

use axum::Json;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::schema::{
    Approval, ApprovalDecision, ApprovalList, ChainCheck, DecisionRequest, DryRunChange, ErrorBody,
    ObjectChange, Obligation, ObligationStatus, Proof, ProofPoint, ProofVerdict, Proposer,
    RemediateRequest, RequestDetail, RequestItem, RequestList, RequestState, Target,
};

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
        super::review::remediate,
        super::ingest::alertmanager,
        super::ingest::native,
        super::chat::completions,
        super::chat::stream,
        super::chat::models,
        super::chat::hitl_resume,
        super::chat::conversations,
        super::memory::list,
        super::memory::put,
        super::memory::delete,
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
        RemediateRequest,
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
            obligations: vec![
                domain::obligations::rollback::REVISION_NAMED
                    .holds(vec!["revision 1 (shop/checkout:1.4.1) is kept".into()]),
            ],
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
        assert_eq!(
            values("Proposer"),
            json!(["offline", "model", "approver", "reviewer"])
        );
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
            action_type: "".into(),
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
