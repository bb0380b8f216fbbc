//! Rules about nodes: a node that is Ready again, one that is not, and pods wedged in an
//! exhausted runtime state.

use super::*;

/// Log lines that say a process's runtime state is exhausted or wedged (quoted as evidence).
const WEDGED: &[&str] = &[
    "too many open files",
    "connection pool exhausted",
    "pool exhausted",
    "deadlock detected",
    "no more connections",
    "out of file descriptors",
    "timed out waiting for a connection from the pool",
];

/// A node Ready now whose readiness keeps coming and going: its pods are disrupted with each
/// drop. Move them off it (its proof checks that the node is at fault, that other nodes take
/// them and the disruption budgets).
pub(super) fn node_flapping(f: &Facts) -> Option<Diagnosis> {
    let node = &f.node;
    let flaps = f.node_flaps.as_ref()?;
    if f.kind() != "Node" || node.ready != "True" {
        return None;
    }
    let mut d = Diagnosis::new(
        "NodeFlapping",
        format!("Node {} is Ready now, but {flaps}", node.name),
    );
    d.factors.push(flaps.clone());
    d.confidence = 0.75;
    d.severity = Severity::High;
    d.target = f.target.clone();
    d.proposal = proposal(ActionType::CordonDrainNode, ActionParams::Drain, "");
    d.analysis = "A node whose readiness drops again and again disrupts every pod on it with each drop, whatever it shows at this moment: being Ready now does not make it healthy. Moving its pods to stable nodes ends the disruption; the node itself needs repair or replacement.".into();
    Some(d)
}

pub(super) fn node_ready(f: &Facts) -> Option<Diagnosis> {
    let node = &f.node;
    // Another object the alert names that does not show its desired state keeps the problem
    // open (`resolved.alerted-objects-met`).
    if f.kind() != "Node"
        || node.ready != "True"
        || !node.pressure.is_empty()
        || f.node_flaps.is_some()
        || !f.alerted_unmet.is_empty()
    {
        return None;
    }
    let mut d = Diagnosis::new(
        "NodeHealthy",
        format!("Node {} is Ready with no pressure conditions", node.name),
    );
    d.outcome = InvestigationOutcome::ProblemResolved;
    d.confidence = 0.8;
    d.target = f.target.clone();
    super::workloads::unseen_by_objects(f, &mut d);
    Some(d)
}

pub(super) fn node_not_ready(f: &Facts) -> Option<Diagnosis> {
    if f.kind() != "Node" {
        return None;
    }
    let node = &f.node;
    let total = f.nodes.len();
    let not_ready = f.not_ready_nodes();
    let count = if total > 0 {
        format!(" ({} of {total} nodes not ready)", not_ready.len())
    } else {
        String::new()
    };
    let state = if node.ready == "True" {
        format!("Ready but under {}", node.pressure.join(", "))
    } else if node.pressure.is_empty() {
        "NotReady".to_owned()
    } else {
        format!("NotReady with {}", node.pressure.join(", "))
    };
    let mut d = Diagnosis::new(
        "NodeNotReady",
        format!("Node {} is {state}{count}", node.name),
    );
    d.factors.push(format!("Ready={}", node.ready));
    if !node.ready_message.is_empty() {
        d.factors.push(format!("kubelet: {}", node.ready_message));
    }
    if !not_ready.is_empty() {
        d.factors.push(format!("not ready: {}", listed(&not_ready)));
    }
    d.target = f.target.clone();
    d.severity = Severity::Critical;
    // With many nodes down the problem is the cluster's, not this node's.
    if node.trouble.is_none() {
        // No Ready condition at all (a kubelet that never reported, an object written by
        // hand): nothing shows what is wrong, and nothing the drain's proof could find it at
        // fault by.
        d.human = Some(format!(
            "node {} reports no Ready condition: its kubelet has not reported its state, so nothing shows what is wrong with it; check the kubelet on it before moving its pods",
            node.name
        ));
        d.confidence = 0.6;
    } else if observed::cluster_wide(not_ready.len(), total) {
        d.human = Some(format!(
            "{} of {total} nodes are not ready ({}): a cluster-wide problem (network, control plane, a bad node image); draining {} would not help",
            not_ready.len(),
            listed(&not_ready),
            node.name
        ));
        d.confidence = 0.75;
    } else {
        d.confidence = 0.8;
        d.proposal = proposal(ActionType::CordonDrainNode, ActionParams::Drain, "");
    }
    Some(d)
}

/// Running pods, not crashing, whose readiness fails with a wedged-state error in their logs,
/// the spec unchanged: a rolling restart clears it.
pub(super) fn wedged_runtime(f: &Facts) -> Option<Diagnosis> {
    let failing: Vec<_> = f.failing_pods().collect();
    if failing.is_empty() || f.rollout.is_some() {
        return None;
    }
    // Wedged: running, not crashing (`Pod::broken`: a container that ended once and runs
    // again is not crashing), and ready once since they started. A pod never ready since its
    // start shows how a fresh pod of its template starts: a restart makes another such pod (the
    // restart's proof asks the same, `restart.pods-run-but-wedged`).
    let running_not_crashing = failing
        .iter()
        .all(|p| p.observed.wedged() && p.observed.broken().is_none());
    let line = f.first_error_line.as_deref()?;
    let lower = line.to_ascii_lowercase();
    let signature = WEDGED.iter().find(|w| lower.contains(*w))?;
    if !running_not_crashing || !matches!(f.kind(), "Deployment" | "StatefulSet" | "DaemonSet") {
        return None;
    }
    let mut d = Diagnosis::new(
        "WedgedRuntime",
        format!(
            "{} of {} pods of {} run but are not ready, wedged ({signature}); the spec is unchanged",
            failing.len(),
            f.pods.len(),
            f.target_text()
        ),
    );
    d.factors = f.failure_descriptions();
    d.factors.push(format!("last error in the logs: {line}"));
    d.factors.extend(
        f.failing_warnings()
            .filter(|w| w.reason == "Unhealthy")
            .map(|w| w.message.clone())
            .take(2),
    );
    d.confidence = 0.72;
    d.severity = Severity::Medium;
    d.target = f.target.clone();
    d.proposal = proposal(ActionType::RestartDeployment, ActionParams::Restart, "");
    d.analysis = "The processes run but their runtime state is exhausted; the spec and image are unchanged, so a fresh process clears it. If it recurs, the leak needs a fix.".into();
    Some(d)
}
