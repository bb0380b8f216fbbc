//! The simulated control plane of a [`super::snapshot::SnapshotCluster`] made with
//! `simulating()` (what `kubemedic demo` executes against): writes are applied to the captured
//! objects, and the controllers and kubelets a real cluster runs are stood in for here. Every
//! part of it is a stand-in, and the demo labels what it produced "simulated":
//! - writes: JSON merge patch (RFC 7386), strategic merge patch (lists of named objects merged
//!   by name, as for containers), replace with a `resourceVersion` check, create, delete, evict;
//! - the Deployment controller: a pod template that no ReplicaSet runs gets one (an existing
//!   ReplicaSet with the same template is reused, as `rollout undo` does), the others are scaled
//!   to zero and their pods removed, the current one follows `spec.replicas`;
//! - the kubelet: a pod the simulation starts is scheduled on a Ready, schedulable node and
//!   runs ready at once — whether the new pods of a real cluster run is for that cluster to say;
//! - volume expansion: a PVC's capacity follows its request when its StorageClass allows it.
//!
//! Pure functions over the object list; the caller holds the lock and the clock.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::obj::{self, array, at, i64_at, str_at};

const REVISION: &str = "deployment.kubernetes.io/revision";
const TEMPLATE_HASH: &str = "pod-template-hash";

/// An object that changed and whose controllers must react: (kind, namespace, name).
pub type Dirty = BTreeSet<(String, Option<String>, String)>;

/// JSON merge patch (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Strategic merge patch, as far as kubemedic's writes need it: like a merge patch, except that
/// a list of objects that all carry a `name` is merged element by element on `name`.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (Value::Array(t), Value::Array(p)) if named(t) && named(p) => {
            for item in p {
                let name = str_at(item, &["name"]);
                match t.iter_mut().find(|e| str_at(e, &["name"]) == name) {
                    Some(existing) => strategic_merge(existing, item),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, p) => {
            *t = Value::Null;
            merge_patch(t, p);
        }
    }
}

fn named(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|i| str_at(i, &["name"]).is_some())
}

/// The next `resourceVersion` after every one in `objects`.
pub fn next_resource_version(objects: &[Value]) -> String {
    let max = objects
        .iter()
        .filter_map(|o| str_at(o, &["metadata", "resourceVersion"]))
        .filter_map(|v| v.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    (max + 1).to_string()
}

/// Stamp a written object: a new `resourceVersion`, and a new `generation` when its spec
/// changed.
pub fn stamp_written(object: &mut Value, before: Option<&Value>, resource_version: String) {
    let spec_changed = before.is_none_or(|b| b.get("spec") != object.get("spec"));
    let generation = before
        .and_then(|b| i64_at(b, &["metadata", "generation"]))
        .unwrap_or(0);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(resource_version));
        meta.insert(
            "generation".into(),
            json!(if spec_changed {
                generation + 1
            } else {
                generation.max(1)
            }),
        );
    }
}

fn same_object(o: &Value, kind: &str, namespace: Option<&str>, name: &str) -> bool {
    obj::kind(o) == kind && obj::namespace(o) == namespace && obj::name(o) == name
}

fn uid(o: &Value) -> &str {
    str_at(o, &["metadata", "uid"]).unwrap_or("")
}

fn owner_of(o: &Value) -> Option<(&str, &str)> {
    array(o, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) != Some(false))
        .and_then(|r| Some((str_at(r, &["kind"])?, str_at(r, &["name"])?)))
}

/// What changed besides `changed` itself: a removed pod marks its controller, and its
/// controller's Deployment, dirty.
pub fn owners_of_removed(objects: &[Value], removed: &Value, dirty: &mut Dirty) {
    if obj::kind(removed) != "Pod" {
        return;
    }
    let ns = obj::namespace(removed).map(str::to_owned);
    if let Some(("ReplicaSet", rs)) = owner_of(removed) {
        let deployment = objects
            .iter()
            .find(|o| same_object(o, "ReplicaSet", ns.as_deref(), rs))
            .and_then(owner_of)
            .filter(|(k, _)| *k == "Deployment")
            .map(|(_, n)| n.to_owned());
        if let Some(d) = deployment {
            dirty.insert(("Deployment".into(), ns, d));
        }
    }
}

/// Run the simulated controllers for what changed.
pub fn reconcile(objects: &mut Vec<Value>, dirty: &Dirty, now: DateTime<Utc>) {
    for (kind, ns, name) in dirty {
        match kind.as_str() {
            "Deployment" => deployment(objects, ns.as_deref(), name, now),
            "PersistentVolumeClaim" => expand_volume(objects, ns.as_deref(), name),
            _ => {}
        }
    }
}

/// The pod template without the label the controller adds, for comparing templates.
fn bare_template(t: &Value) -> Value {
    let mut t = t.clone();
    if let Some(labels) = t
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.remove(TEMPLATE_HASH);
    }
    if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("creationTimestamp");
    }
    t
}

/// The `pod-template-hash` of a template: the start of its spec hash.
fn template_hash(t: &Value) -> String {
    let hash = super::context::spec_hash(&bare_template(t));
    hash.trim_start_matches("sha256:")
        .chars()
        .take(10)
        .collect()
}

fn revision(o: &Value) -> i64 {
    obj::annotation(o, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn set_annotation(o: &mut Value, key: &str, value: &str) {
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(a) = annotations {
            a.insert(key.into(), json!(value));
        }
    }
}

fn set_path(o: &mut Value, path: &[&str], value: Value) {
    let mut cur = o;
    for key in &path[..path.len() - 1] {
        if !cur.get(*key).is_some_and(Value::is_object)
            && let Value::Object(m) = cur
        {
            m.insert((*key).into(), Value::Object(Map::new()));
        }
        match cur.get_mut(*key) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let (Value::Object(m), Some(last)) = (cur, path.last()) {
        m.insert((*last).into(), value);
    }
}

fn deployment(objects: &mut Vec<Value>, ns: Option<&str>, name: &str, now: DateTime<Utc>) {
    let Some(d) = objects
        .iter()
        .find(|o| same_object(o, "Deployment", ns, name))
        .cloned()
    else {
        return;
    };
    let Some(template) = at(&d, &["spec", "template"]).cloned() else {
        return;
    };
    let replicas = i64_at(&d, &["spec", "replicas"]).unwrap_or(1).max(0);
    let wanted = bare_template(&template);
    let sets: Vec<usize> = (0..objects.len())
        .filter(|i| obj::kind(&objects[*i]) == "ReplicaSet" && obj::owned_by(&objects[*i], &d))
        .collect();
    let top = sets
        .iter()
        .map(|i| revision(&objects[*i]))
        .max()
        .unwrap_or(0);
    let current = sets.iter().copied().find(|i| {
        at(&objects[*i], &["spec", "template"]).map(bare_template) == Some(wanted.clone())
    });
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let current = match current {
        Some(i) => {
            if revision(&objects[i]) < top {
                set_annotation(&mut objects[i], REVISION, &(top + 1).to_string());
            }
            i
        }
        None => {
            let hash = template_hash(&template);
            let mut t = template.clone();
            set_path(&mut t, &["metadata", "labels", TEMPLATE_HASH], json!(hash));
            let mut selector = at(&d, &["spec", "selector"])
                .cloned()
                .unwrap_or_else(|| json!({}));
            set_path(&mut selector, &["matchLabels", TEMPLATE_HASH], json!(hash));
            let rs_name = format!("{name}-{hash}");
            objects.push(json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name, "namespace": ns,
                    "uid": format!("simulated-{rs_name}"),
                    "labels": at(&t, &["metadata", "labels"]).cloned().unwrap_or(json!({})),
                    "annotations": {REVISION: (top + 1).to_string()},
                    "creationTimestamp": stamp,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                        "uid": uid(&d), "controller": true}],
                },
                "spec": {"replicas": replicas, "selector": selector, "template": t},
                "status": {"replicas": 0},
            }));
            objects.len() - 1
        }
    };
    let current_revision = revision(&objects[current]).to_string();
    let current_name = obj::name(&objects[current]).to_owned();
    // Scale: the current ReplicaSet runs `replicas`, the others none.
    let set_names: Vec<String> = sets
        .iter()
        .map(|i| obj::name(&objects[*i]).to_owned())
        .chain(std::iter::once(current_name.clone()))
        .collect();
    for o in objects.iter_mut() {
        if obj::kind(o) == "ReplicaSet"
            && obj::namespace(o) == ns
            && set_names.iter().any(|n| n == obj::name(o))
        {
            let n = if obj::name(o) == current_name {
                replicas
            } else {
                0
            };
            set_path(o, &["spec", "replicas"], json!(n));
        }
    }
    // Pods of the other ReplicaSets go; the current one gets what it lacks.
    objects.retain(|o| {
        !(obj::kind(o) == "Pod"
            && obj::namespace(o) == ns
            && matches!(owner_of(o), Some(("ReplicaSet", rs)) if rs != current_name && set_names.iter().any(|n| n == rs)))
    });
    let Some(rs) = objects
        .iter()
        .find(|o| same_object(o, "ReplicaSet", ns, &current_name))
        .cloned()
    else {
        return;
    };
    let mine: Vec<usize> = (0..objects.len())
        .filter(|i| obj::kind(&objects[*i]) == "Pod" && obj::owned_by(&objects[*i], &rs))
        .collect();
    let have = mine.len() as i64;
    if have > replicas {
        let extra: BTreeSet<usize> = mine.iter().copied().skip(replicas as usize).collect();
        let mut i = 0;
        objects.retain(|_| {
            let keep = !extra.contains(&i);
            i += 1;
            keep
        });
    }
    let node = schedulable_node(objects);
    for k in have..replicas {
        let pod = started_pod(&rs, ns, k, node.as_deref(), &stamp);
        objects.push(pod);
    }
    // Status as the controllers would report it.
    let ready = (0..objects.len())
        .filter(|i| obj::kind(&objects[*i]) == "Pod" && obj::owned_by(&objects[*i], &rs))
        .filter(|i| pod_ready(&objects[*i]))
        .count() as i64;
    for o in objects.iter_mut() {
        if obj::kind(o) == "ReplicaSet" && obj::namespace(o) == ns {
            if obj::name(o) == current_name {
                set_path(
                    o,
                    &["status"],
                    json!({"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                           "observedGeneration": i64_at(o, &["metadata", "generation"]).unwrap_or(1)}),
                );
            } else if set_names.iter().any(|n| n == obj::name(o)) {
                set_path(o, &["status"], json!({"replicas": 0}));
            }
        }
        if same_object(o, "Deployment", ns, name) {
            set_annotation(o, REVISION, &current_revision);
            let generation = i64_at(o, &["metadata", "generation"]).unwrap_or(1);
            set_path(
                o,
                &["status"],
                json!({
                    "observedGeneration": generation, "replicas": replicas,
                    "updatedReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                    "unavailableReplicas": (replicas - ready).max(0),
                    "conditions": [
                        {"type": "Available", "status": if ready >= replicas { "True" } else { "False" },
                         "reason": "MinimumReplicasAvailable", "lastUpdateTime": stamp, "lastTransitionTime": stamp},
                        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                         "message": format!("ReplicaSet \"{current_name}\" has successfully progressed (simulated)"),
                         "lastUpdateTime": stamp, "lastTransitionTime": stamp},
                    ],
                }),
            );
        }
    }
}

fn pod_ready(p: &Value) -> bool {
    array(p, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == Some("Ready") && str_at(c, &["status"]) == Some("True"))
}

/// A Ready node that takes new pods (not cordoned, no NoSchedule/NoExecute taint).
fn schedulable_node(objects: &[Value]) -> Option<String> {
    objects
        .iter()
        .filter(|o| obj::kind(o) == "Node")
        .filter(|n| !at(n, &["spec", "unschedulable"]).is_some_and(|u| u == &json!(true)))
        .filter(|n| {
            !array(n, &["spec", "taints"]).iter().any(|t| {
                matches!(
                    str_at(t, &["effect"]),
                    Some("NoSchedule") | Some("NoExecute")
                )
            })
        })
        .find(|n| {
            array(n, &["status", "conditions"]).iter().any(|c| {
                str_at(c, &["type"]) == Some("Ready") && str_at(c, &["status"]) == Some("True")
            })
        })
        .map(|n| obj::name(n).to_owned())
}

/// A pod of `rs` as the simulated kubelet starts it: running and ready on `node`, or Pending
/// and unschedulable when no node takes it.
fn started_pod(rs: &Value, ns: Option<&str>, index: i64, node: Option<&str>, now: &str) -> Value {
    let rs_name = obj::name(rs);
    let seed = format!("{rs_name}/{index}/{now}");
    let suffix: String = hex::encode(Sha256::digest(seed.as_bytes()))
        .chars()
        .take(5)
        .collect();
    let name = format!("{rs_name}-{suffix}");
    let template = at(rs, &["spec", "template"]).cloned().unwrap_or(json!({}));
    let mut spec = at(&template, &["spec"]).cloned().unwrap_or(json!({}));
    let status = match node {
        Some(n) => {
            set_path(&mut spec, &["nodeName"], json!(n));
            let statuses: Vec<Value> = array(&template, &["spec", "containers"])
                .iter()
                .map(|c| {
                    json!({"name": str_at(c, &["name"]).unwrap_or("app"), "image": str_at(c, &["image"]).unwrap_or(""),
                           "ready": true, "started": true, "restartCount": 0,
                           "state": {"running": {"startedAt": now}}})
                })
                .collect();
            json!({"phase": "Running", "startTime": now,
                   "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
                                  {"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}],
                   "containerStatuses": statuses})
        }
        None => {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0 nodes are available (simulated)"}]})
        }
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "uid": format!("simulated-{name}"),
            "labels": at(&template, &["metadata", "labels"]).cloned().unwrap_or(json!({})),
            "annotations": {"kubemedic.io/simulated": "started by the demo's simulated kubelet"},
            "creationTimestamp": now,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                "uid": uid(rs), "controller": true}],
        },
        "spec": spec,
        "status": status,
    })
}

/// The simulated volume expansion: capacity follows the request when the class allows it.
fn expand_volume(objects: &mut [Value], ns: Option<&str>, name: &str) {
    let Some(i) = objects
        .iter()
        .position(|o| same_object(o, "PersistentVolumeClaim", ns, name))
    else {
        return;
    };
    let class = str_at(&objects[i], &["spec", "storageClassName"]).map(str::to_owned);
    let expandable = objects.iter().any(|o| {
        obj::kind(o) == "StorageClass"
            && Some(obj::name(o)) == class.as_deref()
            && at(o, &["allowVolumeExpansion"]) == Some(&json!(true))
    });
    let requested = at(&objects[i], &["spec", "resources", "requests", "storage"]).cloned();
    if let (true, Some(size)) = (expandable, requested) {
        set_path(&mut objects[i], &["status", "capacity", "storage"], size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "web:1"}, {"name": "proxy", "image": "proxy:1"}]}}}});
        strategic_merge(
            &mut d,
            &json!({"spec": {"template": {"spec": {"containers": [
                {"name": "proxy", "resources": {"limits": {"memory": "256Mi"}}}]}}}}),
        );
        let containers = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "web:1");
        assert_eq!(containers[1]["image"], "proxy:1");
        assert_eq!(containers[1]["resources"]["limits"]["memory"], "256Mi");
        let mut m = json!({"a": {"b": 1, "c": 2}});
        merge_patch(&mut m, &json!({"a": {"b": null, "d": [1]}}));
        assert_eq!(m, json!({"a": {"c": 2, "d": [1]}}));
    }

    fn cluster() -> Vec<Value> {
        let template = |image: &str| {
            json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": image}]}})
        };
        let rs = |name: &str, rev: &str, image: &str, replicas: i64| {
            let mut t = template(image);
            t["metadata"]["labels"][TEMPLATE_HASH] = json!(name);
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": "shop", "uid": name, "annotations": {REVISION: rev},
                    "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "d1", "controller": true}]},
                "spec": {"replicas": replicas, "template": t}})
        };
        vec![
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop", "uid": "d1", "generation": 2,
                    "annotations": {REVISION: "2"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template("web:2")}}),
            rs("web-1", "1", "web:1", 0),
            rs("web-2", "2", "web:2", 2),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-2-a", "namespace": "shop",
                "ownerReferences": [{"kind": "ReplicaSet", "name": "web-2", "uid": "web-2", "controller": true}]},
                "status": {"phase": "Running"}}),
        ]
    }

    #[test]
    fn a_rolled_back_template_reuses_its_replica_set_and_starts_ready_pods() {
        let mut objects = cluster();
        let d = objects
            .iter_mut()
            .find(|o| obj::kind(o) == "Deployment")
            .unwrap();
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("web:1");
        let dirty: Dirty = [("Deployment".into(), Some("shop".into()), "web".into())].into();
        reconcile(&mut objects, &dirty, Utc::now());
        let d = objects
            .iter()
            .find(|o| obj::kind(o) == "Deployment")
            .unwrap();
        assert_eq!(obj::annotation(d, REVISION), Some("3"));
        assert_eq!(d["status"]["availableReplicas"], 2);
        let pods: Vec<&Value> = objects.iter().filter(|o| obj::kind(o) == "Pod").collect();
        assert_eq!(pods.len(), 2, "the old revision's pod is gone: {pods:#?}");
        assert!(
            pods.iter()
                .all(|p| owner_of(p) == Some(("ReplicaSet", "web-1")))
        );
        assert!(
            pods.iter()
                .all(|p| pod_ready(p) && p["spec"]["nodeName"] == "n1")
        );
        let rs1 = objects.iter().find(|o| obj::name(o) == "web-1").unwrap();
        assert_eq!(rs1["spec"]["replicas"], 2);
        assert_eq!(obj::annotation(rs1, REVISION), Some("3"));
        let rs2 = objects.iter().find(|o| obj::name(o) == "web-2").unwrap();
        assert_eq!(rs2["spec"]["replicas"], 0);
    }

    #[test]
    fn a_new_template_gets_a_new_replica_set() {
        let mut objects = cluster();
        let d = objects
            .iter_mut()
            .find(|o| obj::kind(o) == "Deployment")
            .unwrap();
        d["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"memory": "384Mi"}});
        let dirty: Dirty = [("Deployment".into(), Some("shop".into()), "web".into())].into();
        reconcile(&mut objects, &dirty, Utc::now());
        let sets: Vec<&Value> = objects
            .iter()
            .filter(|o| obj::kind(o) == "ReplicaSet")
            .collect();
        assert_eq!(sets.len(), 3);
        let new = sets.iter().find(|s| revision(s) == 3).unwrap();
        assert_eq!(
            new["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
            "384Mi"
        );
    }
}
