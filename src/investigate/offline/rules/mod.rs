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
//!
//! This file holds the table, [`diagnose`] and what several rules share; the rules themselves
//! are in one file per family (`predicted`, `nodes`, `scheduling`, `pods`, `workloads`).

mod nodes;
mod pods;
mod predicted;
mod scheduling;
mod vet;
mod workloads;

use chrono::Duration;
use serde_json::Value;

use super::facts::{Blocker, Facts, PreviousHealth, SERVED_MIN_SECONDS};
use super::quantity;
use crate::cluster::observed;
use crate::domain::{
    ActionParams, ActionType, InvestigationOutcome, LimitResource, Proposal, Severity, Target,
};
use crate::prove::findings;
pub(super) use vet::{asks_neighbourhood, vet, vet_neighbourhood, vetted};

use nodes::{node_flapping, node_not_ready, node_ready, wedged_runtime};
use pods::{
    containercreating_stuck, cpu_throttling, crashloopbackoff, create_container_config_error,
    imagepullbackoff, lone_pod_failure, oomkilled, readiness_probe_failing,
    state_kept_across_restarts, terminating_stuck,
};
use predicted::{memory_exhaustion_predicted, pvc_fill_predicted};
use scheduling::{
    pending_insufficient_resources, pending_scheduling_constraints, pending_untolerated_taint,
};
use workloads::{
    hpa_maxed_out, pdb_blocks_eviction, problem_resolved, rollout_held, rollout_regression,
    scaled_below_declared, scaled_to_zero, service_unreachable, suspended,
};

/// A rule's conclusion, before it becomes the RCA schema.
pub(super) struct Diagnosis {
    /// The failure mode, as the analysis names it.
    pub mode: &'static str,
    pub summary: String,
    pub factors: Vec<String>,
    pub outcome: InvestigationOutcome,
    pub confidence: f64,
    pub severity: Severity,
    pub target: Option<Target>,
    pub proposal: Option<Proposal>,
    /// Why a human must decide, if one must.
    pub human: Option<String>,
    pub analysis: String,
    /// The rule that decided, and the playbooks it implements (set by [`diagnose`]).
    pub rule: &'static str,
    pub rule_playbooks: &'static [&'static str],
    /// The alerted container was killed for memory lately: whatever the rule concludes, a
    /// node that ran short of memory itself at those kills explains them (the graph's
    /// question, and `memory.killed-by-own-limit`'s).
    pub killed_for_memory: bool,
    /// Its rule's standing against the dependency graph ([`Rule::standing`]).
    pub standing: Standing,
}

impl Diagnosis {
    pub fn new(mode: &'static str, summary: impl Into<String>) -> Self {
        Self {
            mode,
            summary: summary.into(),
            factors: vec![],
            outcome: InvestigationOutcome::Actionable,
            confidence: 0.8,
            severity: Severity::High,
            target: None,
            proposal: None,
            human: None,
            analysis: String::new(),
            rule: "none",
            standing: Standing::Symptom,
            rule_playbooks: &[],
            killed_for_memory: false,
        }
    }
}

/// How far a rule's conclusion stands against the neighbourhood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::investigate::offline) enum Standing {
    /// The rule's evidence determines the cause (a rollout, a prediction, the object's own
    /// status): the neighbourhood only adds context.
    Determined,
    /// The rule names a cause that a dependency unhealthy now would override.
    UnlessUnhealthy,
    /// The rule saw the symptom only: any culprit the neighbourhood supports decides.
    Symptom,
}

pub(super) struct Rule {
    pub name: &'static str,
    /// How far its conclusion stands against what the dependency graph finds
    /// ([`super::depends::decide`]).
    pub standing: Standing,
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
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: subject_unverified,
    },
    // Predictions first: a forecast is judged on its own terms, whatever the pods show.
    Rule {
        name: "pvc-fill-predicted",
        standing: Standing::Determined,
        playbooks: &["PVCFillPredicted"],
        diagnose: pvc_fill_predicted,
    },
    Rule {
        name: "memory-exhaustion-predicted",
        standing: Standing::Determined,
        playbooks: &["MemoryExhaustionPredicted"],
        diagnose: memory_exhaustion_predicted,
    },
    // Nodes: no playbook describes a node failure.
    Rule {
        name: "node-flapping",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: node_flapping,
    },
    Rule {
        name: "node-ready",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: node_ready,
    },
    Rule {
        name: "node-not-ready",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: node_not_ready,
    },
    // Autoscalers and disruption budgets: judged on their own status. No playbook.
    Rule {
        name: "hpa-maxed-out",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: hpa_maxed_out,
    },
    Rule {
        name: "pdb-blocks-eviction",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: pdb_blocks_eviction,
    },
    Rule {
        name: "service-unreachable",
        standing: Standing::Determined,
        playbooks: &["ServiceUnreachable"],
        diagnose: service_unreachable,
    },
    // The "a recent rollout broke it: roll back" branch these playbooks share.
    Rule {
        name: "rollout-regression",
        standing: Standing::Determined,
        playbooks: &["CrashLoopBackOff", "ImagePullBackOff"],
        diagnose: rollout_regression,
    },
    // Suspended by its own spec (a CronJob's spec.suspend). No playbook.
    Rule {
        name: "suspended",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: suspended,
    },
    // Scaled to zero against its declared replicas. No playbook.
    Rule {
        name: "scaled-to-zero",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: scaled_to_zero,
    },
    // Scaled below the replicas it is meant to run, the pods left running but not ready: the
    // capacity left does not carry the load. No playbook.
    Rule {
        name: "scaled-below-declared",
        standing: Standing::Symptom,
        playbooks: &[],
        diagnose: scaled_below_declared,
    },
    // Only when the alert is about throttling (before "healthy again": throttled pods run). No
    // playbook.
    Rule {
        name: "cpu-throttling",
        standing: Standing::UnlessUnhealthy,
        playbooks: &[],
        diagnose: cpu_throttling,
    },
    // A rollout the spec holds (a partition, OnDelete, paused) with every pod healthy: a
    // release step someone chose. No playbook.
    Rule {
        name: "rollout-held",
        standing: Standing::Symptom,
        playbooks: &[],
        diagnose: rollout_held,
    },
    // Healthy again. No playbook.
    Rule {
        name: "problem-resolved",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: problem_resolved,
    },
    Rule {
        name: "oomkilled",
        standing: Standing::UnlessUnhealthy,
        playbooks: &["OOMKilled"],
        diagnose: oomkilled,
    },
    Rule {
        name: "create-container-config-error",
        standing: Standing::Determined,
        playbooks: &["CreateContainerConfigError"],
        diagnose: create_container_config_error,
    },
    Rule {
        name: "imagepullbackoff",
        standing: Standing::UnlessUnhealthy,
        playbooks: &["ImagePullBackOff"],
        diagnose: imagepullbackoff,
    },
    Rule {
        name: "pending-insufficient-resources",
        standing: Standing::Symptom,
        playbooks: &["PendingInsufficientResources"],
        diagnose: pending_insufficient_resources,
    },
    Rule {
        name: "pending-untolerated-taint",
        standing: Standing::Symptom,
        playbooks: &["PendingSchedulingConstraints"],
        diagnose: pending_untolerated_taint,
    },
    Rule {
        name: "pending-scheduling-constraints",
        standing: Standing::Symptom,
        playbooks: &["PendingSchedulingConstraints"],
        diagnose: pending_scheduling_constraints,
    },
    Rule {
        name: "terminating-stuck",
        standing: Standing::Symptom,
        playbooks: &["TerminatingStuck"],
        diagnose: terminating_stuck,
    },
    Rule {
        name: "containercreating-stuck",
        standing: Standing::Symptom,
        playbooks: &["ContainerCreatingStuck"],
        diagnose: containercreating_stuck,
    },
    // The only pod ran, and fails every start since on state its emptyDir keeps: replace it.
    Rule {
        name: "state-kept-across-restarts",
        standing: Standing::Determined,
        playbooks: &[],
        diagnose: state_kept_across_restarts,
    },
    // One pod fails where its siblings of the same revision run: replace that pod.
    Rule {
        name: "lone-pod-failure",
        standing: Standing::Symptom,
        playbooks: &["CrashLoopBackOff", "ReadinessProbeFailing"],
        diagnose: lone_pod_failure,
    },
    // Running pods wedged in an exhausted runtime state, the spec unchanged: restart them.
    Rule {
        name: "wedged-runtime",
        standing: Standing::UnlessUnhealthy,
        playbooks: &["ReadinessProbeFailing"],
        diagnose: wedged_runtime,
    },
    Rule {
        name: "crashloopbackoff",
        standing: Standing::Symptom,
        playbooks: &["CrashLoopBackOff"],
        diagnose: crashloopbackoff,
    },
    Rule {
        name: "readiness-probe-failing",
        standing: Standing::Symptom,
        playbooks: &["ReadinessProbeFailing"],
        diagnose: readiness_probe_failing,
    },
];

/// The first rule that fires decides; none firing means the evidence determines no cause.
pub(super) fn diagnose(f: &Facts) -> Diagnosis {
    for rule in RULES {
        if let Some(mut d) = (rule.diagnose)(f) {
            tracing::debug!(rule = rule.name, playbooks = ?rule.playbooks, "offline rule fired");
            d.rule = rule.name;
            d.standing = rule.standing;
            d.rule_playbooks = rule.playbooks;
            vet(&mut d, f);
            return d;
        }
    }
    inconclusive(f)
}

/// The parameters this incident's facts give an action a learned pattern proposes (no rule
/// determined the cause, so none computed them): the one failing pod to delete, the revision
/// before a recent rollout to roll back to. Empty where the facts give none; the catalog's
/// required parameters decide whether that is enough.
pub(super) fn learned_parameters(
    action_type: &ActionType,
    f: &Facts,
) -> serde_json::Map<String, Value> {
    let v = match action_type {
        ActionType::DeletePod => match f.failing_pods().collect::<Vec<_>>().as_slice() {
            [p] => Some(ActionParams::delete_pod(&p.name)),
            _ => None,
        },
        ActionType::RollbackDeployment | ActionType::RollbackStatefulSet => match &f.rollout {
            Some(r) if r.kind == f.kind() => Some(ActionParams::rollback(r.previous.number)),
            _ => None,
        },
        _ => None,
    };
    v.map(|p| p.to_map()).unwrap_or_default()
}

/// By how much the rules raise a limit or grow a claim in one step: enough to get past a kill
/// at the old value or a volume that is filling, well inside the proofs' bound
/// ([`findings::MAX_STEP_FACTOR`]).
const RAISE_FACTOR: f64 = 1.5;
const _: () = assert!(RAISE_FACTOR > 1.0 && RAISE_FACTOR < findings::MAX_STEP_FACTOR as f64);

fn proposal(
    action_type: ActionType,
    params: ActionParams,
    git_change: impl Into<String>,
) -> Option<Proposal> {
    Some(Proposal {
        action_type,
        parameters: params.to_map(),
        git_change: git_change.into(),
        workflow_id: None,
    })
}

/// Propose deleting pod `name` so its controller replaces it ([`vet`] asks this of every
/// deletion proposed on the incident's workload, whichever rule proposed it); or, when a replacement would not
/// start clean as the delete's proof judges it ([`findings::Replacement`]: no controller makes
/// one, it has ended already, the failure comes
/// with its template, is shared by a sibling, nothing else serves meanwhile, or it read a
/// configuration change its ready siblings have not), a rollout is under way
/// ([`observed::Workload::rollout_in_progress`]) or the pod has not failed past its start-up
/// yet ([`observed::Pod::unready`]), tell a human why.
fn replace_pod(d: &mut Diagnosis, f: &Facts, name: &str) {
    let Some(pod) = f.pods.iter().find(|p| p.name == name) else {
        d.human = Some(format!(
            "pod {name} is not among the pods of {}: nothing to replace",
            f.target_text()
        ));
        return;
    };
    let replacement = findings::Replacement::of(
        &pod.observed,
        f.pods.iter().map(|p| &p.observed),
        f.workload.as_ref().and_then(|w| w.replicas),
        pod.kept.as_ref(),
    );
    if let Err(why) = replacement.controlled() {
        d.human = Some(why);
        return;
    }
    if let Err(why) = replacement.still_running() {
        d.human = Some(why);
        return;
    }
    if let Err(why) = replacement.template_fails() {
        d.human = Some(why);
        return;
    }
    if let Some(why) = f.workload.as_ref().and_then(|w| w.rollout_in_progress()) {
        d.human = Some(format!(
            "a rollout of {} is under way ({why}): it replaces pod {name} itself; look again once it has finished",
            f.target_text()
        ));
        return;
    }
    let u = pod.observed.unready(f.now);
    if !u.past_startup {
        d.human = Some(match u.failing_for {
            Some(t) => format!(
                "pod {name} has not been ready for {} of the {} its start-up allows ({} restarts): too early to tell whether a replacement would start any better; look again once that has passed",
                observed::ago(t),
                observed::ago(u.allowance),
                u.restarts
            ),
            None => format!("pod {name} is ready now: nothing to replace"),
        });
        return;
    }
    if let Err(line) = replacement.sibling_ready() {
        d.human = Some(format!(
            "pod {name} would be replaced with nothing else serving ({line}): a human decides whether the outage is worth it"
        ));
        return;
    }
    let sharing = replacement.sharing();
    if !sharing.is_empty() {
        d.human = Some(format!(
            "the failure of pod {name} is not its own: {} not ready either, so a replacement meets what they meet",
            listed(
                &sharing
                    .iter()
                    .map(|p| format!("sibling {}", p.name))
                    .collect::<Vec<_>>()
            )
        ));
        return;
    }
    let nodes: Vec<&observed::Node> = f.nodes.iter().map(|n| &n.observed).collect();
    if let Err(lines) = replacement.follows_node(&nodes) {
        d.human = Some(lines.join("; "));
        return;
    }
    if let Some(lines) = f.node_at_fault.get(name) {
        d.human = Some(format!(
            "{}: replacing pod {name} repeats its failure",
            lines.join("; ")
        ));
        return;
    }
    if let Err(lines) = replacement.config_changed(|cm| f.configmap_writes.get(cm).copied()) {
        d.human = Some(format!(
            "{}: the configuration is the suspect, not pod {name}",
            lines.join("; ")
        ));
        return;
    }
    d.proposal = proposal(ActionType::DeletePod, ActionParams::delete_pod(name), "");
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

/// Names for a sentence: all of them up to five, else the first four and how many more.
fn listed<S: AsRef<str>>(names: &[S]) -> String {
    let all: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    if all.len() <= 5 {
        all.join(", ")
    } else {
        format!("{} and {} more", all[..4].join(", "), all.len() - 4)
    }
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
mod fixtures;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_model;
#[cfg(test)]
mod tests_refused;
#[cfg(test)]
mod tests_rollout;
