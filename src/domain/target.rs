//! The remediation target: which Kubernetes object a signal or a request is about.
//!
//! Shared vocabulary of ingest (targets read from alert labels), the pipeline (one active request
//! per target) and the cluster view (the verified root owner). The target fingerprint is
//! `sha256("namespace:kind:name")` in lower-case hex; cluster-scoped kinds have an empty
//! namespace (`":Node:worker-1"`), exactly as DESIGN §3.1 and the Kubernaut gateway define it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    pub kind: String,
    pub name: String,
    /// `None` for cluster-scoped kinds (Node, PersistentVolume, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Kinds that have no namespace. A namespace given with one of these is dropped.
pub const CLUSTER_SCOPED_KINDS: &[&str] = &[
    "Node",
    "PersistentVolume",
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "StorageClass",
    "CustomResourceDefinition",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "VolumeAttachment",
    "CSIDriver",
    "CSINode",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
];

pub fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED_KINDS.contains(&kind)
}

impl Target {
    /// A target, with the namespace cleared for cluster-scoped kinds.
    pub fn new(
        kind: impl Into<String>,
        name: impl Into<String>,
        namespace: Option<String>,
    ) -> Self {
        let kind = kind.into();
        let namespace = if is_cluster_scoped(&kind) {
            None
        } else {
            namespace.filter(|ns| !ns.is_empty())
        };
        Self {
            kind,
            name: name.into(),
            namespace,
        }
    }

    pub fn fingerprint(&self) -> String {
        fingerprint_of(
            self.namespace.as_deref().unwrap_or(""),
            &self.kind,
            &self.name,
        )
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", ns, self.kind, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// `sha256("namespace:kind:name")` as lower-case hex.
pub fn fingerprint_of(namespace: &str, kind: &str, name: &str) -> String {
    let mut h = Sha256::new();
    h.update(namespace.as_bytes());
    h.update(b":");
    h.update(kind.as_bytes());
    h.update(b":");
    h.update(name.as_bytes());
    hex::encode(h.finalize())
}

/// Labels that name a target, most specific first (DESIGN §3.1). `job_name` is
/// kube-state-metrics' label for a Job; a bare `job` is usually Prometheus' scrape job, so it
/// counts only when it is not one of the well-known scrape job names.
const TARGET_LABELS: &[(&str, &str)] = &[
    ("pod", "Pod"),
    ("deployment", "Deployment"),
    ("statefulset", "StatefulSet"),
    ("daemonset", "DaemonSet"),
    ("job_name", "Job"),
    ("job", "Job"),
    ("cronjob", "CronJob"),
    ("node", "Node"),
    ("persistentvolumeclaim", "PersistentVolumeClaim"),
    ("service", "Service"),
    ("horizontalpodautoscaler", "HorizontalPodAutoscaler"),
    ("poddisruptionbudget", "PodDisruptionBudget"),
];

const SCRAPE_JOBS: &[&str] = &[
    "kube-state-metrics",
    "kubelet",
    "node-exporter",
    "apiserver",
    "kubernetes-pods",
    "kubernetes-nodes",
    "kubernetes-service-endpoints",
    "kubernetes-apiservers",
    "kubernetes-cadvisor",
    "cadvisor",
    "prometheus",
    "alertmanager",
    "coredns",
    "kube-proxy",
    "kube-scheduler",
    "kube-controller-manager",
];

fn is_scrape_job(value: &str) -> bool {
    SCRAPE_JOBS.contains(&value) || value.contains('/')
}

/// All targets the labels name, most specific first. A node label next to a pod label is a
/// different object (where the pod runs), so only workload-ish labels in the namespace become
/// aliases of each other; the node is an alias only when it is the primary target.
pub fn targets_from_labels(labels: &BTreeMap<String, String>) -> Vec<Target> {
    // A blank label is no label (Prometheus drops empty ones; blank ones name nothing).
    let label = |name: &str| labels.get(name).filter(|v| !v.trim().is_empty());
    let namespace = label("namespace")
        .or_else(|| label("exported_namespace"))
        .cloned();
    let mut found = Vec::new();
    for (name, kind) in TARGET_LABELS {
        let Some(value) = label(name) else {
            continue;
        };
        if *name == "job" && (is_scrape_job(value) || labels.contains_key("job_name")) {
            continue;
        }
        let target = Target::new(*kind, value.clone(), namespace.clone());
        // Namespaced kinds need a namespace to be a usable target.
        if target.namespace.is_none() && !is_cluster_scoped(kind) {
            continue;
        }
        if !found.contains(&target) {
            found.push(target);
        }
    }
    // The primary target decides; a Node that is merely where a pod runs is not an alias.
    if let Some(first) = found.first()
        && first.kind != "Node"
    {
        found.retain(|t| t.kind != "Node");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_sha256_of_namespace_kind_name() {
        let t = Target::new("Deployment", "checkout", Some("shop".into()));
        // echo -n 'shop:Deployment:checkout' | sha256sum
        assert_eq!(
            t.fingerprint(),
            "6d1a895f68c481a1ea6a977b880cc1233fdb70b0b96b9d447a06e1b4cb90594f"
        );
    }

    // Found by tests/fuzz.rs: a blank label (`pod: " "`) named a target called " ".
    #[test]
    fn blank_labels_name_no_target() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            targets_from_labels(&labels(&[("namespace", "shop"), ("pod", " \t\n ")])),
            vec![]
        );
        assert_eq!(
            targets_from_labels(&labels(&[("namespace", " "), ("deployment", "checkout")])),
            vec![]
        );
        assert_eq!(
            targets_from_labels(&labels(&[
                ("namespace", " "),
                ("exported_namespace", "shop"),
                ("pod", "p"),
                ("node", "  ")
            ])),
            vec![Target::new("Pod", "p", Some("shop".into()))]
        );
    }

    #[test]
    fn cluster_scoped_kinds_drop_the_namespace() {
        let node = Target::new("Node", "worker-1", Some("shop".into()));
        assert_eq!(node.namespace, None);
        // echo -n ':Node:worker-1' | sha256sum
        assert_eq!(
            node.fingerprint(),
            "5811a14c33e6ea55be7f43355c2cffd48201fcbf3fc51c48a3f58e375e6f7ccc"
        );
        assert_eq!(node.to_string(), "Node/worker-1");
    }
}
