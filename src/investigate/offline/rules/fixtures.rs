//! Test fixtures: incidents built the way the API server would report them, then gathered
//! through the same parsing as a real investigation.
//!
//! `Incident::deployment("api").memory_limit("256Mi").with(pod("api-1").oom_killed())` is a
//! Deployment whose one pod is killed for memory; `.diagnosis()` runs facts and rules on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::super::evidence::{Alert, Evidence, LogKey, ObservedPod, Root, WorkloadState};
use super::super::facts::Facts;
use super::{self as rules, Diagnosis};
use crate::cluster::context::ResourceContext;
use crate::cluster::observed;
use crate::domain::{DetectedLabels, QuotaUsage, Target};

const NAMESPACE: &str = "shop";

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_268_800, 0).unwrap_or_default()
}

/// `minutes` before the investigation, as the API server writes times.
fn ago(minutes: i64) -> String {
    (now() - Duration::minutes(minutes)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A pod, running and ready unless told otherwise, with the conditions a kubelet writes.
pub(super) fn pod(name: &str) -> PodFixture {
    PodFixture(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": ago(60)},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]},
        "status": {
            "phase": "Running", "startTime": ago(60),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(60)},
                {"type": "Ready", "status": "True", "lastTransitionTime": ago(59)},
            ],
            "containerStatuses": [{
                "name": "app", "image": "shop/app:1.0", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": ago(60)}},
            }],
        },
    }))
}

pub(super) struct PodFixture(Value);

impl PodFixture {
    pub fn container(&mut self) -> &mut Value {
        &mut self.0["status"]["containerStatuses"][0]
    }

    /// Created and started `minutes` ago, its container with it.
    pub fn started(mut self, minutes: i64) -> Self {
        self.0["metadata"]["creationTimestamp"] = json!(ago(minutes));
        self.0["status"]["startTime"] = json!(ago(minutes));
        self.container()["state"] = json!({"running": {"startedAt": ago(minutes)}});
        self
    }

    /// Its container reads ConfigMap `name` at its start (`envFrom`).
    pub fn reads_configmap(mut self, name: &str) -> Self {
        self.0["spec"]["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": name}}]);
        self
    }

    /// The pod's Ready condition False since `minutes` ago (its container is not ready).
    fn not_ready(&mut self, minutes: i64) {
        self.0["status"]["conditions"][1] =
            json!({"type": "Ready", "status": "False", "lastTransitionTime": ago(minutes)});
    }

    /// Its container's memory limit, in the pod (a LimitRange's default, or an older template).
    pub fn memory_limit(mut self, limit: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": limit}});
        self
    }

    /// Exits with `reason` and `exit_code` a few minutes ago, and is backing off.
    pub fn crash_looping(mut self, reason: &str, exit_code: i64) -> Self {
        let c = self.container();
        c["ready"] = json!(false);
        c["restartCount"] = json!(4);
        c["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}});
        c["lastState"] = json!({"terminated": {
            "reason": reason, "exitCode": exit_code, "startedAt": ago(4), "finishedAt": ago(3),
        }});
        self.not_ready(4);
        self
    }

    pub fn oom_killed(self) -> Self {
        self.crash_looping("OOMKilled", 137)
    }

    /// Waits to start, for `reason`.
    pub fn waiting(mut self, reason: &str, message: &str) -> Self {
        let c = self.container();
        c["ready"] = json!(false);
        c["state"] = json!({"waiting": {"reason": reason, "message": message}});
        self.not_ready(60);
        self
    }

    /// Its container requests `cpu`.
    pub fn requests_cpu(mut self, cpu: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": cpu}});
        self
    }

    /// Placed on a node `minutes` ago, its container still being created.
    pub fn creating(self, minutes: i64) -> Self {
        let mut p = self.started(minutes).waiting("ContainerCreating", "");
        p.0["status"]["phase"] = json!("Pending");
        p
    }

    /// Not scheduled on any node.
    pub fn pending(mut self) -> Self {
        self.0["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "lastTransitionTime": ago(10),
            "message": "0/3 nodes are available: 3 Insufficient cpu."}]});
        self
    }

    /// Deletion asked `minutes` ago, held by `finalizer`.
    pub fn terminating_for(mut self, minutes: i64, finalizer: &str) -> Self {
        self.0["metadata"]["deletionTimestamp"] = json!(ago(minutes));
        self.0["metadata"]["finalizers"] = json!([finalizer]);
        self
    }

    /// Mounts volume `name` (`source`: `{"emptyDir": {}}`, `{"configMap": …}`) at `path`.
    pub fn volume(mut self, name: &str, path: &str, source: Value) -> Self {
        let mut v = json!({"name": name});
        if let (Some(v), Some(src)) = (v.as_object_mut(), source.as_object()) {
            v.extend(src.clone());
        }
        push(&mut self.0["spec"]["volumes"], v);
        push(
            &mut self.0["spec"]["containers"][0]["volumeMounts"],
            json!({"name": name, "mountPath": path}),
        );
        self
    }

    /// Not ready since it started: its Ready condition last changed as the kubelet started it.
    pub fn never_ready(mut self) -> Self {
        self.not_ready(60);
        self
    }

    /// The pod as JSON, to change what no builder sets.
    pub fn raw(self) -> Value {
        self.0
    }

    /// Of the revision whose pod-template-hash is `hash`.
    pub fn revision(mut self, hash: &str) -> Self {
        self.0["metadata"]["labels"] = json!({"pod-template-hash": hash});
        self
    }

    /// Running, ready for a while, and not ready since `minutes` ago (its probe fails).
    pub fn not_ready_since(mut self, minutes: i64) -> Self {
        self.container()["ready"] = json!(false);
        self.not_ready(minutes);
        self
    }

    /// A second container, `name`, in the same state as the first.
    pub fn sidecar(mut self, name: &str) -> Self {
        let mut status = self.container().clone();
        status["name"] = json!(name);
        push(&mut self.0["status"]["containerStatuses"], status);
        push(
            &mut self.0["spec"]["containers"],
            json!({"name": name, "image": "shop/proxy:1.0"}),
        );
        self
    }

    /// A second container `name` (as [`PodFixture::sidecar`]) killed for memory three minutes
    /// ago.
    pub fn sidecar_oom_killed(self, name: &str) -> Self {
        let mut p = self.sidecar(name);
        let c = &mut p.0["status"]["containerStatuses"][1];
        c["restartCount"] = json!(2);
        c["lastState"] = json!({"terminated": {
            "reason": "OOMKilled", "exitCode": 137, "startedAt": ago(4), "finishedAt": ago(3),
        }});
        p
    }

    /// Bound to node `node`.
    pub fn on(mut self, node: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(node);
        self
    }

    /// Created by the ReplicaSet `rs`.
    pub fn owned_by(mut self, rs: &str) -> Self {
        self.0["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs, "controller": true}]);
        self
    }
}

/// One incident: a Deployment in namespace `shop` and what was gathered about it.
pub(super) struct Incident {
    ev: Evidence,
    deployment: Value,
}

impl Incident {
    pub fn deployment(name: &str) -> Self {
        let target = Target::new("Deployment", name, Some(NAMESPACE.into()));
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]}}},
            // What its controller reports of a workload at its desired state.
            "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1},
        });
        let ev = Evidence {
            now: now(),
            alert: Alert {
                name: "KubePodCrashLooping".into(),
                proactive: false,
                container: None,
                starts_at: None,
                unseen_by_objects: None,
            },
            subject: target.clone(),
            context: Some(Arc::new(ResourceContext {
                target: target.clone(),
                owner_chain: vec![],
                root_owner: target,
                root_api_version: "apps/v1".into(),
                spec_hash: None,
                autoscaled_drift_hash: None,
                detected_labels: DetectedLabels::default(),
                warnings: vec![],
            })),
            root: Some(Root::read(&deployment)),
            pods: vec![],
            events: vec![],
            revisions: vec![],
            workload: Some(WorkloadState::read(&deployment)),
            hpa: None,
            autoscalers: vec![],
            pdb: None,
            namespace_pods: vec![],
            logs: HashMap::new(),
            metrics: None,
            nodes: vec![],
            port_holders: vec![],
            cluster_pods: Some(vec![]),
            node_events_unread: vec![],
            alerted: vec![],
            storage_class: None,
            configmap_writes: BTreeMap::new(),
        };
        Self { ev, deployment }
    }

    /// The alert's subject and root owner become `target` (a core/v1 kind).
    fn retarget(&mut self, target: Target) {
        self.ev.subject = target.clone();
        if let Some(ctx) = self.ev.context.as_mut().map(Arc::make_mut) {
            ctx.target = target.clone();
            ctx.root_owner = target;
            ctx.root_api_version = "v1".into();
        }
    }

    /// A PersistentVolumeClaim `name` of `capacity` on the storage class `standard`, bound.
    pub fn claim(name: &str, capacity: &str) -> Self {
        let mut incident = Self::deployment(name);
        let target = Target::new("PersistentVolumeClaim", name, Some(NAMESPACE.into()));
        let claim = json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": capacity}},
            },
            "status": {"phase": "Bound", "capacity": {"storage": capacity}},
        });
        incident.retarget(target);
        incident.ev.root = Some(Root::read(&claim));
        incident.ev.workload = None;
        incident.deployment = claim;
        incident
    }

    /// The alert's root is node `name` with `conditions`, among `others` (their names) that
    /// are Ready.
    pub fn node(name: &str, conditions: Value, others: &[&str]) -> Self {
        let mut incident = Self::deployment(name);
        let target = Target::new("Node", name, None);
        let node = |name: &str, conditions: Value| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"conditions": conditions}})
        };
        let raw = node(name, conditions);
        incident.retarget(target);
        incident.ev.root = Some(Root::read(&raw));
        incident.ev.workload = None;
        incident.ev.nodes = std::iter::once(observed::Node::parse(&raw))
            .chain(others.iter().map(|n| {
                observed::Node::parse(&node(n, json!([{"type": "Ready", "status": "True"}])))
            }))
            .collect();
        incident.deployment = raw;
        incident
    }

    /// A Ready node `name` allocating `cpu` and `memory`.
    pub fn node_allocating(mut self, name: &str, cpu: &str, memory: &str) -> Self {
        self.ev.nodes.push(observed::Node::parse(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
        })));
        self
    }

    /// A pod of another namespace running on node `node`, requesting `cpu`.
    pub fn bound_on(mut self, node: &str, cpu: &str) -> Self {
        let n = self.ev.cluster_pods.as_ref().map_or(0, Vec::len);
        self.ev
            .cluster_pods
            .get_or_insert_with(Vec::new)
            .push(observed::Pod::parse(&json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("batch-{n}"), "namespace": "batch"},
                "spec": {"nodeName": node, "containers": [{"name": "work", "image": "batch:1",
                    "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": "Running"},
            })));
        self
    }

    /// A Ready node `name` with room, under MemoryPressure.
    pub fn node_under_memory_pressure(mut self, name: &str) -> Self {
        self.ev.nodes.push(observed::Node::parse(&json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                    {"type": "MemoryPressure", "status": "True"}],
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        })));
        self
    }

    /// A Ready node `name` with room, tainted `key:NoSchedule` by `manager` (its managed fields).
    pub fn tainted_node(self, name: &str, key: &str, manager: &str) -> Self {
        self.tainted_node_with(name, key, &["NoSchedule"], manager)
    }

    /// A Ready node carrying the taint `key` with each of `effects`, written by `manager`.
    pub fn tainted_node_with(
        mut self,
        name: &str,
        key: &str,
        effects: &[&str],
        manager: &str,
    ) -> Self {
        let taints: Vec<serde_json::Value> = effects
            .iter()
            .map(|e| json!({"key": key, "effect": e}))
            .collect();
        self.ev.nodes.push(observed::Node::parse(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                "managedFields": [{"manager": manager,
                "operation": "Update", "time": ago(30), "fieldsV1": {"f:spec": {"f:taints": {}}}}]},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        })));
        self
    }

    /// The claim's StorageClass `standard`, allowing volume expansion or not.
    pub fn storage_class(mut self, allow_expansion: bool) -> Self {
        self.ev.storage_class = Some(observed::StorageClass::parse(&json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "standard"}, "provisioner": "example.com/disk",
            "allowVolumeExpansion": allow_expansion,
        })));
        self
    }

    /// The claim is `phase` (`Pending`, `Lost`): no volume bound to it.
    pub fn claim_phase(mut self, phase: &str) -> Self {
        self.deployment["status"] = json!({"phase": phase});
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The claim reports its condition `kind` True (`FileSystemResizePending`, …).
    pub fn claim_condition(mut self, kind: &str) -> Self {
        self.deployment["status"]["conditions"] = json!([{"type": kind, "status": "True"}]);
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The claim asks for `size` while its volume still has the old capacity (being expanded).
    pub fn resize_requested(mut self, size: &str) -> Self {
        self.deployment["spec"]["resources"]["requests"]["storage"] = json!(size);
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The alert `name` fires on the PromQL `expression` (its generator URL carries it).
    pub fn alert_expression(mut self, name: &str, expression: &str) -> Self {
        let url = format!(
            "http://prometheus:9090/graph?g0.expr={}",
            expression.replace(' ', "%20")
        );
        self.ev.alert.name = name.into();
        self.ev.alert.unseen_by_objects =
            crate::prove::findings::condition::unseen_by_objects(name, Some(&url));
        self
    }

    /// The alert is `name`, about `container` when given.
    pub fn alert(mut self, name: &str, container: Option<&str>) -> Self {
        self.ev.alert.name = name.into();
        self.ev.alert.container = container.map(str::to_owned);
        self
    }

    /// The template's container `app` is limited to `cpu`, and a second container `proxy`
    /// runs beside it when `sidecar`.
    pub fn cpu_limit(mut self, cpu: &str, sidecar: bool) -> Self {
        let containers = &mut self.deployment["spec"]["template"]["spec"]["containers"];
        containers[0]["resources"] = json!({"limits": {"cpu": cpu}});
        if sidecar {
            push(containers, json!({"name": "proxy", "image": "envoy:1.30"}));
        }
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The alert is the prediction `name` (proactive).
    pub fn predicted(mut self, name: &str) -> Self {
        self.ev.alert.name = name.into();
        self.ev.alert.proactive = true;
        self
    }

    /// The metrics API reports `memory` in use by the container `app` of `pod`.
    pub fn memory_use(mut self, pod: &str, memory: &str) -> Self {
        let usage = observed::PodMetrics {
            name: pod.into(),
            containers: vec![observed::ContainerUse {
                name: Some("app".into()),
                cpu: None,
                memory: Some(memory.into()),
            }],
        };
        self.ev.metrics.get_or_insert_with(Vec::new).push(usage);
        self
    }

    /// The container's memory limit in the pod template.
    pub fn memory_limit(mut self, limit: &str) -> Self {
        self.deployment["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"memory": limit}});
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// An autoscaler of the deployment at its maximum `max`, its CPU at `cpu`% of a 70% target,
    /// and the template's container requesting one CPU.
    pub fn hpa_at_max(mut self, max: i64, cpu: i64) -> Self {
        let name = crate::cluster::obj::name(&self.deployment).to_owned();
        let hpa = observed::Hpa::parse(&json!({
            "metadata": {"name": name},
            "spec": {"maxReplicas": max, "targetCPUUtilizationPercentage": 70,
                "scaleTargetRef": {"kind": "Deployment", "name": name}},
            "status": {"currentReplicas": max, "desiredReplicas": max,
                "currentCPUUtilizationPercentage": cpu},
        }));
        self.ev.autoscalers.push(hpa.clone());
        self.ev.hpa = Some(hpa);
        self.deployment["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": "1"}});
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The template's container binds host port `port` (TCP).
    pub fn host_port(mut self, port: i64) -> Self {
        self.deployment["spec"]["template"]["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": port, "hostPort": port, "protocol": "TCP"}]);
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// The events of node `node` were not read (the pods fail on more nodes than are judged).
    pub fn node_events_unread(mut self, node: &str) -> Self {
        self.ev.node_events_unread.push(node.to_owned());
        self
    }

    /// The template's pods are labelled `app: <deployment>` and require one per node
    /// (`podAntiAffinity` on `kubernetes.io/hostname` among themselves).
    pub fn one_per_node(mut self) -> Self {
        let name = crate::cluster::obj::name(&self.deployment).to_owned();
        let template = &mut self.deployment["spec"]["template"];
        template["metadata"] = json!({"labels": {"app": name}});
        template["spec"]["affinity"] = json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": name}},
                "topologyKey": "kubernetes.io/hostname"}]}});
        self.ev.root = Some(Root::read(&self.deployment));
        self
    }

    /// An autoscaler `name` in the namespace that scales the deployment (not the root).
    pub fn autoscaled_by(mut self, name: &str) -> Self {
        let target = crate::cluster::obj::name(&self.deployment).to_owned();
        self.ev.autoscalers.push(observed::Hpa::parse(&json!({
            "metadata": {"name": name},
            "spec": {"minReplicas": 1, "maxReplicas": 10,
                "scaleTargetRef": {"kind": "Deployment", "name": target}},
        })));
        self
    }

    /// The namespace's quota of `resource`: `used` of `hard`.
    pub fn quota(mut self, resource: &str, used: &str, hard: &str) -> Self {
        if let Some(ctx) = self.ev.context.as_mut().map(Arc::make_mut) {
            ctx.detected_labels.quota_details.insert(
                resource.into(),
                QuotaUsage {
                    hard: hard.into(),
                    used: used.into(),
                },
            );
        }
        self
    }

    /// Created `minutes` ago, its pod template reading ConfigMap `config` as a volume (the
    /// kubelet keeps it in sync: running pods read every write).
    pub fn mounts_configmap(mut self, config: &str, minutes: i64) -> Self {
        self.deployment["metadata"]["creationTimestamp"] = json!(ago(minutes));
        let spec = &mut self.deployment["spec"]["template"]["spec"];
        spec["volumes"] = json!([{"name": "config", "configMap": {"name": config}}]);
        spec["containers"][0]["volumeMounts"] =
            json!([{"name": "config", "mountPath": "/etc/app"}]);
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// Its rollout paused (`kubectl rollout pause`).
    pub fn paused(mut self) -> Self {
        self.deployment["spec"]["paused"] = json!(true);
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// How many of its pods its controller reports updated to the current template
    /// (`status.updatedReplicas`).
    pub fn updated(mut self, n: i64) -> Self {
        self.deployment["status"]["updatedReplicas"] = json!(n);
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// Its update strategy (`spec.strategy.type`).
    pub fn strategy(mut self, strategy: &str) -> Self {
        self.deployment["spec"]["strategy"] = json!({"type": strategy});
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// The replicas its applied configuration declares
    /// (`kubectl.kubernetes.io/last-applied-configuration`).
    pub fn applied(mut self, replicas: i64) -> Self {
        let applied = json!({"spec": {"replicas": replicas}}).to_string();
        self.deployment["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": applied});
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// The Deployment's `spec.replicas`.
    pub fn replicas(mut self, n: i64) -> Self {
        self.deployment["spec"]["replicas"] = json!(n);
        for count in [
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
        ] {
            self.deployment["status"][count] = json!(n);
        }
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    /// `spec.replicas` `want`, and a status whose controller reports `available` of them
    /// ready, available and updated.
    pub fn available(mut self, want: i64, available: i64) -> Self {
        self = self.replicas(want);
        self.deployment["status"]["readyReplicas"] = json!(available);
        self.deployment["status"]["availableReplicas"] = json!(available);
        self.ev.root = Some(Root::read(&self.deployment));
        self.ev.workload = Some(WorkloadState::read(&self.deployment));
        self
    }

    pub fn with(self, pod: PodFixture) -> Self {
        self.with_raw_pod(pod.0)
    }

    /// An object the alert names besides the root, as read now.
    pub fn alerted(mut self, kind: &str, pod: PodFixture) -> Self {
        let name = pod.0["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.ev
            .alerted
            .push((Target::new(kind, name, Some(NAMESPACE.into())), pod.0));
        self
    }

    /// A pod among the pods of every namespace the evidence read (`cluster_pods`), the
    /// incident's own included when a test wants them there.
    pub fn in_cluster(mut self, pod: PodFixture) -> Self {
        let now = self.ev.now;
        self.ev
            .cluster_pods
            .get_or_insert_with(Vec::new)
            .push(observed::Pod::at(&pod.0, now));
        self
    }

    /// The pods of every namespace were not read (the list was refused).
    pub fn cluster_unread(mut self) -> Self {
        self.ev.cluster_pods = None;
        self
    }

    /// A pod, as the API server sent it, among the pods of every namespace the evidence read.
    pub fn in_cluster_raw(mut self, raw: Value) -> Self {
        let now = self.ev.now;
        self.ev
            .cluster_pods
            .get_or_insert_with(Vec::new)
            .push(observed::Pod::at(&raw, now));
        self
    }

    /// A pod exactly as the API server (or something pretending to be one) sent it.
    pub fn with_raw_pod(mut self, raw: Value) -> Self {
        let now = self.ev.now;
        self.ev.pods.extend(ObservedPod::parse(raw, now));
        self
    }

    /// The deployment controller's word that it scaled ReplicaSet `rs` to `to`, `minutes` ago.
    pub fn scaled(mut self, rs: &str, up: bool, to: i64, minutes: i64) -> Self {
        let name = self.deployment["metadata"]["name"].clone();
        let verb = if up { "up" } else { "down" };
        self.ev
            .events
            .push(crate::cluster::observed::Event::parse(&json!({
                "type": "Normal", "reason": "ScalingReplicaSet",
                "message": format!("Scaled {verb} replica set {rs} to {to}"),
                "involvedObject": {"kind": "Deployment", "name": name}, "lastTimestamp": ago(minutes),
            })));
        self
    }

    /// A Warning event about `object`, `minutes` ago.
    pub fn warning(mut self, object: &str, reason: &str, message: &str, minutes: i64) -> Self {
        self.ev
            .events
            .push(crate::cluster::observed::Event::parse(&json!({
                "type": "Warning", "reason": reason, "message": message,
                "involvedObject": {"kind": "Pod", "name": object}, "lastTimestamp": ago(minutes),
            })));
        self
    }

    /// A Warning event about node `node`, `minutes` ago.
    pub fn node_warning(mut self, node: &str, reason: &str, message: &str, minutes: i64) -> Self {
        self.ev
            .events
            .push(crate::cluster::observed::Event::parse(&json!({
                "type": "Warning", "reason": reason, "message": message,
                "involvedObject": {"kind": "Node", "name": node}, "lastTimestamp": ago(minutes),
            })));
        self
    }

    /// Node `node`'s readiness went NotReady `count` times, the last `minutes` ago.
    pub fn node_flapped(mut self, node: &str, count: i64, minutes: i64) -> Self {
        self.ev
            .events
            .push(crate::cluster::observed::Event::parse(&json!({
                "type": "Normal", "reason": "NodeNotReady", "count": count,
                "message": format!("Node {node} status is now: NodeNotReady"),
                "involvedObject": {"kind": "Node", "name": node},
                "firstTimestamp": ago(minutes + 30), "lastTimestamp": ago(minutes),
            })));
        self
    }

    /// A node `name` that is not Ready.
    pub fn node_not_ready(mut self, name: &str) -> Self {
        self.ev.nodes.push(observed::Node::parse(&json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        })));
        self
    }

    /// The previous log of a pod's container.
    pub fn log(self, pod: &str, text: &str) -> Self {
        self.container_log(pod, "app", text)
    }

    /// The previous log of container `container` of a pod.
    pub fn container_log(mut self, pod: &str, container: &str, text: &str) -> Self {
        let key = LogKey {
            pod: pod.into(),
            container: container.into(),
            previous: true,
        };
        self.ev.logs.insert(key, text.into());
        self
    }

    /// Revision 2 (`image`) rolled out `minutes` ago over a revision 1 that had ready pods.
    /// Its ReplicaSets are `<deployment>-1` and `<deployment>-2`.
    pub fn rolled_out(mut self, image: &str, minutes: i64) -> Self {
        let name = self.ev.subject.name.clone();
        let rs = |revision: i64, image: &str, created: String, ready: i64| {
            observed::Revision::of_replicaset(&json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {
                    "name": format!("{name}-{revision}"), "namespace": NAMESPACE,
                    "creationTimestamp": created,
                    "annotations": {"deployment.kubernetes.io/revision": revision.to_string()},
                },
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}},
                "status": {"replicas": ready, "readyReplicas": ready},
            }))
        };
        self.ev
            .revisions
            .extend(rs(1, "shop/app:1.0", ago(7 * 24 * 60), 2));
        self.ev.revisions.extend(rs(2, image, ago(minutes), 0));
        self
    }

    /// Every revision's pods read ConfigMap `name` at their start (`envFrom`), last written
    /// `minutes` ago.
    pub fn reads_configmap(mut self, name: &str, minutes: i64) -> Self {
        for rs in &mut self.ev.revisions {
            if let Some(c) = rs.template.pointer_mut("/spec/containers/0") {
                c["envFrom"] = json!([{"configMapRef": {"name": name}}]);
            }
        }
        self.configmap_written(name, minutes)
    }

    /// ConfigMap `name` was last written `minutes` ago.
    pub fn configmap_written(mut self, name: &str, minutes: i64) -> Self {
        self.ev
            .configmap_writes
            .insert(name.to_owned(), now() - Duration::minutes(minutes));
        self
    }

    /// The previous revision's pods are gone (Recreate, or a completed rolling update).
    pub fn previous_gone(mut self) -> Self {
        for rs in &mut self.ev.revisions {
            rs.ready = 0;
        }
        self
    }

    /// The alert started firing `minutes` ago.
    pub fn alert_started(mut self, minutes: i64) -> Self {
        self.ev.alert.starts_at = Some(now() - Duration::minutes(minutes));
        self
    }

    /// When `minutes` ago is, as the API server writes it.
    pub fn at(minutes: i64) -> DateTime<Utc> {
        now() - Duration::minutes(minutes)
    }

    /// The facts, as the gatherer leaves the evidence (the pods heed their warnings).
    pub fn facts(&self) -> Facts {
        let mut ev = self.ev.clone();
        // A pod is never older than the revision that made it: a pod of a newer revision
        // (the builder's pods are created an hour ago) was created with its revision.
        for p in &mut ev.pods {
            let made = ev
                .revisions
                .iter()
                .find(|r| r.owns(&p.observed))
                .and_then(|r| r.created);
            if let Some(made) = made
                && p.observed.created.is_none_or(|c| c < made)
            {
                p.observed.created = Some(made);
            }
        }
        ev.heed_warnings();
        Facts::derive(&ev)
    }

    pub fn diagnosis(&self) -> Diagnosis {
        rules::diagnose(&self.facts())
    }
}

fn push(list: &mut Value, item: Value) {
    match list.as_array_mut() {
        Some(items) => items.push(item),
        None => *list = json!([item]),
    }
}
