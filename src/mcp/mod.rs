//! The Model Context Protocol server (docs/adr/0030-mcp-server-with-rmcp.md): what an assistant
//! a person already uses may read of kubemedic, and what an approver may decide from there.
//!
//! Inputs: a [`Caller`] (who, with which role) for every tool call — fixed for stdio, taken from
//! the HTTP request's extensions (put there by `src/web/mcp.rs` after it checked the bearer key)
//! for streamable HTTP. Outputs: JSON text content, or an MCP error whose message names what was
//! wrong (the argument, the role that is missing, the approval that is gone).
//!
//! Invariants: a caller without a role reads nothing; only an approver decides, and the decision
//! goes through [`Approvals::decide_api`] like the API's, audited with the caller's name and the
//! channel `mcp`. Nothing here knows HTTP servers: the transports live in `web` and `cli`.

use std::sync::Arc;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, InitializeResult, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::approval::{Approvals, Confirmation};
use crate::domain::{ApprovalRequest, ApprovalStatus, Channel, Phase, RemediationRequest, Role};
use crate::store::{RequestFilter, Store};

/// The most items one list returns.
pub const MAX_LIMIT: i64 = 200;
const DEFAULT_LIMIT: i64 = 50;

/// Who calls a tool, as the audit trail names them (`key:<name>`), and their role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub subject: String,
    pub role: Role,
}

/// The MCP server: one per session (HTTP) or per process (stdio); cheap to clone.
#[derive(Clone)]
pub struct KubemedicMcp {
    store: Arc<dyn Store>,
    approvals: Option<Arc<Approvals>>,
    /// The caller over stdio. Over HTTP each request carries its own in its extensions.
    fixed: Option<Caller>,
}

impl KubemedicMcp {
    pub fn new(
        store: Arc<dyn Store>,
        approvals: Option<Arc<Approvals>>,
        fixed: Option<Caller>,
    ) -> Self {
        Self {
            store,
            approvals,
            fixed,
        }
    }

    /// The caller of this tool call, if their role includes `needed`.
    fn need(&self, ctx: &RequestContext<RoleServer>, needed: Role) -> Result<Caller, ErrorData> {
        let from_http = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned();
        match from_http.or_else(|| self.fixed.clone()) {
            None => Err(ErrorData::invalid_request(
                format!("no API key: this tool needs the {needed} role (give an API key)"),
                None,
            )),
            Some(c) if c.role.allows(needed) => Ok(c),
            Some(c) => Err(ErrorData::invalid_request(
                format!(
                    "{} has role {}; this tool needs {needed}",
                    c.subject, c.role
                ),
                None,
            )),
        }
    }
}

/// `list_requests`' arguments.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequests {
    /// Only requests in this phase (received, investigating, awaiting_approval, executing,
    /// completed, failed, …).
    #[serde(default)]
    pub phase: Option<String>,
    /// Only requests whose target is in this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only requests whose target has this name.
    #[serde(default)]
    pub target: Option<String>,
    /// Only requests started by this alert.
    #[serde(default)]
    pub alert: Option<String>,
    /// How many, newest first (1–200, default 50).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// An id argument.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ById {
    /// The request's id (a UUID, as `list_requests` gives it).
    pub id: String,
}

/// `list_pending_approvals`' arguments.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListPending {
    /// How many, oldest first (1–200, default 50).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// `decide_approval`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decide {
    /// The approval's id (a UUID, as `list_pending_approvals` gives it).
    pub approval_id: String,
    /// `approve` or `deny`.
    pub decision: String,
    /// Approve one of the approval's alternatives (its workflow id) instead of the proposed
    /// workflow; only with `approve`.
    #[serde(default)]
    pub alternative: Option<String>,
    /// Why, kept with the decision in the audit trail.
    #[serde(default)]
    pub message: Option<String>,
}

fn uuid_arg(name: &str, value: &str) -> Result<Uuid, ErrorData> {
    Uuid::parse_str(value.trim())
        .map_err(|_| ErrorData::invalid_params(format!("{name}: `{value}` is not a UUID"), None))
}

fn limit_arg(limit: Option<i64>) -> Result<i64, ErrorData> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(ErrorData::invalid_params(
            format!("limit: {n} is not between 1 and {MAX_LIMIT}"),
            None,
        )),
    }
}

/// A store failure: logged with its source, reported without it.
fn unavailable(e: impl std::fmt::Display) -> ErrorData {
    tracing::error!(error = %e, "mcp: the store failed");
    ErrorData::internal_error("the store is unavailable; try again", None)
}

fn json_result(value: &Value) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::json(value)?]))
}

/// A request as a list shows it.
fn summary(r: &RemediationRequest) -> Value {
    json!({
        "id": r.id,
        "phase": r.phase,
        "reason": r.reason,
        "target": r.target,
        "alert": r.signal.name,
        "severity": r.signal.severity,
        "occurrence_count": r.occurrence_count,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "waiting": r.state.waiting,
    })
}

fn approval_json(a: &ApprovalRequest) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("status".into(), json!(a.status().as_str()));
    }
    v
}

#[tool_router]
impl KubemedicMcp {
    #[tool(
        description = "List kubemedic's remediation requests (one per alerting workload), newest first, optionally filtered by phase, namespace, target name or alert name. Each has an id for get_request.",
        annotations(read_only_hint = true)
    )]
    async fn list_requests(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<ListRequests>,
    ) -> Result<CallToolResult, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        let phase = match args.phase.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(p) => Some(Phase::parse(p).ok_or_else(|| {
                ErrorData::invalid_params(format!("phase: `{p}` is not a phase"), None)
            })?),
        };
        let filter = RequestFilter {
            phase,
            namespace: args.namespace.filter(|s| !s.trim().is_empty()),
            target: args.target.filter(|s| !s.trim().is_empty()),
            signal_name: args.alert.filter(|s| !s.trim().is_empty()),
            limit: limit_arg(args.limit)?,
            ..Default::default()
        };
        let page = self
            .store
            .list_requests(&filter)
            .await
            .map_err(unavailable)?;
        let items: Vec<Value> = page.items.iter().map(summary).collect();
        json_result(&json!({ "items": items }))
    }

    #[tool(
        description = "One remediation request by id: its phase, alert, target, every stage's result (investigation, selection, gate decision, approval, execution, verification) and its audit trail, oldest event first.",
        annotations(read_only_hint = true)
    )]
    async fn get_request(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<ById>,
    ) -> Result<CallToolResult, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        let id = uuid_arg("id", &args.id)?;
        let Some(request) = self.store.get_request(id).await.map_err(unavailable)? else {
            return Err(ErrorData::invalid_params(
                format!("id: there is no remediation request {id}"),
                None,
            ));
        };
        let trail = self.store.audit_trail(id).await.map_err(unavailable)?;
        let mut body = summary(&request);
        if let Value::Object(map) = &mut body {
            map.insert("signal".into(), json!(request.signal));
            map.insert("state".into(), json!(request.state));
            map.insert("trail".into(), json!(trail));
        }
        json_result(&body)
    }

    #[tool(
        description = "Approvals waiting for a human decision, oldest first: what would change (workflow, parameters, target), why approval is required, the risk, the evidence and the alternatives. Decide one with decide_approval.",
        annotations(read_only_hint = true)
    )]
    async fn list_pending_approvals(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<ListPending>,
    ) -> Result<CallToolResult, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        let page = self
            .store
            .list_approvals(Some(ApprovalStatus::Pending), limit_arg(args.limit)?, 0)
            .await
            .map_err(unavailable)?;
        let items: Vec<Value> = page.items.iter().map(approval_json).collect();
        json_result(&json!({ "items": items }))
    }

    #[tool(
        description = "Approve or deny a pending approval (approver role only). The first decision wins; it is audited with your key's name. `decision` is `approve` or `deny`; `alternative` approves one of the approval's alternative workflows instead.",
        annotations(destructive_hint = true, idempotent_hint = false)
    )]
    async fn decide_approval(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<Decide>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.need(&ctx, Role::Approver)?;
        let Some(approvals) = &self.approvals else {
            return Err(ErrorData::invalid_request(
                "approvals are not configured on this kubemedic",
                None,
            ));
        };
        let id = uuid_arg("approval_id", &args.approval_id)?;
        let approve = match args.decision.trim() {
            "approve" | "approved" => true,
            "deny" | "denied" | "reject" | "rejected" => false,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("decision: `{other}` is neither `approve` nor `deny`"),
                    None,
                ));
            }
        };
        let decided = approvals
            .decide_api(
                id,
                approve,
                args.alternative.as_deref(),
                args.message.as_deref(),
                &who.subject,
                Channel::Mcp,
                Confirmation::NotAsked,
            )
            .await
            .map_err(|r| {
                let text = format!("{}: {}", r.title, r.detail);
                if r.status >= 500 {
                    ErrorData::internal_error(text, None)
                } else {
                    ErrorData::invalid_params(text, None)
                }
            })?;
        json_result(&approval_json(&decided))
    }
}

#[tool_handler]
impl ServerHandler for KubemedicMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kubemedic", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "kubemedic turns Alertmanager alerts into audited Kubernetes remediations. \
                 Read its requests (list_requests, get_request) and pending approvals \
                 (list_pending_approvals); an approver may decide one (decide_approval).",
            )
    }
}
