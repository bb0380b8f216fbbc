//! Well-known kinds: how users and LLMs spell them, their group, the versions kubemedic prefers
//! (newest stable first — a 1.20 server serves PDBs only as `policy/v1beta1` and kubemedic then
//! uses that), their plural and whether they are namespaced.
//!
//! The live cluster's discovery is the truth for what is served; this table adds short names
//! (`deploy`, `po`…) and the preference order, and is the whole truth for a snapshot.

pub struct KnownKind {
    pub kind: &'static str,
    pub group: &'static str,
    pub versions: &'static [&'static str],
    pub plural: &'static str,
    pub namespaced: bool,
    pub short: &'static [&'static str],
}

macro_rules! k {
    ($kind:literal, $group:literal, [$($v:literal),*], $plural:literal, $ns:literal, [$($s:literal),*]) => {
        KnownKind { kind: $kind, group: $group, versions: &[$($v),*], plural: $plural, namespaced: $ns, short: &[$($s),*] }
    };
}

pub const KNOWN: &[KnownKind] = &[
    k!("Pod", "", ["v1"], "pods", true, ["po"]),
    k!("Service", "", ["v1"], "services", true, ["svc"]),
    k!("Endpoints", "", ["v1"], "endpoints", true, ["ep"]),
    k!("ConfigMap", "", ["v1"], "configmaps", true, ["cm"]),
    k!("Secret", "", ["v1"], "secrets", true, []),
    k!("Event", "", ["v1"], "events", true, ["ev"]),
    k!(
        "PersistentVolumeClaim",
        "",
        ["v1"],
        "persistentvolumeclaims",
        true,
        ["pvc"]
    ),
    k!(
        "PersistentVolume",
        "",
        ["v1"],
        "persistentvolumes",
        false,
        ["pv"]
    ),
    k!("Node", "", ["v1"], "nodes", false, ["no"]),
    k!("Namespace", "", ["v1"], "namespaces", false, ["ns"]),
    k!(
        "ServiceAccount",
        "",
        ["v1"],
        "serviceaccounts",
        true,
        ["sa"]
    ),
    k!(
        "ResourceQuota",
        "",
        ["v1"],
        "resourcequotas",
        true,
        ["quota"]
    ),
    k!("LimitRange", "", ["v1"], "limitranges", true, ["limits"]),
    k!(
        "ReplicationController",
        "",
        ["v1"],
        "replicationcontrollers",
        true,
        ["rc"]
    ),
    k!(
        "Deployment",
        "apps",
        ["v1"],
        "deployments",
        true,
        ["deploy"]
    ),
    k!("ReplicaSet", "apps", ["v1"], "replicasets", true, ["rs"]),
    k!("StatefulSet", "apps", ["v1"], "statefulsets", true, ["sts"]),
    k!("DaemonSet", "apps", ["v1"], "daemonsets", true, ["ds"]),
    k!(
        "ControllerRevision",
        "apps",
        ["v1"],
        "controllerrevisions",
        true,
        []
    ),
    k!("Job", "batch", ["v1"], "jobs", true, []),
    k!(
        "CronJob",
        "batch",
        ["v1", "v1beta1"],
        "cronjobs",
        true,
        ["cj"]
    ),
    k!(
        "HorizontalPodAutoscaler",
        "autoscaling",
        ["v2", "v2beta2", "v1"],
        "horizontalpodautoscalers",
        true,
        ["hpa"]
    ),
    k!(
        "PodDisruptionBudget",
        "policy",
        ["v1", "v1beta1"],
        "poddisruptionbudgets",
        true,
        ["pdb"]
    ),
    k!(
        "NetworkPolicy",
        "networking.k8s.io",
        ["v1"],
        "networkpolicies",
        true,
        ["netpol"]
    ),
    k!(
        "Ingress",
        "networking.k8s.io",
        ["v1", "v1beta1"],
        "ingresses",
        true,
        ["ing"]
    ),
    k!(
        "StorageClass",
        "storage.k8s.io",
        ["v1"],
        "storageclasses",
        false,
        ["sc"]
    ),
    k!(
        "Role",
        "rbac.authorization.k8s.io",
        ["v1"],
        "roles",
        true,
        []
    ),
    k!(
        "RoleBinding",
        "rbac.authorization.k8s.io",
        ["v1"],
        "rolebindings",
        true,
        []
    ),
    k!(
        "ClusterRole",
        "rbac.authorization.k8s.io",
        ["v1"],
        "clusterroles",
        false,
        []
    ),
    k!(
        "ClusterRoleBinding",
        "rbac.authorization.k8s.io",
        ["v1"],
        "clusterrolebindings",
        false,
        []
    ),
    k!(
        "PriorityClass",
        "scheduling.k8s.io",
        ["v1"],
        "priorityclasses",
        false,
        ["pc"]
    ),
    k!(
        "PodMetrics",
        "metrics.k8s.io",
        ["v1beta1"],
        "pods",
        true,
        []
    ),
    k!(
        "NodeMetrics",
        "metrics.k8s.io",
        ["v1beta1"],
        "nodes",
        false,
        []
    ),
    k!(
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        ["v1", "v1beta1"],
        "customresourcedefinitions",
        false,
        ["crd", "crds"]
    ),
];

/// Find a well-known kind by any spelling: `Pod`, `pod`, `pods`, `po`, `deployments.apps`.
pub fn lookup(spelled: &str) -> Option<&'static KnownKind> {
    let s = spelled.trim();
    let (name, group) = match s.split_once('.') {
        Some((n, g)) => (n, Some(g)),
        None => (s, None),
    };
    let group_ok = |k: &KnownKind| group.is_none_or(|g| g.eq_ignore_ascii_case(k.group));
    // Metrics kinds share plurals with pods/nodes; only their kind name selects them.
    KNOWN.iter().filter(|k| group_ok(k)).find(|k| {
        k.kind.eq_ignore_ascii_case(name)
            || (k.group != "metrics.k8s.io"
                && (k.plural.eq_ignore_ascii_case(name)
                    || k.short.iter().any(|a| a.eq_ignore_ascii_case(name))
                    || singular(k.plural).eq_ignore_ascii_case(name)))
    })
}

fn singular(plural: &str) -> &str {
    plural.strip_suffix('s').unwrap_or(plural)
}

/// Preference rank of `version` for a known kind (lower is better); unknown versions last.
pub fn version_rank(known: &KnownKind, version: &str) -> usize {
    known
        .versions
        .iter()
        .position(|v| *v == version)
        .unwrap_or(known.versions.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        for s in [
            "Deployment",
            "deployment",
            "deployments",
            "deploy",
            "deployments.apps",
        ] {
            assert_eq!(lookup(s).map(|k| k.kind), Some("Deployment"), "{s}");
        }
        assert_eq!(lookup("po").map(|k| k.kind), Some("Pod"));
        assert_eq!(lookup("pods").map(|k| k.kind), Some("Pod"));
        assert_eq!(
            lookup("hpa").map(|k| k.kind),
            Some("HorizontalPodAutoscaler")
        );
        assert_eq!(
            lookup("networkpolicy").map(|k| k.kind),
            Some("NetworkPolicy")
        );
        assert_eq!(
            lookup("PodMetrics").map(|k| k.group),
            Some("metrics.k8s.io")
        );
        assert!(lookup("Widget").is_none());
    }
}
