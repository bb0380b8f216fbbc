//! A node: its conditions, taints and allocatable resources.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::time;
use crate::cluster::obj::{self, array, at, str_at};
use crate::cluster::quantity;

/// Whether a taint key is one Kubernetes sets for a node's condition (`node.kubernetes.io/…`),
/// a cloud provider's initialisation (`node.cloudprovider.kubernetes.io/…`) or a node's role
/// (`node-role.kubernetes.io/…`): such a taint is no mistake to lift. Half of
/// [`Node::taint_by_kubernetes`], which also asks who wrote the node's taints.
pub fn taint_key_of_kubernetes(key: &str) -> bool {
    key.starts_with("node.kubernetes.io/")
        || key.starts_with("node.cloudprovider.kubernetes.io/")
        || key.starts_with("node-role.kubernetes.io/")
}

/// The share of a cluster's nodes (one in this many) that, not ready together, makes it the
/// cluster's trouble ([`cluster_wide`]).
pub const CLUSTER_WIDE_ONE_IN: usize = 3;

/// Whether `not_ready` nodes of `total` not ready together are the cluster's trouble rather
/// than a node's: more than one of them, and more than a third of all
/// ([`CLUSTER_WIDE_ONE_IN`]). Draining one then moves
/// its pods onto nodes that may fail the same way and leaves the cause (the network, the control
/// plane, a bad node image) in place. The node rule proposes no drain then, and the drain's
/// proof refuses one. A node counts as not ready unless its Ready condition is True.
pub fn cluster_wide(not_ready: usize, total: usize) -> bool {
    not_ready > 1 && not_ready * CLUSTER_WIDE_ONE_IN > total
}

/// A node, as observed.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub name: String,
    pub ready: bool,
    /// The Ready condition's status (`True`, `False`, `Unknown`); `None` when the node reports
    /// no Ready condition (yet).
    pub ready_status: Option<String>,
    /// The Ready condition's reason and message, `reason: message`.
    pub ready_message: String,
    pub pressure: Vec<String>,
    /// Other conditions that are True (node-problem-detector's `ReadonlyFilesystem`,
    /// `KernelDeadlock`, …: by convention True means a problem).
    pub problems: Vec<String>,
    pub unschedulable: bool,
    pub taints: Vec<(String, String, String)>,
    /// Who last wrote its taints, from its managed fields (an entry without its field list, as
    /// a snapshot may keep it, counts as possibly having written them).
    pub taints_written_by: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub allocatable: Value,
    pub raw: Value,
}

/// What a node runs that a pod may depend on (`status.nodeInfo`): the key, and how evidence
/// names it.
pub const NODE_INFO: &[(&str, &str)] = &[
    ("kernelVersion", "kernel"),
    ("osImage", "OS image"),
    ("containerRuntimeVersion", "container runtime"),
    ("kubeletVersion", "kubelet"),
    ("architecture", "architecture"),
];

impl Node {
    /// What it runs ([`NODE_INFO`]) as it reports it, by the names evidence gives them.
    pub fn info(&self) -> Vec<(&'static str, String)> {
        NODE_INFO
            .iter()
            .filter_map(|(key, label)| {
                str_at(&self.raw, &["status", "nodeInfo", key])
                    .filter(|s| !s.is_empty())
                    .map(|s| (*label, s.to_owned()))
            })
            .collect()
    }

    pub fn parse(n: &Value) -> Self {
        let conds = array(n, &["status", "conditions"]);
        let status = |ty: &str| {
            conds
                .iter()
                .find(|c| str_at(c, &["type"]) == Some(ty))
                .and_then(|c| str_at(c, &["status"]))
        };
        let ready_condition = conds.iter().find(|c| str_at(c, &["type"]) == Some("Ready"));
        Self {
            name: obj::name(n).to_owned(),
            ready: status("Ready") == Some("True"),
            ready_status: status("Ready").map(str::to_owned),
            ready_message: ready_condition
                .map(|c| {
                    [str_at(c, &["reason"]), str_at(c, &["message"])]
                        .into_iter()
                        .flatten()
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join(": ")
                })
                .unwrap_or_default(),
            pressure: [
                "MemoryPressure",
                "DiskPressure",
                "PIDPressure",
                "NetworkUnavailable",
            ]
            .iter()
            .filter(|t| status(t) == Some("True"))
            .map(|t| (*t).to_owned())
            .collect(),
            problems: conds
                .iter()
                .filter(|c| str_at(c, &["status"]) == Some("True"))
                .filter_map(|c| str_at(c, &["type"]))
                .filter(|t| {
                    !matches!(
                        *t,
                        "Ready"
                            | "MemoryPressure"
                            | "DiskPressure"
                            | "PIDPressure"
                            | "NetworkUnavailable"
                    )
                })
                .map(str::to_owned)
                .collect(),
            unschedulable: at(n, &["spec", "unschedulable"])
                .and_then(Value::as_bool)
                .unwrap_or(false),
            taints: array(n, &["spec", "taints"])
                .iter()
                .map(|t| {
                    (
                        str_at(t, &["key"]).unwrap_or_default().to_owned(),
                        str_at(t, &["value"]).unwrap_or_default().to_owned(),
                        str_at(t, &["effect"]).unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            taints_written_by: array(n, &["metadata", "managedFields"])
                .iter()
                .filter(|m| str_at(m, &["subresource"]).is_none())
                .filter(|m| {
                    at(m, &["fieldsV1", "f:spec", "f:taints"]).is_some()
                        || at(m, &["fieldsV1"]).is_none()
                })
                .filter_map(|m| {
                    Some((str_at(m, &["time"]).unwrap_or(""), str_at(m, &["manager"])?))
                })
                .max_by_key(|(t, _)| *t)
                .map(|(_, m)| m.to_owned()),
            labels: obj::map_pairs(at(n, &["metadata", "labels"]))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            allocatable: at(n, &["status", "allocatable"])
                .cloned()
                .unwrap_or(Value::Null),
            raw: n.clone(),
        }
    }

    /// Whether Kubernetes put its taint `key` there, so it is no mistake to lift: the key is one
    /// Kubernetes sets (a condition's, a cloud provider's initialisation, a role), or the node's
    /// taints were last written by the kubelet or a controller. The scheduling rule proposes no
    /// removal of such a taint, and the removal's proof refuses one.
    pub fn taint_by_kubernetes(&self, key: &str) -> bool {
        taint_key_of_kubernetes(key)
            || self
                .taints_written_by
                .as_deref()
                .is_some_and(|w| w == "kubelet" || w.contains("controller"))
    }

    /// What its conditions show wrong with it, each with its message, and since when (the
    /// transition of the last of them the node lists): a Ready condition reported other than True, and any other
    /// condition True (the kubelet's pressures, node-problem-detector's `ReadonlyFilesystem`,
    /// `KernelDeadlock`, …). `None` when nothing does, also for a node that reports no Ready
    /// condition at all: nothing shows it in trouble, as nothing shows it can take pods
    /// (it is not `ready`). The dependency graph blames a node by it, and the drain's proof
    /// finds it at fault by it.
    pub fn trouble(&self) -> Option<(String, Option<DateTime<Utc>>)> {
        let mut problems = Vec::new();
        let mut since = None;
        for c in array(&self.raw, &["status", "conditions"]) {
            let ty = str_at(c, &["type"]).unwrap_or_default();
            let st = str_at(c, &["status"]).unwrap_or_default();
            let bad = if ty == "Ready" {
                st != "True"
            } else {
                st == "True"
            };
            if bad {
                let msg = str_at(c, &["message"]).unwrap_or("");
                problems.push(if ty == "Ready" {
                    format!("NotReady ({msg})")
                } else {
                    format!("{ty} ({msg})")
                });
                since = time(c, &["lastTransitionTime"]).or(since);
            }
        }
        (!problems.is_empty()).then(|| (problems.join(", "), since))
    }

    /// Whether its kubelet is not there to stop a pod: its Ready condition reported other than
    /// True (`Unknown`: the node controller stopped hearing from it). A pod being deleted there
    /// cannot finish terminating until it is back, or a human confirms the node is gone. A node
    /// that reports no Ready condition (yet) says nothing either way.
    pub fn kubelet_away(&self) -> bool {
        self.ready_status.as_deref().is_some_and(|s| s != "True")
    }

    pub fn allocatable(&self, resource: &str) -> Option<u128> {
        str_at(&self.allocatable, &[resource]).and_then(|q| quantity::amount(resource, q))
    }

    pub fn state(&self) -> String {
        let mut s = if self.ready { "Ready" } else { "NotReady" }.to_owned();
        let conditions: Vec<&str> = self
            .pressure
            .iter()
            .chain(&self.problems)
            .map(String::as_str)
            .collect();
        if !conditions.is_empty() {
            s.push_str(&format!(" with {}", conditions.join(", ")));
        }
        if self.unschedulable {
            s.push_str(", cordoned");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_node_is_in_trouble_by_its_conditions_and_not_for_want_of_one() {
        let node = |conditions: serde_json::Value| {
            Node::parse(&serde_json::json!({"metadata": {"name": "worker-1"},
                "status": {"conditions": conditions}}))
        };
        let ready = serde_json::json!({"type": "Ready", "status": "True"});
        assert!(node(serde_json::json!([ready])).trouble().is_none());
        // No Ready condition reported: nothing shows trouble, nor that it takes pods.
        let silent = node(serde_json::json!([]));
        assert!(silent.trouble().is_none() && !silent.ready);
        let lost = node(serde_json::json!([{"type": "Ready", "status": "Unknown",
            "message": "Kubelet stopped posting node status.",
            "lastTransitionTime": "2026-11-30T10:00:00Z"}]));
        let (what, since) = lost.trouble().expect("trouble");
        assert_eq!(what, "NotReady (Kubelet stopped posting node status.)");
        assert!(since.is_some());
        let full = node(serde_json::json!([ready,
            {"type": "DiskPressure", "status": "True", "message": "low on disk"},
            {"type": "KernelDeadlock", "status": "False"}]));
        assert_eq!(
            full.trouble().map(|t| t.0).as_deref(),
            Some("DiskPressure (low on disk)")
        );
    }

    #[test]
    fn many_nodes_down_together_are_the_clusters_trouble() {
        // One node down is that node's, however small the cluster.
        assert!(!cluster_wide(1, 1));
        assert!(!cluster_wide(1, 2));
        // More than one, and more than a third of all.
        assert!(cluster_wide(2, 5));
        assert!(!cluster_wide(2, 6));
        assert!(cluster_wide(3, 3));
    }

    #[test]
    fn kubernetes_own_taints_are_told_from_a_persons() {
        let node = |manager: &str, taints: bool| {
            let fields = if taints {
                json!({"f:spec": {"f:taints": {}}})
            } else {
                json!({"f:metadata": {"f:labels": {}}})
            };
            Node::parse(&json!({
                "metadata": {"name": "n1", "managedFields": [
                    {"manager": manager, "operation": "Update", "time": "2026-11-30T10:00:00Z",
                     "fieldsV1": fields}]},
                "spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]},
            }))
        };
        let by_kubectl = node("kubectl-taint", true);
        for key in [
            "node.kubernetes.io/unreachable",
            "node.cloudprovider.kubernetes.io/uninitialized",
            "node-role.kubernetes.io/control-plane",
        ] {
            assert!(by_kubectl.taint_by_kubernetes(key), "{key}");
        }
        assert!(!by_kubectl.taint_by_kubernetes("maintenance"));
        assert!(!by_kubectl.taint_by_kubernetes("example.com/kubernetes.io"));
        // Written last by the kubelet or a controller: theirs, whatever the key.
        assert!(node("kubelet", true).taint_by_kubernetes("maintenance"));
        assert!(node("node-lifecycle-controller", true).taint_by_kubernetes("maintenance"));
        // A controller that wrote only the labels did not set it.
        assert!(!node("node-lifecycle-controller", false).taint_by_kubernetes("maintenance"));
    }
}
