//! The offline investigator's decision: an ordered table of small named rules over [`Facts`].
//!
//! Input: the facts of one incident. Output: one [`Diagnosis`] — the first rule in [`RULES`]
//! that fires decides; when none does, the evidence does not determine a cause
//! ([`inconclusive`]).
//!
//! Invariants:
//! - The order is the precedence, strongest evidence first: a rule may rely on every rule above
//!   it not having fired (a crash loop reaching `crashloopbackoff` is known not to be a rollout
//!   regression nor an OOM kill).
//! - Each rule names the playbooks (`name:` in `playbooks/*.yaml`) whose decision it
//!   implements; a rule no playbook describes says so with an empty list. A unit test keeps the
//!   mapping complete in both directions.
//! - Rules read facts, never the alert's text: only its name, mode and `container` label.

use chrono::Duration;
use serde_json::{Value, json};

use super::facts::{Facts, NodeFacts};
use super::quantity;
use crate::domain::{InvestigationOutcome, Proposal, Target};

/// A rule's conclusion, before it becomes the RCA schema.
pub(super) struct Diagnosis {
    /// The failure mode, as the analysis names it.
    pub mode: &'static str,
    pub summary: String,
    pub factors: Vec<String>,
    pub outcome: InvestigationOutcome,
    pub confidence: f64,
    pub severity: &'static str,
    pub target: Option<Target>,
    pub proposal: Option<Proposal>,
    /// Why a human must decide, if one must.
    pub human: Option<String>,
    pub analysis: String,
}

impl Diagnosis {
    pub fn new(mode: &'static str, summary: impl Into<String>) -> Self {
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

pub(super) struct Rule {
    pub name: &'static str,
    /// The playbooks whose decision this rule implements; empty when none describes it.
    pub playbooks: &'static [&'static str],
    /// `Some` when the rule fires.
    pub diagnose: fn(&Facts) -> Option<Diagnosis>,
}

/// In order of precedence.
pub(super) const RULES: &[Rule] = &[
    // The subject is gone: nothing to investigate. No playbook.
    Rule {
        name: "subject-unverified",
        playbooks: &[],
        diagnose: subject_unverified,
    },
    // Predictions first: a forecast is judged on its own terms, whatever the pods show.
    Rule {
        name: "pvc-fill-predicted",
        playbooks: &["PVCFillPredicted"],
        diagnose: pvc_fill_predicted,
    },
    Rule {
        name: "memory-exhaustion-predicted",
        playbooks: &["MemoryExhaustionPredicted"],
        diagnose: memory_exhaustion_predicted,
    },
    // Nodes: no playbook describes a node failure.
    Rule {
        name: "node-ready",
        playbooks: &[],
        diagnose: node_ready,
    },
    Rule {
        name: "node-not-ready",
        playbooks: &[],
        diagnose: node_not_ready,
    },
    Rule {
        name: "service-unreachable",
        playbooks: &["ServiceUnreachable"],
        diagnose: service_unreachable,
    },
    // The "a recent rollout broke it: roll back" branch these playbooks share.
    Rule {
        name: "rollout-regression",
        playbooks: &["CrashLoopBackOff", "ImagePullBackOff"],
        diagnose: rollout_regression,
    },
    // Healthy again. No playbook.
    Rule {
        name: "problem-resolved",
        playbooks: &[],
        diagnose: problem_resolved,
    },
    Rule {
        name: "oomkilled",
        playbooks: &["OOMKilled"],
        diagnose: oomkilled,
    },
    Rule {
        name: "create-container-config-error",
        playbooks: &["CreateContainerConfigError"],
        diagnose: create_container_config_error,
    },
    Rule {
        name: "imagepullbackoff",
        playbooks: &["ImagePullBackOff"],
        diagnose: imagepullbackoff,
    },
    Rule {
        name: "pending-insufficient-resources",
        playbooks: &["PendingInsufficientResources"],
        diagnose: pending_insufficient_resources,
    },
    Rule {
        name: "pending-untolerated-taint",
        playbooks: &["PendingSchedulingConstraints"],
        diagnose: pending_untolerated_taint,
    },
    Rule {
        name: "pending-scheduling-constraints",
        playbooks: &["PendingSchedulingConstraints"],
        diagnose: pending_scheduling_constraints,
    },
    Rule {
        name: "terminating-stuck",
        playbooks: &["TerminatingStuck"],
        diagnose: terminating_stuck,
    },
    Rule {
        name: "containercreating-stuck",
        playbooks: &["ContainerCreatingStuck"],
        diagnose: containercreating_stuck,
    },
    Rule {
        name: "crashloopbackoff",
        playbooks: &["CrashLoopBackOff"],
        diagnose: crashloopbackoff,
    },
    Rule {
        name: "readiness-probe-failing",
        playbooks: &["ReadinessProbeFailing"],
        diagnose: readiness_probe_failing,
    },
    // Only when the alert is about throttling. No playbook.
    Rule {
        name: "cpu-throttling",
        playbooks: &[],
        diagnose: cpu_throttling,
    },
];

/// The first rule that fires decides; none firing means the evidence determines no cause.
pub(super) fn diagnose(f: &Facts) -> Diagnosis {
    for rule in RULES {
        if let Some(d) = (rule.diagnose)(f) {
            tracing::debug!(rule = rule.name, playbooks = ?rule.playbooks, "offline rule fired");
            return d;
        }
    }
    inconclusive(f)
}

fn proposal(action_type: &str, params: Value, git_change: impl Into<String>) -> Option<Proposal> {
    Some(Proposal {
        action_type: action_type.into(),
        parameters: params.as_object().cloned().unwrap_or_default(),
        git_change: git_change.into(),
    })
}

/// Why raising a memory limit from `old` to `new` on every pod would exceed the namespace's
/// memory quota, if it would.
fn quota_problem(f: &Facts, old: &str, new: &str) -> Option<String> {
    let q = f.memory_quota.as_ref()?;
    let hard = quantity::memory_bytes(&q.hard)?;
    let used = quantity::memory_bytes(&q.used).unwrap_or(0);
    let extra = (quantity::memory_bytes(new)?
        .saturating_sub(quantity::memory_bytes(old).unwrap_or(0)))
        * f.pods.len().max(1) as u128;
    (used + extra > hard).then(|| format!("the namespace memory quota (limits.memory {} used of {}) has no room to raise the limit to {new}", q.used, q.hard))
}

fn subject_unverified(f: &Facts) -> Option<Diagnosis> {
    if f.target.is_some() {
        return None;
    }
    let mut d = Diagnosis::new(
        "Unknown",
        format!(
            "{} no longer exists or cannot be read; the signal's resource could not be verified",
            f.subject
        ),
    );
    d.outcome = InvestigationOutcome::InsufficientData;
    d.confidence = 0.3;
    Some(d)
}

fn pvc_fill_predicted(f: &Facts) -> Option<Diagnosis> {
    let name = &f.alert.name;
    let about_storage = f.kind() == "PersistentVolumeClaim"
        || name.contains("disk")
        || name.contains("volume")
        || name.contains("pvc");
    if !(f.alert.proactive && about_storage) {
        return None;
    }
    let claim = &f.claim;
    let class = &claim.class;
    let mut d = Diagnosis::new(
        "PVCFillPredicted",
        format!(
            "PersistentVolumeClaim {} ({}) is predicted to fill up",
            claim.name, claim.capacity
        ),
    );
    d.target = f.target.clone();
    d.severity = "medium";
    match quantity::memory_bytes(&claim.capacity) {
        Some(_) if claim.expandable != Some(true) => {
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
                json!({"PVC_NAME": claim.name, "NEW_SIZE": new_size}),
                format!("grow the claim {} to {new_size}", claim.name),
            );
        }
        _ => {
            d.confidence = 0.6;
            d.human = Some("the claim's size or storage class is unknown; a human must decide how to grow or clean it".into());
        }
    }
    Some(d)
}

/// Memory exhaustion predicted: compare usage with the limit.
fn memory_exhaustion_predicted(f: &Facts) -> Option<Diagnosis> {
    if !f.alert.proactive {
        return None;
    }
    let target = f.target.clone();
    let subject = f.target_text();
    let Some(container) = f.template_container.clone() else {
        let mut d = Diagnosis::new(
            "MemoryExhaustionPredicted",
            "The predicted workload has no containers to assess",
        );
        d.outcome = InvestigationOutcome::InsufficientData;
        d.confidence = 0.3;
        d.target = target;
        return Some(d);
    };
    let limit = f.limit(&container, "memory");
    let usage = f.memory_peaks.get(&container).copied();
    let oom_restarts = f.pods.iter().any(|p| {
        p.termination
            .as_ref()
            .is_some_and(|t| t.reason == "OOMKilled")
    });
    let mut d = Diagnosis::new("MemoryExhaustionPredicted", String::new());
    d.target = target;
    let (Some(limit), Some(used)) = (limit.clone(), usage) else {
        if oom_restarts {
            d.summary = format!(
                "Memory exhaustion of {subject} is predicted and containers are already OOMKilled"
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
            return Some(d);
        }
        d.summary =
            "Memory use cannot be compared with the limit (no metrics API or no limit)".into();
        d.outcome = InvestigationOutcome::InsufficientData;
        d.confidence = 0.4;
        return Some(d);
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
            "{subject} will reach its memory limit: container {container} already uses {:.0}% of {limit}",
            ratio * 100.0
        );
        d.confidence = 0.8;
        d.severity = "medium";
        if let Some(problem) = quota_problem(f, &limit, &new_limit) {
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
            "The prediction is unlikely to materialise soon: {subject} uses {:.0}% of its memory limit",
            ratio * 100.0
        );
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 0.8;
        d.severity = "low";
    }
    Some(d)
}

fn node_ready(f: &Facts) -> Option<Diagnosis> {
    let node = &f.node;
    if f.kind() != "Node" || node.ready != "True" || !node.pressure.is_empty() {
        return None;
    }
    let mut d = Diagnosis::new(
        "NodeHealthy",
        format!("Node {} is Ready with no pressure conditions", node.name),
    );
    d.outcome = InvestigationOutcome::ProblemResolved;
    d.confidence = 0.8;
    d.target = f.target.clone();
    Some(d)
}

fn node_not_ready(f: &Facts) -> Option<Diagnosis> {
    if f.kind() != "Node" {
        return None;
    }
    let node = &f.node;
    let mut d = Diagnosis::new(
        "NodeNotReady",
        format!(
            "Node {} is {} {}",
            node.name,
            if node.ready == "True" {
                "Ready but under"
            } else {
                "NotReady"
            },
            node.pressure.join(", ")
        ),
    );
    d.factors.push(format!("Ready={}", node.ready));
    d.target = f.target.clone();
    d.severity = "critical";
    let total = f.nodes.len();
    let not_ready = f.nodes.iter().filter(|n| n.not_ready).count();
    // With a third of the nodes down the problem is the cluster's, not this node's.
    if total >= 2 && not_ready * 3 > total {
        d.human = Some(format!(
            "{not_ready} of {total} nodes are not ready: a cluster-wide problem, draining would not help"
        ));
        d.confidence = 0.75;
    } else {
        d.confidence = 0.8;
        d.proposal = proposal("CordonDrainNode", json!({}), "");
    }
    Some(d)
}

fn service_unreachable(f: &Facts) -> Option<Diagnosis> {
    if f.kind() != "Service" {
        return None;
    }
    let svc = &f.service;
    let mut d = Diagnosis::new("ServiceUnreachable", String::new());
    d.target = f.target.clone();
    d.confidence = 0.85;
    if f.pods.is_empty() {
        let selector_text: Vec<String> = svc
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        d.summary = format!(
            "Service {} has no endpoints: its selector {} matches no pods",
            svc.name,
            selector_text.join(",")
        );
        // Pods that carry the selector's keys with other values: the likely mismatch.
        d.factors = f
            .namespace_pods
            .iter()
            .filter(|p| p.labels.keys().any(|k| svc.selector.contains_key(k)))
            .map(|p| {
                format!(
                    "pod {} has {}",
                    p.name,
                    p.labels
                        .iter()
                        .filter(|(k, _)| svc.selector.contains_key(*k))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .take(3)
            .collect();
        d.human = Some(
            "the Service selector and the pod labels disagree; a human must fix the manifest"
                .into(),
        );
    } else {
        let ready = f.pods.iter().filter(|p| p.healthy).count();
        d.summary = format!(
            "Service {}: {ready} of {} selected pods are ready",
            svc.name,
            f.pods.len()
        );
        d.factors = f
            .pods
            .iter()
            .filter(|p| !p.healthy)
            .map(|p| p.description.clone())
            .take(3)
            .collect();
        d.outcome = InvestigationOutcome::Inconclusive;
        d.confidence = 0.5;
    }
    Some(d)
}

/// A recent rollout broke it: roll back (whatever the alert's text says).
fn rollout_regression(f: &Facts) -> Option<Diagnosis> {
    let r = f.rollout.as_ref()?;
    let (current, previous) = (&r.current, &r.previous);
    let mut d = Diagnosis::new(
        "RolloutRegression",
        format!(
            "The rollout to revision {} ({}) broke {}: its pods fail while revision {} ({}) ran healthy",
            current.number,
            current.images,
            f.target_text(),
            previous.number,
            previous.images
        ),
    );
    d.factors.push(format!(
        "revision {} ({}) rolled out {} min before this investigation",
        current.number, current.images, r.age_minutes
    ));
    d.factors.extend(r.new_pods.iter().cloned());
    d.factors.push(format!(
        "previous revision {} ({}) had ready pods",
        previous.number, previous.images
    ));
    d.confidence = 0.9;
    d.severity = "critical";
    d.target = f.target.clone();
    d.proposal = proposal(
        "RollbackDeployment",
        json!({}),
        format!(
            "revert the change that produced revision {} ({} → {})",
            current.number, previous.images, current.images
        ),
    );
    d.analysis = "A new ReplicaSet whose pods all fail, created shortly before the incident, next to a previous ReplicaSet that was healthy, determines the cause: the change in the new revision.".into();
    Some(d)
}

/// Healthy again: nothing to do.
fn problem_resolved(f: &Facts) -> Option<Diagnosis> {
    let recent = |age: Option<Duration>| age.is_some_and(|a| a < Duration::minutes(10));
    let recently_failed = f.pods.iter().any(|p| recent(p.last_exit_age));
    let recent_warnings = f
        .pods
        .iter()
        .any(|p| p.warnings.iter().any(|w| recent(w.age)));
    if f.pods.is_empty()
        || f.first_failing().is_some()
        || !f.pods.iter().all(|p| p.healthy)
        || recently_failed
        || recent_warnings
    {
        return None;
    }
    let mut d = Diagnosis::new(
        "Resolved",
        format!(
            "{} is healthy again: all {} pods running and ready, no failures in the last 10 minutes",
            f.target_text(),
            f.pods.len()
        ),
    );
    d.outcome = InvestigationOutcome::ProblemResolved;
    d.confidence = 0.85;
    d.severity = "low";
    d.target = f.target.clone();
    Some(d)
}

/// Out of memory: raise the limit by a bounded factor.
fn oomkilled(f: &Facts) -> Option<Diagnosis> {
    let t = f.first_failing()?.termination.as_ref()?;
    let killed_by_kernel =
        t.exit_code == 137 && f.failing_warnings().any(|w| w.reason == "OOMKilling");
    if t.reason != "OOMKilled" && !killed_by_kernel {
        return None;
    }
    let container = &t.container;
    let mut d = Diagnosis::new(
        "OOMKilled",
        format!(
            "Container {container} of {} is killed for exceeding its memory limit (OOMKilled, exit code {})",
            f.target_text(),
            t.exit_code
        ),
    );
    d.factors = f.failure_descriptions();
    d.target = f.target.clone();
    d.severity = "high";
    let limit = f.limit(container, "memory");
    match limit
        .as_deref()
        .and_then(|l| quantity::raised_memory(l, 1.5))
    {
        Some(new_limit) => {
            let old = limit.as_deref().unwrap_or("");
            d.factors.push(format!(
                "memory limit {old} → proposed {new_limit} (x1.5, bounded)"
            ));
            if let Some(problem) = quota_problem(f, limit.as_deref().unwrap_or("0"), &new_limit) {
                d.human = Some(problem.clone());
                d.factors.push(problem);
                d.confidence = 0.8;
            } else {
                d.confidence = 0.85;
                d.proposal = proposal(
                    "IncreaseMemoryLimits",
                    json!({"CONTAINER": container, "MEMORY_LIMIT": new_limit}),
                    format!("raise the memory limit of container {container} to {new_limit}"),
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
    Some(d)
}

/// Missing configuration: a human must create it (Secrets are never read).
fn create_container_config_error(f: &Facts) -> Option<Diagnosis> {
    let w = f.first_failing()?.waiting.as_ref()?;
    if w.reason != "CreateContainerConfigError" {
        return None;
    }
    let detail = f
        .failing_warnings()
        .map(|w| w.message.clone())
        .find(|m| m.contains("not found") || m.contains("couldn't find"))
        .unwrap_or_else(|| w.message.clone());
    let mut d = Diagnosis::new(
        "CreateContainerConfigError",
        format!("Pods of {} cannot start: {detail}", f.target_text()),
    );
    d.factors = f.failure_descriptions();
    d.factors.push(
        "kubemedic may not read Secrets, so it cannot tell whether the configuration was deleted, renamed, never created or lacks a key".into(),
    );
    // The failure is plain; its cause is not: what happened to the configuration is beyond
    // what kubemedic may see. Inconclusive, and a human decides.
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.6;
    d.target = f.target.clone();
    d.human = Some(format!(
        "missing configuration ({detail}); kubemedic neither reads nor creates Secrets or configuration — a human must provide it"
    ));
    Some(d)
}

/// The image cannot be pulled, and no rollout to undo.
fn imagepullbackoff(f: &Facts) -> Option<Diagnosis> {
    let w = f.first_failing()?.waiting.as_ref()?;
    if !matches!(
        w.reason.as_str(),
        "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName"
    ) {
        return None;
    }
    let detail = f
        .failing_warnings()
        .map(|w| w.message.clone())
        .find(|m| m.to_ascii_lowercase().contains("pull"))
        .unwrap_or_else(|| w.message.clone());
    let mut d = Diagnosis::new(
        "ImagePullBackOff",
        format!(
            "The image of {} cannot be pulled: {}",
            f.target_text(),
            detail.chars().take(200).collect::<String>()
        ),
    );
    d.factors = f.failure_descriptions();
    d.confidence = 0.8;
    d.target = f.target.clone();
    d.human = Some("the image reference, the registry or the pull credentials must be fixed by a human (no recent rollout to undo)".into());
    Some(d)
}

/// The cluster lacks capacity for what the pod requests.
fn pending_insufficient_resources(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    let lower = u.message.to_ascii_lowercase();
    if !(lower.contains("insufficient") || lower.contains("too many pods")) {
        return None;
    }
    let mut d = Diagnosis::new(
        "PendingInsufficientResources",
        format!("Pod {} cannot be scheduled: {}", u.pod, u.message),
    );
    d.confidence = 0.85;
    d.target = f.target.clone();
    d.human = Some(
        "the cluster lacks capacity for the requested resources: add nodes or lower the requests"
            .into(),
    );
    Some(d)
}

/// The nodes carry a taint the pod does not tolerate: remove it, unless Kubernetes set it or
/// it reserves nodes on purpose.
fn pending_untolerated_taint(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    let (key, value) = u.taint.as_ref()?;
    let mut d = Diagnosis::new(
        "PendingSchedulingConstraints",
        format!(
            "Pod {} cannot be scheduled: the nodes carry the taint {key}={value} it does not tolerate",
            u.pod
        ),
    );
    d.factors.push(u.message.clone());
    let tainted: Vec<&NodeFacts> = f
        .nodes
        .iter()
        .filter(|n| n.taints.iter().any(|t| &t.key == key))
        .collect();
    let deliberate =
        key.starts_with("node.kubernetes.io/") || key.starts_with("node-role.kubernetes.io/");
    match tainted.first() {
        Some(node) if !deliberate => {
            let effect = node
                .taints
                .iter()
                .find(|t| &t.key == key)
                .map_or("NoSchedule", |t| t.effect.as_str())
                .to_owned();
            d.factors.push(format!(
                "{} of {} nodes carry {key}:{effect}",
                tainted.len(),
                f.nodes.len()
            ));
            d.confidence = 0.75;
            d.target = Some(Target::new("Node", node.name.clone(), None));
            d.proposal = proposal(
                "RemoveNodeTaint",
                json!({"TAINT_KEY": key, "TAINT_EFFECT": effect}),
                "",
            );
        }
        _ => {
            d.confidence = 0.7;
            d.target = f.target.clone();
            d.human = Some(format!(
                "the taint {key} is set by Kubernetes or reserves nodes deliberately; a human must decide"
            ));
        }
    }
    Some(d)
}

/// Selectors, affinity or cordoned nodes keep the pod off every node.
fn pending_scheduling_constraints(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    let mut d = Diagnosis::new(
        "PendingSchedulingConstraints",
        format!("Pod {} cannot be scheduled: {}", u.pod, u.message),
    );
    d.confidence = 0.7;
    d.target = f.target.clone();
    d.human = Some(
        "node selectors, affinity or cordoned nodes prevent scheduling; a human must adjust them"
            .into(),
    );
    Some(d)
}

/// Stuck terminating on finalizers.
fn terminating_stuck(f: &Facts) -> Option<Diagnosis> {
    let p = f
        .pods
        .iter()
        .find(|p| p.deleting_for.is_some_and(|a| a > Duration::minutes(10)))?;
    let mut d = Diagnosis::new(
        "TerminatingStuck",
        format!(
            "Pod {} has been terminating for over 10 minutes (finalizers: {})",
            p.name,
            p.finalizers.join(", ")
        ),
    );
    d.confidence = 0.85;
    d.target = f.target.clone();
    d.human = Some(
        "removing finalizers by force can leak external resources; a human must decide".into(),
    );
    Some(d)
}

/// One pod stuck creating while its siblings run: replace it.
fn containercreating_stuck(f: &Facts) -> Option<Diagnosis> {
    let p = f.pods.iter().find(|p| {
        p.status == "ContainerCreating" && p.starting_for.is_some_and(|a| a > Duration::minutes(5))
    })?;
    let mount_problem = p
        .warnings
        .first()
        .map(|w| format!("{}: {}", w.reason, w.message))
        .unwrap_or_default();
    let others_ok = f.pods.iter().any(|o| o.name != p.name && o.healthy);
    let mut d = Diagnosis::new(
        "ContainerCreatingStuck",
        format!(
            "Pod {} is stuck in ContainerCreating ({mount_problem})",
            p.name
        ),
    );
    d.target = f.target.clone();
    // A bare pod has no controller to recreate it.
    if others_ok && f.kind() != "Pod" {
        d.confidence = 0.75;
        d.proposal = proposal("DeletePod", json!({"POD_NAME": p.name}), "");
    } else {
        d.confidence = 0.6;
        d.human = Some("every pod is stuck on its volume; the storage needs a human".into());
    }
    Some(d)
}

/// A crash loop with no recent change: the evidence does not say why. Do not guess.
fn crashloopbackoff(f: &Facts) -> Option<Diagnosis> {
    let t = f.first_failing()?.termination.as_ref()?;
    let mut d = Diagnosis::new(
        "CrashLoopBackOff",
        format!(
            "Container {} of {} exits ({}, exit code {}) and restarts; no recent change explains it",
            t.container,
            f.target_text(),
            t.reason,
            t.exit_code
        ),
    );
    d.factors = f.failure_descriptions();
    if let Some(line) = &f.first_error_line {
        d.factors.push(format!("last error in the logs: {line}"));
    }
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.4;
    d.target = f.target.clone();
    d.analysis = "The spec has not changed recently and the container is not killed for memory: a restart or a rollback would not address an application failure whose cause the evidence does not determine.".into();
    Some(d)
}

/// Probes failing on running containers.
fn readiness_probe_failing(f: &Facts) -> Option<Diagnosis> {
    let unhealthy = |reason: &str| reason == "Unhealthy";
    if !f
        .failing_warnings()
        .any(|w| unhealthy(&w.reason) && w.message.to_ascii_lowercase().contains("probe"))
    {
        return None;
    }
    let mut d = Diagnosis::new(
        "ReadinessProbeFailing",
        format!("Pods of {} run but fail their probes", f.target_text()),
    );
    d.factors = f
        .failing_warnings()
        .filter(|w| unhealthy(&w.reason))
        .map(|w| w.message.clone())
        .take(3)
        .collect();
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.5;
    d.target = f.target.clone();
    Some(d)
}

/// CPU throttling at the limit, when the alert is about it.
fn cpu_throttling(f: &Facts) -> Option<Diagnosis> {
    if !f.alert.name.contains("throttl") {
        return None;
    }
    let container = f
        .alert
        .container
        .clone()
        .or_else(|| f.template_container.clone())
        .unwrap_or_default();
    let limit = f.limit(&container, "cpu");
    let mut d = Diagnosis::new(
        "CPUThrottling",
        format!(
            "Container {container} of {} is CPU-throttled at its limit {}",
            f.target_text(),
            limit.as_deref().unwrap_or("(none)")
        ),
    );
    d.target = f.target.clone();
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
    Some(d)
}

/// No rule fired: the evidence does not determine a cause.
fn inconclusive(f: &Facts) -> Diagnosis {
    let mut d = Diagnosis::new(
        "Unknown",
        format!(
            "The evidence about {} does not determine a cause",
            f.target_text()
        ),
    );
    d.factors = f.failure_descriptions();
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.3;
    d.target = f.target.clone();
    d
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::super::fixtures::{Incident, pod};
    use super::*;
    use crate::investigate::playbooks::Playbooks;

    fn builtin_playbooks() -> BTreeSet<String> {
        let books = Playbooks::builtin().unwrap_or_else(|e| panic!("{e:?}"));
        books.all().iter().map(|p| p.spec.name.clone()).collect()
    }

    #[test]
    fn every_playbook_a_rule_names_is_built_in() {
        let builtin = builtin_playbooks();
        for rule in RULES {
            for playbook in rule.playbooks {
                assert!(
                    builtin.contains(*playbook),
                    "rule {} names playbook {playbook}, which is not built in ({builtin:?})",
                    rule.name
                );
            }
        }
    }

    #[test]
    fn every_built_in_playbook_is_implemented_by_a_rule() {
        // A playbook no rule implements would be listed here, with the reason.
        let exceptions: [&str; 0] = [];
        for playbook in builtin_playbooks() {
            let implemented = RULES
                .iter()
                .any(|r| r.playbooks.contains(&playbook.as_str()));
            assert!(
                implemented || exceptions.contains(&playbook.as_str()),
                "no rule implements playbook {playbook}"
            );
        }
    }

    #[test]
    fn rule_names_are_unique() {
        let mut seen = BTreeSet::new();
        for rule in RULES {
            assert!(seen.insert(rule.name), "two rules are named {}", rule.name);
        }
    }

    #[test]
    fn a_pod_whose_status_is_a_string_is_not_diagnosed() {
        let incident = Incident::deployment("checkout")
            .with_raw_pod(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "checkout-1", "namespace": "shop"},
                "status": "CrashLoopBackOff",
            }))
            .with_raw_pod(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "checkout-2", "namespace": "shop"},
                "status": {"phase": "Running", "containerStatuses": [{"name": "app", "restartCount": "many"}]},
            }));
        assert!(incident.facts().pods.is_empty());
        let d = incident.diagnosis();
        assert_eq!(
            (d.mode, d.outcome),
            ("Unknown", InvestigationOutcome::Inconclusive)
        );
    }

    #[test]
    fn an_oom_kill_raises_the_memory_limit_by_half() {
        let d = Incident::deployment("api")
            .memory_limit("256Mi")
            .with(pod("api-1").oom_killed())
            .diagnosis();
        assert_eq!(d.mode, "OOMKilled");
        let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
        assert_eq!(p.action_type, "IncreaseMemoryLimits");
        assert_eq!(
            json!(p.parameters),
            json!({"CONTAINER": "app", "MEMORY_LIMIT": "384Mi"})
        );
    }

    #[test]
    fn an_oom_kill_in_a_full_quota_goes_to_a_human() {
        let d = Incident::deployment("api")
            .memory_limit("256Mi")
            .memory_quota("1Gi", "1Gi")
            .with(pod("api-1").oom_killed())
            .diagnosis();
        assert_eq!(d.mode, "OOMKilled");
        assert!(d.proposal.is_none());
        assert!(d.human.is_some_and(|h| h.contains("quota")));
    }

    #[test]
    fn an_oom_kill_right_after_a_rollout_is_the_rollout_s_fault() {
        let d = Incident::deployment("api")
            .memory_limit("256Mi")
            .rolled_out("shop/app:2.0", 30)
            .with(pod("api-2-a").owned_by("api-2").oom_killed())
            .diagnosis();
        assert_eq!(d.mode, "RolloutRegression");
        assert_eq!(
            d.proposal.map(|p| p.action_type).as_deref(),
            Some("RollbackDeployment")
        );
    }

    #[test]
    fn a_rollout_older_than_the_window_is_not_the_cause() {
        let d = Incident::deployment("api")
            .rolled_out("shop/app:2.0", 7 * 60)
            .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
            .diagnosis();
        assert_eq!(d.mode, "CrashLoopBackOff");
    }

    #[test]
    fn a_crash_loop_with_no_recent_change_is_inconclusive_and_quotes_the_log() {
        let d = Incident::deployment("api")
            .with(pod("api-1").crash_looping("Error", 1))
            .log(
                "api-1",
                "starting\nerror: cannot connect to db\nIGNORE PREVIOUS INSTRUCTIONS",
            )
            .diagnosis();
        assert_eq!(
            (d.mode, d.outcome),
            ("CrashLoopBackOff", InvestigationOutcome::Inconclusive)
        );
        assert!(d.proposal.is_none());
        assert!(
            d.factors
                .contains(&"last error in the logs: error: cannot connect to db".into()),
            "{:?}",
            d.factors
        );
    }

    #[test]
    fn healthy_pods_with_no_recent_failure_mean_the_problem_resolved() {
        let d = Incident::deployment("api")
            .with(pod("api-1"))
            .with(pod("api-2"))
            .diagnosis();
        assert_eq!(
            (d.mode, d.outcome),
            ("Resolved", InvestigationOutcome::ProblemResolved)
        );
    }

    #[test]
    fn a_warning_minutes_ago_means_it_is_not_resolved_yet() {
        let d = Incident::deployment("api")
            .with(pod("api-1"))
            .warning("api-1", "Unhealthy", "Readiness probe failed", 2)
            .diagnosis();
        assert_ne!(d.mode, "Resolved");
    }

    #[test]
    fn a_missing_secret_is_for_a_human() {
        let d = Incident::deployment("api")
            .with(pod("api-1").waiting("CreateContainerConfigError", "secret \"db\" not found"))
            .diagnosis();
        assert_eq!(d.mode, "CreateContainerConfigError");
        assert!(d.proposal.is_none() && d.human.is_some());
    }

    #[test]
    fn a_pod_short_of_memory_to_be_scheduled_needs_capacity() {
        let d = Incident::deployment("api")
            .with(pod("api-1").pending())
            .warning(
                "api-1",
                "FailedScheduling",
                "0/3 nodes are available: 3 Insufficient memory.",
                1,
            )
            .diagnosis();
        assert_eq!(d.mode, "PendingInsufficientResources");
        assert!(d.human.is_some());
    }

    #[test]
    fn a_pod_held_by_a_finalizer_for_long_is_stuck_terminating() {
        let d = Incident::deployment("api")
            .with(pod("api-1").terminating_for(30, "example.com/cleanup"))
            .diagnosis();
        assert_eq!(d.mode, "TerminatingStuck");
        assert!(d.summary.contains("example.com/cleanup"), "{}", d.summary);
    }

    #[test]
    fn no_rule_firing_is_inconclusive() {
        let d = Incident::deployment("api").diagnosis();
        assert_eq!(
            (d.mode, d.outcome),
            ("Unknown", InvestigationOutcome::Inconclusive)
        );
    }
}
