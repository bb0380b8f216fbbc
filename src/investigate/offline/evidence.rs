//! Evidence gathering: the read-only tool calls the offline investigator makes about one
//! signal, and the objects they return, parsed once into typed form.
//!
//! Input: the remediation request, the namespace's pods and events the shared prefetch already
//! read, and the cluster tools. Output: an [`Evidence`] (or `None` when the signal names no
//! resource), plus one [`ToolCallRecord`] per call for the audit trail.
//!
//! Invariants:
//! - JSON stops here. Pods, ReplicaSets, Nodes and PersistentVolumeClaims become k8s-openapi
//!   types; the root owner becomes a [`Root`]; events, logs and metrics become small structs.
//! - An object that does not parse is left out, never an error and never a panic: a rule cannot
//!   detect what kubemedic could not read. k8s-openapi fills an absent required field with its
//!   default (`""`, `0`, `false`); the API server always sends those fields.
//! - Only an unreachable cluster is an error (the request waits); any other failed call just
//!   leaves the evidence thinner.
//! - Which calls are made, with which arguments and in which order, is part of the audit trail:
//!   it must not depend on anything but the cluster's answers.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{
    ContainerStatus, Node, PersistentVolumeClaim, Pod, PodTemplateSpec, Service,
};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cluster::ClusterReader;
use crate::cluster::context::ResourceContext;
use crate::cluster::obj::{self, array, at, str_at};
use crate::cluster::render::{event_time, pod_status};
use crate::cluster::selector::Selector;
use crate::cluster::tools::{ClusterTools, ToolResult};
use crate::domain::{RemediationRequest, SignalMode, Target, ToolCallRecord, targets_from_labels};
use crate::investigate::InvestigateError;

/// Everything gathered about the incident.
pub(super) struct Evidence {
    pub now: DateTime<Utc>,
    pub alert: Alert,
    /// What the signal named.
    pub subject: Target,
    /// The subject's owner chain up to its root owner; `None` when the subject is gone.
    pub context: Option<Arc<ResourceContext>>,
    /// The root owner as read; `None` when it could not be read.
    pub root: Option<Root>,
    /// The root owner's pods (a bare Pod is its own).
    pub pods: Vec<ObservedPod>,
    pub events: Vec<EventRecord>,
    /// A Deployment's ReplicaSets (owned by it, by uid).
    pub replicasets: Vec<ReplicaSet>,
    /// Every pod of the signal's namespace (for a Service whose selector matches none).
    pub namespace_pods: Vec<Pod>,
    pub logs: HashMap<LogKey, String>,
    /// `None` when the metrics API is not served or was not asked.
    pub metrics: Option<Vec<PodUsage>>,
    /// Asked only for a Node subject or when a pod is Pending.
    pub nodes: Vec<Node>,
    pub storage_class: Option<StorageClass>,
}

/// What the alert says that the rules may read: never its free text.
pub(super) struct Alert {
    pub name: String,
    pub proactive: bool,
    /// The `container` label.
    pub container: Option<String>,
}

/// The root owner, typed as far as the rules read it.
pub(super) struct Root {
    /// The object's own `kind` (the context's root owner names the same object).
    pub kind: String,
    pub name: String,
    pub object: RootObject,
}

pub(super) enum RootObject {
    Pod(Box<Pod>),
    Node(Box<Node>),
    Claim(Box<PersistentVolumeClaim>),
    Service(Box<Service>),
    /// A workload's pod template (Deployment, StatefulSet, DaemonSet, Job, …).
    Template(Box<PodTemplateSpec>),
    /// A kind the rules read nothing from, or an object that did not parse.
    Opaque,
}

impl Root {
    pub fn read(raw: &Value) -> Self {
        let kind = obj::kind(raw).to_owned();
        let object = match kind.as_str() {
            "Pod" => typed(raw.clone()).map(RootObject::Pod),
            "Node" => typed(raw.clone()).map(RootObject::Node),
            "PersistentVolumeClaim" => typed(raw.clone()).map(RootObject::Claim),
            "Service" => typed(raw.clone()).map(RootObject::Service),
            _ => at(raw, &["spec", "template"])
                .and_then(|t| typed(t.clone()))
                .map(RootObject::Template),
        };
        Self {
            name: obj::name(raw).to_owned(),
            kind,
            object: object.unwrap_or(RootObject::Opaque),
        }
    }
}

/// A pod as read, with its STATUS column.
pub(super) struct ObservedPod {
    pub pod: Pod,
    /// STATUS as `kubectl get pods` prints it, rendered by `cluster::render` from the object as
    /// read: the very text the playbook triggers matched, so rules and playbooks agree.
    pub status: String,
}

impl ObservedPod {
    pub fn parse(raw: Value) -> Option<Self> {
        let status = pod_status(&raw);
        Some(Self {
            pod: typed(raw)?,
            status,
        })
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    pub fn phase(&self) -> Option<&str> {
        self.pod.status.as_ref()?.phase.as_deref()
    }

    pub fn containers(&self) -> &[ContainerStatus] {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[])
    }

    /// A pod is failing when a container waits on an error, has terminated with an error, or
    /// is not ready while running. (Here rather than among the facts because gathering needs
    /// it: only failing pods' logs are read.)
    pub fn failing(&self) -> bool {
        if matches!(self.status.as_str(), "Running" | "Completed" | "Succeeded") {
            return self.containers().iter().any(|c| !c.ready) && self.phase() == Some("Running");
        }
        self.status != "Pending" || self.phase() == Some("Pending")
    }

    pub fn healthy(&self) -> bool {
        self.status == "Running" && self.containers().iter().all(|c| c.ready)
    }
}

/// An event, reduced to what the rules compare.
pub(super) struct EventRecord {
    /// `involvedObject.name`.
    pub object: Option<String>,
    pub warning: bool,
    pub reason: String,
    pub message: String,
    /// When it last happened, if that parses.
    pub at: Option<DateTime<Utc>>,
}

impl EventRecord {
    pub fn read(e: &Value) -> Self {
        Self {
            object: str_at(e, &["involvedObject", "name"]).map(str::to_owned),
            warning: str_at(e, &["type"]) == Some("Warning"),
            reason: str_at(e, &["reason"]).unwrap_or("").to_owned(),
            message: str_at(e, &["message"]).unwrap_or("").to_owned(),
            at: event_time(e)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LogKey {
    pub pod: String,
    pub container: String,
    /// The previous (crashed) instance's log.
    pub previous: bool,
}

/// One pod's line of `kubectl_top_pods`.
pub(super) struct PodUsage {
    pub name: String,
    pub containers: Vec<ContainerUsage>,
}

pub(super) struct ContainerUsage {
    pub name: Option<String>,
    /// A quantity such as `200Mi`.
    pub memory: Option<String>,
}

impl PodUsage {
    fn read(p: &Value) -> Self {
        Self {
            name: str_at(p, &["name"]).unwrap_or("").to_owned(),
            containers: array(p, &["containers"])
                .iter()
                .map(|c| ContainerUsage {
                    name: str_at(c, &["name"]).map(str::to_owned),
                    memory: str_at(c, &["memory"]).map(str::to_owned),
                })
                .collect(),
        }
    }
}

/// A Kubernetes object in typed form, or `None` when it does not parse.
fn typed<T: DeserializeOwned>(raw: Value) -> Option<T> {
    serde_json::from_value(raw).ok()
}

fn items(r: &ToolResult) -> Vec<Value> {
    r.data
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn pods(raw: Vec<Value>) -> Vec<ObservedPod> {
    raw.into_iter().filter_map(ObservedPod::parse).collect()
}

fn all_typed<T: DeserializeOwned>(raw: Vec<Value>) -> Vec<T> {
    raw.into_iter().filter_map(typed).collect()
}

/// The tool calls of one investigation, recorded for the audit trail.
struct Calls<'a> {
    tools: &'a ClusterTools,
    records: &'a mut Vec<ToolCallRecord>,
}

impl Calls<'_> {
    async fn call(&mut self, name: &str, args: Value) -> Result<ToolResult, InvestigateError> {
        let r = self.tools.call(name, &args).await;
        if r.data.pointer("/error/kind").and_then(Value::as_str) == Some("unreachable") {
            return Err(InvestigateError::Unavailable {
                dependency: "cluster".into(),
                message: r.text.clone(),
            });
        }
        self.records.push(ToolCallRecord {
            tool: name.into(),
            arguments: args,
            ok: r.ok,
            output_chars: r.text.len(),
            truncated: r.truncated,
        });
        Ok(r)
    }
}

/// Gather the evidence about `req`'s subject. `namespace_pods` and `events` are the prefetched
/// namespace snapshot.
pub(super) async fn gather(
    reader: &dyn ClusterReader,
    tools: &ClusterTools,
    now: DateTime<Utc>,
    req: &RemediationRequest,
    records: &mut Vec<ToolCallRecord>,
    namespace_pods: Vec<Value>,
    events: Vec<Value>,
) -> Result<Option<Evidence>, InvestigateError> {
    let Some(subject) = req.target.clone() else {
        return Ok(None);
    };
    let mut calls = Calls { tools, records };
    let ns = subject.namespace.clone();
    // Resolve the subject; if a pod is gone, try the alert's other target labels.
    let mut candidates = vec![subject.clone()];
    candidates.extend(
        targets_from_labels(&req.signal.labels)
            .into_iter()
            .filter(|t| *t != subject),
    );
    let mut context = None;
    for c in &candidates {
        let (name, args) = match &c.namespace {
            Some(ns) => (
                "get_namespaced_resource_context",
                json!({"kind": c.kind, "name": c.name, "namespace": ns}),
            ),
            None => (
                "get_cluster_resource_context",
                json!({"kind": c.kind, "name": c.name}),
            ),
        };
        let r = calls.call(name, args).await?;
        if r.ok
            && let Ok(ctx) = tools
                .contexts()
                .resolve(&c.kind, &c.name, c.namespace.as_deref())
                .await
        {
            context = Some(ctx);
            break;
        }
    }
    let mut ev = Evidence {
        now,
        alert: Alert {
            name: req.signal.name.clone(),
            proactive: req.signal.mode == SignalMode::Proactive,
            container: req.signal.labels.get("container").cloned(),
        },
        subject,
        context: context.clone(),
        root: None,
        pods: vec![],
        events: events.iter().map(EventRecord::read).collect(),
        replicasets: vec![],
        namespace_pods: all_typed(namespace_pods),
        logs: HashMap::new(),
        metrics: None,
        nodes: vec![],
        storage_class: None,
    };
    let Some(ctx) = context else {
        return Ok(Some(ev));
    };
    let root_t = ctx.root_owner.clone();
    let root_res = reader.resource(&root_t.kind).await?;
    let root = reader
        .get(&root_res, root_t.namespace.as_deref(), &root_t.name)
        .await
        .ok();
    if let Some(root) = &root {
        match obj::kind(root) {
            "Pod" => ev.pods = pods(vec![root.clone()]),
            "Node" | "PersistentVolumeClaim" | "PersistentVolume" => {}
            "Service" => {
                let selector: Vec<String> = obj::map_pairs(at(root, &["spec", "selector"]))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if !selector.is_empty() {
                    let r = calls.call("kubectl_find_resource", json!({"kind": "Pod", "namespace": ns, "label_selector": selector.join(",")})).await?;
                    ev.pods = pods(items(&r));
                }
            }
            _ => {
                let selector = at(root, &["spec", "selector"])
                    .and_then(Selector::from_object)
                    .map(|s| s.to_query());
                if let Some(sel) = selector.filter(|s| !s.is_empty()) {
                    let r = calls
                        .call(
                            "kubectl_find_resource",
                            json!({"kind": "Pod", "namespace": ns, "label_selector": sel}),
                        )
                        .await?;
                    ev.pods = pods(items(&r));
                    if obj::kind(root) == "Deployment" {
                        let r = calls.call("kubectl_find_resource", json!({"kind": "ReplicaSet", "namespace": ns, "label_selector": sel})).await?;
                        let uid = ctx
                            .owner_chain
                            .last()
                            .map(|l| l.uid.clone())
                            .unwrap_or_default();
                        ev.replicasets = all_typed::<ReplicaSet>(items(&r))
                            .into_iter()
                            .filter(|rs| {
                                rs.metadata
                                    .owner_references
                                    .iter()
                                    .flatten()
                                    .any(|o| o.uid == uid)
                            })
                            .collect();
                    }
                }
            }
        }
    }
    ev.root = root.as_ref().map(Root::read);
    // The failing pods' logs: previous instance when it restarted, current otherwise.
    let failing: Vec<&ObservedPod> = ev.pods.iter().filter(|p| p.failing()).take(2).collect();
    for p in failing {
        let pod_ns = p.pod.metadata.namespace.clone().unwrap_or_default();
        for c in p.containers() {
            let previous = c.restart_count > 0;
            let tool = if previous {
                "kubectl_previous_logs"
            } else {
                "kubectl_logs"
            };
            let r = calls.call(tool, json!({"name": p.name(), "namespace": pod_ns, "container": c.name, "tail_lines": 50})).await?;
            if r.ok {
                let text = r
                    .data
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let key = LogKey {
                    pod: p.name().to_owned(),
                    container: c.name.clone(),
                    previous,
                };
                ev.logs.insert(key, text);
            }
        }
    }
    if ev.alert.proactive || ev.alert.name.to_ascii_lowercase().contains("memory") {
        let r = calls
            .call("kubectl_top_pods", json!({"namespace": ns}))
            .await?;
        if r.data.get("available").and_then(Value::as_bool) == Some(true) {
            ev.metrics = r
                .data
                .get("pods")
                .and_then(Value::as_array)
                .map(|pods| pods.iter().map(PodUsage::read).collect());
        }
    }
    if root_t.kind == "PersistentVolumeClaim"
        && let Some(class) = root
            .as_ref()
            .and_then(|r| str_at(r, &["spec", "storageClassName"]))
    {
        let r = calls
            .call(
                "kubectl_get",
                json!({"kind": "StorageClass", "name": class}),
            )
            .await?;
        ev.storage_class = r
            .data
            .get("items")
            .and_then(|i| i.get(0))
            .cloned()
            .and_then(typed);
    }
    if root_t.kind == "Node" || ev.pods.iter().any(|p| p.phase() == Some("Pending")) {
        let r = calls.call("kubectl_get", json!({"kind": "Node"})).await?;
        ev.nodes = all_typed(items(&r));
    }
    Ok(Some(ev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_whose_status_is_a_string_is_left_out() {
        let malformed = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "checkout-1", "namespace": "shop"},
            "status": "CrashLoopBackOff",
        });
        assert!(ObservedPod::parse(malformed).is_none());
    }

    #[test]
    fn an_object_of_another_kind_is_not_a_pod() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}});
        assert!(ObservedPod::parse(node).is_none());
    }

    #[test]
    fn a_malformed_root_is_opaque_but_keeps_its_name() {
        let root = Root::read(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-1"},
            "status": {"conditions": "Ready"},
        }));
        assert_eq!(
            (root.kind.as_str(), root.name.as_str()),
            ("Node", "worker-1")
        );
        assert!(matches!(root.object, RootObject::Opaque));
    }
}
