//! Evidence both investigators gather the same way: the pre-fetched namespace snapshot that
//! playbooks match against (and its compact view, for the model), the verification of the
//! remediation target (root owner through the owner chain), the remediation history of
//! that root owner, and the incident's signature with the patterns learned for it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::InvestigateError;
use super::playbooks::Snapshot;
use super::view::{self, ViewLimits, unreachable};
use crate::cluster::context::ResourceContext;
use crate::cluster::obj;
use crate::cluster::observed;
use crate::cluster::render::pod_status;
use crate::cluster::tools::{ClusterTools, ToolLimits};
use crate::domain::{
    HistoryContext, LearnedPattern, RcaResult, RemediationRequest, SignalMode, Signature,
    SignatureFacts, Target,
};
use crate::history::{CurrentSpec, RemediationHistory, build_context, patterns};

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
    snapshot.pod_statuses = playbook_statuses(&pods, &events, tools.clock().now());
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
        CurrentSpec {
            hash: ctx.spec_hash.as_deref(),
            autoscaled_drift: ctx.autoscaled_drift_hash.as_deref(),
        },
        &records,
        now,
    ))
}

/// Whether `pod` belongs to `root`, in its namespace ([`observed::Pod::belongs_to`]).
fn belongs(pod: &Value, root: &Target) -> bool {
    if obj::str_at(pod, &["metadata", "namespace"]).is_some_and(|ns| {
        root.namespace
            .as_deref()
            .is_some_and(|r| !r.is_empty() && r != ns)
    }) {
        return false;
    }
    observed::Pod::parse(pod).belongs_to(&root.kind, &root.name)
}

/// How a pod is failing as of `now`, having heeded `events` ([`observed::Pod::heed`]), as
/// signature facts; empty for a pod [`observed::Pod::failure`] finds nothing wrong with
/// (running and ready, completed, or still starting). The facts' words are the signature's and
/// stay as they are: learned patterns match on them.
fn pod_states(pod: &Value, events: &[observed::Event], now: DateTime<Utc>) -> Vec<String> {
    if observed::Pod::at(pod, now).heed(events).failure().is_none() {
        return vec![];
    }
    let phase = obj::str_at(pod, &["status", "phase"]).unwrap_or("Unknown");
    let containers: Vec<&Value> = obj::array(pod, &["status", "containerStatuses"])
        .iter()
        .chain(obj::array(pod, &["status", "initContainerStatuses"]).iter())
        .collect();
    let mut out = Vec::new();
    if phase == "Running" {
        out.push("not-ready".to_owned());
    } else {
        out.push(format!("phase:{phase}"));
    }
    for c in containers {
        if let Some(r) = obj::str_at(c, &["state", "waiting", "reason"]) {
            out.push(format!("waiting:{r}"));
        }
        for path in [
            ["state", "terminated", "reason"],
            ["lastState", "terminated", "reason"],
        ] {
            if let Some(r) = obj::str_at(c, &path) {
                out.push(format!("terminated:{r}"));
            }
        }
    }
    out
}

/// The facts of the incident's signature (docs/adr/0024-outcome-learning.md): the signal's
/// name, the verified root owner's kind, how the root owner's unhealthy pods fail, and the
/// reasons of the Warning events about the root owner, its children or its pods — from the
/// pods and events both investigators pre-fetch. Never a name, a namespace or a count, so the
/// same failure elsewhere has the same signature.
pub fn signature(
    alert: &str,
    root: &Target,
    pods: &[Value],
    events: &[Value],
    now: DateTime<Utc>,
) -> Signature {
    let owned: Vec<&Value> = pods.iter().filter(|p| belongs(p, root)).collect();
    let names: Vec<&str> = owned
        .iter()
        .filter_map(|p| obj::str_at(p, &["metadata", "name"]))
        .collect();
    let events: Vec<observed::Event> = events.iter().map(observed::Event::parse).collect();
    let pod_states = owned
        .iter()
        .flat_map(|p| pod_states(p, &events, now))
        .collect();
    let events = events
        .into_iter()
        .filter(|e| e.warning && !e.reason.is_empty() && e.about(&root.name, &names))
        .map(|e| e.reason)
        .collect();
    patterns::signature(SignatureFacts {
        alert: alert.to_owned(),
        kind: root.kind.clone(),
        pod_states,
        events,
    })
}

/// The patterns learned for `signature`, strongest first; none when the provider cannot
/// answer (learning is a hint: its absence never stops an investigation).
pub async fn learned(
    provider: &dyn RemediationHistory,
    signature: &Signature,
    now: DateTime<Utc>,
) -> Vec<LearnedPattern> {
    match provider.outcomes(&signature.hash, now).await {
        Ok(outcomes) => patterns::aggregate(&outcomes, now),
        Err(e) => {
            tracing::warn!(error = %e, "learned patterns unavailable; investigating without them");
            vec![]
        }
    }
}

/// The incident's signature and what was learned under it, for a verified target (none
/// without one): what both investigators record on the analysis.
pub async fn signature_and_learned(
    provider: &dyn RemediationHistory,
    alert: &str,
    verified: Option<&ResourceContext>,
    (pods, events): (&[Value], &[Value]),
    now: DateTime<Utc>,
) -> (Option<Signature>, Vec<LearnedPattern>) {
    let Some(ctx) = verified else {
        return (None, vec![]);
    };
    let s = signature(alert, &ctx.root_owner, pods, events, now);
    let learned = learned(provider, &s, now).await;
    (Some(s), learned)
}

/// The statuses playbooks match (`pod_status_regex`), in kubectl's words, of the pods the model
/// of the cluster calls failing ([`observed::Pod::failure`], having heeded the namespace's
/// `events`: a pod whose volume cannot mount is stuck): not a pod seconds into
/// ContainerCreating, nor one a rollout terminates on time. Why each container last ended counts
/// too while it is recent ([`observed::MEMORY_KILL_LOOKBACK_HOURS`], what the OOM rule reads): a
/// pod crash-looping after OOM kills shows CrashLoopBackOff now and OOMKilled as its last
/// state; an OOM kill of days ago is history.
fn playbook_statuses(pods: &[Value], events: &[Value], now: DateTime<Utc>) -> Vec<String> {
    let recent = now - chrono::Duration::hours(observed::MEMORY_KILL_LOOKBACK_HOURS);
    let events: Vec<observed::Event> = events.iter().map(observed::Event::parse).collect();
    let mut out = Vec::new();
    for p in pods {
        let pod = observed::Pod::at(p, now).heed(&events);
        if pod.failure().is_some() {
            out.push(pod_status(p));
        }
        let mut last: Vec<&str> = Vec::new();
        for c in &pod.containers {
            if let Some((r, _, at)) = &c.terminated
                && at.is_none_or(|t| t >= recent)
                && !last.contains(&r.as_str())
            {
                last.push(r);
                out.push(r.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Issue 43: playbooks match what the model calls failing: a pod seconds into
    /// ContainerCreating or one a rollout terminates on time is not stuck, and an OOM kill of
    /// two days ago on a pod serving since is history.
    #[test]
    fn playbooks_match_the_pods_the_model_calls_failing() {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let creating = |started: &str| {
            json!({"metadata": {"name": "web-1", "creationTimestamp": started},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Pending", "startTime": started,
                    "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}}]}})
        };
        let old_kill = json!({"metadata": {"name": "web-2"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 1,
                    "state": {"running": {"startedAt": "2026-11-19T12:00:00Z"}},
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                        "finishedAt": "2026-11-19T11:59:00Z"}}}]}});
        let leaving = json!({"metadata": {"name": "web-3", "deletionTimestamp": "2026-11-21T11:59:50Z"},
            "status": {"phase": "Running"}});
        let statuses = playbook_statuses(
            &[creating("2026-11-21T11:59:50Z"), old_kill.clone(), leaving],
            &[],
            now,
        );
        assert!(statuses.is_empty(), "{statuses:?}");
        // The same pod seconds into its start, heeding a warning that its volume cannot mount:
        // stuck.
        let warning = json!({"kind": "Event", "type": "Warning", "reason": "FailedMount",
            "involvedObject": {"kind": "Pod", "name": "web-1"},
            "lastTimestamp": "2026-11-21T11:59:58Z",
            "message": "MountVolume.SetUp failed for volume \"data\" : configmap \"web\" not found"});
        let statuses = playbook_statuses(&[creating("2026-11-21T11:59:50Z")], &[warning], now);
        assert_eq!(statuses, ["ContainerCreating"]);
        let mut recent_kill = old_kill;
        recent_kill["status"]["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] =
            json!("2026-11-21T11:50:00Z");
        let statuses =
            playbook_statuses(&[creating("2026-11-21T11:40:00Z"), recent_kill], &[], now);
        assert_eq!(statuses, ["ContainerCreating", "OOMKilled"]);
    }

    fn pod(name: &str, owner: &str, status: Value) -> Value {
        let hash = owner.rsplit('-').next().unwrap_or_default();
        json!({"metadata": {"name": name, "namespace": "shop",
            "labels": {"pod-template-hash": hash},
            "ownerReferences": [{"kind": "ReplicaSet", "name": owner, "controller": true}]},
            "status": status})
    }

    fn ready() -> Value {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "state": {"running": {}}}]})
    }

    fn not_ready() -> Value {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "app", "state": {"running": {}}}]})
    }

    fn warning(name: &str, reason: &str) -> Value {
        json!({"type": "Warning", "reason": reason, "involvedObject": {"kind": "Pod", "name": name}})
    }

    /// Issue 43: the pods of a workload as the model reads them (`Pod::belongs_to`): a bare
    /// ReplicaSet `web-v2`, whose pods carry another template hash, is not Deployment `web`'s
    /// revision, as its name alone suggested.
    #[test]
    fn a_bare_replicaset_named_like_a_revision_is_not_the_deployment_s() {
        let web = Target::new("Deployment", "web", Some("shop".into()));
        let mut bare = pod("web-v2-x", "web-v2", not_ready());
        bare["metadata"]["labels"]["pod-template-hash"] = json!("");
        assert!(!belongs(&bare, &web));
        assert!(belongs(&pod("web-7d9-a", "web-7d9", ready()), &web));
        let rollout_pod = json!({"metadata": {"name": "web-6b7c9-x", "namespace": "shop",
            "labels": {"rollouts-pod-template-hash": "6b7c9"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-6b7c9", "controller": true}]}});
        assert!(belongs(
            &rollout_pod,
            &Target::new("Rollout", "web", Some("shop".into()))
        ));
        assert!(!belongs(
            &rollout_pod,
            &Target::new("Rollout", "we", Some("shop".into()))
        ));
        let job_pod = json!({"metadata": {"name": "backup-29000000-q", "namespace": "shop",
            "ownerReferences": [{"kind": "Job", "name": "backup-29000000", "controller": true}]}});
        assert!(belongs(
            &job_pod,
            &Target::new("CronJob", "backup", Some("shop".into()))
        ));
    }

    #[test]
    fn the_same_failure_on_another_object_has_the_same_signature() {
        let checkout = Target::new("Deployment", "checkout", Some("shop".into()));
        let a = signature(
            "KubePodNotReady",
            &checkout,
            &[
                pod("checkout-7d9-a", "checkout-7d9", not_ready()),
                pod("checkout-7d9-b", "checkout-7d9", ready()),
                // Another workload's pods and events are not this incident's.
                pod(
                    "checkout-api-5c-a",
                    "checkout-api-5c",
                    json!({"phase": "Pending"}),
                ),
            ],
            &[
                warning("checkout-7d9-a", "Unhealthy"),
                warning("checkout-api-5c-a", "FailedScheduling"),
                json!({"type": "Normal", "reason": "Pulled",
                    "involvedObject": {"name": "checkout-7d9-a"}}),
            ],
            chrono::Utc::now(),
        );
        assert_eq!(a.facts.pod_states, vec!["not-ready"]);
        assert_eq!(a.facts.events, vec!["Unhealthy"]);
        let cart = Target::new("Deployment", "cart", Some("shop".into()));
        let b = signature(
            "KubePodNotReady",
            &cart,
            &[
                pod("cart-6f-x", "cart-6f", not_ready()),
                pod("cart-6f-y", "cart-6f", not_ready()),
            ],
            &[
                warning("cart-6f-x", "Unhealthy"),
                warning("cart-6f-y", "Unhealthy"),
            ],
            chrono::Utc::now(),
        );
        assert_eq!(a.hash, b.hash);
        // A crash loop is another class.
        let c = signature(
            "KubePodNotReady",
            &cart,
            &[pod(
                "cart-6f-x",
                "cart-6f",
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "app",
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"reason": "Error"}}}]}),
            )],
            &[warning("cart-6f-x", "BackOff")],
            chrono::Utc::now(),
        );
        assert_eq!(
            c.facts.pod_states,
            vec!["not-ready", "terminated:Error", "waiting:CrashLoopBackOff"]
        );
        assert_ne!(c.hash, a.hash);
    }
}
