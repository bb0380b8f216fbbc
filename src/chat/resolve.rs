//! What a question is about, read against the cluster rather than guessed from grammar.
//!
//! Every word of the question that could be a Kubernetes name is looked up among the names
//! the cluster has: namespaces, workloads (Deployments, StatefulSets, DaemonSets), pods and
//! nodes. A name that exists is a target; a namespace named alone is a scan of it; a word such
//! as "pod" or "node" narrows the kinds. Nothing found falls back on the conversation's last
//! target ("fix it", "and its logs?"); more than one match is asked back, never picked.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cluster::observed;
use crate::cluster::{ClusterReader, ListQuery};
use crate::domain::Target;

/// The kinds a question may name, in the order a match is preferred.
const WORKLOAD_KINDS: &[&str] = &["Deployment", "StatefulSet", "DaemonSet"];

/// Words that ask about a whole namespace rather than one object.
const SCAN_WORDS: &[&str] = &[
    "anything",
    "everything",
    "wrong",
    "unhealthy",
    "health",
    "healthy",
    "problem",
    "problems",
    "issue",
    "issues",
    "broken",
    "failing",
    "scan",
    "status",
];

/// What a question was resolved to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// One object; `how` says which words named it.
    Target { target: Target, how: String },
    /// A namespace, to scan for what is unhealthy.
    Scan { namespace: String },
    /// Several objects match; the answer lists them and asks which.
    Ambiguous { candidates: Vec<Target> },
    /// Nothing in the question or the conversation names an object.
    Unknown,
}

/// The words of a question that could be Kubernetes names (DNS labels and subdomains,
/// lowercased), in order; `ns/name` counts as both.
pub fn words(question: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in question.split(|c: char| !(c.is_ascii_alphanumeric() || "-./_".contains(c))) {
        for part in raw.split('/') {
            let w = part
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_ascii_lowercase();
            if !w.is_empty() && w.len() <= 253 {
                out.push(w);
            }
        }
    }
    out
}

fn names(items: &[Value]) -> Vec<(Option<String>, String)> {
    items
        .iter()
        .filter_map(|o| {
            let m = o.get("metadata")?;
            Some((
                m.get("namespace")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                m.get("name")?.as_str()?.to_owned(),
            ))
        })
        .collect()
}

async fn list(
    reader: &dyn ClusterReader,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Vec<Value>, String> {
    let res = reader
        .resource(kind)
        .await
        .map_err(|e| format!("cannot list {kind}: {e}"))?;
    reader
        .list(&res, namespace, &ListQuery::default())
        .await
        .map_err(|e| format!("cannot list {kind}: {e}"))
}

/// Resolve `question` against the cluster; `previous` is the conversation's last target.
pub async fn resolve(
    reader: &dyn ClusterReader,
    question: &str,
    previous: Option<&Target>,
) -> Result<Resolution, String> {
    let words = words(question);
    let said: BTreeSet<&str> = words.iter().map(String::as_str).collect();
    let wants = |k: &[&str]| k.iter().any(|w| said.contains(w));
    let kind_hint: Option<&str> = if wants(&["pod", "pods", "po"]) {
        Some("Pod")
    } else if wants(&["node", "nodes"]) {
        Some("Node")
    } else if wants(&["deployment", "deployments", "deploy"]) {
        Some("Deployment")
    } else if wants(&["statefulset", "statefulsets", "sts"]) {
        Some("StatefulSet")
    } else if wants(&["daemonset", "daemonsets", "ds"]) {
        Some("DaemonSet")
    } else {
        None
    };

    let namespaces: Vec<String> = names(&list(reader, "Namespace", None).await?)
        .into_iter()
        .map(|(_, n)| n)
        .filter(|n| said.contains(n.as_str()))
        .collect();
    let scopes: Vec<Option<&str>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(|n| Some(n.as_str())).collect()
    };

    let mut candidates: Vec<Target> = Vec::new();
    let kinds: Vec<&str> = match kind_hint {
        Some(k) => vec![k],
        None => WORKLOAD_KINDS
            .iter()
            .copied()
            .chain(["Pod", "Node"])
            .collect(),
    };
    for kind in kinds {
        let scoped: Vec<Option<&str>> = if kind == "Node" {
            vec![None]
        } else {
            scopes.clone()
        };
        for ns in scoped {
            for (obj_ns, name) in names(&list(reader, kind, ns).await?) {
                // A namespace's own name is not also an object of it, unless asked by kind.
                let named_as_namespace = namespaces.contains(&name) && kind_hint.is_none();
                if said.contains(name.as_str()) && !named_as_namespace {
                    candidates.push(Target::new(kind, name, obj_ns));
                }
            }
        }
    }
    candidates.dedup();
    // A workload is preferred to its pods or a node of the same name.
    if candidates.len() > 1 {
        let workloads: Vec<Target> = candidates
            .iter()
            .filter(|t| WORKLOAD_KINDS.contains(&t.kind.as_str()))
            .cloned()
            .collect();
        if !workloads.is_empty() {
            candidates = workloads;
        }
    }
    match candidates.len() {
        1 => {
            let target = candidates.remove(0);
            let how = format!(
                "`{}` is a {}{}",
                target.name,
                target.kind,
                target
                    .namespace
                    .as_ref()
                    .map(|n| format!(" in namespace {n}"))
                    .unwrap_or_default()
            );
            return Ok(Resolution::Target { target, how });
        }
        0 => {}
        _ => return Ok(Resolution::Ambiguous { candidates }),
    }
    if let [namespace] = namespaces.as_slice()
        && (SCAN_WORDS.iter().any(|w| said.contains(w)) || previous.is_none())
    {
        return Ok(Resolution::Scan {
            namespace: namespace.clone(),
        });
    }
    if let Some(previous) = previous {
        return Ok(Resolution::Target {
            target: previous.clone(),
            how: "the conversation's last target".into(),
        });
    }
    Ok(Resolution::Unknown)
}

/// One thing a namespace scan found wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The workload that owns the pod, when it could be named; else the pod.
    pub target: Target,
    pub what: String,
}

/// The workloads (and unowned pods) of `namespace` that are not healthy, worst first.
pub async fn scan(
    reader: &dyn ClusterReader,
    namespace: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Finding>, String> {
    let mut workloads: Vec<(String, String)> = Vec::new();
    for kind in WORKLOAD_KINDS {
        for (_, name) in names(&list(reader, kind, Some(namespace)).await?) {
            workloads.push(((*kind).to_owned(), name));
        }
    }
    let mut found: Vec<Finding> = Vec::new();
    // The pods heed the namespace's warnings, as every other reader's do (a pod a minute into
    // ContainerCreating with a FailedMount fails to start).
    let pods: Vec<observed::Pod> = list(reader, "Pod", Some(namespace))
        .await?
        .iter()
        .map(|raw| observed::Pod::at(raw, now))
        .collect();
    let pods = crate::cluster::heeding(reader, pods, Some(namespace))
        .await
        .map_err(|e| format!("cannot read the events of namespace {namespace}: {e}"))?;
    for pod in pods {
        let Some(problem) = pod_problem(&pod) else {
            continue;
        };
        let pod_name = pod.name.clone();
        let owner = owner_workload(&pod, &workloads);
        let target = match owner {
            Some((kind, name)) => Target::new(kind, name, Some(namespace.to_owned())),
            None => Target::new("Pod", pod_name.clone(), Some(namespace.to_owned())),
        };
        let what = format!("pod {pod_name}: {problem}");
        match found.iter_mut().find(|f| f.target == target) {
            Some(f) => {
                if !f.what.contains(&problem) {
                    f.what.push_str(&format!("; {what}"));
                }
            }
            None => found.push(Finding { target, what }),
        }
    }
    Ok(found)
}

/// The workload a pod belongs to ([`observed::Pod::workload`]), among `workloads`.
fn owner_workload(pod: &observed::Pod, workloads: &[(String, String)]) -> Option<(String, String)> {
    pod.controller.as_ref()?;
    let owner = pod.workload();
    workloads.iter().find(|w| **w == owner).cloned()
}

/// What is wrong with a pod now, if anything ([`observed::Pod::failure`]).
fn pod_problem(pod: &observed::Pod) -> Option<String> {
    pod.failure().map(|f| f.line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_the_names_a_question_could_hold() {
        assert_eq!(
            words("Why is checkout crashing in shop?"),
            ["why", "is", "checkout", "crashing", "in", "shop"]
        );
        assert_eq!(
            words("look at shop/checkout-v2."),
            ["look", "at", "shop", "checkout-v2"]
        );
        assert_eq!(
            words("node worker-1.example.com"),
            ["node", "worker-1.example.com"]
        );
    }

    #[test]
    fn a_pod_is_unhealthy_by_its_waiting_reason_or_readiness() {
        let pod_problem =
            |raw: &Value| super::pod_problem(&observed::Pod::at(raw, chrono::Utc::now()));
        let crashing = serde_json::json!({"status": {"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": false, "restartCount": 7,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(
            pod_problem(&crashing).as_deref(),
            Some("container app CrashLoopBackOff, 7 restarts")
        );
        let fine = serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        assert_eq!(pod_problem(&fine), None);
        let probe = serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}], "containerStatuses": [
            {"name": "app", "ready": false, "restartCount": 0, "state": {"running": {}}}]}});
        assert_eq!(
            pod_problem(&probe).as_deref(),
            Some("running, not ready (container app)")
        );
        // Ten seconds into creating its containers a pod is starting, not failing.
        let starting = serde_json::json!({"metadata": {"creationTimestamp": chrono::Utc::now()
                - chrono::Duration::seconds(10)},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "app",
                "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        assert_eq!(pod_problem(&starting), None);
        assert_eq!(pod_problem(&fine), None);
        let pending = serde_json::json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/1 nodes are available"}]}});
        assert_eq!(
            pod_problem(&pending).as_deref(),
            Some("Pending, unschedulable: 0/1 nodes are available")
        );
    }

    /// Issue 43: the namespace scan heeds the namespace's warnings, as the rules, the proofs
    /// and the graph do: a pod seconds into ContainerCreating whose volume cannot mount fails
    /// to start; without the warning it is starting.
    #[tokio::test]
    async fn the_scan_heeds_the_warnings_about_a_pod_still_starting() {
        let now: chrono::DateTime<chrono::Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "shop",
                "creationTimestamp": "2026-11-21T11:59:30Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "web:1"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "app",
                "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        let warning = serde_json::json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web-0.1", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "shop"},
            "type": "Warning", "reason": "FailedMount",
            "message": "MountVolume.SetUp failed for volume \"data\": rpc error: code = Internal desc = volume in use by another node",
            "lastTimestamp": "2026-11-21T11:59:50Z"});
        let found = |items: Vec<Value>| async move {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            let snap = crate::cluster::SnapshotCluster::from_yaml(&list.to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            scan(&snap, "shop", now)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(found(vec![pod.clone()]).await.is_empty());
        let warned = found(vec![pod, warning]).await;
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].what.contains("FailedMount"), "{warned:?}");
    }

    /// A pod of a Deployment's ReplicaSet belongs to the Deployment; one of a ReplicaSet made
    /// by hand (`web-v2`, no template hash in its name) to the ReplicaSet, not to a Deployment
    /// `web` beside it.
    #[test]
    fn a_pod_belongs_to_its_deployment_only_through_a_replicaset_named_by_its_hash() {
        let pod = |rs: &str, hash: Option<&str>| {
            let mut labels = serde_json::Map::new();
            if let Some(h) = hash {
                labels.insert("pod-template-hash".into(), h.into());
            }
            observed::Pod::parse(
                &serde_json::json!({"metadata": {"name": format!("{rs}-x2k9p"),
                "labels": labels,
                "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "controller": true}]}}),
            )
        };
        let workloads = [
            ("Deployment".to_owned(), "web".to_owned()),
            ("ReplicaSet".to_owned(), "web-v2".to_owned()),
        ];
        assert_eq!(
            owner_workload(&pod("web-7d4b9c8f6", Some("7d4b9c8f6")), &workloads),
            Some(workloads[0].clone())
        );
        assert_eq!(
            owner_workload(&pod("web-v2", None), &workloads),
            Some(workloads[1].clone())
        );
    }
}
