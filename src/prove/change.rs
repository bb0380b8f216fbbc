//! The change a dry run says an action would make, in words an approver reads: "image of
//! container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1; 3 pods replaced, at most 1
//! unavailable", "memory limit of container api 256Mi → 384Mi".

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cluster::obj::{self, array, at, str_at};
use crate::cluster::observed::Workload;
use crate::cluster::{DryRunOp, DryRunWrite};
use crate::domain::{DryRunChange, ObjectChange};

fn object_name(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "(none)".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn by_name(list: &[Value]) -> Vec<(String, &Value)> {
    list.iter()
        .map(|c| (str_at(c, &["name"]).unwrap_or_default().to_owned(), c))
        .collect()
}

/// How the containers of two pod specs differ.
fn containers(before: &Value, after: &Value, out: &mut Vec<String>) {
    for key in ["initContainers", "containers"] {
        let b = by_name(array(before, &[key]));
        let a = by_name(array(after, &[key]));
        let label = if key == "initContainers" {
            "init container"
        } else {
            "container"
        };
        for (name, ac) in &a {
            let Some((_, bc)) = b.iter().find(|(n, _)| n == name) else {
                out.push(format!(
                    "{label} {name} added ({})",
                    show(at(ac, &["image"]))
                ));
                continue;
            };
            if at(bc, &["image"]) != at(ac, &["image"]) {
                out.push(format!(
                    "image of {label} {name} {} → {}",
                    show(at(bc, &["image"])),
                    show(at(ac, &["image"]))
                ));
            }
            for section in ["limits", "requests"] {
                let keys: BTreeSet<String> = [bc, ac]
                    .iter()
                    .filter_map(|c| at(c, &["resources", section]).and_then(Value::as_object))
                    .flat_map(|m| m.keys().cloned())
                    .collect();
                for r in keys {
                    let (x, y) = (
                        at(bc, &["resources", section, &r]),
                        at(ac, &["resources", section, &r]),
                    );
                    if x != y {
                        let what = if section == "limits" {
                            "limit"
                        } else {
                            "request"
                        };
                        out.push(format!(
                            "{r} {what} of {label} {name} {} → {}",
                            show(x),
                            show(y)
                        ));
                    }
                }
            }
            for field in ["command", "args", "env", "envFrom", "ports", "volumeMounts"] {
                if at(bc, &[field]) != at(ac, &[field]) {
                    out.push(format!("{field} of {label} {name} changed"));
                }
            }
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                if at(bc, &[probe]) != at(ac, &[probe]) {
                    out.push(format!("{probe} of {label} {name} changed"));
                }
            }
        }
        for (name, _) in &b {
            if !a.iter().any(|(n, _)| n == name) {
                out.push(format!("{label} {name} removed"));
            }
        }
    }
    if at(before, &["volumes"]) != at(after, &["volumes"]) {
        out.push("volumes changed".into());
    }
}

/// What a changed pod template does to the running pods.
fn rollout(w: &Value) -> String {
    let workload = Workload::parse(w);
    let replicas = workload.wanted();
    let strategy = workload.strategy.as_deref().unwrap_or("RollingUpdate");
    let percent = |p: i64| Value::from(format!("{p}%"));
    match workload.kind.as_str() {
        "StatefulSet" => {
            format!("{replicas} pod(s) replaced one at a time, highest ordinal first ({strategy})")
        }
        "DaemonSet" => format!(
            "the pod on every node replaced, at most {} unavailable at a time",
            show(workload.max_unavailable.as_ref().or(Some(&Value::from(1))))
        ),
        _ if strategy == "Recreate" => {
            format!("all {replicas} pod(s) stopped, then replaced (Recreate)")
        }
        _ => format!(
            "{replicas} pod(s) replaced, at most {} unavailable and {} extra at a time",
            show(workload.max_unavailable.as_ref().or(Some(&percent(
                super::findings::DEFAULT_MAX_UNAVAILABLE_PERCENT
            )))),
            show(
                workload
                    .max_surge
                    .as_ref()
                    .or(Some(&percent(super::findings::DEFAULT_MAX_SURGE_PERCENT)))
            )
        ),
    }
}

fn workload(before: &Value, after: &Value, out: &mut Vec<String>) {
    let (br, ar) = (
        at(before, &["spec", "replicas"]),
        at(after, &["spec", "replicas"]),
    );
    if br != ar {
        out.push(format!("replicas {} → {}", show(br), show(ar)));
    }
    let (bt, at_) = (
        at(before, &["spec", "template"]),
        at(after, &["spec", "template"]),
    );
    if bt == at_ {
        return;
    }
    let empty = Value::Null;
    let (bt, at_) = (bt.unwrap_or(&empty), at_.unwrap_or(&empty));
    let mut changes = Vec::new();
    containers(
        at(bt, &["spec"]).unwrap_or(&empty),
        at(at_, &["spec"]).unwrap_or(&empty),
        &mut changes,
    );
    let restamp =
        |t: &Value| obj::annotation(t, "kubectl.kubernetes.io/restartedAt").map(str::to_owned);
    if restamp(bt) != restamp(at_) {
        changes.push("pods restarted (kubectl.kubernetes.io/restartedAt stamped)".into());
    }
    if changes.is_empty() {
        changes.push("pod template changed".into());
    }
    out.extend(changes);
    out.push(rollout(after));
}

fn node(before: &Value, after: &Value, out: &mut Vec<String>) {
    let cordoned =
        |n: &Value| at(n, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true);
    if cordoned(before) != cordoned(after) {
        out.push(if cordoned(after) {
            "cordoned (no new pods scheduled)".into()
        } else {
            "uncordoned".into()
        });
    }
    let taints = |n: &Value| -> BTreeSet<String> {
        array(n, &["spec", "taints"])
            .iter()
            .map(|t| {
                format!(
                    "{}{}:{}",
                    str_at(t, &["key"]).unwrap_or_default(),
                    str_at(t, &["value"])
                        .map(|v| format!("={v}"))
                        .unwrap_or_default(),
                    str_at(t, &["effect"]).unwrap_or_default()
                )
            })
            .collect()
    };
    let (b, a) = (taints(before), taints(after));
    for t in b.difference(&a) {
        out.push(format!("taint {t} removed"));
    }
    for t in a.difference(&b) {
        out.push(format!("taint {t} added"));
    }
}

fn compare(kind: &str, before: &Value, after: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            workload(before, after, &mut out)
        }
        "HorizontalPodAutoscaler" => {
            for f in ["minReplicas", "maxReplicas"] {
                let (b, a) = (at(before, &["spec", f]), at(after, &["spec", f]));
                if b != a {
                    out.push(format!("{f} {} → {}", show(b), show(a)));
                }
            }
        }
        "PodDisruptionBudget" => {
            for f in ["minAvailable", "maxUnavailable"] {
                let (b, a) = (at(before, &["spec", f]), at(after, &["spec", f]));
                if b != a {
                    out.push(format!("{f} {} → {}", show(b), show(a)));
                }
            }
        }
        "PersistentVolumeClaim" => {
            let p = ["spec", "resources", "requests", "storage"];
            let (b, a) = (at(before, &p), at(after, &p));
            if b != a {
                out.push(format!("storage request {} → {}", show(b), show(a)));
            }
        }
        "Node" => node(before, after, &mut out),
        _ => {}
    }
    if out.is_empty() && at(before, &["spec"]) != at(after, &["spec"]) {
        out.push("spec changed".into());
    }
    out
}

/// The dry-run calls of one action, as changes per object (several calls to one object are
/// one change: from the first state to the last).
pub(super) fn describe(writes: &[DryRunWrite]) -> DryRunChange {
    let mut objects: Vec<ObjectChange> = Vec::new();
    let mut seen: Vec<(String, Option<Value>, Option<Value>, DryRunOp)> = Vec::new();
    for w in writes {
        let key = object_name(&w.kind, w.namespace.as_deref(), &w.name);
        match seen.iter_mut().find(|(k, ..)| *k == key) {
            Some(entry) => {
                entry.2 = w.after.clone();
                entry.3 = w.op;
            }
            None => seen.push((key, w.before.clone(), w.after.clone(), w.op)),
        }
    }
    for (key, before, after, op) in seen {
        let kind = key.split(' ').next().unwrap_or_default().to_owned();
        let changes = match (op, &before, &after) {
            (DryRunOp::Delete, _, _) => {
                let owner = before.as_ref().and_then(|b| {
                    array(b, &["metadata", "ownerReferences"])
                        .iter()
                        .find(|o| at(o, &["controller"]).and_then(Value::as_bool) == Some(true))
                        .map(|o| format!("{} {}", show(at(o, &["kind"])), show(at(o, &["name"]))))
                });
                vec![match owner {
                    Some(o) => format!("deleted; its {o} creates a replacement"),
                    None => "deleted".into(),
                }]
            }
            (DryRunOp::Evict, _, _) => vec!["evicted (its disruption budget allows it)".into()],
            (DryRunOp::Create, _, Some(a)) => vec![format!(
                "created{}",
                array(a, &["spec", "template", "spec", "containers"])
                    .first()
                    .and_then(|c| str_at(c, &["image"]))
                    .map(|i| format!(" (image {i})"))
                    .unwrap_or_default()
            )],
            (_, Some(b), Some(a)) => compare(&kind, b, a),
            (_, None, Some(_)) => vec!["changed (its state before could not be read)".into()],
            _ => vec![],
        };
        if !changes.is_empty() {
            objects.push(ObjectChange {
                object: key,
                changes,
            });
        }
    }
    // Evictions of a drain: one line for all of them.
    let evicted: Vec<String> = objects
        .iter()
        .filter(|o| o.changes.iter().any(|c| c.starts_with("evicted")))
        .map(|o| o.object.trim_start_matches("Pod ").to_owned())
        .collect();
    if evicted.len() > 3 {
        objects.retain(|o| !o.changes.iter().any(|c| c.starts_with("evicted")));
        objects.push(ObjectChange {
            object: format!("{} pods", evicted.len()),
            changes: vec![format!("evicted: {}", evicted.join(", "))],
        });
    }
    DryRunChange {
        objects,
        refused: None,
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(image: &str, memory: &str, replicas: i64) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "checkout", "namespace": "shop"},
            "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
              "template": {"spec": {"containers": [{"name": "checkout", "image": image,
                "resources": {"limits": {"memory": memory}}}]}}}})
    }

    fn write(before: Value, after: Value) -> DryRunWrite {
        DryRunWrite {
            op: DryRunOp::Replace,
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "checkout".into(),
            before: Some(before),
            after: Some(after),
        }
    }

    #[test]
    fn a_rollback_reads_as_its_image_change_and_what_happens_to_the_pods() {
        let c = describe(&[write(
            deployment("shop/checkout:1.4.2", "256Mi", 3),
            deployment("shop/checkout:1.4.1", "256Mi", 3),
        )]);
        assert_eq!(
            c.summary(),
            "Deployment shop/checkout: image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1; \
             Deployment shop/checkout: 3 pod(s) replaced, at most 1 unavailable and 1 extra at a time"
        );
    }

    #[test]
    fn a_limit_change_names_the_container_and_both_values() {
        let c = describe(&[write(
            deployment("shop/api:1", "256Mi", 2),
            deployment("shop/api:1", "384Mi", 2),
        )]);
        assert!(
            c.lines().contains(
                &"Deployment shop/checkout: memory limit of container checkout 256Mi → 384Mi"
                    .to_owned()
            ),
            "{:?}",
            c.lines()
        );
    }

    #[test]
    fn a_deletion_names_the_controller_that_replaces_the_pod() {
        let c = describe(&[DryRunWrite {
            op: DryRunOp::Delete,
            kind: "Pod".into(),
            namespace: Some("shop".into()),
            name: "checkout-1".into(),
            before: Some(
                json!({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "checkout-7d9", "controller": true}]}}),
            ),
            after: None,
        }]);
        assert_eq!(
            c.summary(),
            "Pod shop/checkout-1: deleted; its ReplicaSet checkout-7d9 creates a replacement"
        );
    }
}
