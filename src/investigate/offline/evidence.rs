//! Evidence gathering: the read-only tool calls the offline investigator makes about one
//! signal, and the objects they return, parsed once into typed form.
//!
//! Input: the remediation request, the namespace's pods and events the shared prefetch already
//! read, and the cluster tools. Output: an [`Evidence`] (or `None` when the signal names no
//! resource), plus one [`ToolCallRecord`] per call for the audit trail.
//!
//! Invariants:
//! - JSON stops here. Pods become k8s-openapi types (also `observed::Pod`); nodes, revisions,
//!   events, autoscalers, disruption budgets, claims and storage classes become the shared
//!   model's (`observed::Node`, `observed::Revision`, `observed::Event`, `observed::Hpa`,
//!   `observed::Pdb`, `observed::Claim`, `observed::StorageClass`), which the proofs read too;
//!   the root owner becomes a [`Root`]; logs and metrics become small structs.
//! - An object that does not parse is left out, never an error and never a panic: a rule cannot
//!   detect what kubemedic could not read. k8s-openapi fills an absent required field with its
//!   default (`""`, `0`, `false`); the API server always sends those fields.
//! - Only an unreachable cluster is an error (the request waits); any other failed call just
//!   leaves the evidence thinner.
//! - Which calls are made, with which arguments and in which order, is part of the audit trail:
//!   it must not depend on anything but the cluster's answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::ClusterReader;
use crate::cluster::context::ResourceContext;
use crate::cluster::obj::{self, at};
use crate::cluster::observed;
use crate::cluster::render::pod_status;
use crate::cluster::tools::{ClusterTools, ToolResult};
use crate::domain::{RemediationRequest, SignalMode, Target, ToolCallRecord, targets_from_labels};
use crate::investigate::InvestigateError;
use crate::prove::findings::{self, PortHolder};

/// Everything gathered about the incident.
#[derive(Clone)]
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
    pub events: Vec<observed::Event>,
    /// The workload's revisions, oldest first: a Deployment's ReplicaSets, a StatefulSet's (or
    /// DaemonSet's) ControllerRevisions (owned by it, by uid).
    pub revisions: Vec<observed::Revision>,
    /// The workload whose pods were read: the root owner, or for an HPA its scale target and
    /// for a PDB the owner of the pods it selects.
    pub workload: Option<WorkloadState>,
    /// The root owner as an autoscaler, when it is one.
    pub hpa: Option<observed::Hpa>,
    /// The autoscalers of the workload's namespace, read for a Deployment, StatefulSet or
    /// ReplicaSet ([`crate::prove::findings::count_set_by`] picks the one that sets its count).
    pub autoscalers: Vec<observed::Hpa>,
    /// The root owner as a disruption budget, when it is one.
    pub pdb: Option<observed::Pdb>,
    /// Every pod of the signal's namespace (for a Service whose selector matches none).
    pub namespace_pods: Vec<observed::Pod>,
    pub logs: HashMap<LogKey, String>,
    /// `None` when the metrics API is not served or was not asked.
    pub metrics: Option<Vec<observed::PodMetrics>>,
    /// Asked only for a Node subject or when a pod is Pending.
    pub nodes: Vec<observed::Node>,
    /// The host ports a Pending pod asks for, held by pods already on nodes (every namespace):
    /// asked only when such a pod asks for one.
    pub port_holders: Vec<PortHolder>,
    /// The pods of every namespace, as of the moment, read when a pod waits for a node, a node
    /// is the root, a pod of the root fails on a node, or more replicas of a template binding
    /// host ports or kept apart by a required anti-affinity may be proposed: what room each node
    /// has left ([`crate::prove::findings::Room::Free`], as the taint removal's and the drain's
    /// proofs judge it), whether a failing pod's node is the common factor (what
    /// `delete.node-not-at-fault` asks), and where more replicas could go. The pods heed their
    /// namespace's events: the incident's, and another's where a pod starts on a node judged.
    /// `None` when they were not read (not asked for, or the list was refused): nothing is
    /// judged free of what they would show.
    pub cluster_pods: Option<Vec<observed::Pod>>,
    /// The nodes the root's pods fail on whose events were not read (beyond
    /// [`FAILING_NODES_JUDGED`]): whether one is at fault is not known there.
    pub node_events_unread: Vec<String>,
    /// The StorageClass a PersistentVolumeClaim root names, when it was read.
    pub storage_class: Option<observed::StorageClass>,
    /// When each ConfigMap was last written that the workload's current revision reads (when it
    /// is recent and has one before it: a rollout undo keeps what was rewritten in place,
    /// [`crate::prove::findings::undo_on_config`]) or a pod not ready reads (a replacement reads
    /// it as it is now, [`crate::prove::findings::Replacement::config_changed`]).
    pub configmap_writes: BTreeMap<String, DateTime<Utc>>,
    /// The objects the alert names besides the root, as read now (those that could be read):
    /// whether each shows its desired state is what `resolved.alerted-objects-met` asks of a
    /// claim that the problem is gone.
    pub alerted: Vec<(Target, Value)>,
}

/// How many ConfigMaps the evidence reads (a template rarely reads more; the proofs read every
/// one before they allow a rollback or a deletion).
const CONFIGMAPS_READ: usize = 16;

/// The nodes of the root's failing pods judged as the common factor of the failures, at most.
const FAILING_NODES_JUDGED: usize = 3;

/// What the alert says that the rules may read: never its free text.
#[derive(Clone)]
pub(super) struct Alert {
    pub name: String,
    /// When the alert started firing (a timestamp, not text).
    pub starts_at: Option<DateTime<Utc>>,
    pub proactive: bool,
    /// The subject's container as the alert names it (never the exporter's).
    pub container: Option<String>,
    /// Why the cluster's objects cannot show its condition gone, when they cannot
    /// ([`crate::prove::findings::condition::objects_show`]).
    pub unseen_by_objects: Option<String>,
}

/// The root owner, typed as far as the rules read it.
#[derive(Clone)]
pub(super) struct Root {
    pub name: String,
    pub object: RootObject,
}

#[derive(Clone)]
pub(super) enum RootObject {
    /// A bare pod: its spec.
    Pod(Box<observed::PodSpec>),
    Node(Box<observed::Node>),
    Claim(Box<observed::Claim>),
    Service(Box<observed::Service>),
    /// A workload's pod template's spec (Deployment, StatefulSet, DaemonSet, Job, …).
    Template(Box<observed::PodSpec>),
    /// A kind the rules read nothing from, or an object that did not parse.
    Opaque,
}

impl Evidence {
    /// The pods heed the warnings about them ([`observed::Pod::heed`]): a pod seconds into
    /// ContainerCreating with a FailedAttachVolume fails to start, as the graph sees it too.
    pub fn heed_warnings(&mut self) {
        for p in &mut self.pods {
            p.observed = std::mem::take(&mut p.observed).heed(&self.events);
        }
    }
}

impl Root {
    pub fn read(raw: &Value) -> Self {
        let kind = obj::kind(raw).to_owned();
        let object = match kind.as_str() {
            "Pod" => Some(RootObject::Pod(Box::new(observed::PodSpec::of_pod(raw)))),
            "Node" => Some(RootObject::Node(Box::new(observed::Node::parse(raw)))),
            "PersistentVolumeClaim" => {
                observed::Claim::read(raw).map(|c| RootObject::Claim(Box::new(c)))
            }
            "Service" => Some(RootObject::Service(Box::new(observed::Service::parse(raw)))),
            _ => observed::pod_template(raw)
                .filter(|t| t.is_object())
                .map(|_| RootObject::Template(Box::new(observed::PodSpec::of_template(raw)))),
        };
        Self {
            name: obj::name(raw).to_owned(),
            object: object.unwrap_or(RootObject::Opaque),
        }
    }
}

/// A pod as read, with its STATUS column.
#[derive(Clone)]
pub(super) struct ObservedPod {
    /// Its spec: what it requests, where it may be scheduled.
    pub spec: observed::PodSpec,
    /// STATUS as `kubectl get pods` prints it, rendered by `cluster::render` from the object as
    /// read: the very text the playbook triggers matched, so rules and playbooks agree.
    pub status: String,
    /// The pod as the rest of kubemedic observes it (`cluster::observed`): what fails.
    pub observed: observed::Pod,
}

impl ObservedPod {
    /// `None` for an object that is not a pod, or that the API's schema for a pod rejects (a
    /// status that is a string, a restart count that is not a number): nothing in it can be
    /// trusted. The schema only checks; the model reads, as of `now` (the moment the evidence
    /// was read at: how long a pod has been creating, terminating or unready).
    pub fn parse(raw: Value, now: DateTime<Utc>) -> Option<Self> {
        if k8s_openapi::api::core::v1::Pod::deserialize(&raw).is_err() {
            return None;
        }
        Some(Self {
            spec: observed::PodSpec::of_pod(&raw),
            status: pod_status(&raw),
            observed: observed::Pod::at(&raw, now),
        })
    }

    pub fn name(&self) -> &str {
        &self.observed.name
    }

    /// A pod is failing when [`observed::Pod::failure`] says so: not scheduled, a container
    /// that cannot run or exited with an error, stuck creating, Failed, or running but not
    /// ready. (Here rather than among the facts because gathering needs it: only failing pods'
    /// logs are read.)
    pub fn failing(&self) -> bool {
        self.observed.failure().is_some()
    }

    /// Serving, as the model says ([`observed::Pod::serving`]).
    pub fn healthy(&self) -> bool {
        self.observed.serving()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LogKey {
    pub pod: String,
    pub container: String,
    /// The previous (crashed) instance's log.
    pub previous: bool,
}

/// The workload whose pods were read: the model's reading of it (its fields read through
/// this), the object as read (what findings read: the replicas it is meant to run), and for one
/// its own spec suspends, who suspended it when.
#[derive(Clone)]
pub(super) struct WorkloadState {
    pub observed: observed::Workload,
    pub raw: Value,
    /// A CronJob's (or Job's) `spec.suspend`, with the object's last change as the API shows it
    /// (who, when) and a CronJob's `status.lastScheduleTime`.
    pub suspended: Option<Suspension>,
}

impl std::ops::Deref for WorkloadState {
    type Target = observed::Workload;

    fn deref(&self) -> &observed::Workload {
        &self.observed
    }
}

/// A workload suspended by its own spec.
#[derive(Debug, Clone)]
pub(super) struct Suspension {
    pub last_change: Option<crate::domain::Change>,
    pub last_schedule: Option<DateTime<Utc>>,
}

impl WorkloadState {
    pub fn read(raw: &Value) -> Self {
        let observed = observed::Workload::parse(raw);
        Self {
            suspended: observed.suspend.then(|| Suspension {
                last_change: crate::prove::graph::last_change(raw),
                last_schedule: observed.last_schedule,
            }),
            observed,
            raw: raw.clone(),
        }
    }
}

fn items(r: &ToolResult) -> Vec<Value> {
    r.list("items")
}

fn pods(raw: Vec<Value>, now: DateTime<Utc>) -> Vec<ObservedPod> {
    raw.into_iter()
        .filter_map(|p| ObservedPod::parse(p, now))
        .collect()
}

/// The tool calls of one investigation, recorded for the audit trail.
struct Calls<'a> {
    tools: &'a ClusterTools,
    records: &'a mut Vec<ToolCallRecord>,
}

impl Calls<'_> {
    /// The whole output (sanitised, up to 64 KiB) for the trail, while the investigation's
    /// allowance lasts.
    fn whole(&self, text: &str) -> Option<String> {
        let kept: usize = self
            .records
            .iter()
            .filter_map(|r| r.output.as_ref())
            .map(String::len)
            .sum();
        (kept + text.len().min(crate::domain::TOOL_OUTPUT_BYTES)
            <= crate::domain::TOOL_OUTPUTS_BYTES)
            .then(|| crate::domain::whole_output(&crate::redact::sanitize_text(text)))
    }

    async fn call(&mut self, name: &str, args: Value) -> Result<ToolResult, InvestigateError> {
        let started = std::time::Instant::now();
        let r = self.tools.call(name, &args).await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).ok();
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
            excerpt: Some(crate::redact::sanitize_text(&crate::domain::excerpt(
                &r.text,
            ))),
            output: self.whole(r.whole_text()),
            duration_ms,
        });
        Ok(r)
    }
}

/// The ReplicaSet a pod of this name was made by, when the name has the ReplicaSet
/// controller's form: the ReplicaSet's name (itself `<deployment>-<template hash>`), a dash and
/// five characters of the alphabet Kubernetes draws random suffixes from.
fn replicaset_of_pod_name(pod: &str) -> Option<&str> {
    let drawn = |part: &str| part.chars().all(|c| observed::GENERATED_CHARS.contains(c));
    let (rs, suffix) = pod.rsplit_once('-')?;
    let (_, hash) = rs.rsplit_once('-')?;
    (suffix.len() == 5 && drawn(suffix) && !hash.is_empty() && drawn(hash)).then_some(rs)
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
    // A pod a ReplicaSet made is named after it (`<replicaset>-<5 characters>`): when the pod
    // is gone (replaced by a rollout, healed), the ReplicaSet, if it still exists, leads to the
    // workload the alert was about.
    if subject.kind == "Pod"
        && let Some(rs) = replicaset_of_pod_name(&subject.name)
    {
        let t = Target::new("ReplicaSet", rs, subject.namespace.clone());
        if !candidates.contains(&t) {
            candidates.push(t);
        }
    }
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
            container: req.signal.subject_container(),
            starts_at: Some(req.signal.starts_at),
            unseen_by_objects: crate::prove::findings::condition::unseen_by_objects(
                &req.signal.name,
                req.signal.generator_url.as_deref(),
            ),
        },
        subject,
        context: context.clone(),
        root: None,
        pods: vec![],
        events: events.iter().map(observed::Event::parse).collect(),
        revisions: vec![],
        workload: None,
        hpa: None,
        autoscalers: vec![],
        pdb: None,
        namespace_pods: namespace_pods.iter().map(observed::Pod::parse).collect(),
        logs: HashMap::new(),
        metrics: None,
        nodes: vec![],
        port_holders: vec![],
        cluster_pods: None,
        node_events_unread: vec![],
        storage_class: None,
        configmap_writes: BTreeMap::new(),
        alerted: vec![],
    };
    let Some(ctx) = context else {
        return Ok(Some(ev));
    };
    let root_t = ctx.root_owner.clone();
    for t in targets_from_labels(&req.signal.labels)
        .into_iter()
        .filter(|t| *t != root_t)
    {
        let r = calls
            .call(
                "kubectl_get",
                json!({"kind": t.kind, "name": t.name, "namespace": t.namespace}),
            )
            .await?;
        if let Some(o) = items(&r).into_iter().next() {
            ev.alerted.push((t, o));
        }
    }
    let root_res = reader.resource(&root_t.kind).await?;
    let root = reader
        .get(&root_res, root_t.namespace.as_deref(), &root_t.name)
        .await
        .ok();
    // The workload whose pods tell the story: the root itself, an autoscaler's scale target,
    // or the owner of the pods a disruption budget selects.
    let mut workload = root.clone();
    match root.as_ref().map(obj::kind) {
        Some("HorizontalPodAutoscaler") => {
            let hpa = root.as_ref().map(observed::Hpa::parse);
            if let Some(h) = &hpa
                && !h.target_kind.is_empty()
            {
                let r = calls
                    .call(
                        "kubectl_get",
                        json!({"kind": h.target_kind, "name": h.target_name, "namespace": ns}),
                    )
                    .await?;
                workload = items(&r).into_iter().next();
            }
            ev.hpa = hpa;
        }
        Some("PodDisruptionBudget") => {
            let pdb = root.as_ref().map(observed::Pdb::parse);
            workload = None;
            // What the budget counts: the namespace's pods its selector selects (every one
            // for an empty selector, none without a selector).
            if let Some(selector) = pdb.as_ref().and_then(observed::Pdb::selector_query) {
                let selector = Some(selector).filter(|s| !s.is_empty());
                let r = calls
                    .call(
                        "kubectl_find_resource",
                        json!({"kind": "Pod", "namespace": ns, "label_selector": selector}),
                    )
                    .await?;
                let selected: Vec<Value> = items(&r)
                    .into_iter()
                    .filter(|p| {
                        pdb.as_ref()
                            .is_some_and(|b| b.selects_labels(at(p, &["metadata", "labels"])))
                    })
                    .collect();
                if let Some(first) = selected.first() {
                    let pod_ns = obj::namespace(first).map(str::to_owned);
                    calls
                        .call(
                            "get_namespaced_resource_context",
                            json!({"kind": "Pod", "name": obj::name(first), "namespace": pod_ns}),
                        )
                        .await?;
                    if let Ok(owner) = tools
                        .contexts()
                        .resolve("Pod", obj::name(first), pod_ns.as_deref())
                        .await
                        && owner.root_owner.kind != "Pod"
                        && let Ok(res) = reader.resource(&owner.root_owner.kind).await
                    {
                        workload = reader
                            .get(
                                &res,
                                owner.root_owner.namespace.as_deref(),
                                &owner.root_owner.name,
                            )
                            .await
                            .ok();
                    }
                }
                ev.pods = pods(selected, ev.now);
            }
            ev.pdb = pdb;
        }
        _ => {}
    }
    if let Some(w) = &workload {
        match obj::kind(w) {
            "Pod" => ev.pods = pods(vec![w.clone()], ev.now),
            "Node"
            | "PersistentVolumeClaim"
            | "PersistentVolume"
            | "PodDisruptionBudget"
            | "HorizontalPodAutoscaler" => {}
            "Service" => {
                let selector = observed::Service::parse(w)
                    .label_selector()
                    .filter(|s| !s.is_empty());
                if let Some(selector) = selector {
                    let r = calls.call("kubectl_find_resource", json!({"kind": "Pod", "namespace": ns, "label_selector": selector.to_query()})).await?;
                    ev.pods = pods(items(&r), ev.now);
                }
            }
            kind => {
                ev.workload = Some(WorkloadState::read(w));
                let selector = observed::pod_selector(w).map(|s| s.to_query());
                let owned = |raw: &Value| obj::owned_by(raw, w);
                if let Some(sel) = selector {
                    if ev.pdb.is_none() {
                        let r = calls
                            .call(
                                "kubectl_find_resource",
                                json!({"kind": "Pod", "namespace": ns, "label_selector": sel}),
                            )
                            .await?;
                        // Parsed once, then asked whose it is (`observed::its_pod`'s question).
                        ev.pods = pods(items(&r), ev.now);
                        ev.pods
                            .retain(|p| p.observed.selected_by(kind, obj::name(w)));
                    }
                    if matches!(kind, "Deployment" | "StatefulSet" | "ReplicaSet") {
                        let r = calls
                            .call(
                                "kubectl_find_resource",
                                json!({"kind": "HorizontalPodAutoscaler", "namespace": ns}),
                            )
                            .await?;
                        ev.autoscalers = items(&r).iter().map(observed::Hpa::parse).collect();
                    }
                    if kind == "Deployment" {
                        let r = calls.call("kubectl_find_resource", json!({"kind": "ReplicaSet", "namespace": ns, "label_selector": sel})).await?;
                        let owned: Vec<Value> =
                            items(&r).into_iter().filter(|rs| owned(rs)).collect();
                        ev.revisions =
                            observed::revisions(&owned, observed::Revision::of_replicaset);
                    }
                    if matches!(kind, "StatefulSet" | "DaemonSet") {
                        let r = calls.call("kubectl_find_resource", json!({"kind": "ControllerRevision", "namespace": ns, "label_selector": sel})).await?;
                        let owned: Vec<Value> =
                            items(&r).into_iter().filter(|rev| owned(rev)).collect();
                        ev.revisions =
                            observed::revisions(&owned, observed::Revision::of_controller_revision);
                    }
                }
            }
        }
    }
    ev.heed_warnings();
    // When the ConfigMaps were last written that a recent revision reads (a rollout undo keeps
    // what was rewritten in place) or a pod not ready reads (its replacement reads them as they
    // are now).
    let recent = ev.workload.as_ref().and_then(|w| {
        let number = w.observed.current_revision_number(&ev.revisions)?;
        let current = ev.revisions.iter().find(|r| r.number == number)?;
        let recent = current.created.is_some_and(|c| {
            ev.now - c < chrono::Duration::hours(crate::domain::RECENT_CHANGE_HOURS)
        });
        (recent && ev.revisions.len() > 1).then_some(&current.template)
    });
    let unready = ev.pods.iter().find(|p| !p.observed.ready);
    let names: BTreeSet<String> = recent
        .into_iter()
        .chain(unready.map(|p| &p.observed.raw))
        .flat_map(crate::prove::findings::configmaps)
        .collect();
    for name in names.into_iter().take(CONFIGMAPS_READ) {
        let r = calls
            .call(
                "kubectl_get",
                json!({"kind": "ConfigMap", "name": name, "namespace": ns}),
            )
            .await?;
        if let Some(written) = items(&r).first().and_then(observed::last_written) {
            ev.configmap_writes.insert(name, written);
        }
    }
    ev.root = workload.as_ref().or(root.as_ref()).map(Root::read);
    // The failing pods' logs: the containers that show the failure (observed::Pod::failure_logs),
    // the previous run's when they restarted.
    // The first two failing pods with a container to read (a pod still being created has none).
    let logged = ev.pods.iter().filter_map(|p| {
        let logs = p.observed.failure_logs();
        (p.failing() && !logs.is_empty()).then_some((p, logs))
    });
    let logged: Vec<_> = logged.take(2).collect();
    for (p, logs) in logged {
        let pod_ns = obj::namespace(&p.observed.raw)
            .unwrap_or_default()
            .to_owned();
        for c in logs {
            let tool = if c.previous {
                "kubectl_previous_logs"
            } else {
                "kubectl_logs"
            };
            let r = calls
                .call(
                    tool,
                    json!({"name": p.name(), "namespace": pod_ns, "container": c.container,
                        "tail_lines": observed::FAILURE_LOG_LINES}),
                )
                .await?;
            if r.ok {
                let text = r
                    .data
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let key = LogKey {
                    pod: p.name().to_owned(),
                    container: c.container,
                    previous: c.previous,
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
            // The tool's rows are `observed::PodMetrics` serialised.
            ev.metrics = r
                .data
                .get("pods")
                .and_then(|rows| serde_json::from_value(rows.clone()).ok());
        }
    }
    if root_t.kind == "PersistentVolumeClaim"
        && let Some(class) = root.as_ref().and_then(|r| observed::Claim::parse(r).class)
    {
        let r = calls
            .call(
                "kubectl_get",
                json!({"kind": "StorageClass", "name": class}),
            )
            .await?;
        ev.storage_class = items(&r).first().map(observed::StorageClass::parse);
    }
    // The nodes: for a node, a budget's drain, a pod waiting for one, a DaemonSet's pod (its
    // replacement starts on the same node), and a limit the rules may raise (a kill for memory,
    // throttling, a prediction): whether a node can hold it.
    let may_raise = ev.alert.proactive
        || findings::is_throttling_alert(&ev.alert.name)
        || ev
            .pods
            .iter()
            .any(|p| !p.observed.memory_kills(&ev.events).is_empty());
    // A pod of the root failing on a node may be replaced: whether that node is the common
    // factor of the failures is asked of it, its readiness flaps and every pod, as the
    // deletion's proof asks (`delete.node-not-at-fault`).
    let failing_on: Vec<String> = if root_t.kind == "Node" {
        vec![]
    } else {
        let mut nodes: Vec<String> = ev
            .pods
            .iter()
            .filter(|p| p.failing())
            .filter_map(|p| p.observed.node.clone())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        ev.node_events_unread = nodes.split_off(FAILING_NODES_JUDGED.min(nodes.len()));
        // And, where a limit may be raised, the nodes a raise's proof asks whether they ran
        // short of memory themselves (`findings::memory_nodes`): their events too.
        if may_raise {
            let killed: Vec<&ObservedPod> = ev
                .pods
                .iter()
                .filter(|p| {
                    !p.observed
                        .recent_memory_kills(&ev.events, ev.now)
                        .is_empty()
                })
                .collect();
            let asked = findings::memory_nodes(
                killed.iter().filter_map(|p| p.observed.node.as_deref()),
                ev.pods.iter().filter_map(|p| p.observed.node.as_deref()),
            );
            for n in asked {
                if !nodes.contains(&n) {
                    ev.node_events_unread.retain(|u| *u != n);
                    nodes.push(n);
                }
            }
        }
        nodes
    };
    // A workload more replicas may be proposed for (an autoscaler's maximum, a count scaled
    // below what it declares): whether they can be placed (`scale.schedulable`), beside the
    // pods binding its host ports or kept apart from it.
    let scalable = ev.hpa.is_some()
        || matches!(root_t.kind.as_str(), "Deployment" | "StatefulSet")
        || ev.workload.as_ref().is_some_and(|w| w.replicas.is_some());
    let binds_ports = scalable
        && matches!(ev.root.as_ref().map(|r| &r.object),
            Some(RootObject::Template(t)) if !t.host_ports.is_empty() || !t.anti_affinity.is_empty());
    if root_t.kind == "Node"
        || root_t.kind == "DaemonSet"
        || scalable
        || ev.pdb.is_some()
        || may_raise
        || ev.pods.iter().any(|p| p.observed.phase == "Pending")
        || !failing_on.is_empty()
        || ev.pods.iter().any(|p| p.observed.deleting)
    {
        let r = calls.call("kubectl_get", json!({"kind": "Node"})).await?;
        ev.nodes = items(&r).iter().map(observed::Node::parse).collect();
    }
    // A node's own events (its readiness going and coming back, the runtime's errors) are
    // recorded outside the namespaces the prefetch read.
    let root_node = (root_t.kind == "Node").then_some(&root_t.name);
    for node in root_node.into_iter().chain(&failing_on) {
        let r = calls.call("kubectl_events", json!({"node": node})).await?;
        ev.events
            .extend(r.list("events").iter().map(observed::Event::parse));
    }
    // A pod waiting for a node: the pods bound to the nodes, in any namespace, say what room
    // each has left for it and, where it binds host ports, who holds them (a DaemonSet's
    // agent, another workload, its own siblings).
    // A node to drain: the same pods say whether what it runs fits elsewhere.
    let unplaced = ev
        .pods
        .iter()
        .find(|p| p.observed.waiting_for_node().is_some());
    if unplaced.is_some() || root_t.kind == "Node" || !failing_on.is_empty() || binds_ports {
        let r = calls.call("kubectl_get", json!({"kind": "Pod"})).await?;
        let mut all: Vec<observed::Pod> = items(&r)
            .iter()
            .map(|p| observed::Pod::at(p, ev.now))
            .collect();
        // The pods of each namespace heed its warnings, as the scene's do: the incident's with
        // the events at hand; another's read when a pod there is still starting (the only pods
        // a warning is heeded for: `cluster::heeding`) on a node judged (the root, a failing
        // pod's), as `Scene::pods_on` reads them for the node a proof judges. Elsewhere a
        // warning changes no answer: room counts requests and ports, a sibling serves or not.
        let judged: Vec<&String> = root_node.into_iter().chain(&failing_on).collect();
        let mut others: Vec<String> = all
            .iter()
            .filter(|p| p.placed_not_started())
            .filter(|p| p.node.as_ref().is_some_and(|n| judged.contains(&n)))
            .filter_map(|p| obj::namespace(&p.raw))
            .filter(|n| Some(*n) != ns.as_deref())
            .map(str::to_owned)
            .collect();
        others.sort_unstable();
        others.dedup();
        let mut warnings: HashMap<String, Vec<observed::Event>> = HashMap::new();
        for other in others {
            let r = calls
                .call("kubectl_events", json!({"namespace": other}))
                .await?;
            warnings.insert(
                other,
                r.list("events")
                    .iter()
                    .map(observed::Event::parse)
                    .collect(),
            );
        }
        for p in &mut all {
            let there = obj::namespace(&p.raw).unwrap_or_default();
            let events = if Some(there) == ns.as_deref() {
                Some(&ev.events)
            } else {
                warnings.get(there)
            };
            if let Some(events) = events {
                *p = std::mem::take(p).heed(events);
            }
        }
        if let Some(p) = unplaced {
            let wanted = p.observed.host_ports();
            if !wanted.is_empty() {
                ev.port_holders = PortHolder::find(&all, &wanted, p.name());
            }
        }
        ev.cluster_pods = r.ok.then_some(all);
    }
    Ok(Some(ev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_name_leads_to_its_replicaset_only_in_the_controllers_form() {
        assert_eq!(
            replicaset_of_pod_name("catalog-api-fbc958844-xntlm"),
            Some("catalog-api-fbc958844")
        );
        assert_eq!(replicaset_of_pod_name("cassandra-0"), None);
        assert_eq!(
            replicaset_of_pod_name("web-bcdfg"),
            None,
            "no template hash"
        );
        assert_eq!(replicaset_of_pod_name("my-job-7x2k9-aeiou"), None, "vowels");
    }

    #[test]
    fn host_port_holders_are_named_by_their_workload_on_their_node() {
        let pod = |name: &str,
                   ns: &str,
                   node: Option<&str>,
                   owner: (&str, &str),
                   hash: &str,
                   port: Value,
                   phase: &str| {
            observed::Pod::parse(&json!({
                "metadata": {"name": name, "namespace": ns, "labels": {"pod-template-hash": hash},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1, "uid": "u", "controller": true}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [port]}]},
                "status": {"phase": phase}
            }))
        };
        let udp = json!({"containerPort": 8125, "hostPort": 8125, "protocol": "UDP"});
        let pending = pod(
            "relay-7d9-x",
            "metrics",
            None,
            ("ReplicaSet", "relay-7d9"),
            "7d9",
            udp.clone(),
            "Pending",
        );
        let wanted = pending.host_ports();
        assert_eq!(wanted, vec![(8125, "UDP".to_owned())]);
        let all = vec![
            pending.clone(),
            pod(
                "agent-a",
                "datadog",
                Some("n1"),
                ("DaemonSet", "agent"),
                "",
                udp.clone(),
                "Running",
            ),
            // Same port, other protocol: no conflict.
            pod(
                "web-1",
                "shop",
                Some("n1"),
                ("ReplicaSet", "web-5f6"),
                "5f6",
                json!({"containerPort": 8125, "hostPort": 8125}),
                "Running",
            ),
            // A sibling of the pending pod, ended: it binds nothing.
            pod(
                "relay-7d9-y",
                "metrics",
                Some("n2"),
                ("ReplicaSet", "relay-7d9"),
                "7d9",
                udp.clone(),
                "Failed",
            ),
            pod(
                "relay-7d9-z",
                "metrics",
                Some("n2"),
                ("ReplicaSet", "relay-7d9"),
                "7d9",
                udp,
                "Running",
            ),
        ];
        let held: Vec<(String, String)> = PortHolder::find(&all, &wanted, "relay-7d9-x")
            .into_iter()
            .map(|h| (h.node, h.workload))
            .collect();
        assert_eq!(
            held,
            vec![
                ("n1".to_owned(), "datadog/DaemonSet/agent".to_owned()),
                ("n2".to_owned(), "metrics/Deployment/relay".to_owned()),
            ]
        );
    }

    #[test]
    fn a_pod_whose_status_is_a_string_is_left_out() {
        let malformed = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "checkout-1", "namespace": "shop"},
            "status": "CrashLoopBackOff",
        });
        assert!(ObservedPod::parse(malformed, Utc::now()).is_none());
    }

    #[test]
    fn an_object_of_another_kind_is_not_a_pod() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}});
        assert!(ObservedPod::parse(node, Utc::now()).is_none());
    }

    #[test]
    fn a_malformed_root_is_opaque_but_keeps_its_name() {
        let root = Root::read(&json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"resources": "10Gi"},
        }));
        assert_eq!(root.name, "data");
        assert!(matches!(root.object, RootObject::Opaque));
        // A node is read through the shared model, which reads what it can: conditions of
        // the wrong shape are no conditions, and a node without a Ready condition is not ready.
        let root = Root::read(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-1"},
            "status": {"conditions": "Ready"},
        }));
        assert_eq!(root.name, "worker-1");
        let RootObject::Node(node) = root.object else {
            panic!("a Node root reads as a node");
        };
        assert!(!node.ready && node.ready_status.is_none());
    }
}
