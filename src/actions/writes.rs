//! The writes behind the built-in actions, on [`ClusterReader`] + [`ClusterWriter`]: rollout
//! restart, rollout undo, scale, set resources, cordon / uncordon, drain, remove a taint, patch
//! an HPA's maximum, relax a PDB, expand a PVC, delete a pod. Every change names its field manager (`kubemedic`) and supports server-side dry
//! run; a change that depends on what it read (undo, taints) sends the resourceVersion it read,
//! so a concurrent edit makes it fail instead of being overwritten.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::selector::Selector;
use crate::cluster::{
    ClusterError, ClusterReader, ClusterWriter, ErrorKind, ListQuery, PatchType, Result,
    WriteOutcome, observed,
};
use crate::domain::BuiltinAction;

fn outcome(action: BuiltinAction, target: String, dry_run: bool, detail: Value) -> WriteOutcome {
    WriteOutcome {
        action: action.into(),
        target,
        dry_run,
        detail,
    }
}

fn invalid(msg: impl Into<String>) -> ClusterError {
    ClusterError::new(ErrorKind::Invalid, msg)
}

/// `kubectl rollout restart`: stamp the pod template so the controller rolls every pod.
pub async fn rollout_restart(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    kind: &str,
    namespace: &str,
    name: &str,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource(kind).await?;
    if !matches!(
        res.kind.as_str(),
        "Deployment" | "StatefulSet" | "DaemonSet"
    ) {
        return Err(invalid(format!("cannot restart a {}", res.kind)));
    }
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}});
    w.patch(
        &res,
        Some(namespace),
        name,
        PatchType::Strategic,
        &patch,
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::RolloutRestart,
        format!("{namespace}/{}/{name}", res.kind),
        dry_run,
        json!({"restartedAt": stamp}),
    ))
}

/// `kubectl rollout undo --to-revision` for a Deployment: put back the pod template of the
/// ReplicaSet of the revision named (`None`: the highest revision below the current one). Replaces the Deployment at the resourceVersion it
/// was read at; when the Deployment changed in between (its controller writes status all the
/// time), it is read again and the decision made afresh, a few times.
pub async fn rollout_undo(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    to_revision: Option<i64>,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let mut seen = None;
    let mut attempt = 0;
    loop {
        match rollout_undo_once(r, w, namespace, name, to_revision, dry_run, &mut seen).await {
            Err(e) if e.kind == ErrorKind::Conflict && attempt < 4 => attempt += 1,
            other => return other,
        }
    }
}

/// One attempt. `seen` is the revision the first attempt found: a later attempt that finds
/// another one (somebody rolled out meanwhile) stops instead of undoing their change.
async fn rollout_undo_once(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    to_revision: Option<i64>,
    dry_run: bool,
    seen: &mut Option<i64>,
) -> Result<WriteOutcome> {
    let deployments = r.resource("Deployment").await?;
    let mut deployment = r.get(&deployments, Some(namespace), name).await?;
    let current: i64 = obj::annotation(&deployment, "deployment.kubernetes.io/revision")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    match *seen {
        Some(first) if first != current => {
            return Err(ClusterError::new(
                ErrorKind::Conflict,
                format!(
                    "Deployment {namespace}/{name} moved from revision {first} to {current} during the rollback; not undoing that"
                ),
            ));
        }
        _ => *seen = Some(current),
    }
    let owned = owned_by(r, "ReplicaSet", namespace, &deployment).await?;
    let revision = |rs: &Value| {
        obj::annotation(rs, "deployment.kubernetes.io/revision")
            .and_then(|r| r.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let previous = match to_revision {
        Some(n) if n >= current => {
            return Err(invalid(format!(
                "Deployment {namespace}/{name} is at revision {current}: revision {n} is not an earlier one"
            )));
        }
        Some(n) => owned.iter().find(|rs| revision(rs) == n).ok_or_else(|| {
            invalid(format!(
                "Deployment {namespace}/{name} keeps no revision {n} to roll back to"
            ))
        })?,
        None => owned
            .iter()
            .filter(|rs| revision(rs) < current)
            .max_by_key(|rs| revision(rs))
            .ok_or_else(|| {
                invalid(format!(
                    "Deployment {namespace}/{name} has no revision before {current} to roll back to"
                ))
            })?,
    };
    let to_revision = revision(previous);
    let mut template = at(previous, &["spec", "template"])
        .cloned()
        .ok_or_else(|| invalid("previous ReplicaSet has no pod template"))?;
    if let Some(labels) = template
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.remove("pod-template-hash");
    }
    if let Some(spec) = deployment.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("template".into(), template);
    }
    w.replace(&deployments, Some(namespace), name, &deployment, dry_run)
        .await?;
    Ok(outcome(
        BuiltinAction::RolloutUndo,
        format!("{namespace}/Deployment/{name}"),
        dry_run,
        json!({"fromRevision": current, "toRevision": to_revision, "replicaSet": obj::name(previous)}),
    ))
}

/// The objects of `kind` in `namespace` that `owner` owns (found through the owner's label
/// selector, kept only when an ownerReference names the owner's uid).
pub async fn owned_by(
    r: &dyn ClusterReader,
    kind: &str,
    namespace: &str,
    owner: &Value,
) -> Result<Vec<Value>> {
    let selector = at(owner, &["spec", "selector"])
        .and_then(Selector::from_object)
        .map(|s| s.to_query())
        .unwrap_or_default();
    let res = r.resource(kind).await?;
    Ok(r.list(&res, Some(namespace), &ListQuery::labels(selector))
        .await?
        .into_iter()
        .filter(|o| obj::owned_by(o, owner))
        .collect())
}

/// Set `spec.replicas`.
pub async fn scale(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    kind: &str,
    namespace: &str,
    name: &str,
    replicas: i64,
    dry_run: bool,
) -> Result<WriteOutcome> {
    if !(0..=10_000).contains(&replicas) {
        return Err(invalid(format!("replicas {replicas} out of range")));
    }
    let res = r.resource(kind).await?;
    let before = r.get(&res, Some(namespace), name).await?;
    let from = i64_at(&before, &["spec", "replicas"]);
    w.patch(
        &res,
        Some(namespace),
        name,
        PatchType::Merge,
        &json!({"spec": {"replicas": replicas}}),
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::Scale,
        format!("{namespace}/{}/{name}", res.kind),
        dry_run,
        json!({"from": from, "to": replicas}),
    ))
}

/// Set resource limits/requests of one container of a workload's pod template: `container` is
/// the list that declares it (`containers` or `initContainers`) and its name.
pub async fn set_resources(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    workload: &crate::domain::Target,
    (list, container): (&str, &str),
    resources: &Value,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource(&workload.kind).await?;
    let patch = json!({"spec": {"template": {"spec": {list: [{"name": container, "resources": resources}]}}}});
    w.patch(
        &res,
        workload.namespace.as_deref(),
        &workload.name,
        PatchType::Strategic,
        &patch,
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::SetResources,
        workload.to_string(),
        dry_run,
        json!({"container": container, "resources": resources}),
    ))
}

/// Mark a node unschedulable.
pub async fn cordon(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    node: &str,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let nodes = r.resource("Node").await?;
    w.patch(
        &nodes,
        None,
        node,
        PatchType::Merge,
        &json!({"spec": {"unschedulable": true}}),
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::Cordon,
        format!("Node/{node}"),
        dry_run,
        json!({}),
    ))
}

/// Cordon a node and evict its pods (not DaemonSet pods, not mirror pods), through the eviction
/// API so PodDisruptionBudgets are respected. An eviction a budget refuses is asked again every
/// [`EVICTION_RETRY`] until `timeout`; still refused then, the drain fails naming the budget's
/// refusal, the pods left and those evicted (the node stays cordoned).
pub async fn drain(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    node: &str,
    timeout: std::time::Duration,
    dry_run: bool,
) -> Result<WriteOutcome> {
    cordon(r, w, node, dry_run).await?;
    let pods = r.resource("Pod").await?;
    let on_node = r
        .list(
            &pods,
            None,
            &ListQuery::fields(format!("spec.nodeName={node}")),
        )
        .await?;
    let mut pending: Vec<(String, String)> = on_node
        .iter()
        .filter(|p| observed::Pod::parse(p).drain_evicts())
        .map(|p| {
            (
                obj::namespace(p).unwrap_or("default").to_owned(),
                obj::name(p).to_owned(),
            )
        })
        .collect();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut evicted = Vec::new();
    // As `kubectl drain`: every pod is asked each round; one a disruption budget refuses now
    // is asked again once the pods already evicted may have been replaced, until the timeout.
    loop {
        let mut refused: Option<ClusterError> = None;
        let mut left = Vec::new();
        for (ns, name) in pending {
            match w.evict(&ns, &name, dry_run).await {
                Ok(()) => evicted.push(format!("{ns}/{name}")),
                // Gone since it was listed: nothing left to move.
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) if e.kind == ErrorKind::Refused => {
                    refused.get_or_insert(e);
                    left.push((ns, name));
                }
                Err(e) => return Err(e),
            }
        }
        let Some(refused) = refused else { break };
        if dry_run || tokio::time::Instant::now() + EVICTION_RETRY > deadline {
            let names: Vec<String> = left.iter().map(|(ns, n)| format!("{ns}/{n}")).collect();
            return Err(ClusterError::new(
                ErrorKind::Refused,
                format!(
                    "{} (still refused after {}s: {}; evicted: {})",
                    refused.message,
                    timeout.as_secs(),
                    names.join(", "),
                    if evicted.is_empty() {
                        "none".to_owned()
                    } else {
                        evicted.join(", ")
                    }
                ),
            ));
        }
        tokio::time::sleep(EVICTION_RETRY).await;
        pending = left;
    }
    Ok(outcome(
        BuiltinAction::Drain,
        format!("Node/{node}"),
        dry_run,
        json!({"evicted": evicted}),
    ))
}

/// How long a drain waits before asking again for evictions a disruption budget refused, as
/// `kubectl drain` does.
const EVICTION_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a drain asks again for evictions a disruption budget refuses, unless its step says
/// (`timeoutSeconds`): long enough for the pods it evicted first to be replaced and ready on
/// other nodes, short enough to hand a budget that never allows it back to a person.
pub const DRAIN_TIMEOUT_SECONDS: u64 = 120;

/// Remove taints with `key` (and `effect`, if given) from a node.
pub async fn remove_taint(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    node: &str,
    key: &str,
    effect: Option<&str>,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let nodes = r.resource("Node").await?;
    let current = r.get(&nodes, None, node).await?;
    let taints = array(&current, &["spec", "taints"]);
    let keep: Vec<Value> = taints
        .iter()
        .filter(|t| {
            !(str_at(t, &["key"]) == Some(key)
                && effect.is_none_or(|e| str_at(t, &["effect"]) == Some(e)))
        })
        .cloned()
        .collect();
    if keep.len() == taints.len() {
        return Err(invalid(format!("node {node} has no taint {key}")));
    }
    let rv = str_at(&current, &["metadata", "resourceVersion"]).unwrap_or("");
    let patch = json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": keep}});
    w.patch(&nodes, None, node, PatchType::Merge, &patch, dry_run)
        .await?;
    Ok(outcome(
        BuiltinAction::RemoveTaint,
        format!("Node/{node}"),
        dry_run,
        json!({"key": key, "effect": effect}),
    ))
}

/// Raise (or lower) an HPA's `maxReplicas`.
pub async fn patch_hpa_max(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    max: i64,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource("HorizontalPodAutoscaler").await?;
    w.patch(
        &res,
        Some(namespace),
        name,
        PatchType::Merge,
        &json!({"spec": {"maxReplicas": max}}),
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::PatchHpaMax,
        format!("{namespace}/HorizontalPodAutoscaler/{name}"),
        dry_run,
        json!({"maxReplicas": max}),
    ))
}

/// Relax a PDB: set `maxUnavailable` (and drop `minAvailable`, they are exclusive).
pub async fn relax_pdb(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    max_unavailable: i64,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource("PodDisruptionBudget").await?;
    let patch = json!({"spec": {"minAvailable": null, "maxUnavailable": max_unavailable}});
    w.patch(
        &res,
        Some(namespace),
        name,
        PatchType::Merge,
        &patch,
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::RelaxPdb,
        format!("{namespace}/PodDisruptionBudget/{name}"),
        dry_run,
        json!({"maxUnavailable": max_unavailable}),
    ))
}

/// Grow a PVC's storage request (the StorageClass must allow expansion).
pub async fn expand_pvc(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    size: &str,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource("PersistentVolumeClaim").await?;
    let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
    w.patch(
        &res,
        Some(namespace),
        name,
        PatchType::Merge,
        &patch,
        dry_run,
    )
    .await?;
    Ok(outcome(
        BuiltinAction::ExpandPvc,
        format!("{namespace}/PersistentVolumeClaim/{name}"),
        dry_run,
        json!({"storage": size}),
    ))
}

/// Delete a pod (its controller recreates it).
pub async fn delete_pod(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource("Pod").await?;
    w.delete(&res, Some(namespace), name, dry_run).await?;
    Ok(outcome(
        BuiltinAction::DeletePod,
        format!("{namespace}/Pod/{name}"),
        dry_run,
        json!({}),
    ))
}
