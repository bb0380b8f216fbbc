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
    components(schemas(ErrorBody, RequestList, RequestItem, DecisionRequest, ChainCheck)),
    modifiers(&Security)
)]
pub struct ApiDoc;

/// `GET /api/v1/openapi.json` (public: it describes, it holds nothing).
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    Json(doc)
}
