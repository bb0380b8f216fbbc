//! The remediation target: which Kubernetes object a signal or a request is about.
//!
//! [`subject_from_labels`] reads it from an alert's labels: the object's own labels
//! (kube-state-metrics' `deployment`, `job_name`, the kubelet's `persistentvolumeclaim`, …)
//! decide, never the scrape target's (`job`, `service`, `instance`, `endpoint`, and the
//! exporter's `pod`/`container`/`node` attached to series that have none of their own);
//! `tests/fixtures/kube-prometheus-stack/alerts.yaml` holds the label sets of real default
//! alerts as they arrive. An alert that names no object has no target.
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
    "CertificateSigningRequest",
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

/// Labels of the objects kube-state-metrics and the kubelet report on, in order of precedence
/// (DESIGN §3.1). A series carries its object's label; the scrape target's own labels (`job`,
/// `service`, `instance`, `endpoint`, and the exporter's `pod`, `container` and `namespace`
/// where the series has none of its own) never appear here. `pod` and `node` are decided apart
/// ([`subject_from_labels`]): they are as often the exporter's or a bystander as the subject.
const OBJECT_LABELS: &[(&str, &str)] = &[
    ("persistentvolumeclaim", "PersistentVolumeClaim"),
    ("horizontalpodautoscaler", "HorizontalPodAutoscaler"),
    ("poddisruptionbudget", "PodDisruptionBudget"),
    ("job_name", "Job"),
    ("cronjob", "CronJob"),
    ("replicaset", "ReplicaSet"),
    ("deployment", "Deployment"),
    ("statefulset", "StatefulSet"),
    ("daemonset", "DaemonSet"),
    ("replicationcontroller", "ReplicationController"),
    ("resourcequota", "ResourceQuota"),
    ("limitrange", "LimitRange"),
    ("ingress", "Ingress"),
    ("networkpolicy", "NetworkPolicy"),
    ("endpointslice", "EndpointSlice"),
    ("configmap", "ConfigMap"),
    ("secret", "Secret"),
    ("serviceaccount", "ServiceAccount"),
    ("role", "Role"),
    ("rolebinding", "RoleBinding"),
    ("lease", "Lease"),
    ("persistentvolume", "PersistentVolume"),
    ("storageclass", "StorageClass"),
    ("volumeattachment", "VolumeAttachment"),
    ("certificatesigningrequest", "CertificateSigningRequest"),
    ("clusterrole", "ClusterRole"),
    ("clusterrolebinding", "ClusterRoleBinding"),
    ("ingressclass", "IngressClass"),
    (
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
    ),
    (
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
    ),
];

/// Kinds whose pods are named after them (`<name>-…`): a pod label beside one of these is the
/// subject only when the pod is one of that object's.
const WORKLOAD_KINDS: &[&str] = &[
    "Job",
    "CronJob",
    "ReplicaSet",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
];

/// Exporters that report on other objects from one pod of their own: their scrape target's
/// `pod` and `container` are attached to every series that has none (kube-prometheus-stack
/// scrapes them with `honorLabels`, so a series' own `pod`, `container` and `namespace` win).
const OBJECT_EXPORTERS: &[&str] = &["kube-state-metrics", "openshift-state-metrics"];

/// Exporters that report on the host they run on: their series never carry a pod of their own,
/// so a `pod` or `container` label is always the exporter's.
const HOST_EXPORTERS: &[&str] = &[
    "node-exporter",
    "prometheus-node-exporter",
    "windows-exporter",
    "blackbox-exporter",
    "prometheus-blackbox-exporter",
];

/// The kubelet (and its cAdvisor): its targets are nodes, not pods, so a `pod` or `container`
/// label on its series is always the series' own; its `node` label is the target's.
const KUBELET_JOBS: &[&str] = &[
    "kubelet",
    "cadvisor",
    "kubernetes-cadvisor",
    "kubernetes-nodes",
];

/// Containers that only proxy a scrape (kube-prometheus and OpenShift put them in front of the
/// exporters): as a `container` label they name the scrape target's port, never the subject's
/// container.
fn is_proxy_container(c: &str) -> bool {
    c.starts_with("kube-rbac-proxy") || c == "oauth-proxy" || c == "prom-label-proxy"
}

/// How a series was scraped, as far as the labels tell: which of `pod` and `container` can be
/// the subject's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scrape {
    /// kube-state-metrics and the like, with the exporter's name.
    ObjectExporter(&'static str),
    HostExporter,
    Kubelet,
    /// An application, a control-plane component or the monitoring stack itself: the scrape
    /// target is what the series is about.
    Other,
}

/// `value` names `name`: `kube-state-metrics`, `kube-prometheus-stack-kube-state-metrics`
/// (a Service or a job named after it) or `monitoring/kube-state-metrics` (a PodMonitor job).
fn names(value: &str, name: &str) -> bool {
    let base = value.rsplit('/').next().unwrap_or(value);
    base == name
        || base
            .strip_suffix(name)
            .is_some_and(|prefix| prefix.ends_with('-'))
}

fn scrape_of(job: Option<&str>, service: Option<&str>, container: Option<&str>) -> Scrape {
    for value in [job, service, container].into_iter().flatten() {
        if let Some(e) = OBJECT_EXPORTERS.iter().find(|e| names(value, e)) {
            return Scrape::ObjectExporter(e);
        }
        if HOST_EXPORTERS.iter().any(|e| names(value, e)) {
            return Scrape::HostExporter;
        }
        if KUBELET_JOBS.iter().any(|k| names(value, k)) {
            return Scrape::Kubelet;
        }
    }
    Scrape::Other
}

fn is_exporter_container(c: &str) -> bool {
    OBJECT_EXPORTERS.contains(&c) || HOST_EXPORTERS.contains(&c)
}

/// What an alert's labels say it is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subject {
    /// The objects the labels name, the subject first, then the other names of the same
    /// workload (a pod's Deployment) for deduplication. Empty when the alert names no object.
    pub targets: Vec<Target>,
    /// The subject's container, when the subject is a pod (or the workload of one) and the
    /// alert names one of its containers; never the exporter's or a scrape proxy's.
    pub container: Option<String>,
}

/// `pod` is one of `owner`'s pods by name (`checkout-7d9c8b6f5-x2k4q` of Deployment `checkout`,
/// `ledger-2` of StatefulSet `ledger`).
fn belongs(pod: &str, owner: &str) -> bool {
    pod.strip_prefix(owner)
        .is_some_and(|rest| rest.starts_with('-') && rest.len() > 1)
}

/// The subject of an alert from its labels (DESIGN §3.1):
/// 1. The object's own labels first, in the order of [`OBJECT_LABELS`]
///    (`persistentvolumeclaim`, `horizontalpodautoscaler`, `poddisruptionbudget`, `job_name`,
///    `cronjob`, `replicaset`, `deployment`, `statefulset`, `daemonset`, …).
/// 2. `pod` (`exported_pod` when the target's clashed) only when it is the subject: never the
///    pod of an exporter that reports on other objects (kube-state-metrics' own pod, attached
///    because the series has none; node-exporter's), and beside a workload label only when it
///    is one of that workload's pods — it is then more specific than the workload.
/// 3. `service` only when nothing marks it as the scrape target's (no `job`, `instance`,
///    `endpoint`, `metrics_path`, `pod` or `container`): a rule that keeps `by (namespace,
///    service)`.
/// 4. `node` last, and only when nothing else is named (the kubelet's and cAdvisor's `node` is
///    where the object is).
///
/// `job`, `instance`, `endpoint`, `metrics_path`, `prometheus` and `prometheus_replica` never
/// name the subject. Namespaced kinds need a namespace (`exported_namespace` first: it is the
/// series' own when the scrape target's clashed).
pub fn subject_from_labels(labels: &BTreeMap<String, String>) -> Subject {
    // A blank label is no label (Prometheus drops empty ones; blank ones name nothing).
    let label = |name: &str| {
        labels
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    };
    let namespace = label("exported_namespace")
        .or_else(|| label("namespace"))
        .map(str::to_owned);
    let target = |kind: &str, name: &str| {
        let t = Target::new(kind, name, namespace.clone());
        (t.namespace.is_some() || is_cluster_scoped(kind)).then_some(t)
    };
    let objects: Vec<Target> = OBJECT_LABELS
        .iter()
        .filter_map(|(l, kind)| label(l).and_then(|v| target(kind, v)))
        .collect();
    let is_workload = |t: &Target| WORKLOAD_KINDS.contains(&t.kind.as_str());

    // The pod and container, and whose they are.
    let exported_pod = label("exported_pod");
    let pod_label = exported_pod.or_else(|| label("pod"));
    let container_label = label("exported_container").or_else(|| label("container"));
    let scrape = scrape_of(label("job"), label("service"), label("container"));
    let own_pod = pod_label.filter(|pod| {
        exported_pod.is_some()
            || match scrape {
                Scrape::Kubelet | Scrape::Other => true,
                Scrape::HostExporter => false,
                // KSM's pod series carry `uid`; its own pod is named after it, and beside an
                // object or node label (its series about them) it can only be the exporter's.
                Scrape::ObjectExporter(name) => {
                    label("uid").is_some()
                        || !(pod.contains(name)
                            || (container_label.is_some_and(is_exporter_container)
                                && (!objects.is_empty() || label("node").is_some())))
                }
            }
    });
    let own_container = container_label.filter(|c| {
        label("exported_container").is_some()
            || match scrape {
                Scrape::Kubelet => true,
                Scrape::HostExporter => false,
                Scrape::ObjectExporter(_) | Scrape::Other => {
                    !is_exporter_container(c) && !is_proxy_container(c)
                }
            }
    });
    // Beside workload labels a pod is the subject only when it is one of theirs.
    let pod = own_pod.and_then(|p| target("Pod", p)).filter(|p| {
        let workloads: Vec<&Target> = objects.iter().filter(|t| is_workload(t)).collect();
        workloads.is_empty() || workloads.iter().any(|w| belongs(&p.name, &w.name))
    });

    let mut targets = Vec::new();
    let mut container = None;
    match (objects.first(), pod) {
        // A pod of the workload the labels name: the pod, then its workloads.
        (first, Some(pod)) if first.is_none_or(is_workload) => {
            targets.extend(
                objects
                    .iter()
                    .filter(|w| is_workload(w) && belongs(&pod.name, &w.name))
                    .cloned(),
            );
            targets.insert(0, pod);
            container = own_container;
        }
        (Some(first), _) => {
            targets.push(first.clone());
            if is_workload(first) {
                // Other names of the same workload (a ReplicaSet and its Deployment).
                targets.extend(
                    objects
                        .iter()
                        .skip(1)
                        .filter(|w| {
                            is_workload(w)
                                && (belongs(&w.name, &first.name) || belongs(&first.name, &w.name))
                        })
                        .cloned(),
                );
                // `sum by (namespace, deployment, container)`: the workload's container.
                if pod_label.is_none() {
                    container = own_container;
                }
            }
        }
        (None, _) => {
            let scraped = [
                "job",
                "instance",
                "endpoint",
                "metrics_path",
                "pod",
                "container",
            ]
            .iter()
            .any(|l| label(l).is_some());
            if let Some(service) = label("service").filter(|_| !scraped) {
                targets.extend(target("Service", service));
            }
            if targets.is_empty() {
                targets.extend(label("node").and_then(|n| target("Node", n)));
            }
        }
    }
    targets.dedup();
    Subject {
        targets,
        container: container.map(str::to_owned),
    }
}

/// All targets the labels name, the subject first ([`subject_from_labels`]).
pub fn targets_from_labels(labels: &BTreeMap<String, String>) -> Vec<Target> {
    subject_from_labels(labels).targets
}

/// Alerts about the alerting pipeline itself, not about any Kubernetes object: the heartbeat
/// that always fires (kube-prometheus-stack's `Watchdog`, formerly `DeadMansSwitch`) and the
/// helper that inhibits `info` alerts (`InfoInhibitor`).
pub const ALERTING_PIPELINE_ALERTS: &[&str] = &["Watchdog", "DeadMansSwitch", "InfoInhibitor"];

/// The labels that say which alert this is, for a person to find it when it names no object:
/// `alertname`, `namespace`, `service`, `job`, `instance` first, then the others but the
/// routing ones (`severity`, `prometheus`, `prometheus_replica`), as `name=value, …`, cut
/// to about [`IDENTIFYING_LABELS_MAX`] bytes.
pub fn identifying_labels(labels: &BTreeMap<String, String>) -> String {
    const FIRST: &[&str] = &["alertname", "namespace", "service", "job", "instance"];
    const ROUTING: &[&str] = &["severity", "prometheus", "prometheus_replica"];
    let first = FIRST.iter().filter_map(|k| labels.get_key_value(*k));
    let rest = labels
        .iter()
        .filter(|(k, _)| !FIRST.contains(&k.as_str()) && !ROUTING.contains(&k.as_str()));
    let mut out = String::new();
    for (k, v) in first.chain(rest).filter(|(_, v)| !v.trim().is_empty()) {
        if out.len() >= IDENTIFYING_LABELS_MAX {
            out.push_str(", …");
            break;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
    if out.len() > IDENTIFYING_LABELS_MAX + 4 {
        let cut = out.floor_char_boundary(IDENTIFYING_LABELS_MAX);
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// About how long [`identifying_labels`] gets.
pub const IDENTIFYING_LABELS_MAX: usize = 512;

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

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// kube-state-metrics' own target labels, attached where a series has none (honorLabels).
    const KSM: &[(&str, &str)] = &[
        ("job", "kube-state-metrics"),
        ("service", "kube-prometheus-stack-kube-state-metrics"),
        ("endpoint", "http"),
        ("instance", "10.244.1.23:8080"),
        (
            "pod",
            "kube-prometheus-stack-kube-state-metrics-7c9d5f8b6-k2x9p",
        ),
        ("container", "kube-state-metrics"),
        ("namespace", "monitoring"),
    ];

    fn ksm(own: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l = labels(KSM);
        l.extend(labels(own));
        l
    }

    // The failure this was written for: KubeJobFailed from a standard install named the
    // kube-state-metrics pod first, found it healthy and closed the alert.
    #[test]
    fn the_exporters_pod_is_never_the_subject() {
        let s = subject_from_labels(&ksm(&[
            ("namespace", "batch"),
            ("job_name", "nightly-export"),
            ("condition", "true"),
        ]));
        assert_eq!(
            s.targets,
            vec![Target::new("Job", "nightly-export", Some("batch".into()))]
        );
        assert_eq!(s.container, None);
        // A Node's series: the exporter's namespace goes with the cluster-scoped kind.
        let s = subject_from_labels(&ksm(&[("node", "worker-2"), ("condition", "Ready")]));
        assert_eq!(s.targets, vec![Target::new("Node", "worker-2", None)]);
        // Its own pod series (with `uid`) are about their pod and container.
        let s = subject_from_labels(&ksm(&[
            ("namespace", "shop"),
            ("pod", "checkout-7d9c8b6f5-x2k4q"),
            ("container", "checkout"),
            ("uid", "0b7d"),
        ]));
        assert_eq!(
            s.targets,
            vec![Target::new(
                "Pod",
                "checkout-7d9c8b6f5-x2k4q",
                Some("shop".into())
            )]
        );
        assert_eq!(s.container.as_deref(), Some("checkout"));
        // node-exporter's pod is the exporter's whatever else is there.
        let s = subject_from_labels(&labels(&[
            ("job", "node-exporter"),
            (
                "pod",
                "kube-prometheus-stack-prometheus-node-exporter-x7k2p",
            ),
            ("container", "node-exporter"),
            ("namespace", "monitoring"),
            ("mountpoint", "/"),
        ]));
        assert_eq!(s, Subject::default());
    }

    #[test]
    fn a_scrape_proxys_container_is_not_the_workloads() {
        // OpenShift: kube-state-metrics behind kube-rbac-proxy-main, its pod label dropped.
        let s = subject_from_labels(&labels(&[
            ("job", "kube-state-metrics"),
            ("service", "kube-state-metrics"),
            ("endpoint", "https-main"),
            ("container", "kube-rbac-proxy-main"),
            ("namespace", "openshift-console"),
            ("deployment", "console"),
        ]));
        assert_eq!(
            s.targets,
            vec![Target::new(
                "Deployment",
                "console",
                Some("openshift-console".into())
            )]
        );
        assert_eq!(s.container, None);
    }

    #[test]
    fn a_pod_beside_a_workload_is_the_subject_only_when_it_is_one_of_its_pods() {
        let own = labels(&[
            ("namespace", "shop"),
            ("pod", "checkout-7d9c8b6f5-x2k4q"),
            ("container", "checkout"),
            ("deployment", "checkout"),
        ]);
        let s = subject_from_labels(&own);
        assert_eq!(
            s.targets,
            vec![
                Target::new("Pod", "checkout-7d9c8b6f5-x2k4q", Some("shop".into())),
                Target::new("Deployment", "checkout", Some("shop".into())),
            ]
        );
        assert_eq!(s.container.as_deref(), Some("checkout"));
        // Some other exporter's pod beside a Deployment's series.
        let other = labels(&[
            ("namespace", "shop"),
            ("pod", "metrics-agent-5d8f7-abcde"),
            ("container", "agent"),
            ("deployment", "checkout"),
        ]);
        let s = subject_from_labels(&other);
        assert_eq!(
            s.targets,
            vec![Target::new("Deployment", "checkout", Some("shop".into()))]
        );
        assert_eq!(s.container, None);
        // A claim's alert is about the claim, whatever pod mounts it.
        let pvc = labels(&[
            ("namespace", "data"),
            ("persistentvolumeclaim", "data-postgres-0"),
            ("pod", "postgres-0"),
            ("node", "worker-2"),
        ]);
        assert_eq!(
            targets_from_labels(&pvc),
            vec![Target::new(
                "PersistentVolumeClaim",
                "data-postgres-0",
                Some("data".into())
            )]
        );
    }

    #[test]
    fn scrape_labels_never_name_the_subject() {
        // TargetDown: a scrape job, not an object.
        let l = labels(&[
            ("job", "checkout"),
            ("namespace", "shop"),
            ("service", "checkout"),
        ]);
        assert_eq!(targets_from_labels(&l), vec![]);
        // A bare `job` is Prometheus' scrape job, never a Job.
        assert_eq!(
            targets_from_labels(&labels(&[("namespace", "batch"), ("job", "nightly")])),
            vec![]
        );
        // `by (namespace, service)`: nothing marks the Service as a scrape target's.
        let l = labels(&[("namespace", "shop"), ("service", "payments")]);
        assert_eq!(
            targets_from_labels(&l),
            vec![Target::new("Service", "payments", Some("shop".into()))]
        );
        // The kubelet's node is where a volume is mounted, not the subject.
        let l = labels(&[
            ("job", "kubelet"),
            ("node", "worker-2"),
            ("namespace", "data"),
            ("persistentvolumeclaim", "data-postgres-0"),
            ("metrics_path", "/metrics"),
        ]);
        assert_eq!(
            targets_from_labels(&l),
            vec![Target::new(
                "PersistentVolumeClaim",
                "data-postgres-0",
                Some("data".into())
            )]
        );
    }

    #[test]
    fn exported_labels_are_the_series_own() {
        // honorLabels off: the series' clashing labels are renamed `exported_*`.
        let s = subject_from_labels(&labels(&[
            ("job", "kube-state-metrics"),
            ("namespace", "monitoring"),
            ("pod", "kube-state-metrics-6f7b9c-abcde"),
            ("container", "kube-state-metrics"),
            ("exported_namespace", "shop"),
            ("exported_pod", "checkout-7d9c8b6f5-x2k4q"),
            ("exported_container", "checkout"),
        ]));
        assert_eq!(
            s.targets,
            vec![Target::new(
                "Pod",
                "checkout-7d9c8b6f5-x2k4q",
                Some("shop".into())
            )]
        );
        assert_eq!(s.container.as_deref(), Some("checkout"));
    }

    #[test]
    fn identifying_labels_lead_with_what_names_the_alert() {
        let l = labels(&[
            ("alertname", "TargetDown"),
            ("severity", "warning"),
            ("prometheus", "monitoring/kube-prometheus-stack-prometheus"),
            ("service", "checkout"),
            ("namespace", "shop"),
            ("job", "checkout"),
            ("cluster", " "),
            ("zone", "a"),
        ]);
        assert_eq!(
            identifying_labels(&l),
            "alertname=TargetDown, namespace=shop, service=checkout, job=checkout, zone=a"
        );
        let long = "x".repeat(2000);
        let l = labels(&[("alertname", "A"), ("a", &long), ("b", "y")]);
        let text = identifying_labels(&l);
        assert!(text.starts_with("alertname=A, a=xxx"), "{text}");
        assert!(text.len() <= IDENTIFYING_LABELS_MAX + 4, "{}", text.len());
        assert!(text.ends_with('…'), "{text}");
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
