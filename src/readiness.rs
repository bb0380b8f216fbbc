//! Readiness: what `/readyz` asks of the outside systems the daemon uses.
//!
//! A leaf module, like `clock`: the components that own an outside system (the cluster, the
//! model, the approval policy, later the mail server) implement [`Dependency`]; `web` only
//! reads it. It imports nothing of the crate.

use async_trait::async_trait;
use serde::Serialize;

/// Reachability of an outside system, as `/readyz` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct DependencyStatus {
    pub ok: bool,
    pub detail: String,
}

/// An outside system the daemon uses but can live without for a while: the daemon keeps
/// accepting alerts and requests wait (DESIGN §4). `/readyz` names what is missing.
#[async_trait]
pub trait Dependency: Send + Sync {
    fn name(&self) -> &'static str;
    async fn check(&self) -> DependencyStatus;
}
