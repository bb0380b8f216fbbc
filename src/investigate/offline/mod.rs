//! The offline investigator: deterministic, no model, the embedded default (DESIGN §3.5).
//!
//! Same tools, playbooks, RCA schema and catalog as the LLM path. It gathers evidence — the
//! owner chain, recent rollouts (a new ReplicaSet whose pods fail while the previous one was
//! healthy), container states and exit codes, last-state reasons, events, logs, limits,
//! HPA/PDB/quota state, node conditions and taints — and decides with explicit rules, in order
//! of how strongly the evidence determines the cause. When the evidence does not determine it
//! (a crash loop with no recent change, a missing Secret it may not read) it says inconclusive
//! or asks for a human instead of guessing. The alert's text never decides anything, and
//! text found in logs or objects is only ever quoted as evidence, never followed.

pub mod quantity;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use regex::Regex;

use serde_json::{Map, Value, json};

use super::gather;
use super::playbooks::Playbooks;
use super::route::{Invocation2, merge, route};
use super::{InvestigateError, Investigator};
use crate::catalog::{Catalog, SelectionContext};
use crate::clock::Clock;
use crate::cluster::ClusterReader;
use crate::cluster::context::ResourceContext;
use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::render::{event_time, pod_status};
use crate::cluster::selector::Selector;
use crate::cluster::tools::{ClusterTools, ToolLimits, ToolResult};
use crate::domain::{
    Analysis, InvestigationOutcome, Proposal, RcaResult, RemediationRequest, RootCauseAnalysis,
    SelectedWorkflow, Selection, SignalMode, Target, TargetRef, ToolCallRecord, ValidationAttempt,
    targets_from_labels,
};
use crate::history::RemediationHistory;

/// A rollout this recent, whose pods fail while the previous revision's ran, is the cause.
const ROLLOUT_WINDOW_HOURS: i64 = 6;

pub struct OfflineInvestigator {
    pub reader: Arc<dyn ClusterReader>,
    pub clock: Arc<dyn Clock>,
    pub tool_limits: ToolLimits,
    pub catalog: Arc<Catalog>,
    pub playbooks: Arc<Playbooks>,
    pub history: Arc<dyn RemediationHistory>,
}

/// Everything gathered about the incident.
struct Evidence {
    now: DateTime<Utc>,
    subject: Target,
    context: Option<Arc<ResourceContext>>,
    root: Option<Value>,
    pods: Vec<Value>,
    events: Vec<Value>,
    replicasets: Vec<Value>,
    namespace_pods: Vec<Value>,
    logs: HashMap<(String, String, bool), String>,
    metrics: Option<Vec<Value>>,
    nodes: Vec<Value>,
    storage_class: Option<Value>,
}

struct Diagnosis {
    mode: &'static str,
    summary: String,
    factors: Vec<String>,
    outcome: InvestigationOutcome,
    confidence: f64,
    severity: &'static str,
    target: Option<Target>,
    proposal: Option<Proposal>,
    human: Option<String>,
    analysis: String,
}

impl Diagnosis {
    fn new(mode: &'static str, summary: impl Into<String>) -> Self {
        Self {
            mode,
            summary: summary.into(),
            factors: vec![],
            outcome: InvestigationOutcome::Actionable,
            confidence: 0.8,
            severity: "high",
            target: None,
            proposal: None,
            human: None,
            analysis: String::new(),
        }
    }
}

fn proposal(action_type: &str, params: Value, git_change: impl Into<String>) -> Option<Proposal> {
    Some(Proposal {
        action_type: action_type.into(),
        parameters: params.as_object().cloned().unwrap_or_default(),
        git_change: git_change.into(),
    })
}

fn age_of(t: Option<&str>, now: DateTime<Utc>) -> Option<Duration> {
    t.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| now - t.with_timezone(&Utc))
}

fn revision(o: &Value) -> i64 {
    obj::annotation(o, "deployment.kubernetes.io/revision")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn owned_by(pod: &Value, owner: &str) -> bool {
    array(pod, &["metadata", "ownerReferences"])
        .iter()
        .any(|o| str_at(o, &["name"]) == Some(owner))
}

fn images(template_owner: &Value) -> String {
    array(template_owner, &["spec", "template", "spec", "containers"])
        .iter()
        .filter_map(|c| str_at(c, &["image"]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pod is failing when a container waits on an error, has terminated with an error, or is
/// not ready while running.
fn failing(pod: &Value) -> bool {
    let status = pod_status(pod);
    if matches!(status.as_str(), "Running" | "Completed" | "Succeeded") {
        return array(pod, &["status", "containerStatuses"])
            .iter()
            .any(|c| c.get("ready").and_then(Value::as_bool) == Some(false))
            && str_at(pod, &["status", "phase"]) == Some("Running");
    }
    status != "Pending" || str_at(pod, &["status", "phase"]) == Some("Pending")
}

fn healthy(pod: &Value) -> bool {
    pod_status(pod) == "Running"
        && array(pod, &["status", "containerStatuses"])
            .iter()
            .all(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
}

/// The most telling terminated state of a pod's containers: (container, reason, exit code).
fn last_termination(pod: &Value) -> Option<(String, String, i64)> {
    array(pod, &["status", "containerStatuses"])
        .iter()
        .find_map(|c| {
            let t =
                at(c, &["lastState", "terminated"]).or_else(|| at(c, &["state", "terminated"]))?;
            Some((
                str_at(c, &["name"]).unwrap_or("").to_owned(),
                str_at(t, &["reason"]).unwrap_or("Error").to_owned(),
                i64_at(t, &["exitCode"]).unwrap_or(-1),
            ))
        })
}

fn waiting_reason(pod: &Value) -> Option<(String, String)> {
    array(pod, &["status", "containerStatuses"])
        .iter()
        .find_map(|c| {
            let w = at(c, &["state", "waiting"])?;
            Some((
                str_at(w, &["reason"])?.to_owned(),
                str_at(w, &["message"]).unwrap_or("").to_owned(),
            ))
        })
}

fn restarts(pod: &Value) -> i64 {
    array(pod, &["status", "containerStatuses"])
        .iter()
        .filter_map(|c| i64_at(c, &["restartCount"]))
        .sum()
}

fn container_limit(owner: &Value, container: &str, resource: &str) -> Option<String> {
    let containers = array(owner, &["spec", "template", "spec", "containers"]);
    let containers = if containers.is_empty() {
        array(owner, &["spec", "containers"])
    } else {
        containers
    };
    containers
        .iter()
        .find(|c| str_at(c, &["name"]) == Some(container))
        .and_then(|c| str_at(c, &["resources", "limits", resource]))
        .map(str::to_owned)
}

/// A line of a log that looks like the error (never an instruction; quoted as evidence only).
fn error_line(log: &str) -> Option<String> {
    let re = Regex::new(r"(?i)(panic|fatal|error|exception|failed|refused|cannot|missing)").ok()?;
    let line = log.lines().rev().find(|l| re.is_match(l))?.trim();
    let cut: String = line.chars().take(160).collect();
    Some(cut)
}

impl Evidence {
    fn events_for(&self, name: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| str_at(e, &["involvedObject", "name"]) == Some(name))
            .collect()
    }

    fn warnings_for(&self, name: &str) -> Vec<(&str, &str)> {
        self.events_for(name)
            .into_iter()
            .filter(|e| str_at(e, &["type"]) == Some("Warning"))
            .map(|e| {
                (
                    str_at(e, &["reason"]).unwrap_or(""),
                    str_at(e, &["message"]).unwrap_or(""),
                )
            })
            .collect()
    }

    fn root_owner(&self) -> Option<&Target> {
        self.context.as_ref().map(|c| &c.root_owner)
    }

    /// The current and the previous ReplicaSet of a Deployment, if the current one is a recent
    /// rollout whose pods fail while the previous one's pods ran.
    fn rollout_regression(&self) -> Option<(Value, Value, Vec<String>)> {
        let root = self.root.as_ref()?;
        if obj::kind(root) != "Deployment" {
            return None;
        }
        let mut rs = self.replicasets.clone();
        rs.sort_by_key(|r| std::cmp::Reverse(revision(r)));
        let current = rs.first()?.clone();
        let previous = rs.get(1)?.clone();
        let recent = age_of(
            str_at(&current, &["metadata", "creationTimestamp"]),
            self.now,
        )
        .is_some_and(|a| a < Duration::hours(ROLLOUT_WINDOW_HOURS));
        if !recent {
            return None;
        }
        let new_pods: Vec<&Value> = self
            .pods
            .iter()
            .filter(|p| owned_by(p, obj::name(&current)))
            .collect();
        let old_pods: Vec<&Value> = self
            .pods
            .iter()
            .filter(|p| owned_by(p, obj::name(&previous)))
            .collect();
        let new_failing = !new_pods.is_empty() && new_pods.iter().all(|p| failing(p));
        let old_healthy = i64_at(&previous, &["status", "readyReplicas"]).unwrap_or(0) > 0
            || old_pods.iter().any(|p| healthy(p));
        if !(new_failing && old_healthy) {
            return None;
        }
        let mut factors = vec![format!(
            "revision {} ({}) rolled out {} min before this investigation",
            revision(&current),
            images(&current),
            age_of(
                str_at(&current, &["metadata", "creationTimestamp"]),
                self.now
            )
            .map_or(0, |a| a.num_minutes())
        )];
        for p in &new_pods {
            factors.push(describe_failure(p));
        }
        factors.push(format!(
            "previous revision {} ({}) had ready pods",
            revision(&previous),
            images(&previous)
        ));
        Some((current, previous, factors))
    }
}

fn describe_failure(p: &Value) -> String {
    let mut s = format!("pod {} is {}", obj::name(p), pod_status(p));
    if let Some((c, reason, code)) = last_termination(p) {
        s.push_str(&format!(
            " (container {c} last terminated: {reason}, exit code {code}, {} restarts)",
            restarts(p)
        ));
    } else if let Some((reason, message)) = waiting_reason(p)
        && !message.is_empty()
    {
        s.push_str(&format!(
            " ({reason}: {})",
            message.chars().take(160).collect::<String>()
        ));
    }
    s
}

impl OfflineInvestigator {
    async fn tool(
        &self,
        tools: &ClusterTools,
        records: &mut Vec<ToolCallRecord>,
        name: &str,
        args: Value,
    ) -> Result<ToolResult, InvestigateError> {
        let r = tools.call(name, &args).await;
        if r.data.pointer("/error/kind").and_then(Value::as_str) == Some("unreachable") {
            return Err(InvestigateError::Unavailable {
                dependency: "cluster".into(),
                message: r.text.clone(),
            });
        }
        records.push(ToolCallRecord {
            tool: name.into(),
            arguments: args,
            ok: r.ok,
            output_chars: r.text.len(),
            truncated: r.truncated,
        });
        Ok(r)
    }

    async fn gather(
        &self,
        tools: &ClusterTools,
        req: &RemediationRequest,
        records: &mut Vec<ToolCallRecord>,
        namespace_pods: Vec<Value>,
        events: Vec<Value>,
    ) -> Result<Option<Evidence>, InvestigateError> {
        let now = self.clock.now();
        let Some(subject) = req.target.clone() else {
            return Ok(None);
        };
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
            let r = self.tool(tools, records, name, args).await?;
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
            subject: subject.clone(),
            context: context.clone(),
            root: None,
            pods: vec![],
            events,
            replicasets: vec![],
            namespace_pods,
            logs: HashMap::new(),
            metrics: None,
            nodes: vec![],
            storage_class: None,
        };
        let Some(ctx) = context else {
            return Ok(Some(ev));
        };
        let root_t = ctx.root_owner.clone();
        let root_res = self.reader.resource(&root_t.kind).await?;
        ev.root = self
            .reader
            .get(&root_res, root_t.namespace.as_deref(), &root_t.name)
            .await
            .ok();
        if let Some(root) = &ev.root {
            match obj::kind(root) {
                "Pod" => ev.pods = vec![root.clone()],
                "Node" | "PersistentVolumeClaim" | "PersistentVolume" => {}
                "Service" => {
                    let selector: Vec<String> = obj::map_pairs(at(root, &["spec", "selector"]))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    if !selector.is_empty() {
                        let r = self.tool(tools, records, "kubectl_find_resource", json!({"kind": "Pod", "namespace": ns, "label_selector": selector.join(",")})).await?;
                        ev.pods = r
                            .data
                            .get("items")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                    }
                }
                _ => {
                    let selector = at(root, &["spec", "selector"])
                        .and_then(Selector::from_object)
                        .map(|s| s.to_query());
                    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
                        let r = self
                            .tool(
                                tools,
                                records,
                                "kubectl_find_resource",
                                json!({"kind": "Pod", "namespace": ns, "label_selector": sel}),
                            )
                            .await?;
                        ev.pods = r
                            .data
                            .get("items")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        if obj::kind(root) == "Deployment" {
                            let r = self.tool(tools, records, "kubectl_find_resource", json!({"kind": "ReplicaSet", "namespace": ns, "label_selector": sel})).await?;
                            let uid = ctx
                                .owner_chain
                                .last()
                                .map(|l| l.uid.clone())
                                .unwrap_or_default();
                            ev.replicasets = r
                                .data
                                .get("items")
                                .and_then(Value::as_array)
                                .cloned()
                                .unwrap_or_default()
                                .into_iter()
                                .filter(|rs| {
                                    array(rs, &["metadata", "ownerReferences"])
                                        .iter()
                                        .any(|o| str_at(o, &["uid"]) == Some(uid.as_str()))
                                })
                                .collect();
                        }
                    }
                }
            }
        }
        // The failing pods' logs: previous instance when it restarted, current otherwise.
        let failing_pods: Vec<Value> = ev
            .pods
            .iter()
            .filter(|p| failing(p))
            .take(2)
            .cloned()
            .collect();
        for p in &failing_pods {
            let pod_ns = obj::namespace(p).unwrap_or("").to_owned();
            for c in array(p, &["status", "containerStatuses"]) {
                let container = str_at(c, &["name"]).unwrap_or("").to_owned();
                let previous = i64_at(c, &["restartCount"]).unwrap_or(0) > 0;
                let tool = if previous {
                    "kubectl_previous_logs"
                } else {
                    "kubectl_logs"
                };
                let r = self.tool(tools, records, tool, json!({"name": obj::name(p), "namespace": pod_ns, "container": container, "tail_lines": 50})).await?;
                if r.ok {
                    let text = r
                        .data
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    ev.logs
                        .insert((obj::name(p).to_owned(), container, previous), text);
                }
            }
        }
        if req.signal.mode == SignalMode::Proactive
            || req.signal.name.to_ascii_lowercase().contains("memory")
        {
            let r = self
                .tool(tools, records, "kubectl_top_pods", json!({"namespace": ns}))
                .await?;
            if r.data.get("available").and_then(Value::as_bool) == Some(true) {
                ev.metrics = r.data.get("pods").and_then(Value::as_array).cloned();
            }
        }
        if root_t.kind == "PersistentVolumeClaim"
            && let Some(class) = ev
                .root
                .as_ref()
                .and_then(|r| str_at(r, &["spec", "storageClassName"]))
                .map(str::to_owned)
        {
            let r = self
                .tool(
                    tools,
                    records,
                    "kubectl_get",
                    json!({"kind": "StorageClass", "name": class}),
                )
                .await?;
            ev.storage_class = r.data.get("items").and_then(|i| i.get(0)).cloned();
        }
        if root_t.kind == "Node"
            || ev
                .pods
                .iter()
                .any(|p| str_at(p, &["status", "phase"]) == Some("Pending"))
        {
            let r = self
                .tool(tools, records, "kubectl_get", json!({"kind": "Node"}))
                .await?;
            ev.nodes = r
                .data
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
        }
        Ok(Some(ev))
    }

    fn diagnose(&self, req: &RemediationRequest, ev: &Evidence) -> Diagnosis {
        let root_t = ev.root_owner().cloned();
        let root = ev.root.clone().unwrap_or(Value::Null);
        let kind = root_t.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let proactive = req.signal.mode == SignalMode::Proactive;

        if root_t.is_none() {
            let mut d = Diagnosis::new(
                "Unknown",
                format!(
                    "{} no longer exists or cannot be read; the signal's resource could not be verified",
                    ev.subject
                ),
            );
            d.outcome = InvestigationOutcome::InsufficientData;
            d.confidence = 0.3;
            return d;
        }
        let target = root_t.clone();
        // How the summaries name the target.
        let subject = target.as_ref().map(ToString::to_string).unwrap_or_default();

        if proactive {
            return self.diagnose_proactive(req, ev, &root, target);
        }
        if kind == "Node" {
            return diagnose_node(ev, &root, target);
        }
        if kind == "Service" {
            return diagnose_service(ev, &root, target);
        }

        // 1. A recent rollout broke it: roll back (whatever the alert's text says).
        if let Some((current, previous, factors)) = ev.rollout_regression() {
            let mut d = Diagnosis::new(
                "RolloutRegression",
                format!(
                    "The rollout to revision {} ({}) broke {}: its pods fail while revision {} ({}) ran healthy",
                    revision(&current),
                    images(&current),
                    subject,
                    revision(&previous),
                    images(&previous)
                ),
            );
            d.factors = factors;
            d.confidence = 0.9;
            d.severity = "critical";
            d.target = target;
            d.proposal = proposal(
                "RollbackDeployment",
                json!({}),
                format!(
                    "revert the change that produced revision {} ({} → {})",
                    revision(&current),
                    images(&previous),
                    images(&current)
                ),
            );
            d.analysis = "A new ReplicaSet whose pods all fail, created shortly before the incident, next to a previous ReplicaSet that was healthy, determines the cause: the change in the new revision.".into();
            return d;
        }

        let failing_pods: Vec<&Value> = ev.pods.iter().filter(|p| failing(p)).collect();

        // 2. Healthy again: nothing to do.
        let recently_failed = ev.pods.iter().any(|p| {
            array(p, &["status", "containerStatuses"]).iter().any(|c| {
                age_of(
                    str_at(c, &["lastState", "terminated", "finishedAt"]),
                    ev.now,
                )
                .is_some_and(|a| a < Duration::minutes(10))
            })
        });
        let recent_warnings = ev.pods.iter().any(|p| {
            ev.events_for(obj::name(p)).iter().any(|e| {
                str_at(e, &["type"]) == Some("Warning")
                    && age_of(event_time(e), ev.now).is_some_and(|a| a < Duration::minutes(10))
            })
        });
        if !ev.pods.is_empty()
            && failing_pods.is_empty()
            && ev.pods.iter().all(healthy)
            && !recently_failed
            && !recent_warnings
        {
            let mut d = Diagnosis::new(
                "Resolved",
                format!(
                    "{} is healthy again: all {} pods running and ready, no failures in the last 10 minutes",
                    subject,
                    ev.pods.len()
                ),
            );
            d.outcome = InvestigationOutcome::ProblemResolved;
            d.confidence = 0.85;
            d.severity = "low";
            d.target = target;
            return d;
        }

        let first_failing = failing_pods.first().copied();
        let terminated = first_failing.and_then(last_termination);
        let waiting = first_failing.and_then(waiting_reason);
        let warnings: Vec<(String, String)> = failing_pods
            .iter()
            .flat_map(|p| ev.warnings_for(obj::name(p)))
            .map(|(r, m)| (r.to_owned(), m.to_owned()))
            .collect();

        // 3. Out of memory: raise the limit by a bounded factor.
        if let Some((container, reason, code)) = &terminated
            && (reason == "OOMKilled"
                || (*code == 137 && warnings.iter().any(|(r, _)| r == "OOMKilling")))
        {
            let mut d = Diagnosis::new(
                "OOMKilled",
                format!(
                    "Container {container} of {} is killed for exceeding its memory limit (OOMKilled, exit code {code})",
                    subject
                ),
            );
            d.factors = failing_pods.iter().map(|p| describe_failure(p)).collect();
            d.target = target.clone();
            d.severity = "high";
            let limit = container_limit(&root, container, "memory");
            match limit
                .as_deref()
                .and_then(|l| quantity::raised_memory(l, 1.5))
            {
                Some(new_limit) => {
                    d.factors.push(format!(
                        "memory limit {} → proposed {new_limit} (x1.5, bounded)",
                        limit.as_deref().unwrap_or("")
                    ));
                    if let Some(problem) = quota_problem(
                        ev,
                        limit.as_deref().unwrap_or("0"),
                        &new_limit,
                        ev.pods.len(),
                    ) {
                        d.human = Some(problem.clone());
                        d.factors.push(problem);
                        d.confidence = 0.8;
                    } else {
                        d.confidence = 0.85;
                        d.proposal = proposal(
                            "IncreaseMemoryLimits",
                            json!({"CONTAINER": container, "MEMORY_LIMIT": new_limit}),
                            format!(
                                "raise the memory limit of container {container} to {new_limit}"
                            ),
                        );
                    }
                }
                None => {
                    d.human = Some(format!(
                        "container {container} has no memory limit to raise; the node or its neighbours are short of memory"
                    ));
                    d.confidence = 0.7;
                }
            }
            return d;
        }

        // 4. Missing configuration: a human must create it (Secrets are never read).
        if let Some((reason, message)) = &waiting
            && reason == "CreateContainerConfigError"
        {
            let detail = warnings
                .iter()
                .map(|(_, m)| m.clone())
                .find(|m| m.contains("not found") || m.contains("couldn't find"))
                .unwrap_or_else(|| message.clone());
            let mut d = Diagnosis::new(
                "CreateContainerConfigError",
                format!("Pods of {} cannot start: {detail}", subject),
            );
            d.factors = failing_pods.iter().map(|p| describe_failure(p)).collect();
            d.factors.push(
                "kubemedic may not read Secrets, so it cannot tell whether the configuration was deleted, renamed, never created or lacks a key".into(),
            );
            // The failure is plain; its cause is not: what happened to the configuration is
            // beyond what kubemedic may see. Inconclusive, and a human decides.
            d.outcome = InvestigationOutcome::Inconclusive;
            d.confidence = 0.6;
            d.target = target;
            d.human = Some(format!(
                "missing configuration ({detail}); kubemedic neither reads nor creates Secrets or configuration — a human must provide it"
            ));
            return d;
        }

        // 5. Image cannot be pulled (and no rollout to undo).
        if let Some((reason, message)) = &waiting
            && matches!(
                reason.as_str(),
                "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName"
            )
        {
            let detail = warnings
                .iter()
                .map(|(_, m)| m.clone())
                .find(|m| m.to_ascii_lowercase().contains("pull"))
                .unwrap_or_else(|| message.clone());
            let mut d = Diagnosis::new(
                "ImagePullBackOff",
                format!(
                    "The image of {} cannot be pulled: {}",
                    subject,
                    detail.chars().take(200).collect::<String>()
                ),
            );
            d.factors = failing_pods.iter().map(|p| describe_failure(p)).collect();
            d.confidence = 0.8;
            d.target = target;
            d.human = Some("the image reference, the registry or the pull credentials must be fixed by a human (no recent rollout to undo)".into());
            return d;
        }

        // 6. Pending: capacity or scheduling constraints.
        if let Some(d) = diagnose_pending(ev, target.clone()) {
            return d;
        }

        // 7. Stuck terminating on finalizers.
        if let Some(p) = ev.pods.iter().find(|p| {
            age_of(str_at(p, &["metadata", "deletionTimestamp"]), ev.now)
                .is_some_and(|a| a > Duration::minutes(10))
        }) {
            let finalizers: Vec<&str> = array(p, &["metadata", "finalizers"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let mut d = Diagnosis::new(
                "TerminatingStuck",
                format!(
                    "Pod {} has been terminating for over 10 minutes (finalizers: {})",
                    obj::name(p),
                    finalizers.join(", ")
                ),
            );
            d.confidence = 0.85;
            d.target = target;
            d.human = Some(
                "removing finalizers by force can leak external resources; a human must decide"
                    .into(),
            );
            return d;
        }

        // 8. One pod stuck creating while its siblings run: replace it.
        if let Some(p) = ev.pods.iter().find(|p| {
            // startTime: when the kubelet took the pod; creation if it never did.
            let started = str_at(p, &["status", "startTime"])
                .or_else(|| str_at(p, &["metadata", "creationTimestamp"]));
            pod_status(p) == "ContainerCreating"
                && age_of(started, ev.now).is_some_and(|a| a > Duration::minutes(5))
        }) {
            let mount_problem = ev
                .warnings_for(obj::name(p))
                .iter()
                .map(|(r, m)| format!("{r}: {m}"))
                .next()
                .unwrap_or_default();
            let others_ok = ev
                .pods
                .iter()
                .filter(|o| obj::name(o) != obj::name(p))
                .any(healthy);
            let mut d = Diagnosis::new(
                "ContainerCreatingStuck",
                format!(
                    "Pod {} is stuck in ContainerCreating ({mount_problem})",
                    obj::name(p)
                ),
            );
            d.target = target;
            if others_ok && kind != "Pod" {
                d.confidence = 0.75;
                d.proposal = proposal("DeletePod", json!({"POD_NAME": obj::name(p)}), "");
            } else {
                d.confidence = 0.6;
                d.human =
                    Some("every pod is stuck on its volume; the storage needs a human".into());
            }
            return d;
        }

        // 9. Crash loop with no recent change: the evidence does not say why. Do not guess.
        if let Some((container, reason, code)) = &terminated {
            let mut d = Diagnosis::new(
                "CrashLoopBackOff",
                format!(
                    "Container {container} of {} exits ({reason}, exit code {code}) and restarts; no recent change explains it",
                    subject
                ),
            );
            d.factors = failing_pods.iter().map(|p| describe_failure(p)).collect();
            if let Some(line) = first_failing
                .and_then(|p| ev.logs.iter().find(|((pod, _, _), _)| pod == obj::name(p)))
                .and_then(|(_, log)| error_line(log))
            {
                d.factors.push(format!("last error in the logs: {line}"));
            }
            d.outcome = InvestigationOutcome::Inconclusive;
            d.confidence = 0.4;
            d.target = target;
            d.analysis = "The spec has not changed recently and the container is not killed for memory: a restart or a rollback would not address an application failure whose cause the evidence does not determine.".into();
            return d;
        }

        // 10. Probes failing on running containers.
        if warnings
            .iter()
            .any(|(r, m)| r == "Unhealthy" && m.to_ascii_lowercase().contains("probe"))
        {
            let mut d = Diagnosis::new(
                "ReadinessProbeFailing",
                format!("Pods of {} run but fail their probes", subject),
            );
            d.factors = warnings
                .iter()
                .filter(|(r, _)| r == "Unhealthy")
                .map(|(_, m)| m.clone())
                .take(3)
                .collect();
            d.outcome = InvestigationOutcome::Inconclusive;
            d.confidence = 0.5;
            d.target = target;
            return d;
        }

        // 11. Throttling or a maxed-out HPA, when the signal is about them.
        let name = req.signal.name.to_ascii_lowercase();
        if name.contains("throttl") {
            let container = req
                .signal
                .labels
                .get("container")
                .cloned()
                .or_else(|| {
                    array(&root, &["spec", "template", "spec", "containers"])
                        .first()
                        .and_then(|c| str_at(c, &["name"]))
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            let limit = container_limit(&root, &container, "cpu");
            let mut d = Diagnosis::new(
                "CPUThrottling",
                format!(
                    "Container {container} of {} is CPU-throttled at its limit {}",
                    subject,
                    limit.as_deref().unwrap_or("(none)")
                ),
            );
            d.target = target;
            match limit.as_deref().and_then(|l| quantity::raised_cpu(l, 1.5)) {
                Some(new_limit) => {
                    d.confidence = 0.72;
                    d.severity = "medium";
                    d.proposal = proposal(
                        "IncreaseCPULimits",
                        json!({"CONTAINER": container, "CPU_LIMIT": new_limit}),
                        format!("raise the CPU limit of {container} to {new_limit}"),
                    );
                }
                None => {
                    d.outcome = InvestigationOutcome::NotActionable;
                    d.confidence = 0.7;
                }
            }
            return d;
        }

        let mut d = Diagnosis::new(
            "Unknown",
            format!("The evidence about {} does not determine a cause", subject),
        );
        d.factors = failing_pods.iter().map(|p| describe_failure(p)).collect();
        d.outcome = InvestigationOutcome::Inconclusive;
        d.confidence = 0.3;
        d.target = target;
        d
    }

    fn diagnose_proactive(
        &self,
        req: &RemediationRequest,
        ev: &Evidence,
        root: &Value,
        target: Option<Target>,
    ) -> Diagnosis {
        let name = req.signal.name.to_ascii_lowercase();
        let kind = target.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let subject = target.as_ref().map(ToString::to_string).unwrap_or_default();
        if kind == "PersistentVolumeClaim"
            || name.contains("disk")
            || name.contains("volume")
            || name.contains("pvc")
        {
            return diagnose_pvc(ev, root, target);
        }
        // Memory exhaustion predicted: compare usage with the limit.
        let containers = array(root, &["spec", "template", "spec", "containers"]);
        let Some(container) = containers
            .first()
            .and_then(|c| str_at(c, &["name"]))
            .map(str::to_owned)
        else {
            let mut d = Diagnosis::new(
                "MemoryExhaustionPredicted",
                "The predicted workload has no containers to assess",
            );
            d.outcome = InvestigationOutcome::InsufficientData;
            d.confidence = 0.3;
            d.target = target;
            return d;
        };
        let limit = container_limit(root, &container, "memory");
        let usage: Option<u128> = ev.metrics.as_ref().and_then(|m| {
            m.iter()
                .filter(|p| {
                    ev.pods
                        .iter()
                        .any(|o| obj::name(o) == p["name"].as_str().unwrap_or(""))
                })
                .flat_map(|p| p["containers"].as_array().cloned().unwrap_or_default())
                .filter(|c| c["name"] == container.as_str())
                .filter_map(|c| c["memory"].as_str().and_then(quantity::memory_bytes))
                .max()
        });
        let oom_restarts = ev
            .pods
            .iter()
            .any(|p| last_termination(p).is_some_and(|(_, r, _)| r == "OOMKilled"));
        let mut d = Diagnosis::new("MemoryExhaustionPredicted", String::new());
        d.target = target.clone();
        let (Some(limit), Some(used)) = (limit.clone(), usage) else {
            if oom_restarts {
                d.summary = format!(
                    "Memory exhaustion of {} is predicted and containers are already OOMKilled",
                    subject
                );
                d.confidence = 0.75;
                if let Some(new_limit) = limit
                    .as_deref()
                    .and_then(|l| quantity::raised_memory(l, 1.5))
                {
                    d.proposal = proposal(
                        "IncreaseMemoryLimits",
                        json!({"CONTAINER": container, "MEMORY_LIMIT": new_limit}),
                        format!("raise the memory limit of {container} to {new_limit}"),
                    );
                }
                return d;
            }
            d.summary =
                "Memory use cannot be compared with the limit (no metrics API or no limit)".into();
            d.outcome = InvestigationOutcome::InsufficientData;
            d.confidence = 0.4;
            return d;
        };
        let limit_bytes = quantity::memory_bytes(&limit).unwrap_or(u128::MAX);
        let ratio = used as f64 / limit_bytes as f64;
        d.factors.push(format!(
            "container {container} uses {} of its {limit} limit ({:.0}%)",
            quantity::format_mi(used),
            ratio * 100.0
        ));
        if ratio >= 0.8 || oom_restarts {
            let new_limit = quantity::raised_memory(&limit, 1.5).unwrap_or(limit.clone());
            d.summary = format!(
                "{} will reach its memory limit: container {container} already uses {:.0}% of {limit}",
                subject,
                ratio * 100.0
            );
            d.confidence = 0.8;
            d.severity = "medium";
            if let Some(problem) = quota_problem(ev, &limit, &new_limit, ev.pods.len()) {
                d.human = Some(problem);
            } else {
                d.proposal = proposal(
                    "IncreaseMemoryLimits",
                    json!({"CONTAINER": container, "MEMORY_LIMIT": new_limit}),
                    format!("raise the memory limit of {container} to {new_limit}"),
                );
            }
        } else {
            d.summary = format!(
                "The prediction is unlikely to materialise soon: {} uses {:.0}% of its memory limit",
                subject,
                ratio * 100.0
            );
            d.outcome = InvestigationOutcome::NotActionable;
            d.confidence = 0.8;
            d.severity = "low";
        }
        d
    }

    fn rca_from(&self, d: &Diagnosis) -> RcaResult {
        RcaResult {
            root_cause_analysis: RootCauseAnalysis {
                summary: d.summary.clone(),
                severity: d.severity.into(),
                contributing_factors: d.factors.clone(),
                remediation_target: d.target.as_ref().map(|t| TargetRef {
                    kind: t.kind.clone(),
                    name: t.name.clone(),
                    namespace: t.namespace.clone(),
                    api_version: None,
                }),
                investigation_analysis: if d.analysis.is_empty() {
                    format!("Failure mode: {}.", d.mode)
                } else {
                    format!("Failure mode: {}. {}", d.mode, d.analysis)
                },
            },
            confidence: d.confidence,
            investigation_outcome: d.outcome,
            actionable: d.outcome == InvestigationOutcome::Actionable,
            needs_human_review: d.human.is_some(),
            human_review_reason: d.human.clone(),
        }
    }
}

/// Whether raising a memory limit from `old` to `new` for `replicas` pods would exceed the
/// namespace's memory quota.
fn quota_problem(ev: &Evidence, old: &str, new: &str, replicas: usize) -> Option<String> {
    let labels = &ev.context.as_ref()?.detected_labels;
    let q = labels.quota_details.get("limits.memory")?;
    let hard = quantity::memory_bytes(&q.hard)?;
    let used = quantity::memory_bytes(&q.used).unwrap_or(0);
    let extra = (quantity::memory_bytes(new)?
        .saturating_sub(quantity::memory_bytes(old).unwrap_or(0)))
        * replicas.max(1) as u128;
    (used + extra > hard).then(|| format!("the namespace memory quota (limits.memory {} used of {}) has no room to raise the limit to {new}", q.used, q.hard))
}

fn diagnose_node(ev: &Evidence, node: &Value, target: Option<Target>) -> Diagnosis {
    let conditions = array(node, &["status", "conditions"]);
    let ready = conditions
        .iter()
        .find(|c| str_at(c, &["type"]) == Some("Ready"))
        .and_then(|c| str_at(c, &["status"]))
        .unwrap_or("Unknown");
    let pressure: Vec<&str> = conditions
        .iter()
        .filter(|c| str_at(c, &["type"]) != Some("Ready") && str_at(c, &["status"]) == Some("True"))
        .filter_map(|c| str_at(c, &["type"]))
        .collect();
    let name = obj::name(node).to_owned();
    if ready == "True" && pressure.is_empty() {
        let mut d = Diagnosis::new(
            "NodeHealthy",
            format!("Node {name} is Ready with no pressure conditions"),
        );
        d.outcome = InvestigationOutcome::ProblemResolved;
        d.confidence = 0.8;
        d.target = target;
        return d;
    }
    let not_ready_nodes = ev
        .nodes
        .iter()
        .filter(|n| {
            array(n, &["status", "conditions"]).iter().any(|c| {
                str_at(c, &["type"]) == Some("Ready") && str_at(c, &["status"]) != Some("True")
            })
        })
        .count();
    let mut d = Diagnosis::new(
        "NodeNotReady",
        format!(
            "Node {name} is {} {}",
            if ready == "True" {
                "Ready but under"
            } else {
                "NotReady"
            },
            pressure.join(", ")
        ),
    );
    d.factors.push(format!("Ready={ready}"));
    d.target = target;
    d.severity = "critical";
    if ev.nodes.len() >= 2 && not_ready_nodes * 3 > ev.nodes.len() {
        d.human = Some(format!(
            "{not_ready_nodes} of {} nodes are not ready: a cluster-wide problem, draining would not help",
            ev.nodes.len()
        ));
        d.confidence = 0.75;
    } else {
        d.confidence = 0.8;
        d.proposal = proposal("CordonDrainNode", json!({}), "");
    }
    d
}

fn diagnose_service(ev: &Evidence, svc: &Value, target: Option<Target>) -> Diagnosis {
    let name = obj::name(svc).to_owned();
    let selector = at(svc, &["spec", "selector"])
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let selector_text: Vec<String> = selector
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    let mut d = Diagnosis::new("ServiceUnreachable", String::new());
    d.target = target;
    d.confidence = 0.85;
    if ev.pods.is_empty() {
        d.summary = format!(
            "Service {name} has no endpoints: its selector {} matches no pods",
            selector_text.join(",")
        );
        let similar: Vec<String> = ev
            .namespace_pods
            .iter()
            .filter(|p| obj::labels(p).any(|(k, _)| selector.contains_key(k)))
            .map(|p| {
                format!(
                    "pod {} has {}",
                    obj::name(p),
                    obj::labels(p)
                        .filter(|(k, _)| selector.contains_key(*k))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .take(3)
            .collect();
        d.factors = similar;
        d.human = Some(
            "the Service selector and the pod labels disagree; a human must fix the manifest"
                .into(),
        );
    } else {
        let ready = ev.pods.iter().filter(|p| healthy(p)).count();
        d.summary = format!(
            "Service {name}: {ready} of {} selected pods are ready",
            ev.pods.len()
        );
        d.factors = ev
            .pods
            .iter()
            .filter(|p| !healthy(p))
            .map(describe_failure)
            .take(3)
            .collect();
        d.outcome = InvestigationOutcome::Inconclusive;
        d.confidence = 0.5;
    }
    d
}

fn diagnose_pending(ev: &Evidence, target: Option<Target>) -> Option<Diagnosis> {
    let pending: Vec<&Value> = ev
        .pods
        .iter()
        .filter(|p| {
            str_at(p, &["status", "phase"]) == Some("Pending") && pod_status(p) == "Pending"
        })
        .collect();
    let p = pending.first()?;
    let (_, message) = ev
        .warnings_for(obj::name(p))
        .into_iter()
        .find(|(r, _)| *r == "FailedScheduling")?;
    let message = message.to_owned();
    let lower = message.to_ascii_lowercase();
    if lower.contains("insufficient") || lower.contains("too many pods") {
        let mut d = Diagnosis::new(
            "PendingInsufficientResources",
            format!("Pod {} cannot be scheduled: {message}", obj::name(p)),
        );
        d.confidence = 0.85;
        d.target = target;
        d.human = Some("the cluster lacks capacity for the requested resources: add nodes or lower the requests".into());
        return Some(d);
    }
    // 1.20: "0/3 nodes are available: 3 node(s) had taint {dedicated: gpu}, that the pod didn't tolerate."
    let taint = Regex::new(r"had taint \{([^:}]+):\s*([^}]*)\}")
        .ok()?
        .captures(&message)
        .map(|c| (c[1].trim().to_owned(), c[2].trim().to_owned()));
    if let Some((key, value)) = taint {
        let mut d = Diagnosis::new(
            "PendingSchedulingConstraints",
            format!(
                "Pod {} cannot be scheduled: the nodes carry the taint {key}={value} it does not tolerate",
                obj::name(p)
            ),
        );
        d.factors.push(message.clone());
        let tainted: Vec<&Value> = ev
            .nodes
            .iter()
            .filter(|n| {
                array(n, &["spec", "taints"])
                    .iter()
                    .any(|t| str_at(t, &["key"]) == Some(key.as_str()))
            })
            .collect();
        if key.starts_with("node.kubernetes.io/")
            || key.starts_with("node-role.kubernetes.io/")
            || tainted.is_empty()
        {
            d.confidence = 0.7;
            d.target = target;
            d.human = Some(format!(
                "the taint {key} is set by Kubernetes or reserves nodes deliberately; a human must decide"
            ));
        } else {
            let node = tainted[0];
            let effect = array(node, &["spec", "taints"])
                .iter()
                .find(|t| str_at(t, &["key"]) == Some(key.as_str()))
                .and_then(|t| str_at(t, &["effect"]))
                .unwrap_or("NoSchedule")
                .to_owned();
            d.factors.push(format!(
                "{} of {} nodes carry {key}:{effect}",
                tainted.len(),
                ev.nodes.len()
            ));
            d.confidence = 0.75;
            d.target = Some(Target::new("Node", obj::name(node), None));
            d.proposal = proposal(
                "RemoveNodeTaint",
                json!({"TAINT_KEY": key, "TAINT_EFFECT": effect}),
                "",
            );
        }
        return Some(d);
    }
    let mut d = Diagnosis::new(
        "PendingSchedulingConstraints",
        format!("Pod {} cannot be scheduled: {message}", obj::name(p)),
    );
    d.confidence = 0.7;
    d.target = target;
    d.human = Some(
        "node selectors, affinity or cordoned nodes prevent scheduling; a human must adjust them"
            .into(),
    );
    Some(d)
}

fn diagnose_pvc(ev: &Evidence, pvc: &Value, target: Option<Target>) -> Diagnosis {
    let capacity = str_at(pvc, &["status", "capacity", "storage"])
        .or_else(|| str_at(pvc, &["spec", "resources", "requests", "storage"]))
        .unwrap_or("")
        .to_owned();
    let class = str_at(pvc, &["spec", "storageClassName"])
        .unwrap_or("")
        .to_owned();
    let mut d = Diagnosis::new(
        "PVCFillPredicted",
        format!(
            "PersistentVolumeClaim {} ({capacity}) is predicted to fill up",
            obj::name(pvc)
        ),
    );
    d.target = target;
    d.severity = "medium";
    let expandable = ev
        .storage_class
        .as_ref()
        .and_then(|sc| sc.get("allowVolumeExpansion"))
        .and_then(Value::as_bool);
    match quantity::memory_bytes(&capacity) {
        Some(_) if expandable != Some(true) => {
            d.confidence = 0.8;
            d.factors.push(format!(
                "storage class {class} does not allow volume expansion"
            ));
            d.human = Some(format!(
                "the storage class {class} cannot expand volumes; the data must be cleaned up or migrated by a human"
            ));
        }
        Some(bytes) if !class.is_empty() => {
            let new_size = quantity::format_gi((bytes as f64 * 1.5).ceil() as u128);
            d.factors.push(format!(
                "storage class {class}; proposed size {new_size} (x1.5)"
            ));
            d.confidence = 0.8;
            d.proposal = proposal(
                "ExpandPVC",
                json!({"PVC_NAME": obj::name(pvc), "NEW_SIZE": new_size}),
                format!("grow the claim {} to {new_size}", obj::name(pvc)),
            );
        }
        _ => {
            d.confidence = 0.6;
            d.human = Some("the claim's size or storage class is unknown; a human must decide how to grow or clean it".into());
        }
    }
    d
}

#[async_trait]
impl Investigator for OfflineInvestigator {
    fn name(&self) -> String {
        "offline".into()
    }

    async fn analyse(&self, req: &RemediationRequest) -> Result<Analysis, InvestigateError> {
        let now = self.clock.now();
        let tools = ClusterTools::new(
            self.reader.clone(),
            self.clock.clone(),
            self.tool_limits.clone(),
        );
        let (snapshot, _, pods, events) = gather::prefetch(&tools, req).await?;
        let matched: Vec<String> = self
            .playbooks
            .matching(&snapshot)
            .iter()
            .map(|p| p.spec.name.clone())
            .collect();
        let mut records = vec![
            ToolCallRecord {
                tool: "kubectl_get".into(),
                arguments: json!({"kind": "Pod", "namespace": gather::signal_namespace(req)}),
                ok: true,
                output_chars: 0,
                truncated: false,
            },
            ToolCallRecord {
                tool: "kubectl_events".into(),
                arguments: json!({"namespace": gather::signal_namespace(req)}),
                ok: true,
                output_chars: 0,
                truncated: false,
            },
        ];
        let evidence = self.gather(&tools, req, &mut records, pods, events).await?;
        let mut diagnosis = match &evidence {
            Some(ev) => self.diagnose(req, ev),
            None => {
                let mut d = Diagnosis::new(
                    "Unknown",
                    "The signal names no Kubernetes resource to investigate",
                );
                d.outcome = InvestigationOutcome::InsufficientData;
                d.confidence = 0.2;
                d
            }
        };
        // A proposal on a target kubemedic resolved: verify the (possibly different) target.
        let mut rca = self.rca_from(&diagnosis);
        let fallback = diagnosis.target.clone();
        let verified = gather::verify_target(&tools, &rca, fallback.as_ref()).await?;
        if verified.is_none() && diagnosis.proposal.is_some() {
            diagnosis.proposal = None;
        }
        let history = match &verified {
            Some(ctx) => gather::history(self.history.as_ref(), ctx, now).await,
            None => None,
        };
        // History: a remedy that already failed on this spec is not proposed again.
        if let (Some(h), Some(p)) = (&history, &diagnosis.proposal) {
            let failed_before = h
                .tier1
                .chain
                .iter()
                .chain(&h.tier2.chain)
                .filter(|e| {
                    e.workflow_type == p.action_type
                        && e.signal_resolved != Some(true)
                        && e.hash_match != crate::domain::HashMatch::None
                })
                .count();
            if failed_before >= 2 {
                diagnosis.human = Some(format!(
                    "{} was already applied {failed_before} times to this configuration without resolving the signal; escalating to a human",
                    p.action_type
                ));
                rca = self.rca_from(&diagnosis);
            }
        }
        rca.needs_human_review = diagnosis.human.is_some();
        rca.human_review_reason = diagnosis.human.clone();
        let mut warnings = Vec::new();
        if rca.investigation_outcome == InvestigationOutcome::Inconclusive {
            warnings.push("inconclusive: the evidence does not determine the cause".into());
        }
        Ok(Analysis {
            root_owner: verified.as_ref().map(|c| c.root_owner.clone()),
            spec_hash: verified.as_ref().and_then(|c| c.spec_hash.clone()),
            detected_labels: verified.as_ref().map(|c| c.detected_labels.clone()),
            history,
            rca,
            warnings,
            playbooks: matched,
            tool_calls: records,
            usage: Default::default(),
            investigator: self.name(),
            llm_calls: vec![],
            proposal: diagnosis.proposal,
        })
    }

    async fn select(
        &self,
        req: &RemediationRequest,
        analysis: &Analysis,
    ) -> Result<Selection, InvestigateError> {
        let detected = analysis.detected_labels.clone().unwrap_or_default();
        let ctx = SelectionContext {
            severity: req.signal.severity.clone(),
            environment: req.state.enrichment.as_ref().map(|e| e.environment.clone()),
            signal_mode: Some(req.signal.mode.as_str().into()),
            target_kind: analysis.root_owner.as_ref().map(|t| t.kind.clone()),
            detected: detected.clone(),
        };
        let mut inv2 = Invocation2::default();
        match &analysis.proposal {
            Some(p)
                if analysis.rca.investigation_outcome == InvestigationOutcome::Actionable
                    && !analysis.rca.needs_human_review =>
            {
                let mut action_type = p.action_type.clone();
                let mut params = p.parameters.clone();
                // GitOps: a spec change goes to Git as a proposal, never as a direct patch.
                if detected.git_ops_managed && action_type != "DeletePod" {
                    action_type = "GitRevert".into();
                    let change = if p.git_change.is_empty() {
                        format!(
                            "apply {} ({})",
                            p.action_type,
                            serde_json::to_string(&p.parameters).unwrap_or_default()
                        )
                    } else {
                        p.git_change.clone()
                    };
                    params = Map::new();
                    params.insert(
                        "PROPOSED_CHANGE".into(),
                        json!(format!(
                            "{change} — in the Git source of truth (managed by {})",
                            detected.git_ops_tool.as_deref().unwrap_or("GitOps")
                        )),
                    );
                }
                let listed = self.catalog.list_workflows(&action_type, &ctx, 0, 1);
                let first = listed["workflows"]
                    .get(0)
                    .and_then(|w| w["workflow_id"].as_str())
                    .map(str::to_owned);
                match first {
                    None => {
                        inv2.no_workflow =
                            Some(format!("no {action_type} workflow fits this target"));
                    }
                    Some(id) => match self.catalog.validate_selection(
                        &id,
                        &params,
                        analysis.root_owner.as_ref(),
                        &ctx,
                    ) {
                        Ok(full) => {
                            let w = self.catalog.workflow(&id);
                            inv2.selected = Some(SelectedWorkflow {
                                workflow_id: id.clone(),
                                action_type: action_type.clone(),
                                version: w.map(|w| w.version.clone()).unwrap_or_default(),
                                confidence: analysis.rca.confidence,
                                rationale: format!(
                                    "{} for: {}",
                                    action_type, analysis.rca.root_cause_analysis.summary
                                ),
                                parameters: full,
                            });
                        }
                        Err(e) => {
                            inv2.validation_attempts.push(ValidationAttempt {
                                workflow_id: id,
                                code: e.code.into(),
                                errors: e.errors,
                            });
                            inv2.validation_failed = true;
                        }
                    },
                }
            }
            _ => {
                inv2.no_workflow = Some(
                    analysis
                        .rca
                        .human_review_reason
                        .clone()
                        .unwrap_or_else(|| analysis.rca.root_cause_analysis.summary.clone()),
                );
            }
        }
        let mut merged = merge(&analysis.rca, &inv2);
        let outcome = route(analysis, &inv2, &mut merged);
        Ok(Selection {
            selected: inv2.selected.clone(),
            alternatives: vec![],
            no_workflow_reasoning: inv2.no_workflow.clone(),
            validation_attempts: inv2.validation_attempts.clone(),
            merged,
            outcome,
            usage: Default::default(),
            llm_calls: vec![],
        })
    }
}
