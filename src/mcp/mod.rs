//! The Model Context Protocol server (docs/adr/0030-mcp-server-with-rmcp.md): what an assistant
//! a person already uses may read of kubemedic, what it may ask kubemedic to investigate, and
//! what an approver may decide from there.
//!
//! Inputs: a [`Caller`] (who, with which role) for every call — fixed for stdio, taken from
//! the HTTP request's extensions (put there by `src/web/mcp.rs` after it checked the bearer key)
//! for streamable HTTP — and the [`Parts`] the transport serves: the approvals, the cluster the
//! investigation reads ([`ClusterAccess`]), how a question is investigated
//! ([`Investigations`]), and the live catalog, playbooks and policy. Outputs: JSON text
//! content, or an MCP error whose message names what was wrong (the argument, the role that is
//! missing, the approval that is gone, the tool or resource that does not exist).
//!
//! Tools: the `#[tool]` methods below, and the investigation's read-only cluster tools
//! ([`cluster`]), served through the same `ClusterTools` the model calls — the same reader with
//! its read policy (no Secrets, no blocked namespaces), the same sanitiser and output caps, the
//! same text the model reads. Resources: the catalog, the playbooks and the policy
//! ([`resources`]), read from the live configuration on every read.
//!
//! Invariants: a caller without a role reads nothing; only an approver decides, and the decision
//! goes through [`Approvals::decide_api`] like the API's, audited with the caller's name and the
//! channel `mcp`. `investigate` never executes anything: a question is a request of source
//! `chat`, which the gate never lets run without a human decision. Nothing here knows HTTP
//! servers: the transports live in `web` and `cli`.

pub mod cluster;
mod explain;
pub mod investigation;
pub mod resources;

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, schemars, tool, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::approval::{Approvals, Confirmation};
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::cluster::ClusterReader;
use crate::cluster::tools::{ClusterTools, ToolLimits};
use crate::domain::{
    ApprovalRequest, ApprovalStatus, Channel, Phase, RemediationRequest, Role, Target,
};
use crate::investigate::playbooks::Playbooks;
use crate::live::Live;
use crate::policy::RegoGate;
use crate::store::{RequestFilter, Store};

/// The most items one list returns.
pub const MAX_LIMIT: i64 = 200;
const DEFAULT_LIMIT: i64 = 50;
/// How long `investigate` waits for the investigation unless told (`wait_seconds`)…
pub const DEFAULT_INVESTIGATE_WAIT: Duration = Duration::from_secs(120);
/// …and at most.
pub const MAX_INVESTIGATE_WAIT_SECONDS: u64 = 300;

/// Who calls a tool, as the audit trail names them (`key:<name>`), and their role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub subject: String,
    pub role: Role,
    /// The caller's W3C `traceparent` (HTTP only): a request `investigate` opens continues it.
    pub trace: Option<crate::domain::TraceContext>,
}

/// The cluster the read-only tools read: the investigation's own reader (with its read
/// policy), clock, output limits and per-call timeout.
#[derive(Clone)]
pub struct ClusterAccess {
    pub reader: Arc<dyn ClusterReader>,
    pub clock: Arc<dyn Clock>,
    pub limits: ToolLimits,
    /// How long one tool call may take (the investigation's `--tool-timeout-seconds`).
    pub timeout: Duration,
}

/// What `investigate` is asked about.
#[derive(Debug, Clone, PartialEq)]
pub enum About {
    /// An object the caller names, with their question's text if they gave one.
    Target { target: Target, question: String },
    /// A question in words, resolved against the cluster as the chat resolves it.
    Question(String),
}

/// An investigation as far as it went.
#[derive(Debug, Clone)]
pub struct Investigated {
    /// The request investigated; `None` when the question led to no investigation (a
    /// namespace scan's listing, in `answer`).
    pub request: Option<RemediationRequest>,
    /// Its approval, when one was asked for.
    pub approval: Option<ApprovalRequest>,
    /// Whether the request is in the store (audited, followed by the workers), or was
    /// investigated in this process only.
    pub recorded: bool,
    /// Whether the investigation reached its answer (else it is still running).
    pub done: bool,
    /// The answer as the chat gives it, from what the stages recorded.
    pub answer: String,
}

/// How a question or a named target is investigated: through the daemon's chat and pipeline
/// (an audited request, [`investigation::ThroughChat`]), or — over stdio, where no workers run —
/// by the stages up to the gate in the calling process (`src/cli/mcp.rs`).
#[async_trait::async_trait]
pub trait Investigations: Send + Sync {
    async fn investigate(
        &self,
        who: &Caller,
        about: About,
        wait: Duration,
    ) -> Result<Investigated, ErrorData>;
}

/// What the MCP server serves besides the store. Absent parts leave their tools saying so.
#[derive(Clone, Default)]
pub struct Parts {
    pub approvals: Option<Arc<Approvals>>,
    pub cluster: Option<ClusterAccess>,
    pub investigations: Option<Arc<dyn Investigations>>,
    pub catalog: Option<Arc<Live<Catalog>>>,
    pub playbooks: Option<Arc<Live<Playbooks>>>,
    pub policy: Option<Arc<RegoGate>>,
}

/// The MCP server: one per session (HTTP) or per process (stdio); cheap to clone.
#[derive(Clone)]
pub struct KubemedicMcp {
    store: Arc<dyn Store>,
    parts: Arc<Parts>,
    /// The caller over stdio. Over HTTP each request carries its own in its extensions.
    fixed: Option<Caller>,
}

impl KubemedicMcp {
    pub fn new(store: Arc<dyn Store>, parts: Arc<Parts>, fixed: Option<Caller>) -> Self {
        Self {
            store,
            parts,
            fixed,
        }
    }

    /// The request `id` and its audit trail; an error naming the id when there is no such request.
    async fn request_and_trail(
        &self,
        id: Uuid,
    ) -> Result<(RemediationRequest, Vec<crate::domain::AuditEvent>), ErrorData> {
        let Some(request) = self.store.get_request(id).await.map_err(unavailable)? else {
            return Err(ErrorData::invalid_params(
                format!("id: there is no remediation request {id}"),
                None,
            ));
        };
        let trail = self.store.audit_trail(id).await.map_err(unavailable)?;
        Ok((request, trail))
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

/// An object of the cluster, as `investigate` takes it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetArg {
    /// Kind, e.g. Deployment, StatefulSet, Pod, Node.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// Its namespace (not for cluster-scoped kinds such as Node).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `investigate`'s arguments.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvestigateArgs {
    /// The object to investigate. Give this, or `question`, or both.
    #[serde(default)]
    pub target: Option<TargetArg>,
    /// A question in words, naming what it is about ("why is checkout crashing in shop?").
    /// With a `target`, the question's text only.
    #[serde(default)]
    pub question: Option<String>,
    /// How long to wait for the investigation, in seconds (1–300, default 120). When it is
    /// not done by then, the result says so and get_request follows it.
    #[serde(default)]
    pub wait_seconds: Option<u64>,
}

/// How a tool that ran reports what went wrong (docs/mcp.md, "Errors"). MCP keeps JSON-RPC
/// errors for the protocol (an unknown tool, a server failure) and puts a tool's own refusal in
/// its result with `isError`, where the model calling it can read and act on it: a role too low,
/// an argument that does not hold (input validation is the tool's too, MCP 2025-11-25), an
/// approval decided already, approvals not configured. A server failure stays an error.
fn tool_error(e: ErrorData) -> Result<CallToolResponse, ErrorData> {
    if e.code == rmcp::model::ErrorCode::INTERNAL_ERROR {
        return Err(e);
    }
    Ok(CallToolResponse::Complete(CallToolResult::error(vec![
        ContentBlock::text(e.message.to_string()),
    ])))
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
        let (request, trail) = self.request_and_trail(id).await?;
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
        description = "Investigate an object of the cluster (target: kind, name, namespace) or a question in words, as kubemedic investigates an alert: its read-only tools on the cluster, the model when one is configured (else the offline investigator). Returns the root cause, the evidence, the confidence, the workflow it proposes and the policy's decision. Nothing is executed: a proposed workflow waits for an approver (decide_approval). Over HTTP the question becomes an audited request (its id is in the result).",
        annotations(destructive_hint = false, idempotent_hint = false)
    )]
    async fn investigate(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<InvestigateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.need(&ctx, Role::Viewer)?;
        let question = args
            .question
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
            .to_owned();
        let about = match args.target {
            Some(t) => {
                let field = |name: &str, v: &str| {
                    if v.trim().is_empty() {
                        Err(ErrorData::invalid_params(
                            format!("target.{name}: must not be empty"),
                            None,
                        ))
                    } else {
                        Ok(v.trim().to_owned())
                    }
                };
                About::Target {
                    target: Target {
                        kind: field("kind", &t.kind)?,
                        name: field("name", &t.name)?,
                        namespace: t
                            .namespace
                            .map(|n| n.trim().to_owned())
                            .filter(|n| !n.is_empty()),
                    },
                    question,
                }
            }
            None if question.is_empty() => {
                return Err(ErrorData::invalid_params(
                    "give a `target` (kind, name, namespace) or a `question` naming what to \
                     investigate",
                    None,
                ));
            }
            None => About::Question(question),
        };
        let wait = match args.wait_seconds {
            None => DEFAULT_INVESTIGATE_WAIT,
            Some(s) if (1..=MAX_INVESTIGATE_WAIT_SECONDS).contains(&s) => Duration::from_secs(s),
            Some(s) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "wait_seconds: {s} is not between 1 and {MAX_INVESTIGATE_WAIT_SECONDS}"
                    ),
                    None,
                ));
            }
        };
        let Some(investigations) = &self.parts.investigations else {
            return Err(ErrorData::invalid_request(
                "investigate: this kubemedic cannot investigate (no Kubernetes cluster, or \
                 the catalog or the playbooks did not load; see its log and /readyz)",
                None,
            ));
        };
        let done = investigations.investigate(&who, about, wait).await?;
        json_result(&investigation::to_json(&done))
    }

    #[tool(
        description = "Why the approval policy decided as it did for one request (by id): the decision (allowed, approval required, or degraded), the policy's reason and scored risk factors, the revision (sha256) of the policy that decided and where the policy in force comes from (a directory, the built-in policy, or ApprovalPolicy objects), the input facts it decided on, and the human decision if one was made.",
        annotations(read_only_hint = true)
    )]
    async fn explain_policy_decision(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(args): Parameters<ById>,
    ) -> Result<CallToolResult, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        let id = uuid_arg("id", &args.id)?;
        let (request, trail) = self.request_and_trail(id).await?;
        let approval = self
            .store
            .approval_of_request(id)
            .await
            .map_err(unavailable)?;
        let body = explain::explain(
            &request,
            &trail,
            approval.as_ref(),
            self.parts.policy.as_deref(),
        )?;
        json_result(&body)
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
        let Some(approvals) = &self.parts.approvals else {
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

impl ServerHandler for KubemedicMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("kubemedic", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "kubemedic turns Alertmanager alerts into audited Kubernetes remediations. \
             Read the cluster with the investigation's read-only tools (kubectl_*, \
             get_*_resource_context), ask for an investigation (investigate), read its \
             requests (list_requests, get_request) and why the policy decided as it did \
             (explain_policy_decision), and its pending approvals (list_pending_approvals); \
             an approver may decide one (decide_approval). The catalog, the playbooks and \
             the policy are resources (kubemedic://…).",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = Self::tool_router().list_all();
        if self.parts.cluster.is_some() {
            tools.extend(cluster::tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if ClusterTools::is_tool(name) {
            return self
                .parts
                .cluster
                .as_ref()
                .and_then(|_| cluster::tools().into_iter().find(|t| t.name == name));
        }
        Self::tool_router().get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if ClusterTools::is_tool(&name) {
            if let Err(e) = self.need(&ctx, Role::Viewer) {
                return tool_error(e);
            }
            let Some(access) = &self.parts.cluster else {
                return tool_error(ErrorData::invalid_request(
                    format!(
                        "{name}: no Kubernetes cluster is configured on this kubemedic, so \
                         its cluster tools are not served"
                    ),
                    None,
                ));
            };
            let args = Value::Object(request.arguments.unwrap_or_default());
            return Ok(CallToolResponse::Complete(
                cluster::call(access, &name, &args).await,
            ));
        }
        let router = Self::tool_router();
        if !router.has_route(&name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`: tools/list names the tools this server has"),
                None,
            ));
        }
        match router.call(ToolCallContext::new(self, request, ctx)).await {
            Err(e) => tool_error(e),
            ok => ok,
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        Ok(ListResourcesResult::with_all_items(resources::list(
            &self.parts,
        )))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.need(&ctx, Role::Viewer)?;
        resources::read(&self.parts, &request.uri).map(ReadResourceResponse::Complete)
    }
}
