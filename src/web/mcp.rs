//! `/mcp`: the MCP tools (`crate::mcp`) over the streamable HTTP transport.
//!
//! The tools get what the daemon runs with: its approvals, the cluster reader and limits the
//! investigation uses, the chat (an `investigate` is a question, so an audited request), and
//! the live catalog, playbooks and policy.
//!
//! Every call needs an API key (`Authorization: Bearer km_…`): the key's name and role become
//! the [`crate::mcp::Caller`] the tools check — a viewer reads, an approver also decides.
//! Browser sessions and the auth proxy are not accepted here: a cookie would let a foreign page
//! call `decide_approval` in an approver's name, and an MCP client always has a key to send.
//!
//! The transport runs stateless (each POST is answered on its own, no `Mcp-Session-Id`), so
//! any replica can answer any call.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::auth::Via;
use super::{ApiError, AppState};
use crate::mcp::investigation::ThroughChat;
use crate::mcp::{Caller, Investigations, KubemedicMcp, Parts};

/// The `/mcp` route, authenticated.
pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let store = state.store.clone();
    let parts = Arc::new(Parts {
        approvals: state.approvals.clone(),
        cluster: state.cluster.clone(),
        // A question is a request: the chat ingests it, the workers investigate it.
        investigations: state.chat.clone().map(|chat| {
            Arc::new(ThroughChat::new(chat, state.store.clone())) as Arc<dyn Investigations>
        }),
        catalog: state.catalog.clone(),
        playbooks: state.playbooks.clone(),
        policy: state.policy.clone(),
    });
    // The daemon authenticates every call, so the transport's Host allow-list (a guard for
    // unauthenticated servers on loopback) is off; the listener's own settings apply.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(state.max_body_bytes)
        .with_cancellation_token(state.shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(KubemedicMcp::new(store.clone(), parts.clone(), None)),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(middleware::from_fn_with_state(state, authenticate))
}

/// Puts the key's caller in the request, or answers 401.
async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let principal = match state.principal(req.headers(), None).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match principal {
        Some(p) if p.via == Via::Key => {
            let trace = crate::telemetry::incoming_trace(req.headers());
            req.extensions_mut().insert(Caller {
                subject: p.subject,
                role: p.role,
                trace,
            });
            next.run(req).await
        }
        _ => ApiError::Unauthorized.into_response(),
    }
}
