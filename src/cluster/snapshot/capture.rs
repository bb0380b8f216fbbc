//! [`capture`]: a snapshot from a live cluster — the target namespaces' objects of the kinds
//! an investigation reads, the cluster-scoped ones it follows, events, current and previous
//! logs; never Secrets; every value sanitised.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::SNAPSHOT_API_VERSION;
use crate::cluster::obj::{self, str_at};
use crate::cluster::render::strip_noise;
use crate::cluster::{ClusterError, ClusterReader, ErrorKind, ListQuery, LogQuery, Result};
use crate::redact::{sanitize_text, sanitize_value};

/// An object as `kubectl get -o yaml` shows it, with its managed fields cut to who wrote it and
/// when (a Node keeps which fields, so who set its taints stays visible). A workload keeps its
/// last-applied configuration (the replicas and template it was declared with are evidence,
/// e.g. of a workload scaled to zero by hand); everything is sanitised afterwards.
fn captured(d: &Value) -> Value {
    let kind = obj::kind(d);
    let managed = crate::cluster::cache::trimmed_managed_fields(d);
    let mut v = if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet") {
        let mut v = d.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        v
    } else {
        strip_noise(d)
    };
    if !managed.is_empty()
        && let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("managedFields".into(), Value::Array(managed));
    }
    v
}

/// Namespaced kinds a snapshot captures (Secrets never).
pub const CAPTURED_KINDS: &[&str] = &[
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ControllerRevision",
    "Job",
    "CronJob",
    "Service",
    "Endpoints",
    "ConfigMap",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "Event",
    "PodMetrics",
];

/// Cluster-scoped kinds a snapshot captures.
pub const CAPTURED_CLUSTER_KINDS: &[&str] = &["Node", "PersistentVolume", "StorageClass"];

/// Capture the given namespaces of a live cluster as snapshot YAML; none given: every
/// namespace the reader may list (blocked ones are left out by its read policy). Kinds that
/// cannot be read (forbidden, not served) are listed in the header and skipped.
pub async fn capture(
    reader: &dyn ClusterReader,
    namespaces: &[String],
    now: DateTime<Utc>,
) -> Result<String> {
    let mut docs: Vec<Value> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let version = reader.server_version().await?;
    let ns_res = reader.resource("Namespace").await?;
    let namespaces: Vec<String> = if namespaces.is_empty() {
        reader
            .list(&ns_res, None, &ListQuery::default())
            .await
            .map_err(|e| {
                ClusterError::new(
                    e.kind,
                    format!("cannot list namespaces ({e}); name them with --namespace"),
                )
            })?
            .iter()
            .map(|n| obj::name(n).to_owned())
            .collect()
    } else {
        namespaces.to_vec()
    };
    for ns in &namespaces {
        match reader.get(&ns_res, None, ns).await {
            Ok(o) => docs.push(o),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(e) => skipped.push(format!("Namespace/{ns}: {e}")),
        }
        for kind in CAPTURED_KINDS {
            let res = match reader.resource(kind).await {
                Ok(r) => r,
                Err(e) => {
                    skipped.push(format!("{kind}: {e}"));
                    continue;
                }
            };
            match reader.list(&res, Some(ns), &ListQuery::default()).await {
                Ok(items) => docs.extend(items),
                Err(e) if e.is_unreachable() => return Err(e),
                Err(e) => skipped.push(format!("{kind} in {ns}: {e}")),
            }
        }
    }
    for kind in CAPTURED_CLUSTER_KINDS {
        match reader.resource(kind).await {
            Ok(res) => match reader.list(&res, None, &ListQuery::default()).await {
                Ok(items) => docs.extend(items),
                Err(e) if e.is_unreachable() => return Err(e),
                Err(e) => skipped.push(format!("{kind}: {e}")),
            },
            Err(e) => skipped.push(format!("{kind}: {e}")),
        }
    }
    // What the nodes reported about themselves (NotReady, SystemOOM, pressure): events about a
    // Node live in whatever namespace its kubelet wrote them to (`default`), not in the
    // namespaces captured, yet the investigation reads them.
    if namespaces.iter().all(|ns| ns != "default")
        && let Ok(res) = reader.resource("Event").await
    {
        match reader
            .list(&res, None, &ListQuery::fields("involvedObject.kind=Node"))
            .await
        {
            Ok(items) => docs.extend(items),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(e) => skipped.push(format!("Events about Nodes: {e}")),
        }
    }
    let mut logs: Vec<Value> = Vec::new();
    for pod in docs.iter().filter(|d| obj::kind(d) == "Pod") {
        let ns = obj::namespace(pod).unwrap_or("");
        let name = obj::name(pod);
        for status in obj::array(pod, &["status", "containerStatuses"]) {
            let Some(container) = str_at(status, &["name"]) else {
                continue;
            };
            let restarted = obj::i64_at(status, &["restartCount"]).unwrap_or(0) > 0
                || obj::at(status, &["lastState", "terminated"]).is_some();
            for previous in [false, true] {
                if previous && !restarted {
                    continue;
                }
                let q = LogQuery {
                    container: Some(container.to_owned()),
                    previous,
                    tail_lines: Some(500),
                    since_seconds: None,
                };
                match reader.logs(ns, name, &q).await {
                    Ok(text) => logs.push(json!({
                        "apiVersion": SNAPSHOT_API_VERSION,
                        "kind": "PodLogs",
                        "metadata": {"namespace": ns, "name": name},
                        "container": container,
                        "previous": previous,
                        "text": sanitize_text(&text),
                    })),
                    Err(e) if e.is_unreachable() => return Err(e),
                    Err(_) => {}
                }
            }
        }
    }
    let header = json!({
        "apiVersion": SNAPSHOT_API_VERSION,
        "kind": "SnapshotInfo",
        "serverVersion": version,
        "capturedAt": now.to_rfc3339(),
        "namespaces": namespaces,
        "skipped": skipped,
    });
    let mut out =
        String::from("# kubemedic cluster snapshot (Secrets never captured; values sanitised)\n");
    for doc in std::iter::once(header)
        .chain(
            docs.iter()
                .filter(|d| obj::kind(d) != "Secret")
                .map(|d| sanitize_value(&captured(d))),
        )
        .chain(logs)
    {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string(&doc).map_err(|e| {
                ClusterError::new(ErrorKind::Other, format!("cannot write YAML: {e}"))
            })?,
        );
    }
    Ok(out)
}
