//! Evidence both investigators gather the same way: the pre-fetched namespace snapshot that
//! playbooks match against (and its compact view, for the model), the verification of the
//! remediation target (root owner through the owner chain), and the remediation history of
//! that root owner.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::InvestigateError;
use super::playbooks::Snapshot;
use super::view::{self, ViewLimits, unreachable};
use crate::cluster::context::ResourceContext;
use crate::cluster::obj;
use crate::cluster::render::pod_status;
use crate::cluster::tools::{ClusterTools, ToolLimits};
use crate::domain::{HistoryContext, RcaResult, RemediationRequest, SignalMode, Target};
use crate::history::{RemediationHistory, build_context};

/// The namespace the signal is about (target namespace, else its `namespace` label).
pub fn signal_namespace(req: &RemediationRequest) -> Option<String> {
    req.target
        .as_ref()
        .and_then(|t| t.namespace.clone())
        .or_else(|| req.signal.labels.get("namespace").cloned())
        .filter(|n| !n.is_empty())
}

/// Pods read by the pre-fetch at most: enough for the view to find the unhealthy pods of a
/// large namespace (the tools' own list cap, 50, sorts by name and could hide them).
const PREFETCH_MAX_PODS: usize = 500;

/// Pods and Warning events of the signal's namespace: for playbook matching, and the compact
/// view of what is unhealthy for invocation 1's prompt ([`view::render`]). An unreachable
/// cluster is an error (the request waits); anything else just leaves the snapshot thinner.
pub async fn prefetch(
    tools: &ClusterTools,
    req: &RemediationRequest,
) -> Result<(Snapshot, String, Vec<Value>, Vec<Value>), InvestigateError> {
    let mut snapshot = Snapshot {
        alertname: req.signal.name.clone(),
        proactive: req.signal.mode == SignalMode::Proactive,
        ..Default::default()
    };
    let Some(ns) = signal_namespace(req) else {
        return Ok((snapshot, String::new(), vec![], vec![]));
    };
    let wide = tools.with_limits(ToolLimits {
        max_list_items: PREFETCH_MAX_PODS.max(tools.limits().max_list_items),
        ..tools.limits().clone()
    });
    let pods_result = wide
        .call(
            "kubectl_get",
            &serde_json::json!({"kind": "Pod", "namespace": ns}),
        )
        .await;
    if let Some(e) = unreachable(&pods_result) {
        return Err(e);
    }
    let pods = pods_result.list("items");
    let pods_total = pods_result
        .data
        .get("total")
        .and_then(Value::as_u64)
        .map_or(pods.len(), |t| t as usize);
    let events_result = tools
        .call("kubectl_events", &serde_json::json!({"namespace": ns}))
        .await;
    if let Some(e) = unreachable(&events_result) {
        return Err(e);
    }
    let events = events_result.list("events");
    for p in &pods {
        snapshot.pod_statuses.push(pod_status(p));
        // Why each container last died counts too: a pod crash-looping after OOM kills shows
        // CrashLoopBackOff now and OOMKilled as its last state.
        let mut last = Vec::new();
        for c in obj::array(p, &["status", "containerStatuses"]) {
            if let Some(r) = obj::str_at(c, &["lastState", "terminated", "reason"])
                && !last.contains(&r)
            {
                last.push(r);
                snapshot.pod_statuses.push(r.to_owned());
            }
        }
    }
    for e in events
        .iter()
        .filter(|e| obj::str_at(e, &["type"]) == Some("Warning"))
    {
        let reason = obj::str_at(e, &["reason"]).unwrap_or("").to_owned();
        let message = obj::str_at(e, &["message"]).unwrap_or("").trim().to_owned();
        snapshot.warning_events.push((reason, message));
    }
    let text = view::render(
        &format!("namespace {ns}"),
        &pods,
        pods_total,
        &events,
        false,
        tools.clock().now(),
        ViewLimits::default(),
    );
    Ok((snapshot, text, pods, events))
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The verified root owner of the RCA's remediation target: from a context the investigation
/// already resolved, or resolved now (read-only). `None` when the target does not exist or
/// cannot be read — outcome 5, RCA incomplete.
pub async fn verify_target(
    tools: &ClusterTools,
    rca: &RcaResult,
    fallback: Option<&Target>,
) -> Result<Option<Arc<ResourceContext>>, InvestigateError> {
    let wanted = rca
        .root_cause_analysis
        .remediation_target
        .as_ref()
        .map(|t| (t.kind.clone(), t.name.clone(), t.namespace.clone()))
        .or_else(|| fallback.map(|t| (t.kind.clone(), t.name.clone(), t.namespace.clone())));
    let Some((kind, name, namespace)) = wanted else {
        return Ok(None);
    };
    for ctx in tools.contexts().resolved().await {
        let hit = |t: &Target| {
            same(&t.kind, &kind)
                && t.name == name
                && (t.namespace.is_none() || namespace.is_none() || t.namespace == namespace)
        };
        if hit(&ctx.target) || hit(&ctx.root_owner) {
            return Ok(Some(ctx));
        }
    }
    let ns = namespace.or_else(|| fallback.and_then(|t| t.namespace.clone()));
    match tools.contexts().resolve(&kind, &name, ns.as_deref()).await {
        Ok(ctx) => Ok(Some(ctx)),
        Err(e) if e.is_unreachable() => Err(e.into()),
        Err(_) => Ok(None),
    }
}

/// History of the root owner for its current spec.
pub async fn history(
    provider: &dyn RemediationHistory,
    ctx: &ResourceContext,
    now: DateTime<Utc>,
) -> Option<HistoryContext> {
    let records = provider.records(&ctx.root_owner, now).await.ok()?;
    Some(build_context(
        &ctx.root_owner,
        ctx.spec_hash.as_deref(),
        &records,
        now,
    ))
}
